"""Tests of hashring.bounded (consistent hashing with bounded loads) and of
``compute_ownership(..., max_load=...)``.

Caps are exact, not statistical: a member of weight w never holds more
than ceil(c * K * w / W) of K distinct keys.  Most property tests use few
partitions: the cap, the walk and determinism do not depend on balance.
"""

import math
import random
import unittest
import uuid
from decimal import Decimal
from fractions import Fraction

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from hashring import EmptyRing, HashRing, Member, bounded_assign, compute_ownership, moves_between
from hashring.bounded import load_factor

SMALL = 64
SETTINGS = settings(max_examples=40, deadline=None, database=None,
                    suppress_health_check=[HealthCheck.too_slow])

names = st.text(alphabet="abcdefghijklmnopqrstuvwxyz0123456789-.",
                min_size=1, max_size=12)
factors = st.one_of(st.floats(1.0, 1.5), st.sampled_from([1, 1.02, 1.05,
                                                          1.1, 2]))


def uuid_keys(seed, count):
    rnd = random.Random(seed)
    return [str(uuid.UUID(int=rnd.getrandbits(128), version=4))
            for _ in range(count)]


def weighted_ring(weighted, partitions=SMALL):
    ring = HashRing([], partitions=partitions)
    for name, weight in weighted:
        ring.add_node(name, weight)
    return ring


def caps(ring, count, c):
    total = sum(ring.nodes.values())
    factor = load_factor(c)
    return {m: math.ceil(factor * count * w / total)
            for m, w in ring.nodes.items()}


def loads(owners):
    counts = {}
    for owner in owners.values():
        counts[owner] = counts.get(owner, 0) + 1
    return counts


rings = st.lists(st.tuples(names, st.integers(1, 4)), min_size=1,
                 max_size=20, unique_by=lambda t: t[0]).map(weighted_ring)


class TestBoundedAssign(unittest.TestCase):

    def test_busiest_over_mean_is_at_most_c(self):
        # The cap is ceil(c * mean): busiest/mean <= c + n / K, and <= c
        # exactly when c * K / n is whole (every case here but n = 3 at
        # c = 1.10, where the cap is 3,667 keys, 1.1001 x the mean).
        keys = uuid_keys(7, 10_000)
        for n in (3, 5, 10, 20, 50, 100):
            ring = HashRing([f"compute-{i}" for i in range(n)],
                            partitions=256)
            for c in (1.02, 1.05, 1.10):
                counts = loads(bounded_assign(ring, keys, c))
                self.assertEqual(n, len(counts))
                busiest = max(counts.values())
                cap = load_factor(c) * 10_000 / n
                self.assertLessEqual(busiest, math.ceil(cap))
                slack = 0 if cap.denominator == 1 else n / 10_000
                self.assertLessEqual(busiest * n / len(keys), c + slack)

    def test_default_factor_is_1_05(self):
        ring = HashRing([f"c{i}" for i in range(20)], partitions=SMALL)
        keys = uuid_keys(1, 2_000)
        self.assertEqual(bounded_assign(ring, keys, 1.05),
                         bounded_assign(ring, keys))
        self.assertLessEqual(max(loads(bounded_assign(ring, keys)).values()),
                             105)

    def test_factor_one_gives_weighted_shares_rounded_up(self):
        ring = weighted_ring([("a", 1), ("b", 2), ("c", 5)])
        counts = loads(bounded_assign(ring, uuid_keys(3, 800), 1))
        self.assertEqual({"a": 100, "b": 200, "c": 500}, counts)

    def test_large_factor_equals_plain_ring(self):
        ring = HashRing([f"c{i}" for i in range(10)], partitions=SMALL)
        keys = uuid_keys(2, 1_000)
        self.assertEqual(ring.assign(keys), bounded_assign(ring, keys, 100))

    def test_exact_decimal_factor(self):
        self.assertEqual(Fraction(21, 20), load_factor(1.05))
        self.assertEqual(Fraction(21, 20), load_factor(Decimal("1.05")))
        self.assertEqual(Fraction(21, 20), load_factor(Fraction(21, 20)))
        self.assertEqual(Fraction(2), load_factor(2))
        # 40 keys, 2 members: the cap is exactly 21 (1.05 as a binary
        # float is a hair above 21/20 and would round the cap up to 22).
        ring = HashRing(["a", "b"], partitions=SMALL)
        counts = loads(bounded_assign(ring, uuid_keys(0, 40), 1.05))
        self.assertLessEqual(max(counts.values()), 21)

    def test_bad_factors(self):
        ring = HashRing(["a"], partitions=SMALL)
        for bad in (0.99, 0, -1, Fraction(99, 100)):
            with self.assertRaisesRegex(ValueError, ">= 1"):
                bounded_assign(ring, ["k"], bad)
        for bad in (math.nan, math.inf, Decimal("Infinity")):
            with self.assertRaisesRegex(ValueError, "finite"):
                bounded_assign(ring, ["k"], bad)
        for bad in (True, "1.05", None, 1j):
            with self.assertRaises(TypeError):
                bounded_assign(ring, ["k"], bad)

    def test_empty_ring_and_bad_keys(self):
        with self.assertRaises(EmptyRing):
            bounded_assign(HashRing([]), ["k"])
        ring = HashRing(["a"], partitions=SMALL)
        with self.assertRaisesRegex(ValueError, "key must not be empty"):
            bounded_assign(ring, ["ok", ""])
        with self.assertRaises(TypeError):
            bounded_assign(ring, ["ok", 3])
        self.assertEqual({}, bounded_assign(ring, []))

    def test_str_and_bytes_of_one_key_count_once(self):
        ring = HashRing(["a", "b"], partitions=SMALL)
        keys = uuid_keys(4, 10)
        both = bounded_assign(ring, keys + [k.encode() for k in keys], 1)
        self.assertEqual(20, len(both))
        self.assertTrue(all(both[k] == both[k.encode()] for k in keys))
        self.assertEqual(bounded_assign(ring, keys, 1),
                         {k: both[k] for k in keys})

    def test_ring_is_not_modified(self):
        ring = HashRing(["a", "b", "c"], partitions=SMALL)
        keys = uuid_keys(5, 300)
        before = (dict(ring.nodes), ring.assign(keys), len(ring))
        bounded_assign(ring, keys, 1)
        self.assertEqual(before, (dict(ring.nodes), ring.assign(keys),
                                  len(ring)))


