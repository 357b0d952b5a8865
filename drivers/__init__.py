"""Concrete implementations of ``computed.driver.BaremetalDriver``.

One subpackage per backend (``drivers.ironic``). The daemon never imports
a backend's client library directly; it gets a driver object from here.
"""
