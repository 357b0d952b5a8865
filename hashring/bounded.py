"""Consistent hashing with bounded loads: balance within a factor, opt-in.

Owns ``bounded_assign(ring, keys, max_load)``, which maps a whole key set
onto a ``HashRing``'s members so that no member holds more than
``ceil(max_load * K * weight / total_weight)`` of the K distinct keys
(Mirrokni, Thorup and Zadimoghaddam, "Consistent Hashing with Bounded
Loads", 2018).  Guarantees:

* Cap: member m gets at most ``ceil(c * K * w_m / W)`` keys, c =
  ``max_load``, so busiest/mean <= c + W / (K * w_min) (the ceiling adds
  at most one key), and <= c exactly when c * K * w / W is whole, e.g.
  10,000 keys on 3, 5, 10, 20, 50 or 100 equal members at c = 1.02 or
  1.05.  The caps sum to at least K, so every key is placed.
* Ring first: keys are processed in ring-position order (ties by key
  bytes); a key goes to its ring owner unless that member is full, then
  to the next member clockwise (token by token) with room.  With a large
  enough c no cap binds and the answer equals ``HashRing.assign``.
* Determinism: the answer depends only on the *set* of key bytes, the
  ring (members, weights, partitions, hash function) and c; not on the
  order of ``keys``, duplicates, ``hash()`` or the process.  ``c`` is
  read as the decimal it prints as (``1.05`` is exactly 21/20), so caps
  are exact integers on every host.

What it costs (measured, ``bench/ring_bench.py``; figures in BENCHMARKS.md
and the ``ring.py`` docstring): a key's owner now depends on the other
keys and on members that did not change.  On a join or leave some keys
move between two members that both stayed, and enrolling or deleting a
single Ironic node can move other nodes (when the caps step by one, every
full member hands one key back, and overflow chains shift).  The
smaller c and the more members, the more of both.

Why a separate function and not a mode of ``HashRing.assign``: the ring's
contract is that a key's owner depends only on the key and the membership
(``assign`` agrees with ``get_nodes`` key by key).  Bounded loads breaks
that contract, so it gets its own name at the call site and leaves the
ring's methods, and their guarantees, untouched.  It reads the ring's
token table and never modifies the ring.
"""

from __future__ import annotations

import math
from bisect import bisect_left
from collections.abc import Iterable
from decimal import Decimal
from fractions import Fraction
from numbers import Rational, Real

from hashring.errors import EmptyRing
from hashring.keys import TAG_MASK, Key, to_bytes
from hashring.ring import HashRing, Member

DEFAULT_MAX_LOAD = 1.05


def bounded_assign(ring: HashRing, keys: Iterable[Key],
                   max_load: Real = DEFAULT_MAX_LOAD) -> dict[Key, Member]:
    """Return ``{key: member}`` with each member's load capped.

    ``max_load`` (c >= 1) bounds each member's keys to ``ceil(c * K *
    weight / total weight)``, K the number of distinct keys (by bytes:
    ``"a"`` and ``b"a"`` are one key and get one owner).  Keys are
    validated as in ``HashRing.assign``; an empty ring raises
    ``EmptyRing``.
    """
    factor = load_factor(max_load)
    keys = list(keys)
    encoded = [to_bytes(key) for key in keys]
    tokens, order, position = ring.token_table()
    if not tokens:
        raise EmptyRing()
    # Deterministic processing order: by ring position, then bytes.  The
    # set drops duplicates, so neither order nor repetition of ``keys``
    # can change the answer.
    todo = sorted({(position(data), data) for data in encoded})
    caps = _caps(factor, len(todo), [ring.nodes[m] for m in order])
    loads = [0] * len(order)
    size = len(tokens)
    owner_tag: dict[bytes, int] = {}
    start = 0
    for point, data in todo:
        # Positions only grow, so each search starts where the last ended.
        start = bisect_left(tokens, point, start)
        index = start if start < size else 0
        tag = tokens[index] & TAG_MASK
        while loads[tag] >= caps[tag]:
            index += 1
            if index == size:
                index = 0
            tag = tokens[index] & TAG_MASK
        loads[tag] += 1
        owner_tag[data] = tag
    return {key: order[owner_tag[data]] for key, data in zip(keys, encoded)}


def _caps(factor: Fraction, count: int, weights: list[int]) -> list[int]:
    """Return ``ceil(factor * count * w / sum(weights))`` for each w."""
    total = sum(weights)
    num, den = factor.numerator * count, factor.denominator * total
    caps = [-(-num * weight // den) for weight in weights]
    # Holds because factor >= 1; the walk above relies on it to terminate.
    assert sum(caps) >= count, (caps, count)
    return caps


def load_factor(max_load: Real) -> Fraction:
    """Return ``max_load`` as an exact fraction, rejecting values < 1."""
    if isinstance(max_load, bool) or not isinstance(
            max_load, (Real, Decimal)):
        raise TypeError(f"max_load must be a real number, not "
                        f"{type(max_load).__name__}: {max_load!r}")
    if isinstance(max_load, Rational):
        factor = Fraction(max_load.numerator, max_load.denominator)
    else:
        value = float(max_load) if not isinstance(max_load, Decimal) \
            else max_load
        if not math.isfinite(value):
            raise ValueError(f"max_load must be finite, not {max_load!r}")
        # repr() is the shortest decimal that reads back as the same float:
        # 1.05 becomes 21/20, not 1.0500000000000000444...
        factor = Fraction(repr(value)) if isinstance(value, float) \
            else Fraction(value)
    if factor < 1:
        raise ValueError(f"max_load must be >= 1 (no member can be held "
                         f"below the mean), not {max_load!r}")
    return factor
