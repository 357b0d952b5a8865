"""The daemon as a host of instances: stickiness, re-homing orphans, and when to resume work."""

from __future__ import annotations

import types

import pytest

from computed.daemon.hosting import Hosting
from computed.db import instances as db_instances
from computed.fleet import audit as audit_log
from computed.fleet.audit import AuditLog
from computed.fleet.plan import compute_plan
from hashring.ownership import Member
from tests.unit.daemon.fakes import Clock


class Rehomer:
    """Adopts ``adopt`` at the next step; records what it was asked."""

    def __init__(self, *adopt: str):
        self.adopt = list(adopt)
        self.steps: list[tuple] = []

    def step(self, plan, member_epoch, standing):
        assert standing is STANDING
        self.steps.append((list(plan.members), dict(plan.orphans), member_epoch))
        adopted, self.adopt = self.adopt, []
        return adopted


STANDING = object()  # the fleet, passed through to the re-homing


RESUME_INTERVAL = 60.0


@pytest.fixture
def audit_path(tmp_path):
    return tmp_path / "audit.jsonl"


def hosting(engine, audit_path, rehomer=None, clock=None):
    membership = types.SimpleNamespace(host="c1", member_epoch=42)
    return Hosting(engine, membership, rehomer or Rehomer(), AuditLog(str(audit_path), "c1"),
                   resume_interval=RESUME_INTERVAL, clock=clock or Clock())


def test_resume_is_due_every_interval_and_not_in_between(engine, audit_path):
    clock = Clock()
    host = hosting(engine, audit_path, clock=clock)
    assert not host.resume_due()
    clock.now += RESUME_INTERVAL
    assert host.resume_due()
    assert not host.resume_due()
    clock.now += RESUME_INTERVAL - 1
    assert not host.resume_due()


def test_a_join_makes_resume_due_at_once(engine, audit_path):
    host = hosting(engine, audit_path)
    host.joined(member_epoch=43)  # nothing of this host to move in an empty database
    assert host.resume_due()
    assert not host.resume_due()


def test_orphans_are_left_alone_until_the_fleet_planned(engine, audit_path):
    rehomer = Rehomer("i1")
    host = hosting(engine, audit_path, rehomer)
    assert host.rehome_orphans(None, STANDING) == []
    assert rehomer.steps == [] and not host.resume_due()


def test_adopted_instances_are_audited_and_resumed(engine, audit_path):
    rehomer = Rehomer("i1", "i2")
    host = hosting(engine, audit_path, rehomer)
    members = [Member("c1", 1, False), Member("c2", 2, True)]
    # n9 hosts an instance of a host that is gone: an orphan.
    plan = compute_plan(members, held=(), nodes={"n1", "n9"}, instance_hosts={"n9": "gone"},
                        host="c1")
    assert host.rehome_orphans(plan, STANDING) == ["i1", "i2"]
    assert rehomer.steps == [([Member("c1", 1, False), Member("c2", 2, True)], {"n9": "gone"},
                              42)]
    records = audit_log.read(audit_path)
    assert [(r["event"], r["instance"], r["member_epoch"]) for r in records] == \
        [("rehome", "i1", 42), ("rehome", "i2", 42)]
    assert host.resume_due()
    assert host.rehome_orphans(plan, STANDING) == [] and not host.resume_due()


def test_instance_hosts_keep_the_last_answer_when_the_database_fails(engine, audit_path,
                                                                     monkeypatch):
    host = hosting(engine, audit_path)
    assert host.hosts() == {}
    monkeypatch.setattr(db_instances, "instance_hosts", lambda engine: {"n1": "c2"})
    assert host.hosts() == {"n1": "c2"}

    def unreachable(engine):
        raise ConnectionError("database away")

    monkeypatch.setattr(db_instances, "instance_hosts", unreachable)
    assert host.hosts() == {"n1": "c2"}  # dropping stickiness would move n1 away from c2


# --- re-adoption at (re)join: a database error is retried, with backoff ---------------------

INSTANCE = "11111111-0000-0000-0000-000000000001"


def flaky(monkeypatch, failures: int):
    """Make ``instances_by_host`` (the first read of re-adoption) fail ``failures`` times."""
    real = db_instances.instances_by_host
    calls = []

    def instances_by_host(engine, host):
        calls.append(host)
        if len(calls) <= failures:
            raise ConnectionError("database away")
        return real(engine, host)

    monkeypatch.setattr(db_instances, "instances_by_host", instances_by_host)
    return calls


def test_a_failed_readoption_is_retried_until_it_succeeds(engine, audit_path, monkeypatch,
                                                          caplog):
    db_instances.create_instance(engine, INSTANCE, "CUSTOM_GOLD", node_uuid="n1", host="c1",
                                 member_epoch=41)
    clock = Clock()
    host = hosting(engine, audit_path, clock=clock)
    calls = flaky(monkeypatch, failures=2)
    host.joined(member_epoch=43)  # does not raise: the fleet goes on, re-adoption is pending
    assert "database away" in caplog.text
    assert host.readopt_failures == 1 and host.readopt_pending
    assert db_instances.get_instance(engine, INSTANCE).member_epoch == 41
    # Nothing of this host is resumed before its instances are under the new member epoch.
    assert not host.resume_due()
    assert not host.readopt()  # not due yet: backoff
    assert len(calls) == 1
    clock.now += 1
    assert not host.readopt()  # fails again
    assert host.readopt_failures == 2 and len(calls) == 2
    clock.now += 1
    assert not host.readopt()  # the backoff doubled
    assert len(calls) == 2
    clock.now += 1
    assert host.readopt()
    assert not host.readopt_pending
    assert db_instances.get_instance(engine, INSTANCE).member_epoch == 43
    assert host.resume_due()
    assert host.readopt() and len(calls) == 3  # nothing pending: no more database reads


def test_a_later_join_replaces_a_pending_readoption(engine, audit_path, monkeypatch):
    db_instances.create_instance(engine, INSTANCE, "CUSTOM_GOLD", node_uuid="n1", host="c1",
                                 member_epoch=41)
    clock = Clock()
    host = hosting(engine, audit_path, clock=clock)
    flaky(monkeypatch, failures=1)
    host.joined(member_epoch=43)
    host.joined(member_epoch=44)  # the session was lost again meanwhile: a new epoch, at once
    assert not host.readopt_pending
    assert db_instances.get_instance(engine, INSTANCE).member_epoch == 44


def test_readoption_backoff_is_capped():
    from computed.daemon.hosting import READOPT_MAX_DELAY, readopt_delay
    assert [readopt_delay(n) for n in (1, 2, 3)] == [1.0, 2.0, 4.0]
    assert readopt_delay(100) == READOPT_MAX_DELAY
