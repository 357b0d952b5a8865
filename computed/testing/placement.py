"""OpenStack Placement (PyPI ``openstack-placement``) in a virtualenv of its own, over HTTP.

No auth (``noauth2``: any ``X-Auth-Token`` is accepted, ``admin`` gets admin rights), its database
on the stack's PostgreSQL when there is one (sqlite answers concurrent writes with "database is
locked", which would make every benchmark measure sqlite), else sqlite in the scratch directory,
served by computed/testing/bin/wsgi_serve.py. Ready when ``GET /`` lists the API versions.
"""

from __future__ import annotations

import json
import os
import urllib.request
from pathlib import Path

from computed.testing import process, venvs
from computed.testing.service import Service

REQUIREMENTS = ("openstack-placement==16.0.0", "psycopg2-binary>=2.9")
# Kept in a folder of its own: the script's folder goes first on sys.path, and this one
# holds modules named placement and ironic.
SERVE = Path(__file__).parent / "bin" / "wsgi_serve.py"


def http_json(url: str, timeout: float = 2.0) -> dict | None:
    try:
        with urllib.request.urlopen(url, timeout=timeout) as resp:
            return json.load(resp)
    except (OSError, ValueError):
        return None


class Placement(Service):
    name = "placement"

    def start(self) -> None:
        venv = venvs.ensure("placement", REQUIREMENTS)
        home = self.workdir / "placement"
        home.mkdir(parents=True, exist_ok=True)
        conf = home / "placement.conf"
        connection = self.info.get("database") or f"sqlite:///{home / 'placement.sqlite'}"
        conf.write_text("\n".join([
            "[DEFAULT]",
            "debug = false",
            "[api]",
            "auth_strategy = noauth2",
            "[placement_database]",
            f"connection = {connection}",
            "",
        ]))
        process.run([str(venv / "bin" / "placement-manage"), "--config-file", str(conf),
                     "db", "sync"], "placement-manage db sync")
        port = self.info.get("port") or process.free_port()
        self.info.update(port=port, url=f"http://127.0.0.1:{port}", database=connection)
        env = {**os.environ, "OS_PLACEMENT_CONFIG_DIR": str(home)}
        self.info["pid"] = process.spawn(
            [str(venv / "bin" / "python"), str(SERVE), "placement.wsgi.api:application",
             str(port)], self.log, env=env)
        process.wait_until(self.ready, 60, "placement", pid=self.pid, log=self.log)

    def ready(self) -> bool:
        if not self.info.get("port"):
            return False
        versions = http_json(self.url + "/")
        return bool(versions and versions.get("versions"))
