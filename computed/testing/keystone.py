"""OpenStack Keystone (PyPI ``keystone``) in a virtualenv of its own, over HTTP, with real users.

sqlite in the scratch directory, fernet tokens (a copy of what ``keystone-manage db_sync``,
``fernet_setup`` and ``receipt_setup`` made once per virtualenv, then ``bootstrap``), Keystone's
cache in process (as a deployment's Keystone has one, in memcached: without it one validation
took 1.5 s on a loaded 2-core machine, and a burst of fresh tokens measured the harness, not
computed-api; BENCHMARKS.md), served by
computed/testing/bin/wsgi_serve.py on loopback; ready when ``GET /v3`` answers. Then it makes
the people the compute API's keystone mode is tested with (issue 15):

* ``admin``: the bootstrap admin (role ``admin`` on project ``admin``);
* ``member-a``: role ``member`` on project ``project-a``;
* ``member-b``: role ``member`` on project ``project-b``.

Passwords are random per start and kept in ``info`` (the harness's state file), with each
person's project id; :meth:`Keystone.auth` gives a keystoneauth1 ``Password`` plugin for one of
them and :meth:`Keystone.token` a real token.

Guarantees: ``start`` returns only once Keystone answers and every person can authenticate;
a failing setup command raises with its output (:class:`computed.testing.process.ServiceError`).
"""

from __future__ import annotations

import grp
import os
import pwd
import secrets
import shutil
from pathlib import Path
from typing import Any

from keystoneauth1 import session as ks_session
from keystoneauth1.identity import v3

from computed.testing import process, venvs
from computed.testing.placement import http_json
from computed.testing.service import Service

REQUIREMENTS = ("keystone==30.0.0",)
SERVE = Path(__file__).parent / "bin" / "wsgi_serve.py"
ADMIN = "admin"
MEMBER_A = "member-a"
MEMBER_B = "member-b"
#: Who is made, on which project, with which role.
PEOPLE = {ADMIN: ("admin", "admin"), MEMBER_A: ("project-a", "member"),
          MEMBER_B: ("project-b", "member")}


class Keystone(Service):
    name = "keystone"

    def start(self) -> None:
        venv = venvs.ensure("keystone", REQUIREMENTS)
        home = self.workdir / "keystone"
        home.mkdir(parents=True, exist_ok=True)
        conf = home / "keystone.conf"
        port = self.info.get("port") or process.free_port()
        url = f"http://127.0.0.1:{port}"
        conf.write_text(_config(home))
        manage = [str(venv / "bin" / "keystone-manage"), "--config-file", str(conf)]
        self.info.setdefault("passwords", {who: secrets.token_urlsafe(16) for who in PEOPLE})
        if not (home / "keystone.sqlite").exists():
            template = _template(venv)
            shutil.copy2(template / "keystone.sqlite", home / "keystone.sqlite")
            for keys in KEY_REPOSITORIES:
                shutil.copytree(template / keys, home / keys)
            process.run(manage + bootstrap_arguments(self.info["passwords"][ADMIN], url),
                        "keystone-manage bootstrap")
        self.info.update(port=port, url=url)
        env = {**os.environ, "OS_KEYSTONE_CONFIG_FILES": str(conf)}
        self.info["pid"] = process.spawn(
            [str(venv / "bin" / "python"), str(SERVE), "keystone.wsgi.api:application",
             str(port)], self.log, env=env)
        process.wait_until(self.ready, 120, "keystone", pid=self.pid, log=self.log)
        self._make_people()

    def ready(self) -> bool:
        if not self.info.get("port"):
            return False
        version = http_json(self.url + "/v3")
        return bool(version and version.get("version"))

    @property
    def auth_url(self) -> str:
        return self.url + "/v3"

    def password(self, who: str) -> str:
        return self.info["passwords"][who]

    def project_id(self, who: str) -> str:
        return self.info["projects"][PEOPLE[who][0]]

    def auth(self, who: str) -> v3.Password:
        """A keystoneauth1 plugin for ``who`` (one of :data:`PEOPLE`), scoped to their project."""
        project, _role = PEOPLE[who]
        return v3.Password(auth_url=self.auth_url, username=who, password=self.password(who),
                           user_domain_id="default", project_name=project,
                           project_domain_id="default")

    def token(self, who: str) -> str:
        """A real token of ``who``."""
        return ks_session.Session(auth=self.auth(who)).get_token()

    def _make_people(self) -> None:
        """Projects, users and role assignments, through Keystone's API as the admin (idempotent
        across restarts on the same data)."""
        admin = ks_session.Session(auth=self.auth(ADMIN))
        projects: dict[str, str] = {}
        for who, (project, role) in PEOPLE.items():
            project_id = projects.get(project) or self._ensure(
                admin, "projects", project, {"domain_id": "default"})
            projects[project] = project_id
            if who == ADMIN:
                continue  # made by bootstrap
            user_id = self._ensure(admin, "users", who, {
                "domain_id": "default", "password": self.password(who),
                "default_project_id": project_id})
            role_id = self._find(admin, "roles", role)
            admin.put(f"{self.auth_url}/projects/{project_id}/users/{user_id}/roles/{role_id}",
                      raise_exc=True)
        self.info["projects"] = projects

    def _find(self, admin: ks_session.Session, kind: str, name: str) -> str | None:
        found = admin.get(f"{self.auth_url}/{kind}", params={"name": name}).json()[kind]
        return found[0]["id"] if found else None

    def _ensure(self, admin: ks_session.Session, kind: str, name: str,
                fields: dict[str, Any]) -> str:
        existing = self._find(admin, kind, name)
        if existing:
            return existing
        body = {kind[:-1]: {"name": name, **fields}}
        return admin.post(f"{self.auth_url}/{kind}", json=body).json()[kind[:-1]]["id"]


