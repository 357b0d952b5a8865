"""The reconcile plan: what one daemon does next with its claims, decided without I/O.

Owns the step from what a daemon observed to what it does next. The inputs are the live members
(weighted, draining or not), the claims this daemon holds, the node uuids the fleet shares out,
the hosts of the instances on them, and whether this daemon is draining to stop. The answer is a
:class:`Plan`: the claims to take, the claims to release, the orphans the ownership rules report
and the orphaned instances this daemon is the one to adopt. Pure: no ZooKeeper, no threads, no
clock. :class:`computed.fleet.reconciler.Fleet` reads the inputs, calls :func:`compute_plan` and
carries the plan out; :class:`computed.fleet.rehome.Rehomer` adopts once an orphan's grace is over.

Guarantees of :func:`compute_plan` (property-tested in ``tests/unit/fleet/test_plan.py``):

* **Only what the rules give.** ``take`` is what :func:`hashring.ownership.compute_ownership`
  gives this host and it does not hold yet; ``release`` is what it holds and the rules do not give
  it; the two never meet. When every member carries out its plan, each node has at most one
  owner, and each node the rules give a member is claimed by that member: a node hosting an
  instance by the instance's live host, every other node by its ring owner among the live,
  non-draining members. A join or leave therefore moves only the nodes the ring moves.
* **A daemon draining to stop takes nothing** (``draining=True``): it only releases what the
  rules no longer give it (once its drain marker is among the members, all but its instances'
  nodes).
* **Not a member, owns nothing.** When this host is not among the members it releases every claim
  and takes none; ``member`` is False and the executor joins again.
* **Release first.** A plan has no order; its executor has one: it releases before it takes, so
  a node moving to a peer is dropped before the peer can claim it.
* **One adopter per orphan.** ``adopt`` holds the orphaned nodes whose adopter
  (:func:`hashring.ownership.adopters`) is this host; every daemon computes the same adopter.

:class:`RingCache` keeps the ring of the last membership seen, so that a pass whose members did not
change reuses it: building a ring costs 0.17 s at 50 members and 0.36 s at 100, placing the nodes
on it a small part of that. :class:`OwnershipCache` keeps the rules' answer of the last pass, so
that a pass whose members, nodes and instance hosts did not change places no node again.
"""

from __future__ import annotations

from collections.abc import Callable, Collection, Iterable, Mapping, Sequence
from dataclasses import dataclass

from hashring.ownership import Member, Ownership, adopters, compute_ownership, member_ring
from hashring.ring import HashRing


@dataclass(frozen=True)
class Plan:
    """What one daemon does next, and the rules' answer it was drawn from."""

    host: str
    member: bool  # the host is among the members; False: own nothing and join again
    take: frozenset[str]  # claims to take: the rules give them to the host, it does not hold them
    release: frozenset[str]  # claims to release: held, and the rules do not give them any more
    adopt: frozenset[str]  # orphaned nodes whose instance the host is to adopt (after a grace)
    ownership: Ownership  # the rules' answer for every member
    members: tuple[Member, ...]  # the members it was computed for
    ring: HashRing  # their ring (member_ring): adopters of instances that have no node use it

    @property
    def orphans(self) -> Mapping[str, str]:
        """``{node: gone host}``: nodes whose instance's host is not a member."""
        return self.ownership.orphans


def compute_plan(members: Sequence[Member], held: Collection[str], nodes: Collection[str],
                 instance_hosts: Mapping[str, str], host: str, draining: bool = False,
                 ring: HashRing | None = None, ownership: Ownership | None = None) -> Plan:
    """What ``host`` does next (see the module docstring).

    ``held`` are the nodes whose claim ``host`` holds, ``nodes`` every node uuid the fleet shares
    out, ``instance_hosts`` maps a node hosting an instance to the instance's host, ``draining``
    says that ``host`` is draining to stop. ``ring`` is ``member_ring(members)`` when the caller
    keeps one (:class:`RingCache`); without it the ring is built here. ``ownership`` is the
    rules' answer for these members, nodes and instance hosts when the caller keeps it
    (:class:`OwnershipCache`); without it it is computed here.
    """
    members = tuple(members)
    if ring is None:
        ring = member_ring(members)
    if ownership is None:
        ownership = compute_ownership(members, nodes, instance_hosts, ring=ring)
    member = any(m.name == host for m in members)
    mine = ownership.managed.get(host, frozenset())
    held = frozenset(held)
    take = mine - held if member and not draining else frozenset()
    adopt = frozenset(node for node, adopter in
                      adopters(members, ownership.orphans, ring=ring).items() if adopter == host)
    return Plan(host=host, member=member, take=take, release=held - mine, adopt=adopt,
                ownership=ownership, members=members, ring=ring)


class RingCache:
    """The ring of the last membership seen, rebuilt only when the membership changes.

    Keyed by every member's (name, weight, draining): a join, a leave, a new weight or a drain
    marker rebuilds it, nothing else does. ``build`` makes a ring from members
    (:func:`hashring.ownership.member_ring`; tests pass one that counts). Used by one thread.
    """

    def __init__(self, build: Callable[[Sequence[Member]], HashRing] = member_ring):
        self._build = build
        self._key: tuple[tuple[str, int, bool], ...] | None = None
        self._ring: HashRing | None = None

    def ring_for(self, members: Iterable[Member]) -> HashRing:
        members = tuple(members)
        key = tuple(sorted((m.name, m.weight, m.draining) for m in members))
        if self._ring is None or key != self._key:
            self._ring, self._key = self._build(members), key
        return self._ring


class OwnershipCache:
    """The rules' answer of the last pass, computed again only when its inputs changed.

    Placing every node on the ring costs about 2 ms per 1,000 nodes; the reconciler passes every
    second, so at 10,000 nodes placing them again each pass was 2 % of a core for nothing. Keyed
    by the members, the node set and the instance hosts (``nodes`` compared by identity first:
    :meth:`computed.daemon.nodes.FleetNodes.uuids` hands out the same set while it does not
    change, so an unchanged pass compares no node). The ring must be the members' ring
    (:class:`RingCache`). ``compute`` is :func:`hashring.ownership.compute_ownership`'s
    signature (tests pass one that counts). Used by one thread.
    """

    def __init__(self, compute: Callable[..., Ownership] | None = None):
        self._compute = compute or (lambda members, nodes, instance_hosts, ring:
                                    compute_ownership(members, nodes, instance_hosts, ring=ring))
        self._key: tuple | None = None
        self._ownership: Ownership | None = None

    def ownership_for(self, members: Sequence[Member], nodes: frozenset[str],
                      instance_hosts: Mapping[str, str], ring: HashRing) -> Ownership:
        members = tuple(members)
        instance_hosts = dict(instance_hosts)
        if self._key is not None and self._ownership is not None:
            last_members, last_nodes, last_hosts = self._key
            if (members == last_members and instance_hosts == last_hosts
                    and (nodes is last_nodes or nodes == last_nodes)):
                self._key = (members, nodes, instance_hosts)  # the newer object: cheaper next
                return self._ownership
        self._ownership = self._compute(members, nodes, instance_hosts, ring)
        self._key = (members, nodes, instance_hosts)
        return self._ownership
