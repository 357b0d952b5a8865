"""Which live member manages which Ironic node: the daemon's ownership rules.

Owns the rules, as pure functions over plain values; the daemon feeds them
what it observed (live members, Ironic nodes, instance placement) and acts
on the answer.  Guarantees, for ``compute_ownership``:

* Sticky instances: a node hosting an instance is managed by the member
  that hosts the instance, whatever the ring says, as long as that member
  is live (draining or not).  Instances never move implicitly.
* Orphans: a node whose instance's host is not a live member is managed by
  nobody and reported in ``orphans`` with that host, to be re-homed
  explicitly later.
* Ring-owned nodes: every node without an instance is managed by its ring
  owner among the live, non-draining members (weighted).  A draining member
  gets none; if every live member drains, such nodes are ``unassigned``.
  With ``max_load=c`` (opt-in, see below) a ring owner holding its cap
  passes the node to the next member clockwise with room.
* Partition: each node in ``nodes`` is in exactly one of a member's managed
  set, ``orphans`` or ``unassigned``.  Instance records for nodes that are
  not in ``nodes`` are ignored (Ironic no longer lists them).

Member names and node uuids are compared exactly as given: the daemon
normalises host names before calling (see ``ring.py``).

Balance against movement (``max_load``)
---------------------------------------
``max_load=None`` (the default) is the key-independent ring: a node's
owner depends only on its uuid and the membership, a join or leave moves
only the newcomer's or the leaver's nodes and never a node between two
members that both stayed, and enrolling or deleting a node moves no other
node.  Balance is at the statistical floor of that class: busiest/mean
over 10,000 nodes about 1.05 at 10 members, 1.10 at 20, 1.16 at 50 and
1.27 at 100 (mean over seeds; ``ring.py`` docstring, BENCHMARKS.md).

``max_load=c`` (c >= 1) caps each eligible member's instance-free nodes
at ``ceil(c * free * weight / total weight)`` (``bounded.py``): busiest/
mean of those nodes <= c (up to one node of rounding) at any membership
size.  The price, measured with ``bench/ring_bench.py`` over 10,000 nodes
at c = 1.05 (mean over 10 seeds): a join or leave moves nodes between two
members that both stayed, 4-5 nodes per event at 10 members, 21-26 at 50
and 38-59 at 100, so the total moved is 1.0, 1.1 and 1.4-1.6 x the ideal;
enrolling or deleting one node moves under one other node on average, but
about one such change in n / c steps every cap and moves 16 (50 members)
to 51 (100) others.  c = 1.10 moves 0-40% of that, c = 1.02 1.5 to 6
times as much.  Each extra move is a handover between daemons, so
prefer the default unless the imbalance itself is the problem.
Sticky instances, orphans and draining are unchanged by ``max_load``; the
cap counts only ring-placed nodes, not a member's instance nodes.

The ring, built once per membership
-----------------------------------
Free nodes and orphans are placed on the ring of the live, non-draining
members (``member_ring``).  Building it costs 8 ms at 3 members, 0.17 s at
50 and 0.36 s at 100 (``ring.py``), far more than placing the nodes, so a
caller applying the rules again and again for one membership (the daemon,
on every reconcile pass) builds it once and passes it as ``ring=`` to
``compute_ownership`` and ``adopters``; both check that it is the ring of
the members they are given.  Without ``ring=`` they build it themselves.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from numbers import Real
from types import MappingProxyType

from hashring.bounded import bounded_assign, load_factor
from hashring.ring import DEFAULT_PARTITIONS, HashRing


@dataclass(frozen=True)
class Member:
    """A live daemon as seen by the group: name, ring weight, draining."""

    name: str
    weight: int = 1
    draining: bool = False


@dataclass(frozen=True)
class Move:
    """A node changing manager; ``None`` means no member (orphan/unassigned)."""

    node: str
    source: str | None
    target: str | None


@dataclass(frozen=True)
class Ownership:
    """The outcome of the rules for one membership and one node list."""

    managed: Mapping[str, frozenset[str]]
    orphans: Mapping[str, str] = field(
        default_factory=lambda: MappingProxyType({}))
    unassigned: frozenset[str] = frozenset()

    def owner(self, node: str) -> str | None:
        """Return the member managing ``node``, or None."""
        for member, nodes in self.managed.items():
            if node in nodes:
                return member
        return None

    def owners(self) -> dict[str, str]:
        """Return ``{node: member}`` for every managed node."""
        return {node: member
                for member, nodes in self.managed.items() for node in nodes}


def member_ring(members: Iterable[Member],
                partitions: int = DEFAULT_PARTITIONS) -> HashRing:
    """Return the ring free nodes and orphans are placed on.

    Its members are the live, non-draining ``members`` with their weights;
    it is empty when every member drains.  ``partitions`` is the ring's
    tokens per unit of weight (``HashRing``).
    """
    eligible = _eligible(_by_name(members))
    # add_nodes takes one weight per call and rebuilds the ring each time,
    # so add members grouped by weight rather than one by one.
    by_weight: dict[int, list] = {}
    for member in eligible:
        by_weight.setdefault(member.weight, []).append(member.name)
    ring = HashRing((), partitions=partitions)
    for weight, names in sorted(by_weight.items()):
        ring.add_nodes(names, weight)
    return ring


def compute_ownership(members: Iterable[Member], nodes: Iterable[str],
                      instance_hosts: Mapping[str, str],
                      partitions: int = DEFAULT_PARTITIONS,
                      max_load: Real | None = None,
                      ring: HashRing | None = None) -> Ownership:
    """Apply the ownership rules (see the module docstring).

    ``instance_hosts`` maps a node uuid to the member hosting the instance
    on it; nodes without an instance are absent from it.  ``max_load``
    None (the default) places instance-free nodes on their ring owners;
    a number c >= 1 places them with bounded loads instead (see the
    module docstring for the trade-off).  ``ring`` is
    ``member_ring(members, partitions)`` when the caller keeps one (then
    ``partitions`` is not used); a ring of other members raises
    ``ValueError``.
    """
    live = _by_name(members)
    if ring is not None:
        _check_ring(ring, live)
    managed: dict[str, set] = {name: set() for name in live}
    orphans: dict[str, str] = {}
    free = []
    for node in nodes:
        host = instance_hosts.get(node)
        if host is None:
            free.append(node)
        elif host in live:
            managed[host].add(node)
        else:
            orphans[node] = host
    unassigned = frozenset(
        _place_free(live, free, managed, partitions, max_load, ring))
    return Ownership(
        managed=MappingProxyType(
            {name: frozenset(owned) for name, owned in managed.items()}),
        orphans=MappingProxyType(orphans),
        unassigned=unassigned)


def moves(before: Ownership, after: Ownership) -> tuple[Move, ...]:
    """Return the nodes whose manager differs, sorted by node uuid.

    A node absent from ``before`` or ``after`` (e.g. newly enrolled or
    deleted in Ironic) is not a move and is left out.
    """
    old, new = _placement(before), _placement(after)
    return tuple(Move(node, old[node], new[node])
                 for node in sorted(old.keys() & new.keys())
                 if old[node] != new[node])


def moves_between(before: Iterable[Member], after: Iterable[Member],
                  nodes: Iterable[str], instance_hosts: Mapping[str, str],
                  partitions: int = DEFAULT_PARTITIONS,
                  max_load: Real | None = None) -> tuple[Move, ...]:
    """Return the moves caused by a membership change, nodes unchanged."""
    nodes = list(nodes)
    return moves(
        compute_ownership(before, nodes, instance_hosts, partitions,
                          max_load),
        compute_ownership(after, nodes, instance_hosts, partitions,
                          max_load))


def adopters(members: Iterable[Member], orphans: Mapping[str, str],
             partitions: int = DEFAULT_PARTITIONS,
             ring: HashRing | None = None) -> dict[str, str]:
    """Return ``{node: member}``: who should adopt each orphaned node's instance.

    The adopter is the node's ring owner among the live, non-draining members, so every
    daemon computes the same adopter without talking to the others, and adopted instances
    spread over the fleet the way free nodes do. Empty when every member drains. ``ring``
    as in ``compute_ownership``.
    """
    live = _by_name(members)
    if ring is not None:
        _check_ring(ring, live)
    if not _eligible(live) or not orphans:
        return {}
    if ring is None:
        ring = member_ring(live.values(), partitions)
    return dict(ring.assign(list(orphans)))


def _by_name(members: Iterable[Member]) -> dict[str, Member]:
    live: dict[str, Member] = {}
    for member in members:
        if member.name in live:
            raise ValueError(f"member {member.name!r} is listed twice")
        live[member.name] = member
    return live


def _eligible(live: Mapping[str, Member]) -> list:
    """The members that take free nodes and adopt orphans (not draining)."""
    return [m for m in live.values() if not m.draining]


def _check_ring(ring: HashRing, live: Mapping[str, Member]) -> None:
    expected = {m.name: m.weight for m in _eligible(live)}
    if dict(ring.nodes) != expected:
        raise ValueError(f"the ring given has members {dict(ring.nodes)}, "
                         f"not the live, non-draining members {expected}: "
                         f"build it with member_ring()")


def _place_free(live: Mapping[str, Member], free: list,
                managed: dict[str, set], partitions: int,
                max_load: Real | None, ring: HashRing | None) -> list:
    """Give instance-free nodes to ring owners; return those left over."""
    if max_load is not None:
        load_factor(max_load)  # reject a bad value even if nothing is placed
    if not _eligible(live):
        return free
    if free:
        if ring is None:
            ring = member_ring(live.values(), partitions)
        if max_load is None:
            owners = ring.assign(free)
        else:
            owners = bounded_assign(ring, free, max_load)
        for node, owner in owners.items():
            managed[owner].add(node)
    return []


def _placement(ownership: Ownership) -> dict[str, str | None]:
    placement: dict[str, str | None] = dict.fromkeys(ownership.orphans)
    placement.update(dict.fromkeys(ownership.unassigned))
    placement.update(ownership.owners())
    return placement
