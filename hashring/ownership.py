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
* Partition: each node in ``nodes`` is in exactly one of a member's managed
  set, ``orphans`` or ``unassigned``.  Instance records for nodes that are
  not in ``nodes`` are ignored (Ironic no longer lists them).

Member names and node uuids are compared exactly as given: the daemon
normalises host names before calling (see ``ring.py``).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from types import MappingProxyType
from typing import Dict, FrozenSet, Iterable, Mapping, Optional, Tuple

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
    source: Optional[str]
    target: Optional[str]


@dataclass(frozen=True)
class Ownership:
    """The outcome of the rules for one membership and one node list."""

    managed: Mapping[str, FrozenSet[str]]
    orphans: Mapping[str, str] = field(
        default_factory=lambda: MappingProxyType({}))
    unassigned: FrozenSet[str] = frozenset()

    def owner(self, node: str) -> Optional[str]:
        """Return the member managing ``node``, or None."""
        for member, nodes in self.managed.items():
            if node in nodes:
                return member
        return None

    def owners(self) -> Dict[str, str]:
        """Return ``{node: member}`` for every managed node."""
        return {node: member
                for member, nodes in self.managed.items() for node in nodes}


def compute_ownership(members: Iterable[Member], nodes: Iterable[str],
                      instance_hosts: Mapping[str, str],
                      partitions: int = DEFAULT_PARTITIONS) -> Ownership:
    """Apply the ownership rules (see the module docstring).

    ``instance_hosts`` maps a node uuid to the member hosting the instance
    on it; nodes without an instance are absent from it.
    """
    live = _by_name(members)
    managed: Dict[str, set] = {name: set() for name in live}
    orphans: Dict[str, str] = {}
    free = []
    for node in nodes:
        host = instance_hosts.get(node)
        if host is None:
            free.append(node)
        elif host in live:
            managed[host].add(node)
        else:
            orphans[node] = host
    unassigned = frozenset(_place_free(live, free, managed, partitions))
    return Ownership(
        managed=MappingProxyType(
            {name: frozenset(owned) for name, owned in managed.items()}),
        orphans=MappingProxyType(orphans),
        unassigned=unassigned)


def moves(before: Ownership, after: Ownership) -> Tuple[Move, ...]:
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
                  partitions: int = DEFAULT_PARTITIONS) -> Tuple[Move, ...]:
    """Return the moves caused by a membership change, nodes unchanged."""
    nodes = list(nodes)
    return moves(
        compute_ownership(before, nodes, instance_hosts, partitions),
        compute_ownership(after, nodes, instance_hosts, partitions))


def _by_name(members: Iterable[Member]) -> Dict[str, Member]:
    live: Dict[str, Member] = {}
    for member in members:
        if member.name in live:
            raise ValueError(f"member {member.name!r} is listed twice")
        live[member.name] = member
    return live


def _place_free(live: Mapping[str, Member], free: list,
                managed: Dict[str, set], partitions: int) -> list:
    """Give instance-free nodes to ring owners; return those left over."""
    eligible = [m for m in live.values() if not m.draining]
    if not eligible:
        return free
    if free:
        ring = _ring(eligible, partitions)
        for node, owner in ring.assign(free).items():
            managed[owner].add(node)
    return []


def _ring(members: list, partitions: int) -> HashRing:
    # add_nodes takes one weight per call and rebuilds the ring each time,
    # so add members grouped by weight rather than one by one.
    by_weight: Dict[int, list] = {}
    for member in members:
        by_weight.setdefault(member.weight, []).append(member.name)
    ring = HashRing((), partitions=partitions)
    for weight, names in sorted(by_weight.items()):
        ring.add_nodes(names, weight)
    return ring


def _placement(ownership: Ownership) -> Dict[str, Optional[str]]:
    placement: Dict[str, Optional[str]] = dict.fromkeys(ownership.orphans)
    placement.update(dict.fromkeys(ownership.unassigned))
    placement.update(ownership.owners())
    return placement
