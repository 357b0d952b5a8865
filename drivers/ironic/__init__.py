"""The Ironic (OpenStack Bare Metal) driver: ``IronicDriver``."""

from drivers.ironic.driver import API_VERSION, IronicDriver

__all__ = ['API_VERSION', 'IronicDriver']
