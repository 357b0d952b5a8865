"""OpenStack Ironic (PyPI ``ironic``), the all-in-one process, in a virtualenv of its own.

API and conductor in one process (required with sqlite; run by ``bin/ironic_serve.py``, which
checks each of Ironic's request schemas once instead of at every request), no auth, the
``fake-hardware`` type with fake boot/deploy/power/management interfaces, automated cleaning off
so that ``provide`` is quick.
Versioned notifications go to the stack's RabbitMQ on topic ``ironic_versioned_notifications``
(exchange ``ironic``) when a transport URL is given; ``retry = 0`` keeps Ironic's API answering
while the broker is down instead of blocking every write.

Ready when ``GET /v1`` answers: never judge by the PID (a crash-looping worker leaves the master
alive).

With ``glance`` (:meth:`Ironic.use_glance`: a Keystone's URL and a user of it), Ironic reads
Glance images from the Image service of that Keystone's catalog with the user's password, as
a deployed Ironic does with its ``[glance]`` service user: it then knows a Glance image's type
(whole disk or partition), which its rebuild needs (Ironic 39.0.0 answers the rebuild of a
Glance image it cannot read with a 500, ``auto_lessee``). With ``glance_url`` (a Glance
without Keystone, :mod:`computed.testing.glance`'s default) it reads that Glance without
credentials (``[glance] auth_type = none`` and ``endpoint_override``: keystoneauth's
no-auth plugin and the URL as the image endpoint). Without either Ironic reads no Glance.

Its policy shows instance secrets (``show_instance_secrets``: Ironic masks them by default), so
that a test or the local run reads back the config drive the daemon passed, in the node's
``instance_info.configdrive`` (the fake deploy keeps the JSON object as it was received).
"""

from __future__ import annotations

import shutil
import uuid as uuidlib
from collections.abc import Iterator
from pathlib import Path

from computed.testing import process, venvs
from computed.testing.placement import http_json
from computed.testing.service import Service

REQUIREMENTS = ("ironic==39.0.0",)
SERVE = Path(__file__).parent / "bin" / "ironic_serve.py"
NOTIFICATION_TOPIC = "ironic_versioned_notifications"
API_VERSION = "1.115"
PAGE = 1000  # Ironic's default [api] max_limit: a page this long may have a next one
DROP_SLICE = 10000  # node uuids a statement of drop_nodes names


