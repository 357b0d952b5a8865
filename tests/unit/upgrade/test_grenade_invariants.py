"""The upgrade test's judgments (tests/upgrade/invariants.py): lost actions, 5xx, how long a
provider stayed wrong, which providers are wrong."""

from __future__ import annotations

import pytest

from tests.upgrade.invariants import Answers, Ledger, Staleness, wrong_providers

FREE = {"maintenance": False, "power_state": "power off", "provision_state": "available",
        "instance_uuid": None}


def test_an_action_is_done_at_its_outcome_and_not_before():
    ledger = Ledger()
    ledger.accepted("s1", "reboot", 10.0, 60, "daemon c1")
    ledger.observe("s1", "REBOOT", "rebooting_hard", 11.0)
    ledger.observe("s1", "ACTIVE", "rebooting_hard", 12.0)  # the task is not over yet
    assert ledger.busy("s1")
    ledger.observe("s1", "ACTIVE", None, 13.0)
    summary = ledger.summary()
    assert (summary["open"], summary["failed"], summary["slowest"]) == (0, [], 3.0)
    assert (summary["asked_by_step"], summary["slowest_by_step"]) == ({"daemon c1": 1},
                                                                      {"daemon c1": 3.0})
    assert not ledger.busy("s1")


def test_a_delete_is_done_when_the_server_is_gone():
    ledger = Ledger()
    ledger.accepted("s1", "delete", 0.0, 60, "api")
    ledger.observe("s1", "ACTIVE", "deleting", 1.0)
    assert ledger.busy("s1")
    ledger.observe("s1", None, None, 2.0)
    assert ledger.summary()["done"] == {"delete": 1}


def test_an_action_past_its_deadline_is_lost_naming_the_server_and_step():
    ledger = Ledger()
    ledger.accepted("s1", "stop", 0.0, 60, "daemon c2 to main")
    ledger.expire(59.0)
    assert ledger.summary()["failed"] == []
    ledger.expire(61.0)
    [failed] = ledger.summary()["failed"]
    assert "stop of server s1" in failed and "daemon c2 to main" in failed
    ledger.observe("s1", "SHUTOFF", None, 62.0)  # too late: it stays lost
    assert ledger.summary()["done"] == {}


def test_error_and_disappearance_fail_an_action():
    ledger = Ledger()
    ledger.accepted("s1", "create", 0.0, 60, "x")
    ledger.accepted("s2", "start", 0.0, 60, "x")
    ledger.observe("s1", "ERROR", None, 1.0)
    ledger.observe("s2", None, None, 1.0)
    assert sorted(ledger.summary()["failed"]) == [
        "server s1 went to ERROR after create", "server s2 disappeared during start"]


def test_an_unknown_action_is_refused():
    with pytest.raises(ValueError, match="'resize' on server s1"):
        Ledger().accepted("s1", "resize", 0.0, 60, "x")


def test_answers_keep_every_5xx_and_count_refusals_apart():
    answers = Answers()
    server = "3f1e0a52-5d7c-4f5e-9a43-0a4c5c1f6b1e"
    answers.answered(200, f"GET /servers/{server}", "x")
    answers.answered(404, f"GET /servers/{server}", "x")
    answers.answered(409, f"stop {server}", "x")
    answers.answered(409, "stop 0b1e0a52-5d7c-4f5e-9a43-0a4c5c1f6b1e", "x")
    answers.answered(503, "create server", "computed-api to main")
    answers.refused("computed-api to main")
    assert answers.summary() == {
        "by_class": {"2xx": 1, "4xx": 3, "5xx": 1},
        "not_ok": {"404 GET /servers/{id}": 1, "409 stop {id}": 2, "503 create server": 1},
        "server_errors": ["503 on create server during computed-api to main"],
        "unreachable": 1, "unreachable_by_step": {"computed-api to main": 1}}


def test_staleness_measures_each_episode_from_first_wrong_to_first_right():
    staleness = Staleness()
    staleness.observe(0.0, set(), "a")
    staleness.observe(1.0, {"n1"}, "a")
    staleness.observe(2.0, {"n1", "n2"}, "b")
    staleness.observe(4.0, {"n2"}, "b")
    staleness.observe(5.0, {"n1", "n2"}, "c")
    staleness.observe(9.0, {"n1"}, "c")
    lengths = sorted((e.node, e.started, e.ended, e.step) for e in staleness.episodes())
    assert lengths == [("n1", 1.0, 4.0, "a"), ("n1", 5.0, None, "c"), ("n2", 2.0, 9.0, "b")]
    assert staleness.longest().node == "n2"
    assert staleness.longest_by_step() == {"a": 3.0, "b": 7.0, "c": 4.0}
    assert [e.node for e in staleness.over(3.5)] == ["n2", "n1"]


def test_an_open_episode_counts_up_to_the_last_observation():
    staleness = Staleness()
    staleness.observe(0.0, {"n1"}, "a")
    staleness.observe(50.0, {"n1"}, "a")
    [episode] = staleness.over(30)
    assert (episode.node, episode.ended) == ("n1", None)


def test_wrong_providers_by_nova_rules():
    nodes = [
        {"uuid": "free-offered", **FREE},
        {"uuid": "free-hidden", **FREE},
        {"uuid": "free-allocated", **FREE},
        {"uuid": "maintenance-offered", **FREE, "maintenance": True},
        {"uuid": "maintenance-hidden", **FREE, "maintenance": True},
        {"uuid": "instance-offered", **FREE, "instance_uuid": "i"},
        {"uuid": "deploying-hidden", **FREE, "provision_state": "deploying"},
        {"uuid": "power-unknown-offered", **FREE, "power_state": None},
    ]
    offered = {"free-offered", "maintenance-offered", "instance-offered",
               "power-unknown-offered"}
    assert wrong_providers(nodes, offered, {"free-allocated"}) == {
        "free-hidden", "maintenance-offered", "instance-offered", "power-unknown-offered"}
