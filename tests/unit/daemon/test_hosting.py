"""The daemon as a host of instances: stickiness, re-homing orphans, and when to resume work."""

from __future__ import annotations

import types

import pytest

from computed.daemon.hosting import RESUME_INTERVAL, Hosting
from computed.db import api as db_api
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


@pytest.fixture
def audit_path(tmp_path):
    return tmp_path / "audit.jsonl"


def hosting(engine, audit_path, rehomer=None, clock=None):
    membership = types.SimpleNamespace(host="c1", member_epoch=42)
    return Hosting(engine, membership, rehomer or Rehomer(), AuditLog(str(audit_path), "c1"),
                   clock=clock or Clock())


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
    monkeypatch.setattr(db_api, "instance_hosts", lambda engine: {"n1": "c2"})
    assert host.hosts() == {"n1": "c2"}

    def unreachable(engine):
        raise ConnectionError("database away")

    monkeypatch.setattr(db_api, "instance_hosts", unreachable)
    assert host.hosts() == {"n1": "c2"}  # dropping stickiness would move n1 away from c2