@SETTINGS
@given(rings, factors, st.integers(0, 600), st.integers(0, 2**32))
def test_caps_are_respected(ring, c, count, seed):
    keys = uuid_keys(seed, count)
    owners = bounded_assign(ring, keys, c)
    assert set(owners) == set(keys)
    limit = caps(ring, count, c)
    for member, load in loads(owners).items():
        assert load <= limit[member]


@SETTINGS
@given(rings, factors, st.integers(0, 2**32), st.randoms(use_true_random=False))
def test_order_and_duplicates_never_matter(ring, c, seed, rnd):
    keys = uuid_keys(seed, 300)
    shuffled = keys + rnd.sample(keys, 50)
    rnd.shuffle(shuffled)
    assert bounded_assign(ring, keys, c) == bounded_assign(ring, shuffled, c)


@SETTINGS
@given(st.lists(names, min_size=1, max_size=12, unique=True),
       st.integers(0, 2**32), st.randoms(use_true_random=False))
def test_membership_insertion_order_never_matters(members, seed, rnd):
    shuffled = list(members)
    rnd.shuffle(shuffled)
    one = HashRing(members, partitions=SMALL)
    other = HashRing([], partitions=SMALL)
    for name in shuffled:
        other.add_node(name)
    keys = uuid_keys(seed, 300)
    assert bounded_assign(one, keys, 1.02) == bounded_assign(other, keys, 1.02)


@SETTINGS
@given(rings, factors, st.integers(0, 2**32))
def test_ring_owner_unless_it_is_full(ring, c, seed):
    keys = uuid_keys(seed, 400)
    owners = bounded_assign(ring, keys, c)
    counts = loads(owners)
    limit = caps(ring, len(keys), c)
    plain = ring.assign(keys)
    for key in keys:
        if owners[key] != plain[key]:
            # Displaced only because the ring owner reached its cap.
            assert counts.get(plain[key], 0) == limit[plain[key]]


@settings(max_examples=10, deadline=None, database=None)
@given(st.lists(st.integers(1, 4), min_size=2, max_size=6),
       st.sampled_from([1.0, 1.02, 1.05]), st.integers(0, 2**32))
