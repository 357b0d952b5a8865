"""The consistent hash ring: which live member owns a key.

Owns the mapping key -> member for a given membership and guarantees:

* Determinism: the answer depends only on the bytes of the key, the bytes
  and weights of the members and ``partitions``; never on insertion order,
  process, host, byte order or Python version (see ``keys.py``).
* Independence: a key's owner does not depend on which other keys exist,
  so a single ``get_nodes`` and a bulk ``assign`` always agree, and
  enrolling or deleting an Ironic node never moves another node.
* Minimal, monotone movement: every member owns ``partitions * weight``
  tokens fixed by its name, and a key belongs to the first token clockwise
  from the key's position.  For each key this is a fixed ranking of all
  possible members, so when a member joins it only takes keys (from
  anyone), when it leaves only its own keys move, and no key ever moves
  between two members that both stayed.  Raising a weight only adds
  tokens, so it only pulls keys towards that member.
* Weights: a member's expected share is its weight over the sum of
  weights; ``shares()`` gives the exact share of the key space.

Member names are NOT normalised: ``"Host-1"`` and ``"host-1"`` are two
members (nova bug 1866380 split a ring that way).  The daemon normalises
before it builds a ring.  ``"a"`` and ``b"a"`` share their bytes and are
refused as two members.

Why this scheme
---------------
Measured with ``bench/ring_bench.py`` (10,000 random UUID keys, 5 seeds,
2-core Xeon, Python 3.11; BENCHMARKS.md has the full table), busiest/mean
as mean / worst over seeds:

    members   this ring      tooz (32 md5)   floor: ideal uniform draw
       3     1.025/1.041    1.248/1.374     1.011/1.022
      10     1.063/1.089    1.207/1.443     1.046/1.056
      20     1.083/1.110    1.354/1.534     1.082/1.120
     100     1.266/1.350    1.578/1.720     1.274/1.320

The "floor" assigns every key to a uniformly random member: it is the best
any scheme can do when a key's owner depends only on the key and the
membership.  With K keys on n members a member's count has relative
standard deviation sqrt((n - 1) / K), 10% at n = 100, K = 10,000, so the
busiest member sits near 1.25 x the mean.  The issue's 1.05 target is
therefore out of reach beyond about 5-10 members at 10,000 keys for *every*
key-independent scheme (rendezvous, any token count, Maglev); this ring
tracks the floor, and the figure shrinks as keys per member grow.

Reaching 1.05 needs key-set-dependent placement, so it is not the
default: it breaks "no key moves between two members that both stayed",
makes a single lookup depend on every other node, and moves nodes when
Ironic enrols or deletes one.  Exact stayer-to-stayer stability on every
join and leave forces each key to rank members in a fixed order, which is
what a token ring or rendezvous hashing gives.

Among those, a token ring with many tokens per member was chosen:

* Rendezvous hashing is exactly at the floor but costs O(members) hash
  computations per lookup in Python (about 100 per key at 100 members):
  slower than tooz's single lookup and far from 100,000 keys in well
  under a second.  A rendezvous-ranked slot table restores O(1) lookups,
  but building it is members x slots in Python: measured 0.5-1.0 s for
  100 members and 65,536 slots, with a slot-count noise of sqrt(n/slots)
  that grows with n.
* Token ring: a member's share has relative deviation about
  1/sqrt(tokens).  At 32 tokens (tooz) that is 18%, the source of tooz's
  imbalance; at 8,192 it is 1.1%, small beside the key-sampling floor.
  A prototype run (10 seeds, 5 members) gave 1.042/1.073 with 4,096
  tokens, 1.029/1.058 with 8,192 and 1.028/1.046 with 16,384 (floor
  1.024/1.042): 8,192 is where more tokens stop paying for the build.
  Tokens come from one SHAKE-128 call per member and the rebuild is
  a C-level merge of sorted runs: 8 ms at 3 members, 0.17 s at 50,
  0.36 s at 100 (tooz: under 3 ms) -- paid once per membership change.
* Lookups are one BLAKE2s digest and one bisect over an ``array('Q')``:
  about 530,000-630,000 get_nodes/s against tooz's 200,000-500,000, and
  100,000 keys among 50 members in 0.18 s in ``assign`` (tooz loop:
  0.32 s).

Movement (same benchmark, 10 members): keys moved on join 1.01 x ideal on
average (worst seed 1.07), on leave 0.97 x (worst 1.005), zero
stayer-to-stayer moves.  The moved keys are exactly the newcomer's or the
leaver's, the least possible; their count above 1/n or 1/(n+1) is the
same sampling noise as above (at 50 members the worst seed was 1.15 x).

Each token's low 16 bits hold its member's index in the byte-sorted
member list, and key positions have those bits cleared: two tokens at the
same position then tie-break by member bytes, the same way whatever the
membership, which keeps the per-key ranking fixed.

Opt-in bounded loads
--------------------
Where balance matters more than movement, ``hashring.bounded_assign(ring,
keys, c)`` and ``compute_ownership(..., max_load=c)`` walk this ring with
consistent hashing with bounded loads (``bounded.py``): each member is
capped at ceil(c x its weighted mean), a key whose ring owner is full goes
to the next member clockwise with room.  Same benchmark, 10,000 keys, 10
seeds, c = 1.05 (mean / worst over seeds):

    members  busiest/mean  moved/ideal     moved/ideal    stayer->stayer
                           join            leave          join / leave
       10    1.046/1.050   1.006/1.058     0.991/1.046      4 /  5 keys
       50    1.050/1.050   1.099/1.204     1.115/1.255     21 / 26 keys
      100    1.050/1.050   1.368/1.485     1.597/1.720     38 / 59 keys

(stayer->stayer, mean keys per join / leave, is 0 for this ring).  At
c = 1.10 the stayer moves are 0 / 0, 5 / 8 and 16 / 21 keys; at c = 1.02
27 / 28, 47 / 54 and 59 / 103.  Enrolling or deleting one node moves 0.1
to 0.7 other nodes on average (this ring: none), except when the node
count crosses a multiple of n / c and every cap steps by one (about one
change in n / c): then 0.6 (10 members), 16 (50) or 51 (100) other nodes
move at c = 1.05.  A bulk call takes 0.20 s for 100,000 keys among 50
members against 0.13 s for ``assign``.  BENCHMARKS.md has the full table.
"""

