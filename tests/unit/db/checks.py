"""Backend-neutral checks of computed's database modules (:mod:`computed.db`), run on sqlite by
the unit tests and on PostgreSQL and MySQL/MariaDB by tests/functional/test_db.py.

Each check takes an engine on a synced database that other checks may share, so every check
makes its own uuids and looks only at its own rows.
"""

from __future__ import annotations

import threading
import uuid as uuidlib

import pytest

from computed.db import instances as db_instances
from computed.db import models
from computed.db import providers as db_providers
from tests import database


def new_uuid() -> str:
    return str(uuidlib.uuid4())


class Recorder:
    """An ``apply`` callback that records the rows it was given and returns ``state``."""

    def __init__(self, state: str | None = '{"reserved": 0}'):
        self.state = state
        self.calls: list[db_providers.ProviderRow | None] = []

    def __call__(self, row: db_providers.ProviderRow | None) -> str | None:
        self.calls.append(row)
        return self.state


# -- providers -------------------------------------------------------------------------------

def check_report_order(engine) -> None:
    uuid = new_uuid()
    first = Recorder('{"v": 1}')
    assert database.apply_report_if_newer(engine, uuid, 5, 3, "h1", first)
    assert first.calls == [None]
    stored = database.get_provider(engine, uuid)
    assert (stored.claim_epoch, stored.seq, stored.host, stored.state, stored.deleted) == \
        (5, 3, "h1", '{"v": 1}', False)

    # Same or older: refused, apply not called.
    for claim_epoch, seq in [(5, 3), (5, 2), (4, 99), (0, 0)]:
        refused = Recorder()
        assert not database.apply_report_if_newer(engine, uuid, claim_epoch, seq, "h2", refused)
        assert refused.calls == []
    assert database.get_provider(engine, uuid) == stored

    newer = Recorder('{"v": 2}')
    assert database.apply_report_if_newer(engine, uuid, 5, 4, "h1", newer)
    assert newer.calls == [stored]
    # A new claim epoch (a new owner's claim) wins whatever its sequence.
    owner = Recorder('{"v": 3}')
    assert database.apply_report_if_newer(engine, uuid, 6, 0, "h2", owner)
    assert owner.calls[0].seq == 4
    assert (database.get_provider(engine, uuid).claim_epoch,
            database.get_provider(engine, uuid).host) == (6, "h2")
    assert uuid in db_providers.provider_uuids(engine)


def check_report_delete_and_revive(engine) -> None:
    uuid = new_uuid()
    assert database.apply_report_if_newer(engine, uuid, 1, 0, "h", Recorder())
    assert database.apply_report_if_newer(engine, uuid, 1, 1, "h", Recorder(None))
    deleted = database.get_provider(engine, uuid)
    assert deleted.deleted and deleted.state is None
    assert (deleted.claim_epoch, deleted.seq) == (1, 1)
    assert uuid not in db_providers.provider_uuids(engine)
    assert not database.apply_report_if_newer(engine, uuid, 1, 0, "h", Recorder())
    revive = Recorder('{"v": 9}')
    assert database.apply_report_if_newer(engine, uuid, 1, 2, "h", revive)
    assert revive.calls == [deleted]
    assert uuid in db_providers.provider_uuids(engine)


def check_applied_states(engine) -> None:
    applied, deleted, unapplied = new_uuid(), new_uuid(), new_uuid()
    assert database.apply_report_if_newer(engine, applied, 1, 0, "h", Recorder('{"v": 1}'))
    assert database.apply_report_if_newer(engine, deleted, 1, 0, "h", Recorder())
    assert database.apply_report_if_newer(engine, deleted, 1, 1, "h", Recorder(None))

    def boom(row):
        raise RuntimeError("placement down")

    with pytest.raises(RuntimeError):  # its row is inserted to be locked, never applied
        database.apply_report_if_newer(engine, unapplied, 1, 0, "h", boom)
    # Pages smaller than the table: every applied row once, as stored, the deleted one None.
    states = dict(db_providers.applied_states(engine, page=1))
    assert states[applied] == '{"v": 1}'
    assert deleted in states and states[deleted] is None
    assert unapplied not in states
    assert len(states) == len(list(db_providers.applied_states(engine)))
    # Only some (a confirming round): looked up by key, or read in one pass skipping the others.
    wanted = {applied, deleted, unapplied, new_uuid()}
    expected = {applied: '{"v": 1}', deleted: None}
    assert dict(db_providers.applied_states(engine, page=1, uuids=wanted)) == expected
    lookups = db_providers.LOOKUP_AT_MOST
    db_providers.LOOKUP_AT_MOST = 1
    try:
        assert dict(db_providers.applied_states(engine, page=1, uuids=wanted)) == expected
    finally:
        db_providers.LOOKUP_AT_MOST = lookups


