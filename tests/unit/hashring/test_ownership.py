"""Tests of hashring.ownership: stickiness, orphans, draining, moves."""

import unittest

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from hashring import Member, Move, compute_ownership, member_ring, moves, moves_between
from hashring.ownership import adopters

SMALL = 256  # partitions: these tests check rules, not balance
SETTINGS = settings(max_examples=40, deadline=None, database=None,
                    suppress_health_check=[HealthCheck.too_slow])

member_names = st.sampled_from([f"compute-{i}" for i in range(8)])
dead_names = st.sampled_from(["gone-1", "gone-2"])
node_ids = st.lists(st.uuids().map(str), min_size=0, max_size=60,
                    unique=True)


@st.composite
def worlds(draw):
    """Live members, Ironic nodes and instance placement."""
    names = draw(st.sets(member_names, min_size=1, max_size=6))
    live = [Member(n, draw(st.integers(1, 3)), draw(st.booleans()))
            for n in sorted(names)]
    nodes = draw(node_ids)
    hosts = st.one_of(st.none(), st.sampled_from(sorted(names)), dead_names)
    instances = {}
    for node in nodes:
        host = draw(hosts)
        if host is not None:
            instances[node] = host
    return live, nodes, instances


def place(ownership):
    return ownership.owners()


class TestRules(unittest.TestCase):

    def test_example(self):
        live = [Member("a"), Member("b"), Member("c", draining=True)]
        nodes = [f"n{i}" for i in range(30)]
        instances = {"n1": "c", "n2": "dead", "n3": "a", "elsewhere": "b"}
        result = compute_ownership(live, nodes, instances, SMALL)
        self.assertEqual({"n1"}, result.managed["c"])
        self.assertIn("n3", result.managed["a"])
        self.assertEqual({"n2": "dead"}, dict(result.orphans))
        self.assertEqual(frozenset(), result.unassigned)
        self.assertEqual(set(nodes) - {"n2"}, set(result.owners()))
        self.assertIsNone(result.owner("n2"))
        self.assertIsNone(result.owner("elsewhere"))

    def test_all_draining_leaves_free_nodes_unassigned(self):
        live = [Member("a", draining=True)]
        result = compute_ownership(live, ["n1", "n2"], {"n2": "a"}, SMALL)
        self.assertEqual(frozenset({"n1"}), result.unassigned)
        self.assertEqual({"n2"}, result.managed["a"])

    def test_no_members_orphans_and_unassigns_everything(self):
        result = compute_ownership([], ["n1", "n2"], {"n2": "a"}, SMALL)
        self.assertEqual({}, dict(result.managed))
        self.assertEqual({"n2": "a"}, dict(result.orphans))
        self.assertEqual(frozenset({"n1"}), result.unassigned)

    def test_duplicate_member_rejected(self):
        with self.assertRaisesRegex(ValueError, "listed twice"):
            compute_ownership([Member("a"), Member("a", 2)], [], {}, SMALL)

    def test_ownership_is_frozen(self):
        result = compute_ownership([Member("a")], ["n1"], {}, SMALL)
        with self.assertRaises(AttributeError):
            result.unassigned = frozenset()
        with self.assertRaises(TypeError):
            result.managed["b"] = frozenset()

    def test_moves_on_leave(self):
        nodes = [f"n{i}" for i in range(40)]
        before = [Member("a"), Member("b"), Member("c")]
        found = moves_between(before, before[:2], nodes, {"n0": "c"}, SMALL)
        self.assertIn(Move("n0", "c", None), found)
        self.assertTrue(all(m.source == "c" for m in found))
        self.assertEqual(sorted(m.node for m in found),
                         [m.node for m in found])


@SETTINGS
@given(worlds())
def test_every_node_has_exactly_one_fate(world):
    live, nodes, instances = world
    result = compute_ownership(live, nodes, instances, SMALL)
    fates = [n for owned in result.managed.values() for n in owned]
    fates += list(result.orphans) + list(result.unassigned)
    assert sorted(fates) == sorted(nodes)


