"""computed.testing.stack starts and stops a wave of services at once: every call ends before a
failure is raised, so the saved state lists every service that started and no stop is skipped."""

import threading

import pytest

from computed.testing import stack
from computed.testing.service import Service


def test_a_wave_runs_its_calls_at_once_and_raises_the_failure_after_all_ended():
    both_running = threading.Barrier(2, timeout=5)
    done = []

    def slow_ok():
        both_running.wait()  # only passes if the other call runs at the same time
        done.append("ok")

    def failing():
        both_running.wait()
        raise RuntimeError("placement did not start")

    with pytest.raises(RuntimeError, match="placement did not start"):
        stack.together([slow_ok, failing])
    assert done == ["ok"]


def test_placement_and_ironic_start_after_what_they_need():
    started = [name for wave in stack.WAVES for name in wave]
    assert sorted(started) == sorted(stack.ORDER)
    wave_of = {name: i for i, wave in enumerate(stack.WAVES) for name in wave}
    assert wave_of["placement"] > wave_of["postgres"]  # its database
    assert wave_of["ironic"] > wave_of["rabbitmq"]     # its notifications
    # Ironic reads Glance: both start together, Glance made first so Ironic knows its URL.
    wave = stack.WAVES[wave_of["ironic"]]
    assert wave_of["glance"] == wave_of["ironic"] and wave.index("glance") < wave.index("ironic")


def test_glance_is_started_only_when_asked_for():
    assert "glance" in stack.ORDER and "glance" not in stack.DEFAULT
    assert set(stack.DEFAULT) == set(stack.ORDER) - {"glance"}


def test_with_glance_ironic_and_computed_api_are_pointed_at_it(tmp_path):
    from computed.testing.glance import Glance
    from computed.testing.ironic import Ironic
    built = stack.Stack(tmp_path)
    glance = built._new("glance")
    assert isinstance(glance, Glance) and glance.url == f"http://127.0.0.1:{glance.info['port']}"
    built.services["glance"] = Glance(tmp_path, info={"url": "http://127.0.0.1:9292"})
    ironic = built._new("ironic")
    assert isinstance(ironic, Ironic)
    conf = ironic._config(tmp_path, 6385)
    assert "[glance]\nauth_type = none\nendpoint_override = http://127.0.0.1:9292\n" in conf
    assert ("[glance]\nauth_type = none\nendpoint_override = http://127.0.0.1:9292\n"
            in built.computed_conf())
    without = stack.Stack(tmp_path, {})
    assert "[glance]" not in without._new("ironic")._config(tmp_path, 6385)
    assert "[glance]" not in without.computed_conf()


def test_ironic_power_sync_is_ironics_default_unless_asked(tmp_path):
    default = stack.Stack(tmp_path)._new("ironic")._config(tmp_path, 6385)
    assert "sync_power_state_interval" not in default
    for seconds in (0, 600):
        conf = stack.Stack(tmp_path, ironic_power_sync=seconds)._new("ironic")._config(
            tmp_path, 6385)
        section = conf.split("[conductor]\n", 1)[1].split("[", 1)[0]
        assert f"sync_power_state_interval = {seconds}\n" in section


def test_placement_workers_are_one_unless_asked_and_kept_in_its_info(tmp_path):
    assert stack.Stack(tmp_path)._new("placement").workers == 1
    placement = stack.Stack(tmp_path, placement_workers=3)._new("placement")
    assert placement.workers == 3 and placement.info["workers"] == 3
    # A stack loaded from its state file (another process, a restart) starts as many again.
    built = stack.Stack(tmp_path, {"placement": placement})
    built.save()
    assert stack.Stack.load(tmp_path)["placement"].workers == 3


def test_placement_refuses_fewer_than_one_worker(tmp_path):
    with pytest.raises(ValueError, match="placement: workers 0"):
        _ = stack.Stack(tmp_path, placement_workers=0)._new("placement").workers


def test_the_cap_on_ironics_unread_notifications_is_set_while_ironic_starts(monkeypatch,
                                                                              tmp_path):
    capped = threading.Event()
    started = []

    class Fake(Service):
        def __init__(self, workdir, info=None, **_kw):
            super().__init__(workdir, info)
            self.info.setdefault("url", "rabbit://x")

        def start(self):
            started.append(type(self).name)
            if type(self).name == "ironic":
                # Only set if the cap is being set at the same time as this start runs.
                assert capped.wait(5), "the cap was not set during Ironic's start"

        def stop(self):
            pass

    fakes = {name: type(name, (Fake,), {"name": name}) for name in stack.ORDER}
    monkeypatch.setattr(stack, "CLASSES", fakes)
    for name, attr in (("ironic", "Ironic"), ("glance", "Glance"), ("placement", "Placement")):
        monkeypatch.setattr(stack, attr, fakes[name])
    monkeypatch.setattr(stack.postgres, "available", lambda: False)
    monkeypatch.setattr(stack.Stack, "_cap_unconsumed_notifications", lambda self: capped.set())
    stack.Stack.up(tmp_path)
    assert sorted(started) == sorted(name for name in stack.DEFAULT if name != "postgres")