def check_report_apply_failure_stores_nothing(engine) -> None:
    uuid = new_uuid()

    def boom(row):
        raise RuntimeError("placement down")

    with pytest.raises(RuntimeError):
        database.apply_report_if_newer(engine, uuid, 1, 0, "h", boom)
    assert database.get_provider(engine, uuid) is None
    assert uuid not in db_providers.provider_uuids(engine)
    assert database.apply_report_if_newer(engine, uuid, 1, 0, "h", Recorder())
    with pytest.raises(RuntimeError):
        database.apply_report_if_newer(engine, uuid, 1, 1, "h", boom)
    assert database.get_provider(engine, uuid).seq == 0
    # The failed report was not recorded, so it can be applied again.
    assert database.apply_report_if_newer(engine, uuid, 1, 1, "h", Recorder())


def check_report_refuses_a_negative_order(engine) -> None:
    uuid = new_uuid()
    with pytest.raises(ValueError, match=uuid):
        database.apply_report_if_newer(engine, uuid, -1, 0, "h", Recorder())
    with pytest.raises(ValueError, match=uuid):
        database.apply_report_if_newer(engine, uuid, 0, -1, "h", Recorder())
    assert database.get_provider(engine, uuid) is None


def check_placement_generation(engine) -> None:
    uuid = new_uuid()
    assert database.apply_report_if_newer(engine, uuid, 3, 1, "h",
                                          lambda row: db_providers.Applied('{"v": 1}', 7))
    assert database.get_provider(engine, uuid).placement_generation == 7
    # A plain state (no generation known) clears it: a stale generation is never kept.
    assert database.apply_report_if_newer(engine, uuid, 3, 2, "h", Recorder('{"v": 2}'))
    assert database.get_provider(engine, uuid).placement_generation is None

    seen = []

    def repair(row):
        seen.append(row)
        return 9

    # A repair of a row that moved on (another (claim_epoch, seq)) changes nothing.
    assert not db_providers.record_placement_generation(engine, uuid, 3, 1, repair)
    assert not db_providers.record_placement_generation(engine, new_uuid(), 0, 0, repair)
    assert seen == []
    before = database.get_provider(engine, uuid)
    assert db_providers.record_placement_generation(engine, uuid, 3, 2, repair)
    assert seen == [before]
    after = database.get_provider(engine, uuid)
    assert after.placement_generation == 9
    assert (after.claim_epoch, after.seq, after.state, after.host) == \
        (before.claim_epoch, before.seq, before.state, before.host)
    assert uuid in {row.uuid for row in db_providers.applied_providers(engine)}

    def boom(row):
        raise RuntimeError("placement down")

    with pytest.raises(RuntimeError):
        db_providers.record_placement_generation(engine, uuid, 3, 2, boom)
    assert database.get_provider(engine, uuid).placement_generation == 9
    # A deleted provider is never repaired.
    assert database.apply_report_if_newer(engine, uuid, 3, 3, "h", Recorder(None))
    assert database.get_provider(engine, uuid).placement_generation is None
    assert not db_providers.record_placement_generation(engine, uuid, 3, 3, repair)
    assert len(seen) == 1


# -- instances -------------------------------------------------------------------------------

