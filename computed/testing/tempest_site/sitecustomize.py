"""Loaded by Tempest's interpreters only (the harness puts this folder on their PYTHONPATH).

Tempest 47.0.0 makes its clients' image clients only when ``[service_available] glance`` is true,
yet every admin compute test class reads ``os_admin.image_client_v2`` in its ``setup_clients``:
without Glance each of those classes fails before any test runs (an AttributeError), though most
never touch an image. After ``tempest.clients`` is imported, the image clients are made whatever
the setting. Making one sends nothing: a test that does use it still fails for want of an Image
service in the catalog, and Tempest's image tests are skipped on the setting as before.
"""

import importlib.abc
import importlib.machinery
import sys

TARGET = "tempest.clients"


def _patch(module) -> None:
    manager = module.Manager
    original = manager._set_image_clients

    def _set_image_clients(self) -> None:
        original(self)
        if not hasattr(self, "image_client_v2"):
            self.image_client_v2 = self.image_v2.ImagesClient()
            self.image_member_client_v2 = self.image_v2.ImageMembersClient()

    manager._set_image_clients = _set_image_clients


class _Loader(importlib.abc.Loader):
    def __init__(self, wrapped: importlib.abc.Loader):
        self.wrapped = wrapped

    def create_module(self, spec):
        return self.wrapped.create_module(spec)

    def exec_module(self, module) -> None:
        self.wrapped.exec_module(module)
        _patch(module)


class _Finder(importlib.abc.MetaPathFinder):
    def find_spec(self, name, path, target=None):
        if name != TARGET:
            return None
        spec = importlib.machinery.PathFinder.find_spec(name, path)
        if spec is not None and spec.loader is not None:
            spec.loader = _Loader(spec.loader)
        return spec


sys.meta_path.insert(0, _Finder())