from __future__ import annotations

from array import array
from bisect import bisect_left
from collections.abc import Callable, Hashable, Iterable, Mapping
from types import MappingProxyType
from typing import Any

from hashring.errors import EmptyRing, UnknownNode
from hashring.keys import (
    DEFAULT_HASH_FUNCTION,
    MAX_MEMBERS,
    POSITION_MASK,
    TAG_MASK,
    Key,
    key_hasher,
    member_tokens,
    tag_tokens,
    to_bytes,
)

Member = Hashable  # str or bytes in practice; kept as given by the caller

DEFAULT_PARTITIONS = 8192


class HashRing:
    """Map keys onto weighted members; drop-in for ``tooz.hashring.HashRing``.

    ``partitions`` is, as in tooz, the number of ring tokens per member and
    per unit of weight (tooz defaults to 32, this ring to 8192: see the
    module docstring for why).  ``hash_function`` names the hashlib
    algorithm used to place keys (one of ``hashlib.algorithms_guaranteed``).
    """

    DEFAULT_PARTITION_NUMBER = DEFAULT_PARTITIONS
    DEFAULT_HASH_FUNCTION = DEFAULT_HASH_FUNCTION

    def __init__(self, nodes: Iterable[Key] = (),
                 partitions: int = DEFAULT_PARTITIONS,
                 hash_function: str = DEFAULT_HASH_FUNCTION) -> None:
        if isinstance(partitions, bool) or not isinstance(partitions, int) \
                or partitions < 1:
            raise ValueError(f"partitions must be a positive int, "
                             f"not {partitions!r}")
        self._partitions = partitions
        self._position = key_hasher(hash_function)
        self._weights: dict[Member, int] = {}
        self._encoded: dict[bytes, Member] = {}
        self._untagged: dict[bytes, array] = {}
        self._order: tuple = ()
        self._tokens = array("Q")
        self.add_nodes(nodes)

    # -- membership -------------------------------------------------------

    @property
    def nodes(self) -> Mapping[Member, int]:
        """Read-only view of member -> weight."""
        return MappingProxyType(self._weights)

    def add_node(self, node: Key, weight: int = 1) -> None:
        """Add ``node`` with ``weight``, or update its weight if present."""
        self.add_nodes((node,), weight)

    def add_nodes(self, nodes: Iterable[Key], weight: int = 1) -> None:
        """Add each of ``nodes`` with ``weight`` (updating existing ones)."""
        _check_weight(weight)
        staged = dict(self._weights)
        encoded = dict(self._encoded)
        for node in nodes:
            data = to_bytes(node, "member")
            known = encoded.get(data)
            if known is not None and known != node:
                # "a" and b"a" would share every token: refuse the alias.
                raise ValueError(f"member {node!r} has the same bytes as "
                                 f"existing member {known!r}")
            encoded[data] = node
            staged[node] = weight
        self._commit(staged, encoded)

    def remove_node(self, node: Key) -> None:
        """Remove ``node``; raise ``UnknownNode`` if it is not a member."""
        self.remove_nodes((node,))

    def remove_nodes(self, nodes: Iterable[Key]) -> None:
        """Remove all of ``nodes`` or, if any is unknown, none of them."""
        staged = dict(self._weights)
        encoded = dict(self._encoded)
        for node in nodes:
            if node not in staged:
                raise UnknownNode(node)
            del staged[node]
            del encoded[to_bytes(node, "member")]
        self._commit(staged, encoded)

    def _commit(self, weights: dict[Member, int],
                encoded: dict[bytes, Member]) -> None:
        if len(weights) > MAX_MEMBERS:
            raise ValueError(f"at most {MAX_MEMBERS} members are supported")
        self._weights = weights
        self._encoded = encoded
        # The canonical order (by bytes) decides each member's tag, so ties
        # between equal token positions break the same way in every process
        # and for every membership: a member ranks above another on a key
        # regardless of who else is on the ring.
        order = sorted(encoded)
        self._untagged = {data: self._member_tokens(data, weights[encoded[data]])
                          for data in order}
        merged: list = []
        for tag, data in enumerate(order):
            merged.extend(tag_tokens(self._untagged[data], tag))
        # Each member's run is already sorted: timsort merges the runs.
        merged.sort()
        self._order = tuple(encoded[data] for data in order)
        self._tokens = array("Q", merged)

    def _member_tokens(self, data: bytes, weight: int) -> array:
        count = self._partitions * weight
        cached = self._untagged.get(data)
        if cached is not None and len(cached) == count:
            return cached
        return member_tokens(data, count)

    # -- lookups ----------------------------------------------------------

    def get_nodes(self, data: Key, ignore_nodes: Iterable[Any] | None = None,
                  replicas: int = 1) -> set[Member]:
        """Return the set of ``replicas`` members owning ``data``.

        Members in ``ignore_nodes`` are skipped, and the next members
        clockwise take their place, so ``get_nodes(k, ignore_nodes={m})``
        equals the answer of the same ring without ``m``.  Fewer members
        than ``replicas`` (after ignoring) give a smaller set, as in tooz.
        """
        tokens = self._tokens
        if type(data) is not bytes or not data:
            data = to_bytes(data)
        if not tokens:
            raise EmptyRing()
        start = bisect_left(tokens, self._position(data))
        if replicas == 1 and not ignore_nodes:
            # The common call, kept free of extra function calls.
            if start == len(tokens):
                start = 0
            return {self._order[tokens[start] & TAG_MASK]}
        if isinstance(replicas, bool) or not isinstance(replicas, int) \
                or replicas < 0:
            raise ValueError(f"replicas must be an int >= 0, not {replicas!r}")
        return self._walk(start, set(ignore_nodes or ()), replicas)

    def _walk(self, start: int, ignore: set[Any], replicas: int) -> set[Member]:
        order = self._order
        wanted = min(replicas, sum(1 for m in order if m not in ignore))
        found: set[Member] = set()
        tokens = self._tokens
        size = len(tokens)
        index = start
        while len(found) < wanted:
            member = order[tokens[index % size] & TAG_MASK]
            if member not in ignore:
                found.add(member)
            index += 1
        return found

    def owner(self, data: Key) -> Member:
        """Return the one member owning ``data`` (``get_nodes`` unwrapped)."""
        tokens = self._tokens
        if not tokens:
            raise EmptyRing()
        if type(data) is not bytes or not data:
            data = to_bytes(data)
        index = bisect_left(tokens, self._position(data))
        return self._order[tokens[index if index < len(tokens) else 0]
                           & TAG_MASK]

    def assign(self, keys: Iterable[Key]) -> dict[Key, Member]:
        """Return ``{key: owner}`` for every key; the bulk form of ``owner``.

        Every key is validated before any is assigned, so a bad key raises
        without a partial answer.  The answer for a key never depends on
        the other keys.
        """
        keys = list(keys)
        encoded = [to_bytes(key) for key in keys]
        tokens = self._tokens
        if not tokens:
            raise EmptyRing()
        order = self._order
        position = self._position
        last = len(tokens) - 1
        result = {}
        for key, data in zip(keys, encoded):
            index = bisect_left(tokens, position(data))
            if index > last:
                index = 0
            result[key] = order[tokens[index] & TAG_MASK]
        return result

    def token_table(self) -> tuple[array, tuple, Callable[[bytes], int]]:
        """Return (tokens, members by tag, key position function), read-only.

        For walks over the same token table as ``assign`` (``bounded.py``);
        callers must not modify what it returns.
        """
        return self._tokens, self._order, self._position

    def shares(self) -> dict[Member, float]:
        """Return each member's exact fraction of the ring's key space.

        This is the expected share of uniformly hashed keys; a finite key
        set adds its own sampling noise on top (see the module docstring).
        """
        tokens = self._tokens
        if not tokens:
            raise EmptyRing()
        order = self._order
        arcs = [0] * len(order)
        # Key positions have their tag bits cleared, so a token owns the
        # positions (previous token's position, its own position]; the
        # first token also owns the wrap-around arc.
        previous = (tokens[-1] & POSITION_MASK) - (1 << 64)
        for token in tokens:
            position = token & POSITION_MASK
            arcs[token & TAG_MASK] += position - previous
            previous = position
        total = float(1 << 64)
        return {order[tag]: arc / total for tag, arc in enumerate(arcs)}

    # -- tooz compatibility -------------------------------------------------

    def __getitem__(self, key: Key) -> set[Member]:
        return self.get_nodes(key)

    def __len__(self) -> int:
        """Number of tokens on the ring (tooz: number of partitions)."""
        return len(self._tokens)

    def __repr__(self) -> str:
        return (f"HashRing({len(self._weights)} members, "
                f"{len(self._tokens)} tokens)")


def _check_weight(weight: Any) -> None:
    if isinstance(weight, bool) or not isinstance(weight, int) or weight < 1:
        raise ValueError(f"weight must be an int >= 1, not {weight!r}")