def check_instance_lifecycle(engine) -> None:
    uuid, node = new_uuid(), new_uuid()
    row = db_instances.create_instance(engine, uuid, "CUSTOM_GOLD", node_uuid=node, host="h1",
                                       member_epoch=7, traits=["CUSTOM_B", "CUSTOM_A", "CUSTOM_B"],
                                       image="http://img")
    assert (row.state, row.node_uuid, row.host, row.member_epoch, row.traits, row.image,
            row.live) == \
        (models.BUILDING, node, "h1", 7, ("CUSTOM_A", "CUSTOM_B"), "http://img", True)
    assert db_instances.get_instance(engine, uuid) == row
    assert db_instances.get_instance(engine, new_uuid()) is None
    with pytest.raises(db_instances.InstanceExists) as exists:
        db_instances.create_instance(engine, uuid, "CUSTOM_GOLD")
    assert exists.value.instance_uuid == uuid

    active = db_instances.set_instance_state(engine, uuid, models.ACTIVE,
                                             expect_state=models.BUILDING)
    assert active.state == models.ACTIVE and active.fault is None
    with pytest.raises(db_instances.InstanceConflict) as conflict:
        db_instances.set_instance_state(engine, uuid, models.ACTIVE, expect_state=models.BUILDING)
    assert conflict.value.instance_uuid == uuid and "ACTIVE" in str(conflict.value)
    # fenced: held by another (host, member epoch)
    with pytest.raises(db_instances.InstanceConflict):
        db_instances.set_instance_state(engine, uuid, models.REBOOTING, expect_host="h1",
                                        expect_member_epoch=6)
    failed = db_instances.set_instance_state(engine, uuid, models.ERROR, fault="deploy failed",
                                             expect_state=[models.ACTIVE, models.REBOOTING],
                                             expect_host="h1", expect_member_epoch=7)
    assert (failed.state, failed.fault) == (models.ERROR, "deploy failed")
    with pytest.raises(db_instances.InstanceNotFound) as missing:
        db_instances.set_instance_state(engine, new_uuid(), models.ACTIVE)
    assert missing.value.instance_uuid in str(missing.value)
    with pytest.raises(ValueError, match="SLEEPING"):
        db_instances.set_instance_state(engine, uuid, "SLEEPING")
    gone = db_instances.set_instance_state(engine, uuid, models.DELETED)
    assert gone.deleted_at is not None and not gone.live


def check_one_live_instance_per_node(engine) -> None:
    node = new_uuid()
    first = new_uuid()
    db_instances.create_instance(engine, first, "CUSTOM_GOLD", node_uuid=node, host="h",
                                 member_epoch=1)
    second = new_uuid()
    with pytest.raises(db_instances.NodeInUse) as in_use:
        db_instances.create_instance(engine, second, "CUSTOM_GOLD", node_uuid=node, host="h",
                                     member_epoch=1)
    assert in_use.value.node_uuid == node and node in str(in_use.value)
    assert db_instances.get_instance(engine, second) is None

    # Through scheduling too, and on every live state.
    pending = db_instances.create_instance(engine, new_uuid(), "CUSTOM_GOLD")
    for state in sorted(models.LIVE_STATES):
        db_instances.set_instance_state(engine, first, state)
        with pytest.raises(db_instances.NodeInUse):
            db_instances.assign_node(engine, pending.uuid, node, "h", 1)
    # Unscheduled instances do not count: any number may have no node.
    db_instances.create_instance(engine, new_uuid(), "CUSTOM_GOLD")

    db_instances.set_instance_state(engine, first, models.DELETED)
    placed = db_instances.assign_node(engine, pending.uuid, node, "h2", 3)
    assert (placed.node_uuid, placed.host, placed.member_epoch) == (node, "h2", 3)
    db_instances.set_instance_state(engine, pending.uuid, models.DELETED)
    # Deleted instances on a node do not count either.
    db_instances.create_instance(engine, second, "CUSTOM_GOLD", node_uuid=node, host="h",
                                 member_epoch=1)


def check_error_releasing_the_node(engine) -> None:
    node, uuid = new_uuid(), new_uuid()
    db_instances.create_instance(engine, uuid, "CUSTOM_GOLD", node_uuid=node, host="h",
                                 member_epoch=3)
    with pytest.raises(db_instances.InstanceConflict):  # fenced like every write: nothing changes
        db_instances.set_instance_state(engine, uuid, models.ERROR, "deploy failed",
                                        expect_state=models.BUILDING, expect_host="h",
                                        expect_member_epoch=2, release_node=True)
    assert db_instances.get_instance(engine, uuid).node_uuid == node
    failed = db_instances.set_instance_state(engine, uuid, models.ERROR, "deploy failed",
                                             expect_state=models.BUILDING, expect_host="h",
                                             expect_member_epoch=3, release_node=True)
    assert (failed.state, failed.fault, failed.node_uuid, failed.live) == \
        (models.ERROR, "deploy failed", None, True)
    # The node is free for the next instance while the failed one stays, live, in ERROR.
    db_instances.create_instance(engine, new_uuid(), "CUSTOM_GOLD", node_uuid=node, host="h",
                                 member_epoch=3)
    assert uuid in {row.uuid for row in db_instances.nodeless_instances(engine)}


