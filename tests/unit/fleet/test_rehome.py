"""Re-homing on a real (sqlite) database: grace, adopter choice, compare-and-set."""

from computed.db import instances as db_instances
from computed.fleet.plan import compute_plan
from computed.fleet.rehome import Rehomer, readopt_own
from hashring.ownership import Member, adopters


class Clock:
    def __init__(self):
        self.now = 0.0

    def __call__(self):
        return self.now


def instance(engine, uuid, node, host, epoch):
    db_instances.create_instance(engine, uuid, "CUSTOM_GOLD", node_uuid=node, host=host,
                                 member_epoch=epoch)


def plan(members, orphans, host):
    """``host``'s plan when the nodes of ``orphans`` host instances of hosts that are gone."""
    return compute_plan(members, held=(), nodes=list(orphans), instance_hosts=orphans,
                        host=host)


MEMBERS = [Member("a"), Member("b")]
EPOCHS = {"a": 70, "b": 80}
NODES = [f"00000000-0000-0000-0000-{i:012d}" for i in range(40)]
INSTANCES = [f"11111111-0000-0000-0000-{i:012d}" for i in range(40)]


def test_orphans_are_adopted_only_after_the_grace_and_only_by_their_adopter(engine):
    for node, uuid in zip(NODES, INSTANCES):
        instance(engine, uuid, node, "dead", 5)
    orphans = {node: "dead" for node in NODES}
    clock = Clock()
    rehomers = {name: Rehomer(engine, name, grace=30, clock=clock) for name in ("a", "b")}
    assert rehomers["a"].step(plan(MEMBERS, orphans, "a"), 70, Standing(70)) == []
    assert rehomers["b"].step(plan(MEMBERS, orphans, "b"), 80, Standing(80)) == []
    clock.now = 29.9
    assert rehomers["a"].step(plan(MEMBERS, orphans, "a"), 70, Standing(70)) == []
    clock.now = 30
    adopted = {name: r.step(plan(MEMBERS, orphans, name), EPOCHS[name], Standing(EPOCHS[name]))
               for name, r in rehomers.items()}
    expected = adopters(MEMBERS, orphans)
    hosts = db_instances.instance_hosts(engine)
    assert hosts == expected  # every instance went to its node's adopter, none twice
    assert len(adopted["a"]) + len(adopted["b"]) == len(NODES)
    assert {db_instances.get_instance(engine, u).member_epoch for u in adopted["a"]} == {70}


def test_a_node_that_stops_being_orphaned_restarts_its_grace(engine):
    instance(engine, INSTANCES[0], NODES[0], "dead", 5)
    clock = Clock()
    rehomer = Rehomer(engine, "a", grace=10, clock=clock)
    rehomer.step(plan([Member("a")], {NODES[0]: "dead"}, "a"), 70, Standing(70))
    clock.now = 8
    rehomer.step(plan([Member("a")], {}, "a"), 70, Standing(70))  # its host came back
    clock.now = 12
    assert rehomer.step(plan([Member("a")], {NODES[0]: "dead"}, "a"), 70, Standing(70)) == []
    clock.now = 22
    adopted = rehomer.step(plan([Member("a")], {NODES[0]: "dead"}, "a"), 70, Standing(70))
    assert adopted == [INSTANCES[0]]


def test_a_returning_daemon_keeps_its_own_but_not_what_was_rehomed(engine):
    instance(engine, INSTANCES[0], NODES[0], "a", 5)
    instance(engine, INSTANCES[1], NODES[1], "a", 5)
    assert db_instances.rehome_instance(engine, INSTANCES[1], "a", 5, "b", 9)  # adopted while away
    assert readopt_own(engine, "a", 12) == [INSTANCES[0]]
    assert db_instances.get_instance(engine, INSTANCES[0]).member_epoch == 12
    assert db_instances.get_instance(engine, INSTANCES[1]).host == "b"
    assert readopt_own(engine, "a", 12) == []  # already current


