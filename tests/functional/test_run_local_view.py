"""tools/run-local's view, as a newcomer uses it: ``m`` puts a node in maintenance and back (its
provider in Placement reserved, then free again), the command prefix it shows builds an
instance, the compute API it shows lists that instance to openstacksdk and openstackclient,
README.md's first server works with the stock ``openstack`` CLI and the environment the screen
exports (a key pair, a server from the Glance image ``demo`` with it and user data on the flavor
``bm.demo``, ACTIVE, and the key and the user data in the config drive Ironic received: issue
24's "Done when"), ``k`` kills the daemon hosting the instance and the view says its node waits
for re-homing until a peer adopts it, ``t`` stops the other daemon gracefully, and ``q`` stops
everything the run started.

The run is on a pseudo-terminal (tests/functional/run_local.py says how it is started and what
"nothing left" means), with ``--rehome-grace`` short: the view must still show the wait for
re-homing, and a peer must still adopt the instance's node; only the wait is shorter than the
local run's default.
"""

from __future__ import annotations

import json
import os
import re
import subprocess
import urllib.request
from pathlib import Path

import openstack

from computed.testing.ironic import request
from tests.functional.run_local import (  # noqa: F401 (runs, workdir: fixtures)
    BIN,
    NODES,
    READY_TIMEOUT,
    RunLocal,
    assert_nothing_left,
    runs,
    start,
    workdir,
)

#: For tests/conftest.py's order until a run has timed this file (one stack, a build, a re-homing):
#: seconds on an idle 2-core machine (the tier's guess is 15 s a test).
EXPECTED_FILE_SECONDS = 70

USER_DATA = "#cloud-config\nruncmd:\n  - [touch, /tmp/computed-was-here]\n"
#: Seconds a killed daemon's instance waits before a peer adopts it (the local run's default is
#: 30): long enough for the view, which refreshes every second, to show the wait (it showed it
#: 2-3.5 s after the kill, at once after ZooKeeper's 2 s session; 10 waited 5 s more for the
#: adoption).
REHOME_GRACE = 5


def check_what_the_screen_shows(run: RunLocal) -> None:
    """With the instance built: every metrics endpoint the screen shows answers, the shown
    prefix lists the instance, and so do openstacksdk and openstackclient through the compute
    API as the screen shows it (the noauth2 token, the exported environment)."""
    endpoints = set(re.findall(r"http://127\.0\.0\.1:\d+/metrics", run.output.text))
    assert len(endpoints) == 4, endpoints  # the reporter, the API and two daemons
    for url in endpoints:
        with urllib.request.urlopen(url, timeout=10) as resp:
            assert b"computed_" in resp.read(), url
    listed = subprocess.run([*shown_prefix(run), "server", "list", "--json"],
                            capture_output=True, text=True, timeout=60)
    assert [s["state"] for s in json.loads(listed.stdout)] == ["ACTIVE"], listed.stdout
    api = re.search(r"compute API: (http://127\.0\.0\.1:\d+/v2\.1)", run.output.text)
    assert api, run.output.text[-3000:]
    conn = openstack.connection.Connection(
        auth_type="admin_token", auth={"endpoint": api.group(1), "token": "admin:admin"})
    servers = list(conn.compute.servers(all_projects=True))
    assert [s.status for s in servers] == ["ACTIVE"], servers
    cli = subprocess.run([str(BIN / "openstack"), "server", "list", "--all-projects",
                          "--no-name-lookup", "-f", "json"], capture_output=True, text=True,
                         timeout=120, env=shown_environment(run))
    assert cli.returncode == 0, cli.stderr
    assert [s["ID"] for s in json.loads(cli.stdout)] == [servers[0].id], cli.stdout


def shown_environment(run: RunLocal) -> dict[str, str]:
    """This environment without OS_ settings, plus the ``export`` lines of the first screen
    (every screen shows the same; a later one may be half-read)."""
    text = run.output.text
    start = text.index("compute API: http")
    block = text[start:text.index("python:", start)]
    env = {key: value for key, value in os.environ.items() if not key.startswith("OS_")}
    for line in re.findall(r"^ *export (.+)$", block, re.MULTILINE):
        env.update(pair.split("=", 1) for pair in line.split())
    return env


