"""OpenStack Glance (PyPI ``glance``) in a virtualenv of its own, over HTTP, with a file store.

Its database is sqlite in the scratch directory (a test uploads a few images: PostgreSQL's
concurrency is not needed), its images are files under ``glance/images``, and it is served by
computed/testing/bin/wsgi_serve.py on loopback (``glance.wsgi.api``, native threads: no
eventlet anywhere near computed). Ready when ``GET /`` lists the API versions.

Two ways to authenticate, chosen by the caller:

* ``keystone`` given (a started :class:`computed.testing.keystone.Keystone`): Glance's
  ``keystone`` paste flavor, keystonemiddleware validating tokens with the admin as its
  service user, and Glance registered in Keystone's catalog as service type ``image`` (public,
  internal and admin endpoints): what computed-api's keystone mode finds with a user's token.
* none: Glance's default flavor, where every request is an admin without a project
  (``unauthenticated-context``): images are then given an ``owner`` explicitly.

:meth:`Glance.upload` makes an active image from bytes (create, then upload the data), with a
name, visibility and owner; :meth:`Glance.create` makes one without data (status ``queued``);
:meth:`Glance.images` lists the images Glance's filters (e.g. ``name``) select.

Its empty database is made once per Glance virtualenv (``glance-manage db_sync``, 10 s of CPU
on a loaded 2-core machine, into a scratch file moved in place whole) and copied into each new
Glance: every local run and test session starts from an empty Glance without paying for the
migrations again.

Guarantees: ``start`` returns only once Glance answers; a failing setup command raises with its
output (:class:`computed.testing.process.ServiceError`).
"""

from __future__ import annotations

import json
import os
import shutil
import threading
import urllib.parse
import urllib.request
from pathlib import Path
from typing import Any

from computed.testing import process, venvs
from computed.testing.placement import http_json
from computed.testing.service import Service

REQUIREMENTS = ("glance==33.0.0",)
SERVE = Path(__file__).parent / "bin" / "wsgi_serve.py"
SERVICE_TYPE = "image"
#: Glance's policy rules opened to its unauthenticated admin (no Keystone).
OPEN_RULES = ("add_image", "upload_image", "get_image", "get_images", "modify_image",
              "delete_image", "download_image", "publicize_image", "communitize_image",
              "add_member", "get_member", "get_members", "modify_member", "delete_member",
              "deactivate", "reactivate")


def _empty_database(venv: Path) -> Path:
    """A sqlite database with the schema of ``venv``'s Glance and nothing in it (made by
    ``glance-manage db_sync`` the first time; concurrent first callers each make one and the
    last move wins, every one of them complete)."""
    empty = venv / "computed-empty-glance.sqlite"
    if empty.exists():
        return empty
    scratch = venv / f"computed-empty-glance.{os.getpid()}.{threading.get_ident()}"
    scratch.mkdir(exist_ok=True)
    try:
        conf = scratch / "glance-manage.conf"
        conf.write_text(f"[database]\nconnection = sqlite:///{scratch / 'glance.sqlite'}\n")
        process.run([str(venv / "bin" / "glance-manage"), "--config-file", str(conf),
                     "db_sync"], "glance-manage db_sync", timeout=600)
        os.replace(scratch / "glance.sqlite", empty)
    finally:
        shutil.rmtree(scratch, ignore_errors=True)
    return empty