class Ironic(Service):
    name = "ironic"

    def __init__(self, workdir: Path, info: dict | None = None, transport_url: str = "",
                 deploy_delay: float = 0.0, glance_url: str = "",
                 power_sync_interval: int | None = None):
        super().__init__(workdir, info)
        self.info.setdefault("transport_url", transport_url)
        self.info.setdefault("deploy_delay", deploy_delay)
        # Ironic's [conductor] sync_power_state_interval (None: Ironic's default, 120 s; 0: off).
        self.info.setdefault("power_sync_interval", power_sync_interval)
        if glance_url:
            self.info.setdefault("glance", {"endpoint": glance_url})

    def start(self) -> None:
        venv = venvs.ensure("ironic", REQUIREMENTS)
        home = self.workdir / "ironic"
        home.mkdir(parents=True, exist_ok=True)
        conf = home / "ironic.conf"
        port = self.info.get("port") or process.free_port()
        (home / "policy.yaml").write_text('"show_instance_secrets": "@"\n')
        conf.write_text(self._config(home, port))
        if not (home / "ironic.sqlite").exists():
            shutil.copy2(_schema(venv), home / "ironic.sqlite")
        self.info.update(port=port, url=f"http://127.0.0.1:{port}")
        # The ironic console script, its request schemas checked once (bin/ironic_serve.py).
        self.info["pid"] = process.spawn([str(venv / "bin" / "python"), str(SERVE),
                                          "--config-file", str(conf)], self.log)
        process.wait_until(self.ready, 120, "ironic", pid=self.pid, log=self.log)

    def _config(self, home: Path, port: int) -> str:
        lines = [
            "[DEFAULT]",
            "auth_strategy = noauth",
            "rpc_transport = none",
            "host = ironic-harness",
            "enabled_hardware_types = fake-hardware",
            "enabled_boot_interfaces = fake",
            "enabled_deploy_interfaces = fake",
            "enabled_management_interfaces = fake",
            "enabled_power_interfaces = fake",
            "enabled_network_interfaces = noop",
            "enabled_vendor_interfaces = no-vendor",
            "[api]",
            "host_ip = 127.0.0.1",
            f"port = {port}",
            "[database]",
            f"connection = sqlite:///{home / 'ironic.sqlite'}",
            "[conductor]",
            "automated_clean = false",
            *([f"sync_power_state_interval = {self.info['power_sync_interval']}"]
              if self.info.get("power_sync_interval") is not None else []),
            "[oslo_policy]",
            f"policy_file = {home / 'policy.yaml'}",
            "[fake]",
            # Ironic int()s it: '0.0' would fail every deploy.
            f"deploy_delay = {int(self.info['deploy_delay'])}",
        ]
        glance = self.info.get("glance")
        if glance and "endpoint" in glance:
            lines += ["[glance]", "auth_type = none", f"endpoint_override = {glance['endpoint']}"]
        elif glance:
            lines += ["[glance]", "auth_type = password", f"auth_url = {glance['auth_url']}",
                      f"username = {glance['username']}", f"password = {glance['password']}",
                      f"project_name = {glance['project_name']}", "user_domain_id = default",
                      "project_domain_id = default"]
        if self.info.get("transport_url"):
            lines[1:1] = ["notification_level = info",
                          f"versioned_notifications_topics = {NOTIFICATION_TOPIC}"]
            lines += ["[oslo_messaging_notifications]",
                      "driver = messagingv2",
                      f"transport_url = {self.info['transport_url']}",
                      "retry = 0"]
        return "\n".join(lines) + "\n"

    def use_glance(self, auth_url: str, username: str, password: str, project_name: str
                   ) -> None:
        """Read Glance images from the catalog of the Keystone at ``auth_url`` as ``username``
        (a restart on the same port and data when running)."""
        self.info["glance"] = {"auth_url": auth_url, "username": username,
                               "password": password, "project_name": project_name}
        if self.pid:
            self.restart()

    def enroll_nodes(self, count: int, resource_class: str = "baremetal", prefix: str = "node",
                     **fields: object) -> list[str]:
        """``count`` fake-hardware nodes named ``{prefix}-00000`` on; returns their uuids, in
        that order. The first is created through the API (:func:`enroll_nodes`), the others
        are copies of its row in Ironic's database, each with a uuid and name of its own: a
        creation through the API costs Ironic 1.3-1.6 CPU s per 100 nodes (its schema checks,
        the driver's interfaces resolved, a notification), a copy nothing. So every node is
        what Ironic itself wrote for these fields; no notification announces the copies (a
        test that watches a creation makes its own through the API)."""
        first = enroll_nodes(self.url, 1, resource_class=resource_class, prefix=prefix,
                             workers=1, **fields)[0]
        return [first, *self.copy_node(first, [f"{prefix}-{index:05d}"
                                               for index in range(1, count)])]

    @property
    def database(self) -> Path:
        """Ironic's sqlite database."""
        return self.workdir / "ironic" / "ironic.sqlite"

    def copy_node(self, template: str, names: list[str]) -> list[str]:
        """Copies of node ``template``'s row in Ironic's database, one per name, each with a
        uuid of its own, in one transaction; returns their uuids in ``names``' order."""
        import sqlite3
        if not names:
            return []
        uuids = [str(uuidlib.uuid4()) for _ in names]
        connection = sqlite3.connect(self.database, timeout=60)
        try:
            columns = [column[1] for column in connection.execute("PRAGMA table_info(nodes)")
                       if column[1] not in ("id", "uuid", "name")]
            listed = ", ".join(columns)
            with connection:  # one transaction, committed on return
                connection.executemany(
                    f"INSERT INTO nodes (uuid, name, {listed}) "
                    f"SELECT ?, ?, {listed} FROM nodes WHERE uuid = ?",
                    [(uuid, name, template) for uuid, name in zip(uuids, names)])
        finally:
            connection.close()
        return uuids

    def drop_nodes(self, uuids: list[str]) -> int:
        """Remove the nodes ``uuids`` and every row of theirs straight from Ironic's database,
        in one transaction: a tear-down's clean-up; returns how many nodes were there. Through
        the API a deletion cost Ironic 1.8-1.9 CPU s per 100 nodes (4.0 in a suite's
        accounting, with its notifications): its conductor's lock, a query per table; and the
        API refuses a node with an instance or locked by a deploy, which then stayed for the
        next tests. Nothing is notified: the tests that watch a deletion make theirs through
        the API. Ironic caches no node between requests, so the next one no longer finds them;
        a conductor task still on one of them fails on its next write."""
        import sqlite3
        connection = sqlite3.connect(self.database, timeout=60)
        dropped = 0
        try:
            with connection:  # one transaction, committed on return
                # Every table with a node_id (ports, portgroups, traits, tags, history, ...):
                # Ironic's sqlite enforces no foreign key, so their order does not matter.
                tables = [name for (name,) in connection.execute(
                    "SELECT name FROM sqlite_master WHERE type = 'table' AND name != 'nodes'")
                          if any(column[1] == "node_id" for column in connection.execute(
                              f"PRAGMA table_info({name})"))]
                # In slices: sqlite takes at most 32,766 parameters a statement.
                for start in range(0, len(uuids), DROP_SLICE):
                    chunk = list(uuids[start:start + DROP_SLICE])
                    marks = ",".join("?" * len(chunk))
                    ids = [row[0] for row in connection.execute(
                        f"SELECT id FROM nodes WHERE uuid IN ({marks})", chunk)]
                    if not ids:
                        continue
                    id_marks = ",".join("?" * len(ids))
                    for table in tables:
                        connection.execute(f"DELETE FROM {table} WHERE node_id IN ({id_marks})",
                                           ids)
                    connection.execute(f"DELETE FROM nodes WHERE id IN ({id_marks})", ids)
                    dropped += len(ids)
        finally:
            connection.close()
        return dropped

    def ready(self) -> bool:
        if not self.info.get("port"):
            return False
        root = http_json(self.url + "/v1")
        return bool(root and root.get("id") == "v1")