def test_weights_scale_the_caps(weights, c, seed):
    ring = weighted_ring([(f"m{i}", w) for i, w in enumerate(weights)],
                         partitions=1024)
    keys = uuid_keys(seed, 3_000)
    counts = loads(bounded_assign(ring, keys, c))
    limit = caps(ring, len(keys), c)
    total = sum(weights)
    for i, weight in enumerate(weights):
        mean = len(keys) * weight / total
        load = counts.get(f"m{i}", 0)
        assert load <= limit[f"m{i}"] <= c * mean + 1
        # The other members' caps keep this one from being starved.
        assert load >= mean - (c - 1) * len(keys) - len(weights)


# -- compute_ownership(..., max_load=...) ----------------------------------

member_names = st.sampled_from([f"compute-{i}" for i in range(8)])
dead_names = st.sampled_from(["gone-1", "gone-2"])


@st.composite
def worlds(draw):
    """Live members, Ironic nodes and instance placement."""
    chosen = draw(st.sets(member_names, min_size=1, max_size=6))
    live = [Member(n, draw(st.integers(1, 3)), draw(st.booleans()))
            for n in sorted(chosen)]
    nodes = draw(st.lists(st.uuids().map(str), max_size=80, unique=True))
    hosts = st.one_of(st.none(), st.sampled_from(sorted(chosen)), dead_names)
    instances = {}
    for node in nodes:
        host = draw(hosts)
        if host is not None:
            instances[node] = host
    return live, nodes, instances


@SETTINGS
@given(worlds(), factors)
def test_ownership_partitions_nodes(world, c):
    live, nodes, instances = world
    result = compute_ownership(live, nodes, instances, SMALL, max_load=c)
    fates = [n for owned in result.managed.values() for n in owned]
    fates += list(result.orphans) + list(result.unassigned)
    assert sorted(fates) == sorted(nodes)


@SETTINGS
@given(worlds(), factors)
def test_ownership_sticky_orphans_draining_and_caps(world, c):
    live, nodes, instances = world
    names_ = {m.name for m in live}
    result = compute_ownership(live, nodes, instances, SMALL, max_load=c)
    for node, host in instances.items():
        if host in names_:
            assert node in result.managed[host]
        else:
            assert result.orphans[node] == host
    free = [n for n in nodes if n not in instances]
    eligible = [m for m in live if not m.draining]
    total = sum(m.weight for m in eligible)
    for member in live:
        ring_owned = [n for n in result.managed[member.name]
                      if n not in instances]
        if member.draining:
            assert ring_owned == []
        else:
            assert len(ring_owned) <= math.ceil(
                load_factor(c) * len(free) * member.weight / total)
    if not eligible:
        assert result.unassigned == set(free)


@SETTINGS
@given(worlds(), factors)
def test_ownership_is_order_independent(world, c):
    live, nodes, instances = world
    one = compute_ownership(live, nodes, instances, SMALL, max_load=c)
    two = compute_ownership(list(reversed(live)), list(reversed(nodes)),
                            instances, SMALL, max_load=c)
    assert one == two


@SETTINGS
@given(worlds(), st.data())
def test_ownership_leave_with_bounded_loads(world, data):
    live, nodes, instances = world
    leaver = data.draw(st.sampled_from(live))
    after = [m for m in live if m != leaver]
    for move in moves_between(live, after, nodes, instances, SMALL,
                              max_load=1.05):
        if move.node in instances:
            # Instances stay put; the leaver's become orphans.
            assert move.source == leaver.name and move.target is None
        else:
            assert move.target is None or move.target != leaver.name


class TestOwnershipMaxLoad(unittest.TestCase):

    def test_none_is_todays_behaviour(self):
        live = [Member("a"), Member("b", 2), Member("c", draining=True)]
        nodes = uuid_keys(9, 200)
        instances = {nodes[0]: "c", nodes[1]: "dead"}
        self.assertEqual(compute_ownership(live, nodes, instances, SMALL),
                         compute_ownership(live, nodes, instances, SMALL,
                                           max_load=None))

    def test_bounded_balances_free_nodes(self):
        live = [Member(f"compute-{i}") for i in range(20)]
        nodes = uuid_keys(11, 2_000)
        result = compute_ownership(live, nodes, {}, 256, max_load=1.05)
        self.assertLessEqual(max(len(s) for s in result.managed.values()),
                             105)

    def test_bad_max_load_rejected_even_without_free_nodes(self):
        with self.assertRaises(ValueError):
            compute_ownership([Member("a")], [], {}, SMALL, max_load=0.5)
        with self.assertRaises(TypeError):
            compute_ownership([Member("a")], ["n"], {}, SMALL,
                              max_load="1.05")
