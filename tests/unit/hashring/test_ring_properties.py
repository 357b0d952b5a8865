"""Property-based tests of hashring.ring: determinism, balance, movement,
weights.  Member names come from hypothesis, so they play the part of the
random seed; keys are random UUIDs drawn from a hypothesis-chosen seed.

Bounds on finite key sets are statistical: with K keys on n members the
busiest member's count carries sampling noise of relative standard
deviation sqrt((n - 1) / K) whatever the ring does, so key-count bounds
allow 5 such deviations.  Bounds on ``shares()`` (the exact key-space
share) test the ring itself and use the issue's figures directly.

A member's share itself deviates by about 1/sqrt(8,192 tokens) = 1.1%,
so the 1.05 bound is 4.5 such deviations, and the count bound at n = 3
about 4: over 12 fresh draws of up to 100 members, the statistical tests
failed by chance roughly once in 500 runs.  They run on a fixed set of
draws (``derandomize``): the same examples every run, which the ring must
still balance, and which fail on every run if it stops doing so.  The
exact properties (movement, order, replicas) keep drawing fresh examples.
"""

import math
import random
import uuid

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from hashring import HashRing

SETTINGS = settings(max_examples=12, deadline=None, database=None,
                    suppress_health_check=[HealthCheck.too_slow])
# For bounds that hold with high probability, not always (module docstring).
STATISTICAL = settings(SETTINGS, derandomize=True)

names = st.text(alphabet="abcdefghijklmnopqrstuvwxyz0123456789-.",
                min_size=1, max_size=20)


def members(min_size, max_size):
    return st.lists(names, min_size=min_size, max_size=max_size, unique=True)


def uuid_keys(seed, count):
    rnd = random.Random(seed)
    return [str(uuid.UUID(int=rnd.getrandbits(128), version=4))
            for _ in range(count)]


def noise_bound(n, keys):
    return 1 + 5 * math.sqrt((n - 1) / keys)


@SETTINGS
@given(members(1, 12), st.randoms(use_true_random=False))
def test_membership_order_never_matters(names_, rnd):
    shuffled = list(names_)
    rnd.shuffle(shuffled)
    keys = uuid_keys(rnd.random(), 300)
    one = HashRing(names_)
    other = HashRing([])
    for name in shuffled:
        other.add_node(name)
    assert one.assign(keys) == other.assign(keys)


@STATISTICAL
@given(st.integers(3, 100), st.integers(0, 2**32))
def test_key_space_balance(n, seed):
    ring = HashRing([f"compute-{seed}-{i}" for i in range(n)])
    shares = ring.shares().values()
    assert max(shares) * n <= 1.05


@STATISTICAL
@given(st.integers(3, 100), st.integers(0, 2**32))
def test_key_balance_within_sampling_noise(n, seed):
    keys = uuid_keys(seed, 10_000)
    ring = HashRing([f"compute-{seed}-{i}" for i in range(n)])
    counts = {}
    for owner in ring.assign(keys).values():
        counts[owner] = counts.get(owner, 0) + 1
    assert len(counts) == n
    assert max(counts.values()) * n / len(keys) <= noise_bound(n, len(keys))


@SETTINGS
@given(members(2, 30), names, st.integers(0, 2**32))
def test_join_moves_only_to_newcomer(names_, newcomer, seed):
    names_ = [m for m in names_ if m != newcomer]
    keys = uuid_keys(seed, 2_000)
    before = HashRing(names_)
    after = HashRing(names_ + [newcomer])
    old, new = before.assign(keys), after.assign(keys)
    moved = [k for k in keys if old[k] != new[k]]
    assert all(new[k] == newcomer for k in moved)
    # Exactly the newcomer's keys moved: the least movement possible.
    assert len(moved) == sum(1 for k in keys if new[k] == newcomer)
    ideal = 1 / (len(names_) + 1)
    assert after.shares()[newcomer] <= 1.1 * ideal


@SETTINGS
@given(members(3, 30), st.data(), st.integers(0, 2**32))
def test_leave_moves_only_leavers_keys(names_, data, seed):
    leaver = data.draw(st.sampled_from(names_))
    keys = uuid_keys(seed, 2_000)
    before = HashRing(names_)
    after = HashRing(names_)
    after.remove_node(leaver)
    old, new = before.assign(keys), after.assign(keys)
    moved = {k for k in keys if old[k] != new[k]}
    assert moved == {k for k in keys if old[k] == leaver}
    assert before.shares()[leaver] <= 1.1 / len(names_)


@SETTINGS
@given(members(2, 20), st.data(), st.integers(0, 2**32))
def test_ignore_nodes_equals_ring_without_them(names_, data, seed):
    ignored = data.draw(st.sets(st.sampled_from(names_),
                                max_size=len(names_) - 1))
    full = HashRing(names_)
    reduced = HashRing([m for m in names_ if m not in ignored])
    for key in uuid_keys(seed, 100):
        assert full.get_nodes(key, ignore_nodes=ignored) == \
            reduced.get_nodes(key)


@SETTINGS
@given(members(2, 10), st.integers(1, 4), st.integers(0, 2**32))
def test_replicas_are_distinct_and_start_with_owner(names_, replicas, seed):
    ring = HashRing(names_)
    for key in uuid_keys(seed, 50):
        got = ring.get_nodes(key, replicas=replicas)
        assert len(got) == min(replicas, len(names_))
        assert ring.owner(key) in got


@STATISTICAL
@given(st.lists(st.tuples(names, st.integers(1, 5)), min_size=2, max_size=8,
                unique_by=lambda t: t[0]))
def test_weights_give_proportional_shares(weighted):
    ring = HashRing([])
    for name, weight in weighted:
        ring.add_node(name, weight)
    total = sum(w for _, w in weighted)
    shares = ring.shares()
    for name, weight in weighted:
        assert abs(shares[name] / (weight / total) - 1) <= 0.05


@SETTINGS
@given(members(2, 10), st.data(), st.integers(2, 4), st.integers(0, 2**32))
def test_raising_a_weight_only_pulls_keys_to_that_member(names_, data,
                                                          weight, seed):
    heavier = data.draw(st.sampled_from(names_))
    keys = uuid_keys(seed, 1_000)
    ring = HashRing(names_)
    old = ring.assign(keys)
    ring.add_node(heavier, weight)
    new = ring.assign(keys)
    assert all(new[k] == heavier for k in keys if old[k] != new[k])


@SETTINGS
@given(members(1, 10), st.integers(0, 2**32))
def test_bulk_and_single_lookups_agree(names_, seed):
    ring = HashRing(names_)
    keys = uuid_keys(seed, 200)
    bulk = ring.assign(keys)
    assert all({bulk[k]} == ring.get_nodes(k.encode()) for k in keys)