#: The key repositories keystone-manage fernet_setup and receipt_setup make.
KEY_REPOSITORIES = ("fernet-keys", "fernet-receipts")


def _config(home: Path) -> str:
    """keystone.conf for a Keystone whose files are in ``home``."""
    return "\n".join([
        "[DEFAULT]",
        "debug = false",
        "[database]",
        f"connection = sqlite:///{home / 'keystone.sqlite'}",
        "[identity]",
        # bcrypt's cheapest cost: a test authenticates often, nothing here is secret.
        "password_hash_rounds = 4",
        # Keystone's own cache, in process (a deployment uses memcached): without it every
        # token validation reads the user, project, roles and revocation events from the
        # database (1.5 s a validation at load 19 on this machine); with it a token issued
        # here is cached at issue ([token] cache_on_issue) and validated from memory.
        "[cache]",
        "enabled = true",
        "backend = dogpile.cache.memory",
        "[token]",
        "provider = fernet",
        "[fernet_tokens]",
        f"key_repository = {home / 'fernet-keys'}",
        "[fernet_receipts]",
        f"key_repository = {home / 'fernet-receipts'}",
        "",
    ])


def bootstrap_arguments(password: str, url: str) -> list[str]:
    """``keystone-manage bootstrap``'s arguments: the admin's ``password``, the endpoints at
    ``url``. The password is joined to its option (``--bootstrap-password=...``): a random
    one starts with ``-`` once in 64 (``secrets.token_urlsafe``), which argparse would take
    for an option when it stood alone (seen: a suite's Keystone failed to start so)."""
    return ["bootstrap", f"--bootstrap-password={password}",
            "--bootstrap-admin-url", f"{url}/v3", "--bootstrap-public-url", f"{url}/v3",
            "--bootstrap-internal-url", f"{url}/v3", "--bootstrap-region-id", "RegionOne"]


def _template(venv: Path) -> Path:
    """A folder beside ``venv`` (made once per virtualenv, :func:`venvs.made_once`) holding what
    ``keystone-manage db_sync``, ``fernet_setup`` and ``receipt_setup`` make: the migrated
    database and both key repositories, which a start copies instead of running those three
    commands (3-4 CPU s of imports each) again; ``bootstrap`` (the admin, the endpoints on this
    start's port) runs at each start."""
    return venvs.made_once(venv, lambda folder: _set_up(venv, folder))


def _set_up(venv: Path, folder: Path) -> None:
    conf = folder / "keystone.conf"
    conf.write_text(_config(folder))
    manage = [str(venv / "bin" / "keystone-manage"), "--config-file", str(conf)]
    user = pwd.getpwuid(os.getuid()).pw_name
    group = grp.getgrgid(os.getgid()).gr_name
    process.run(manage + ["db_sync"], "keystone-manage db_sync")
    for what in ("fernet_setup", "receipt_setup"):
        process.run(manage + [what, "--keystone-user", user, "--keystone-group", group],
                    f"keystone-manage {what}")