class Glance(Service):
    name = "glance"

    def __init__(self, workdir: Path, info: dict[str, Any] | None = None,
                 keystone: Any = None):
        super().__init__(workdir, info)
        self.keystone = keystone

    def start(self) -> None:
        venv = venvs.ensure("glance", REQUIREMENTS)
        home = self.workdir / "glance"
        for folder in ("images", "staging", "tasks"):
            (home / folder).mkdir(parents=True, exist_ok=True)
        port = self.info.get("port") or process.free_port()
        url = f"http://127.0.0.1:{port}"
        paste = venv / "etc" / "glance" / "glance-api-paste.ini"
        lines = [
            "[DEFAULT]",
            "debug = false",
            "enabled_backends = fs:file",
            "[database]",
            f"connection = sqlite:///{home / 'glance.sqlite'}",
            "[glance_store]",
            "default_backend = fs",
            "[fs]",
            f"filesystem_store_datadir = {home / 'images'}",
            "[os_glance_staging_store]",
            f"filesystem_store_datadir = {home / 'staging'}",
            "[os_glance_tasks_store]",
            f"filesystem_store_datadir = {home / 'tasks'}",
            "[paste_deploy]",
            f"config_file = {paste}",
        ]
        if self.keystone is not None:
            ks = self.keystone
            lines += ["flavor = keystone",
                      "[keystone_authtoken]",
                      f"www_authenticate_uri = {ks.auth_url}", f"auth_url = {ks.auth_url}",
                      "auth_type = password", "username = admin",
                      f"password = {ks.password('admin')}", "project_name = admin",
                      "user_domain_id = default", "project_domain_id = default"]
        else:
            # unauthenticated-context has no roles, and Glance's defaults ask for roles: the
            # image rules a test uses are opened to it (Glance without Keystone is admin only).
            (home / "policy.yaml").write_text("".join(f'"{rule}": "@"\n' for rule in OPEN_RULES))
            lines += ["[oslo_policy]", f"policy_file = {home / 'policy.yaml'}"]
        (home / "glance-api.conf").write_text("\n".join(lines) + "\n")
        if not (home / "glance.sqlite").exists():
            shutil.copyfile(_empty_database(venv), home / "glance.sqlite")
        self.info.update(port=port, url=url, keystone=self.keystone is not None)
        env = {**os.environ, "OS_GLANCE_CONFIG_DIR": str(home)}
        self.info["pid"] = process.spawn(
            [str(venv / "bin" / "python"), str(SERVE), "glance.wsgi.api:application",
             str(port)], self.log, env=env)
        process.wait_until(self.ready, 180, "glance", pid=self.pid, log=self.log)
        if self.keystone is not None:
            self._register()

    def ready(self) -> bool:
        if not self.info.get("port"):
            return False
        versions = http_json(self.url + "/versions")
        return bool(versions and versions.get("versions"))

    def _register(self) -> None:
        """Glance in Keystone's catalog as ``image`` (idempotent across restarts)."""
        from keystoneauth1 import session as ks_session
        admin = ks_session.Session(auth=self.keystone.auth("admin"))
        base = self.keystone.auth_url
        found = admin.get(f"{base}/services", params={"type": SERVICE_TYPE}).json()["services"]
        service_id = found[0]["id"] if found else admin.post(f"{base}/services", json={
            "service": {"type": SERVICE_TYPE, "name": "glance"}}).json()["service"]["id"]
        endpoints = admin.get(f"{base}/endpoints",
                              params={"service_id": service_id}).json()["endpoints"]
        for endpoint in endpoints:
            admin.delete(f"{base}/endpoints/{endpoint['id']}")
        for interface in ("public", "internal", "admin"):
            admin.post(f"{base}/endpoints", json={"endpoint": {
                "service_id": service_id, "interface": interface, "url": self.url,
                "region_id": "RegionOne"}})

    def _request(self, method: str, path: str, body: Any = None, data: bytes | None = None,
                 token: str | None = None) -> dict[str, Any] | None:
        headers = {}
        if body is not None:
            data = json.dumps(body).encode()
            headers["Content-Type"] = "application/json"
        elif data is not None:
            headers["Content-Type"] = "application/octet-stream"
        if token is None and self.keystone is not None:
            token = self.keystone.token("admin")
        if token:
            headers["X-Auth-Token"] = token
        request = urllib.request.Request(self.url + path, data=data, method=method,
                                         headers=headers)
        with urllib.request.urlopen(request, timeout=60) as response:
            text = response.read()
        return json.loads(text) if text else None

    def create(self, name: str, visibility: str = "public", owner: str | None = None,
               token: str | None = None) -> dict[str, Any]:
        """An image without data (``queued``); ``owner`` set as Glance's admin may."""
        body: dict[str, Any] = {"name": name, "disk_format": "raw",
                                "container_format": "bare", "visibility": visibility}
        if owner is not None:
            body["owner"] = owner
        made = self._request("POST", "/v2/images", body, token=token)
        assert made is not None
        return made

    def upload(self, name: str, data: bytes = b"\0" * 1024, visibility: str = "public",
               owner: str | None = None, token: str | None = None) -> dict[str, Any]:
        """An active image holding ``data``."""
        made = self.create(name, visibility, owner, token)
        self._request("PUT", f"/v2/images/{made['id']}/file", data=data, token=token)
        image = self._request("GET", f"/v2/images/{made['id']}", token=token)
        assert image is not None
        return image

    def images(self, token: str | None = None, **filters: str) -> list[dict[str, Any]]:
        """The images Glance lists with ``filters`` (Glance's query: ``name``, ``status``...),
        its first page."""
        query = urllib.parse.urlencode(filters)
        listed = self._request("GET", f"/v2/images?{query}", token=token)
        assert listed is not None
        return listed["images"]

    def add_member(self, image_id: str, project_id: str) -> None:
        self._request("POST", f"/v2/images/{image_id}/members", {"member": project_id})
