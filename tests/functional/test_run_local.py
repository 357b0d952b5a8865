"""tools/run-local as a newcomer runs it: every way out stops everything it started (Glance
included), a second run refuses, a crashed run is cleaned by the next one, the command prefix it
shows builds an instance, the compute API it shows lists that instance to openstacksdk and
openstackclient, and README.md's first server works with the stock ``openstack`` CLI and the
environment the screen exports: a key pair, a server from the Glance image ``demo`` with it and
user data on the flavor ``bm.demo``, ACTIVE, and the key and the user data in the config drive
Ironic received (issue 24's "Done when").

Each test starts ``tools/run-local`` (its own stack, in a scratch work directory) as a separate
process: on a pseudo-terminal when the exit path needs one (``q``, Ctrl-C, closing the terminal),
else without a terminal, where it runs until signalled. What it started is read from its lock file
and the stack's state file while it runs; after it exits, none of those processes, none of their
process groups and no process naming the work directory may be left.
"""

from __future__ import annotations

import json
import os
import pty
import re
import signal
import subprocess
import sys
import threading
import time
import urllib.request
from pathlib import Path

import openstack
import pytest

from computed.testing.ironic import request
from computed.testing.process import alive

ROOT = Path(__file__).resolve().parents[2]
BIN = Path(sys.executable).parent
RUN_LOCAL = ROOT / "tools" / "run-local"
NODES = 6
SMALL = ("--nodes", str(NODES), "--daemons", "2")
# Starting a stack takes 10-60 s on a loaded 2-core machine; a first run also builds the
# OpenStack services' virtualenvs.
READY_TIMEOUT = 600
EXIT_TIMEOUT = 90
USER_DATA = "#cloud-config\nruncmd:\n  - [touch, /tmp/computed-was-here]\n"


class Output:
    """Everything a file descriptor yields, read by a thread so the writer never blocks."""

    def __init__(self, fd: int):
        self.fd = fd
        self.text = ""
        self.thread = threading.Thread(target=self._read, daemon=True)
        self.thread.start()

    def _read(self) -> None:
        while True:
            try:
                chunk = os.read(self.fd, 65536)
            except OSError:  # a pty whose other side is gone reads EIO
                return
            if not chunk:
                return
            self.text += chunk.decode(errors="replace")

    def wait_for(self, text: str, proc: subprocess.Popen, timeout: float, since: int = 0) -> None:
        """Wait until ``text`` appears (after offset ``since`` of what was read)."""
        deadline = time.monotonic() + timeout
        while text not in self.text[since:]:
            if proc.poll() is not None:
                time.sleep(0.5)  # the last words
                raise AssertionError(f"run-local exited {proc.returncode} before {text!r}:\n"
                                     f"{self.text[-4000:]}")
            if time.monotonic() > deadline:
                raise AssertionError(f"run-local never showed {text!r}:\n{self.text[-4000:]}")
            time.sleep(0.2)


class RunLocal:
    """One tools/run-local process and what it said it started."""

    def __init__(self, workdir: Path, terminal: bool, extra: tuple[str, ...] = ()):
        self.workdir = workdir
        argv = [str(RUN_LOCAL), *SMALL, "--workdir", str(workdir), *extra]
        self.master: int | None = None
        if terminal:
            # setsid -c: a session of its own with the pty as controlling terminal, as a shell
            # in a terminal window gives it (Ctrl-C and the hang-up reach it through the pty).
            self.master, slave = pty.openpty()
            self.proc = subprocess.Popen(["setsid", "-c", *argv], stdin=slave, stdout=slave,
                                         stderr=slave, cwd=ROOT)
            os.close(slave)
            self.output = Output(self.master)
        else:
            self.proc = subprocess.Popen(argv, stdin=subprocess.DEVNULL, stdout=subprocess.PIPE,
                                         stderr=subprocess.STDOUT, cwd=ROOT,
                                         start_new_session=True)
            self.output = Output(self.proc.stdout.fileno())
        self.pids: set[int] = set()

    def wait_ready(self, inherited: set[int] = frozenset()) -> None:
        """Wait for the view; ``inherited``: a crashed run's processes, still in the record."""
        self.output.wait_for("providers in Placement", self.proc, READY_TIMEOUT)
        # Every process it started, as its files record them (read now: they go on exit).
        self.pids = recorded_pids(self.workdir) - inherited
        assert len(self.pids) >= 3, f"too few recorded processes: {self.pids}"
        assert all(alive(pid) for pid in self.pids), self.pids

    def send(self, text: str) -> None:
        os.write(self.master, text.encode())

    def wait_exit(self) -> int:
        try:
            return self.proc.wait(EXIT_TIMEOUT)
        except subprocess.TimeoutExpired:
            raise AssertionError(f"run-local still running {EXIT_TIMEOUT}s after being told to "
                                 f"stop:\n{self.output.text[-4000:]}") from None

    def cleanup(self) -> None:
        """After a failed test: stop whatever is left, as a later run would."""
        if self.proc.poll() is None:
            self.proc.terminate()
            try:
                self.proc.wait(EXIT_TIMEOUT)
            except subprocess.TimeoutExpired:
                self.proc.kill()
        if self.master is not None:
            try:
                os.close(self.master)
            except OSError:
                pass
        for pid in self.pids | leftovers(self.workdir):
            for kill in (os.killpg, os.kill):
                try:
                    kill(pid, signal.SIGKILL)
                except OSError:
                    pass


