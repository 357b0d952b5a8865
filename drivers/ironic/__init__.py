"""The Ironic (OpenStack Bare Metal) driver: ``IronicDriver``.

This folder installs as the top-level package ``computed_ironic`` (``package_dir`` in setup.cfg):
a package called ``drivers`` in users' site-packages would collide with any other project's.
computed itself never imports it: the daemon loads it by name from the entry point group
``computed.baremetal.drivers`` (``[DEFAULT] baremetal_driver = ironic``), as OpenStack services
load their drivers with stevedore.
"""

from .driver import API_VERSION, IronicDriver

__all__ = ['API_VERSION', 'IronicDriver']