def test_a_nodeless_instance_of_a_gone_host_is_adopted_too(engine):
    # A build that failed and released its node leaves an ERROR instance with no node; if its
    # host then dies, nobody could delete it unless someone adopts it.
    db_instances.create_instance(engine, INSTANCES[0], "CUSTOM_GOLD", host="dead", member_epoch=5)
    db_instances.set_instance_state(engine, INSTANCES[0], "ERROR", fault="deploy failed")
    clock = Clock()
    rehomers = {name: Rehomer(engine, name, grace=5, clock=clock) for name in ("a", "b")}
    for name, rehomer in rehomers.items():
        assert rehomer.step(plan(MEMBERS, {}, name), 70, Standing(70)) == []
    clock.now = 5
    adopted = {name: rehomer.step(plan(MEMBERS, {}, name), 70, Standing(70))
               for name, rehomer in rehomers.items()}
    assert sorted(adopted.values()) == [[], [INSTANCES[0]]]
    winner = next(name for name, got in adopted.items() if got)
    assert winner == adopters(MEMBERS, {INSTANCES[0]: "dead"})[INSTANCES[0]]
    row = db_instances.get_instance(engine, INSTANCES[0])
    assert (row.host, row.member_epoch, row.state) == (winner, 70, "ERROR")


def test_a_stale_view_never_takes_an_instance_from_its_new_host(engine):
    instance(engine, INSTANCES[0], NODES[0], "dead", 5)
    assert db_instances.rehome_instance(engine, INSTANCES[0], "dead", 5, "b", 9)  # b adopted it
    clock = Clock()
    rehomer = Rehomer(engine, "a", grace=0, clock=clock)
    # a still believes the node is orphaned from "dead" (its view is a pass behind).
    assert rehomer.step(plan([Member("a")], {NODES[0]: "dead"}, "a"), 70, Standing(70)) == []
    assert db_instances.get_instance(engine, INSTANCES[0]).host == "b"


class Standing:
    """The fleet as the re-homing asks it: may this daemon act under ``member_epoch`` now?"""

    def __init__(self, member_epoch, allowed=True):
        self.member_epoch = member_epoch
        self.allowed = allowed
        self.asked = 0

    def may_act_as(self, member_epoch):
        self.asked += 1
        return self.allowed and member_epoch == self.member_epoch


def test_the_compare_and_set_uses_the_member_epoch_seen_when_the_orphan_was_found(engine):
    # "dead" is seen gone at member epoch 5; before the grace ends it comes back (its rejoin
    # moves the instance to its new member epoch 12) but the adopter's plan is a pass behind.
    instance(engine, INSTANCES[0], NODES[0], "dead", 5)
    clock = Clock()
    rehomer = Rehomer(engine, "a", grace=10, clock=clock)
    stale = plan([Member("a")], {NODES[0]: "dead"}, "a")
    assert rehomer.step(stale, 70, Standing(70)) == []
    assert readopt_own(engine, "dead", 12) == [INSTANCES[0]]
    clock.now = 10
    assert rehomer.step(stale, 70, Standing(70)) == []
    row = db_instances.get_instance(engine, INSTANCES[0])
    assert (row.host, row.member_epoch) == ("dead", 12)  # the live daemon keeps it


def test_nothing_is_rehomed_while_the_fence_refuses(engine):
    instance(engine, INSTANCES[0], NODES[0], "dead", 5)
    clock = Clock()
    rehomer = Rehomer(engine, "a", grace=0, clock=clock)
    orphaned = plan([Member("a")], {NODES[0]: "dead"}, "a")
    refusing = Standing(70, allowed=False)
    assert rehomer.step(orphaned, 70, refusing) == []
    assert refusing.asked and db_instances.get_instance(engine, INSTANCES[0]).host == "dead"
    # a member epoch that is no longer the fleet's (it rejoined since) is refused too
    assert rehomer.step(orphaned, 69, Standing(70)) == []
    assert db_instances.get_instance(engine, INSTANCES[0]).host == "dead"
    assert rehomer.step(orphaned, 70, Standing(70)) == [INSTANCES[0]]
