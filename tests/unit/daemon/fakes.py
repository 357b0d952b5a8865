"""In-memory stand-ins for what the daemon's sync pass talks to: Ironic, the fleet, known providers.

The fence (:class:`computed.fleet.fence.Fence`), the catalog and the outbox are the real ones:
they do no I/O.
"""

from __future__ import annotations

from computed.baremetal.driver import BaremetalDriver, DriverUnavailable, Node
from computed.fleet.claims import Claim
from computed.fleet.fence import Fence


class Clock:
    def __init__(self, now: float = 1000.0) -> None:
        self.now = now

    def __call__(self) -> float:
        return self.now


class Ironic(BaremetalDriver):
    """A driver over a dict of nodes; ``down`` makes every call fail; ``shard`` filters the
    listing as Ironic's shard filter does (get_node is unfiltered)."""

    def __init__(self, *nodes: Node, shard: str | None = None):
        self.nodes = {node.uuid: node for node in nodes}
        self.shard = shard
        self.down = False
        self.reads: list[str] = []

    def list_nodes(self) -> list[Node]:
        if self.down:
            raise DriverUnavailable("list nodes", "Ironic is down")
        return [node for node in self.nodes.values() if self.lists(node)]

    def lists(self, node: Node) -> bool:
        return self.shard is None or node.shard == self.shard

    def get_node(self, uuid: str) -> Node | None:
        self.reads.append(uuid)
        if self.down:
            raise DriverUnavailable(f"get node {uuid}", "Ironic is down")
        return self.nodes.get(uuid)


def open_fence(clock: Clock) -> Fence:
    """A fence connected to its first session, with a fresh lease."""
    fence = Fence(10.0, clock=clock)
    fence.connected()
    fence.renew(lambda: None)
    return fence


class Claims:
    """The claims held, as the fleet's ClaimTable answers ``held()`` and ``get()``."""

    def __init__(self) -> None:
        self.table: dict[str, Claim] = {}

    def held(self) -> dict[str, Claim]:
        return dict(self.table)

    def get(self, node: str) -> Claim | None:
        return self.table.get(node)


class Fleet:
    """What the sync pass uses of :class:`computed.fleet.reconciler.Fleet`: its claims, and
    ``act`` with the same rule (a claim held and the fence allowing its generation)."""

    def __init__(self, fence: Fence):
        self.fence = fence
        self.claims = Claims()
        self.acts: list[tuple[str, str, int, dict]] = []
        self.woken = 0

    def claim(self, node: str, claim_epoch: int) -> Claim:
        claim = Claim(node, claim_epoch, self.fence.term)
        self.claims.table[node] = claim
        return claim

    def release(self, node: str) -> None:
        del self.claims.table[node]

    def act(self, node, action, do=None, **details) -> bool:
        claim = self.claims.get(node)
        if claim is None or not self.fence.may_act(claim.term):
            return False
        self.acts.append((node, action, claim.epoch, details))
        if do is not None:
            do(claim)
        return True

    def wake(self) -> None:
        self.woken += 1


class KnownProviders:
    """What the sync pass uses of :class:`computed.daemon.nodes.FleetNodes`."""

    def __init__(self, *uuids: str):
        self.uuids = set(uuids)
        self.refresh_requests = 0
        self.provider_reads = 0

        self.foreign: set[str] = set()

    @property
    def version(self) -> tuple:
        """Changes when the known providers or the foreign nodes do (as FleetNodes.version)."""
        return frozenset(self.uuids), frozenset(self.foreign)

    def is_known_provider(self, uuid: str) -> bool:
        return uuid in self.uuids

    def mark_foreign(self, uuid: str) -> None:
        self.foreign.add(uuid)

    def is_foreign(self, uuid: str) -> bool:
        return uuid in self.foreign

    def request_refresh(self) -> None:
        self.refresh_requests += 1

    def refresh_providers(self) -> bool:
        self.provider_reads += 1
        return False