def check_racing_creates_one_wins(engine, racers: int = 8) -> None:
    node = new_uuid()
    barrier = threading.Barrier(racers)
    outcomes: list[str] = []

    def build():
        barrier.wait()
        try:
            db_instances.create_instance(engine, new_uuid(), "CUSTOM_GOLD", node_uuid=node,
                                         host="h",
                                         member_epoch=1)
            outcomes.append("created")
        except db_instances.NodeInUse:
            outcomes.append("in use")

    threads = [threading.Thread(target=build) for _ in range(racers)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert sorted(outcomes) == ["created"] + ["in use"] * (racers - 1)


def check_rehome_compare_and_set(engine) -> None:
    uuid = new_uuid()
    db_instances.create_instance(engine, uuid, "CUSTOM_GOLD", node_uuid=new_uuid(), host="dead",
                                 member_epoch=4)
    assert not db_instances.rehome_instance(engine, uuid, "dead", 3, "live",
                                            9)  # wrong member epoch
    assert not db_instances.rehome_instance(engine, uuid, "other", 4, "live", 9)  # wrong host
    assert not db_instances.rehome_instance(engine, new_uuid(), "dead", 4, "live", 9)
    assert db_instances.rehome_instance(engine, uuid, "dead", 4, "live", 9)
    assert not db_instances.rehome_instance(engine, uuid, "dead", 4, "late",
                                            10)  # the returning daemon
    row = db_instances.get_instance(engine, uuid)
    assert (row.host, row.member_epoch) == ("live", 9)
    db_instances.set_instance_state(engine, uuid, models.DELETED)
    assert not db_instances.rehome_instance(engine, uuid, "live", 9, "again", 11)


def check_racing_rehomes_one_wins(engine, racers: int = 8) -> None:
    uuid = new_uuid()
    db_instances.create_instance(engine, uuid, "CUSTOM_GOLD", node_uuid=new_uuid(), host="dead",
                                 member_epoch=1)
    barrier = threading.Barrier(racers)
    winners: list[str] = []

    def adopt(host):
        barrier.wait()
        if db_instances.rehome_instance(engine, uuid, "dead", 1, host, 2):
            winners.append(host)

    threads = [threading.Thread(target=adopt, args=(f"h{i}",)) for i in range(racers)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert len(winners) == 1
    assert db_instances.get_instance(engine, uuid).host == winners[0]


def check_instance_queries(engine) -> None:
    host, other = f"host-{new_uuid()}", f"host-{new_uuid()}"
    nodes = [new_uuid() for _ in range(3)]
    a = db_instances.create_instance(engine, new_uuid(), "C", node_uuid=nodes[0], host=host,
                                     member_epoch=1)
    b = db_instances.create_instance(engine, new_uuid(), "C", node_uuid=nodes[1], host=other,
                                     member_epoch=1)
    c = db_instances.create_instance(engine, new_uuid(), "C", node_uuid=nodes[2], host=host,
                                     member_epoch=1)
    unscheduled = db_instances.create_instance(engine, new_uuid(), "C", host=host, member_epoch=1)
    db_instances.set_instance_state(engine, c.uuid, models.DELETED)

    assert {row.uuid for row in db_instances.instances_by_host(engine, host)} == {a.uuid,
                                                                                  unscheduled.uuid}
    assert [row.uuid for row in db_instances.instances_by_host(engine, other)] == [b.uuid]
    live = {row.uuid for row in db_instances.live_instances(engine)}
    assert {a.uuid, b.uuid, unscheduled.uuid} <= live and c.uuid not in live
    hosts = db_instances.instance_hosts(engine)
    assert (hosts[nodes[0]], hosts[nodes[1]]) == (host, other)
    assert nodes[2] not in hosts


ALL = [check_report_order, check_report_delete_and_revive, check_applied_states,
       check_report_apply_failure_stores_nothing, check_report_refuses_a_negative_order,
       check_placement_generation,
       check_instance_lifecycle,
       check_one_live_instance_per_node, check_error_releasing_the_node,
       check_racing_creates_one_wins,
       check_rehome_compare_and_set, check_racing_rehomes_one_wins, check_instance_queries]