def recorded_pids(workdir: Path) -> set[int]:
    pids = set()
    lock = workdir / "run.lock"
    if lock.exists():
        pids |= {p["pid"] for p in json.loads(lock.read_text())["processes"]}
    state = workdir / "state.json"
    if state.exists():
        pids |= {info["pid"] for info in json.loads(state.read_text()).values() if "pid" in info}
    return pids


def _proc_entries():
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit():
            try:
                stat = (entry / "stat").read_text().rsplit(")", 1)[1].split()
                cmdline = (entry / "cmdline").read_bytes().replace(b"\0", b" ").decode(
                    errors="replace")
                environ = (entry / "environ").read_bytes().decode(errors="replace")
            except OSError:
                continue
            if stat[0] != "Z":
                yield int(entry.name), int(stat[2]), cmdline + environ


def leftovers(workdir: Path, groups: set[int] = frozenset()) -> set[int]:
    """Live processes in one of ``groups`` or naming the work directory."""
    me = os.getpid()
    return {pid for pid, pgid, text in _proc_entries()
            if pid != me and (pgid in groups or str(workdir) in text)}


def assert_nothing_left(run: RunLocal) -> None:
    groups = run.pids | {run.proc.pid}
    deadline = time.monotonic() + 10  # processes killed a moment ago may still be reaped
    while True:
        left = {pid for pid in run.pids if alive(pid)} | leftovers(run.workdir, groups)
        if not left or time.monotonic() > deadline:
            break
        time.sleep(0.2)
    described = {pid: Path(f"/proc/{pid}/cmdline").read_bytes()[:120] for pid in left
                 if Path(f"/proc/{pid}").exists()}
    assert not left, f"left running after exit: {described}\n{run.output.text[-3000:]}"
    assert not (run.workdir / "run.lock").exists()
    assert not (run.workdir / "state.json").exists()


@pytest.fixture
def workdir(tmp_path):
    return tmp_path / "demo"


@pytest.fixture
def runs():
    started: list[RunLocal] = []
    yield started
    for run in started:
        run.cleanup()


def start(runs, workdir, terminal=False, extra=()) -> RunLocal:
    run = RunLocal(workdir, terminal, extra)
    runs.append(run)
    return run


# "q" is the way out of test_the_view_shows_maintenance_a_kill_and_a_graceful_stop, SIGTERM of
# test_a_second_run_refuses_and_a_crashed_run_is_cleaned_by_the_next.
@pytest.mark.parametrize("how", ["ctrl-c", "terminal closed", "stdout closed"])
def test_every_exit_stops_everything_it_started(runs, workdir, how):
    run = start(runs, workdir, terminal=how != "stdout closed")
    run.wait_ready()
    if how == "ctrl-c":
        run.send("\x03")
    elif how == "terminal closed":
        os.close(run.master)
        run.master = None
    else:  # tools/run-local | head: the reader goes away
        run.proc.stdout.close()
    run.wait_exit()
    assert_nothing_left(run)
    if how == "ctrl-c":
        assert "Traceback" not in run.output.text, run.output.text[-3000:]


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


def test_the_view_shows_maintenance_a_kill_and_a_graceful_stop(runs, workdir, tmp_path):
    run = start(runs, workdir, terminal=True)
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


def test_a_second_run_refuses_and_a_crashed_run_is_cleaned_by_the_next(runs, workdir):
    first = start(runs, workdir)
    first.wait_ready()
    second = subprocess.run([str(RUN_LOCAL), *SMALL, "--workdir", str(workdir)],
                            capture_output=True, text=True, timeout=120, cwd=ROOT,
                            stdin=subprocess.DEVNULL)
    assert second.returncode != 0
    refusal = second.stderr.strip().splitlines()
    assert len(refusal) == 1 and f"pid {first.proc.pid}" in refusal[0], second.stderr
    assert first.proc.poll() is None and all(alive(pid) for pid in first.pids)

    first.proc.kill()  # a crash: nothing of the first run is stopped
    first.proc.wait(10)
    assert all(alive(pid) for pid in first.pids)
    third = start(runs, workdir)
    third.wait_ready(inherited=first.pids)
    assert not {pid for pid in first.pids if alive(pid)}, "the crashed run's processes live on"
    third.proc.send_signal(signal.SIGTERM)
    third.wait_exit()
    assert_nothing_left(third)
