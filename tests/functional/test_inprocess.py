"""The in-process harness itself (tests/functional/inprocess.py): each service's lines in its own
log file only, the exit status of a bad configuration, and what only a process can do refused."""

from __future__ import annotations

import pytest

from tests.functional import inprocess
from tests.functional.daemons import dump_logs

WORLD_NODES = 2


def test_each_service_logs_to_its_own_file_only(world):
    reporter = world.reporter("r1")
    c1, c2 = world.daemon("c1"), world.daemon("c2")
    for daemon in (c1, c2):
        daemon.wait_log(f"host {daemon.host} joined group")
    reporter.wait_log("serving topic")
    processes = (reporter, c1, c2)
    logs = {p.host: p.log.read_text() for p in processes}
    assert "host c2 joined" not in logs["c1"] and "host c1 joined" not in logs["c2"], \
        dump_logs(processes)
    assert "computed-reporter r1" not in logs["c1"] + logs["c2"], dump_logs(processes)
    with pytest.raises(inprocess.NotAProcess):
        c1.kill()
    assert c1.stop() == 0 and not c1.alive
    assert logs["c1"] in c1.log.read_text() and "computed stopped" in c1.log.read_text()
    assert "computed stopped" not in c2.log.read_text()


def test_a_bad_configuration_is_exit_status_2_and_leaves_nothing(tmp_path):
    conf = tmp_path / "bad.conf"
    conf.write_text("[fleet]\nweight = many\n")
    service = inprocess.Service("computed", ["--config-file", str(conf)], tmp_path / "bad.log",
                                "bad").start()
    assert service.stop(30) == 2
    service.ensure_stopped()  # raises if a thread or a signal handler were left
    assert inprocess.running() == []
