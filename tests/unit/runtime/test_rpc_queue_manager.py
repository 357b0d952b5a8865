"""computed's transports use oslo.messaging's queue manager (a stopping server loses no cast in
flight: tests/functional/test_rpc_stop.py): on by default, a processname of its own for every
computed process of a host, and its lock directory given to oslo.concurrency. No broker: a
rabbit transport connects only when first used."""

from __future__ import annotations

import os

import pytest
from oslo_concurrency import lockutils
from oslo_config import cfg

from computed.conf import loader
from computed.conf import messaging as messaging_opts
from computed.conf.errors import ConfigError
from computed.runtime import rpc

RABBIT = "rabbit://guest:guest@127.0.0.1:1/"


@pytest.fixture(autouse=True)
def lock_path_restored():
    """get_transport sets oslo.concurrency's process-wide lock directory: put it back. (The
    global CONF caches what it read: cleared, as a process reads it first after the set.)"""
    lockutils.set_defaults(lock_path=None)  # registers [oslo_concurrency] on the global CONF
    before = os.environ.get("OSLO_LOCK_PATH")
    cfg.CONF.clear_default("lock_path", group="oslo_concurrency")  # and its cache
    yield
    lockutils.set_defaults(lock_path=before)
    cfg.CONF.clear_default("lock_path", group="oslo_concurrency")  # and its cache


@pytest.fixture(autouse=True)
def group_leader_alive(monkeypatch):
    """The test process's own group may have lost its leader (a suite started in the background
    by a shell that exited: CI's runner or a developer's ``&``), which turns the queue manager
    off: each test runs as a group leader itself unless it says otherwise."""
    monkeypatch.setattr(os, "getpgrp", os.getpid)


def loaded(tmp_path, text: str = "") -> cfg.ConfigOpts:
    """A configuration parsed as computed's commands parse it, with ``text`` as its file."""
    path = tmp_path / "computed.conf"
    path.write_text(f"[DEFAULT]\ntransport_url = {RABBIT}\n[coordination]\nbackend_url = "
                    f"zookeeper://127.0.0.1:1\n[messaging]\nlock_path = {tmp_path / 'lock'}\n"
                    + text)
    conf = cfg.ConfigOpts()
    loader.register_all(conf)
    conf(["--config-file", str(path)], project="computed", default_config_files=[])
    return conf


def rabbit(conf: cfg.ConfigOpts, service: str, member: str | None = None) -> cfg.ConfigOpts:
    transport = rpc.get_transport(conf, service, member, url=RABBIT)
    transport.cleanup()
    return conf.oslo_messaging_rabbit


def test_the_queue_manager_is_on_unless_the_operator_turns_it_off(tmp_path):
    assert loaded(tmp_path).oslo_messaging_rabbit.use_queue_manager is True
    off = loaded(tmp_path, "[oslo_messaging_rabbit]\nuse_queue_manager = false\n")
    assert off.oslo_messaging_rabbit.use_queue_manager is False


def test_a_bare_configuration_gets_it_too():
    conf = cfg.ConfigOpts()
    conf([])
    rpc.get_transport(conf, "test", url="fake://").cleanup()
    assert conf.oslo_messaging_rabbit.use_queue_manager is True


def test_each_member_and_service_has_a_processname_of_its_own(tmp_path):
    names = {rabbit(loaded(tmp_path), service, member).processname
             for service, member in (("daemon", "c1"), ("daemon", "c2"), ("reporter", "c1"))}
    assert names == {"computed-daemon-c1", "computed-daemon-c2", "computed-reporter-c1"}
    # The member as the fleet knows it (normalised), whichever spelling the file has.
    assert rabbit(loaded(tmp_path), "daemon", " C1.Example.org. ").processname == (
        "computed-daemon-c1.example.org")


def test_a_process_that_is_no_member_is_named_by_its_pid(tmp_path):
    assert rabbit(loaded(tmp_path), "api").processname == f"computed-api-{os.getpid()}"
    assert messaging_opts.process_name("manage", None) == f"computed-manage-{os.getpid()}"


def test_the_processname_is_safe_in_a_file_name():
    assert messaging_opts.process_name("daemon", "a/b c") == "computed-daemon-a_b_c"


def test_the_operators_processname_wins(tmp_path):
    conf = loaded(tmp_path, "[oslo_messaging_rabbit]\nprocessname = mine\n")
    assert rabbit(conf, "daemon", "c1").processname == "mine"


def test_the_lock_path_is_created_and_given_to_oslo_concurrency(tmp_path):
    rabbit(loaded(tmp_path), "daemon", "c1")
    assert (tmp_path / "lock").is_dir()
    # The queue manager's lock: external, without a lock_path of its own.
    with lockutils.lock("probe", external=True):
        pass
    assert "probe" in "".join(os.listdir(tmp_path / "lock"))


def test_an_unusable_lock_path_is_one_config_error(tmp_path):
    (tmp_path / "file").write_text("")
    conf = loaded(tmp_path, f"[messaging]\nlock_path = {tmp_path / 'file' / 'lock'}\n")
    with pytest.raises(ConfigError, match=r"^\[messaging\] lock_path: cannot create "):
        rpc.get_transport(conf, "daemon", "c1", url=RABBIT)


def test_no_lock_path_without_rabbit_or_the_queue_manager(tmp_path):
    rpc.get_transport(loaded(tmp_path), "daemon", "c1", url="fake://").cleanup()
    off = loaded(tmp_path, "[oslo_messaging_rabbit]\nuse_queue_manager = false\n")
    rabbit(off, "daemon", "c1")
    assert not (tmp_path / "lock").exists()


def test_a_process_whose_group_leader_left_runs_without_it(tmp_path, monkeypatch, caplog):
    """oslo.messaging's queue manager fails every queue name once the process group's leader
    has exited (a process a script started in the background and left): such a process turns
    it off, with a warning, rather than failing every server start and call."""
    gone = int(open("/proc/sys/kernel/pid_max").read()) + 1  # no process has this pid
    monkeypatch.setattr(os, "getpgrp", lambda: gone)
    conf = loaded(tmp_path)
    assert rabbit(conf, "daemon", "c1").use_queue_manager is False
    assert f"the leader of its process group (pid {gone}) has exited" in caplog.text
    assert not (tmp_path / "lock").exists()