def check_a_first_server_with_the_cli(run: RunLocal, home: Path) -> None:
    """README.md's walkthrough, with the stock CLI and the environment the screen exports: a
    key pair, a server from the image demo with it and user data on bm.demo, ACTIVE; Ironic's
    node holds the image as its source and the key and user data in its config drive. The
    server is deleted again (the rest of the view test expects one instance)."""
    env = shown_environment(run)

    def cli(*args: str) -> str:
        done = subprocess.run([str(BIN / "openstack"), *args], capture_output=True, text=True,
                              timeout=300, env=env, cwd=home)
        assert done.returncode == 0, (args, done.stdout, done.stderr)
        return done.stdout

    image = json.loads(cli("image", "show", "demo", "-f", "json"))
    assert (image["status"], image["visibility"]) == ("active", "public"), image
    assert f"image demo {image['id']} (public, active)" in run.output.text
    assert "PRIVATE KEY" in cli("keypair", "create", "k")
    public_key = cli("keypair", "show", "k", "--public-key").strip()
    (home / "f").write_text(USER_DATA)
    server = json.loads(cli("server", "create", "--image", "demo", "--key-name", "k",
                            "--user-data", "f", "--flavor", "bm.demo", "--wait", "-f", "json",
                            "first"))
    assert (server["status"], server["key_name"]) == ("ACTIVE", "k"), server
    node = server["OS-EXT-SRV-ATTR:hypervisor_hostname"]
    ironic = json.loads((run.workdir / "state.json").read_text())["ironic"]["url"]
    info = request("GET", f"{ironic}/v1/nodes/{node}?fields=instance_info")["instance_info"]
    assert info["image_source"] == image["id"]
    # Ironic read the image in Glance (its [glance] section): it knows the image's type.
    assert info.get("image_type") == "whole-disk", info
    drive = info["configdrive"]
    assert drive["meta_data"]["public_keys"] == {"k": public_key}
    assert drive["meta_data"]["uuid"] == server["id"]
    assert drive["user_data"] == USER_DATA
    cli("server", "delete", "--wait", server["id"])


def shown_prefix(run: RunLocal) -> list[str]:
    found = re.search(r"computed-manage: (\S+computed-manage --config-file \S+)", run.output.text)
    assert found, run.output.text[-3000:]
    return found.group(1).split()


def create_server(prefix: list[str]) -> None:
    created = subprocess.run([*prefix, "server", "create", "--resource-class", "baremetal-demo",
                              "--image", "http://127.0.0.1/images/demo.qcow2", "--wait"],
                             capture_output=True, text=True, timeout=300, cwd="/")
    assert created.returncode == 0, created.stdout + created.stderr


def test_the_view_shows_maintenance_a_kill_and_a_graceful_stop(
        runs, workdir, tmp_path):  # noqa: F811 (fixtures)
    run = start(runs, workdir, terminal=True, extra=("--rehome-grace", str(REHOME_GRACE)))
    run.wait_ready()
    out = run.output

    def press(key: str, *expected: str, timeout: float = 120) -> None:
        since = len(out.text)
        run.send(key)
        for text in expected:
            out.wait_for(text, run.proc, timeout, since)

    out.wait_for(f"free {NODES},", run.proc, READY_TIMEOUT)
    press("m", "maintenance on in Ironic; its provider in Placement: reserved 1",
          f"free {NODES - 1},")
    press("m", "maintenance off in Ironic; its provider in Placement: reserved 0",
          f"free {NODES},")
    create_server(shown_prefix(run))
    out.wait_for("instances: ACTIVE 1", run.proc, 60)
    check_what_the_screen_shows(run)
    check_a_first_server_with_the_cli(run, tmp_path)
    # k kills the daemon hosting the instance: its node waits for re-homing, and says so.
    press("k", "killed", "hosting instances of computed-",
          "(gone), waiting for re-homing: a peer adopts them in")
    since = len(out.text)
    out.wait_for(f"nodes: claimed {NODES}, unclaimed 0", run.proc, 120, since)
    # t stops the other one gracefully: stopped, not "dead" (its drain, with no peer left to
    # take its nodes, is too short for the view to catch it draining).
    since = len(out.text)
    run.send("t")
    out.wait_for("stopped", run.proc, 120, since)
    assert re.search(r"computed-\d+ +stopped", out.text[since:]), out.text[-3000:]
    assert not re.search(r"computed-\d+ +(dead|exited)", out.text), out.text[-3000:]
    press("q", "stopped")
    run.wait_exit()
    assert_nothing_left(run)
    assert "Traceback" not in run.output.text, run.output.text[-3000:]