@SETTINGS
@given(worlds())
def test_instances_are_sticky_and_orphans_reported(world):
    live, nodes, instances = world
    names = {m.name for m in live}
    result = compute_ownership(live, nodes, instances, SMALL)
    for node, host in instances.items():
        if host in names:
            assert node in result.managed[host]
        else:
            assert result.orphans[node] == host


@SETTINGS
@given(worlds())
def test_draining_members_get_no_free_nodes(world):
    live, nodes, instances = world
    result = compute_ownership(live, nodes, instances, SMALL)
    for member in live:
        if member.draining:
            assert all(instances.get(n) == member.name
                       for n in result.managed[member.name])
    if all(m.draining for m in live):
        assert result.unassigned == {n for n in nodes if n not in instances}


@SETTINGS
@given(worlds(), st.data())
def test_member_leaving_moves_only_its_nodes(world, data):
    live, nodes, instances = world
    leaver = data.draw(st.sampled_from(live))
    after = [m for m in live if m != leaver]
    for move in moves_between(live, after, nodes, instances, SMALL):
        assert move.source == leaver.name
        if move.node in instances:
            # Its instances become orphans; they are not re-homed silently.
            assert move.target is None


@SETTINGS
@given(worlds(), st.sampled_from(["compute-new", "compute-x"]))
def test_member_joining_only_takes_free_nodes(world, name):
    live, nodes, instances = world
    after = live + [Member(name)]
    for move in moves_between(live, after, nodes, instances, SMALL):
        assert move.target == name
        assert move.node not in instances


@SETTINGS
@given(worlds())
def test_no_moves_without_change(world):
    live, nodes, instances = world
    one = compute_ownership(live, nodes, instances, SMALL)
    two = compute_ownership(list(reversed(live)), list(reversed(nodes)),
                            instances, SMALL)
    assert moves(one, two) == ()
    assert one == two


def test_adopters_are_the_ring_owners_among_live_non_draining_members():
    members = [Member("a"), Member("b"), Member("c", draining=True)]
    orphans = {f"node-{i}": "dead-host" for i in range(200)}
    chosen = adopters(members, orphans)
    assert set(chosen) == set(orphans)
    assert set(chosen.values()) == {"a", "b"}  # never the draining one
    # The same answer as the ring gives free nodes, so every daemon agrees.
    free = compute_ownership(members, list(orphans), {})
    assert chosen == free.owners()
    assert adopters([Member("c", draining=True)], orphans) == {}
    assert adopters(members, {}) == {}


@SETTINGS
@given(worlds(), st.sampled_from([None, 1.05]))
def test_a_ring_built_once_gives_the_same_answer(world, max_load):
    live, nodes, instances = world
    ring = member_ring(live, SMALL)
    kept = compute_ownership(live, nodes, instances, max_load=max_load,
                             ring=ring)
    assert kept == compute_ownership(live, nodes, instances, SMALL, max_load)
    orphans = compute_ownership(live, nodes, instances, SMALL).orphans
    assert adopters(live, orphans, ring=ring) == adopters(live, orphans, SMALL)


def test_member_ring_holds_the_live_non_draining_members_with_their_weights():
    members = [Member("a", 2), Member("b"), Member("c", 3, draining=True)]
    assert dict(member_ring(members, SMALL).nodes) == {"a": 2, "b": 1}
    assert dict(member_ring([Member("c", draining=True)], SMALL).nodes) == {}


def test_a_ring_of_other_members_is_refused():
    members = [Member("a"), Member("b")]
    for before in ([Member("a")], [Member("a"), Member("b", 2)],
                   [Member("a"), Member("b", draining=True)]):
        stale = member_ring(before, SMALL)
        with pytest.raises(ValueError, match="build it with member_ring"):
            compute_ownership(members, ["n1"], {}, ring=stale)
        with pytest.raises(ValueError, match="build it with member_ring"):
            adopters(members, {"n1": "gone"}, ring=stale)