def _schema(venv: Path) -> Path:
    """An empty Ironic database (``ironic-dbsync create_schema``, 2-3 CPU s of imports) made once
    per virtualenv (:func:`venvs.made_once`), which each start copies; in WAL mode."""
    return venvs.made_once(venv, lambda folder: _create_schema(venv, folder)) / "ironic.sqlite"


def _create_schema(venv: Path, folder: Path) -> None:
    database = folder / "ironic.sqlite"
    conf = folder / "ironic.conf"
    conf.write_text(f"[database]\nconnection = sqlite:///{database}\n")
    process.run([str(venv / "bin" / "ironic-dbsync"), "--config-file", str(conf),
                 "create_schema"], "ironic-dbsync create_schema")
    _write_ahead_log(database)


def _write_ahead_log(path: Path) -> None:
    """Put Ironic's sqlite database in WAL mode (a property of the file, so it persists): readers
    then stop blocking writers, which otherwise fail with "database is locked" as soon as a few
    daemons list nodes while a test changes one. The connection is closed on return: the file
    alone is the whole database then (no -wal file), ready to be copied."""
    import sqlite3
    connection = sqlite3.connect(path)
    try:
        connection.execute("PRAGMA journal_mode=WAL")
    finally:
        connection.close()


def request(method: str, url: str, body: dict | list | None = None, timeout: float = 30.0,
             attempts: int = 5) -> dict:
    """One Ironic API call; a 5xx (sqlite's "database is locked" under load) is retried."""
    import json
    import time
    import urllib.error
    import urllib.request
    data = None if body is None else json.dumps(body).encode()
    for attempt in range(attempts):
        prepared = urllib.request.Request(url, data=data, method=method, headers={
            "Content-Type": "application/json", "X-OpenStack-Ironic-API-Version": API_VERSION})
        try:
            with urllib.request.urlopen(prepared, timeout=timeout) as resp:
                text = resp.read()
            return json.loads(text) if text else {}
        except urllib.error.HTTPError as exc:
            if exc.code < 500 or attempt == attempts - 1:
                raise
            time.sleep(0.2 * 2 ** attempt)
    raise AssertionError("unreachable")


def enroll_nodes(url: str, count: int, resource_class: str = "baremetal", prefix: str = "node",
                 workers: int = 8, **fields: object) -> list[str]:
    """Create ``count`` fake-hardware nodes through the API, concurrently; returns their uuids."""
    from concurrent.futures import ThreadPoolExecutor

    def create(index: int) -> str:
        body = {"driver": "fake-hardware", "name": f"{prefix}-{index:05d}",
                "resource_class": resource_class, **fields}
        return request("POST", f"{url}/v1/nodes", body)["uuid"]

    with ThreadPoolExecutor(workers) as pool:
        return list(pool.map(create, range(count)))


def list_nodes(url: str, fields: str = "uuid", timeout: float = 30.0) -> Iterator[dict]:
    """Every node with ``fields`` (comma-separated; they must include ``uuid``, the page marker),
    following Ironic's pages."""
    marker = ""
    while True:
        query = f"fields={fields}&limit={PAGE}" + (f"&marker={marker}" if marker else "")
        page = request("GET", f"{url}/v1/nodes?{query}", timeout=timeout)["nodes"]
        yield from page
        if len(page) < PAGE:
            return
        marker = page[-1]["uuid"]


def list_node_uuids(url: str) -> list[str]:
    """Every node's uuid."""
    return [node["uuid"] for node in list_nodes(url)]
