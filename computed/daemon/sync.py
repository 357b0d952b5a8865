"""The node sync pass: from a change of a claimed Ironic node to a provider report in the outbox.

Owns the path of one node change inside a daemon, as plain calls::

    listener thread   NotificationEndpoint -> NodeSync.hint(uuid)               (baremetal.events)
    node thread       NodeSync.reread_hinted() -> driver.get_node(uuid) -> catalog.update(uuid)
                      NodeSync.sync_claimed() -> Fleet.act(uuid, "sync") -> NodeSync._offer()
                          -> provider_from_node(node) -> Outbox.offer(uuid, claim_epoch, state)
    report thread     Outbox.run() -> ReportGate.verdict(uuid, claim_epoch) -> RpcSender.send()

Guarantees:

* Only claimed nodes are re-read and synced, and a node is synced only through
  :meth:`computed.fleet.reconciler.Fleet.act`: while the claim is provably this daemon's (held,
  fence open, lease fresh), with an audit record.
* A node is synced again only when its snapshot or its claim changed since it was last synced, so
  a pass over unchanged nodes offers nothing.
* A claimed node Ironic no longer lists is offered as gone (state None) when computed reported a
  provider for it, and skipped otherwise (not listed yet, nothing to delete).
* A node without resource class is not reported, and logged once per process.
* A claim that goes away drops the node's pending reports (:meth:`Outbox.forget`); at send time
  :class:`ReportGate` drops a report whose claim changed claim epoch and holds one while the fence
  is closed.
"""

from __future__ import annotations

import functools
import logging
import threading
import time
from collections.abc import Callable

from computed.baremetal.catalog import NodeCatalog
from computed.baremetal.driver import BaremetalDriver, DriverError, Node
from computed.daemon.nodes import FleetNodes
from computed.fleet.claims import Claim, ClaimTable
from computed.fleet.fence import Fence
from computed.fleet.reconciler import Fleet
from computed.providers.outbox import Outbox, Verdict
from computed.providers.state import provider_from_node

LOG = logging.getLogger(__name__)

# Events that can add or remove nodes: they call for a full listing, not a single re-read.
LISTING_EVENTS = ("baremetal.node.create.end", "baremetal.node.delete.end")


class ReportGate:
    """Whether a queued report may go out now: the outbox's :class:`computed.providers.outbox.Gate`.

    Send it only under the claim it was made for and while the fence is open; hold it while the
    claim is still ours but the fence is closed (the session may come back); drop it once the claim
    is gone or has another claim epoch (the node's next owner reports it).
    """

    def __init__(self, claims: ClaimTable, fence: Fence):
        self._claims = claims
        self._fence = fence

    def verdict(self, uuid: str, claim_epoch: int) -> Verdict:
        claim = self._claims.get(uuid)
        if claim is None or claim.epoch != claim_epoch:
            return Verdict.DROP
        return Verdict.SEND if self._fence.may_act(claim.term) else Verdict.HOLD


class NodeSync:
    """Re-reads hinted nodes and offers the provider states of changed claimed nodes."""

    def __init__(self, catalog: NodeCatalog, nodes: FleetNodes, driver: BaremetalDriver,
                 fleet: Fleet, outbox: Outbox, clock: Callable[[], float] = time.monotonic):
        self._catalog = catalog
        self._nodes = nodes
        self._driver = driver
        self._fleet = fleet
        self._outbox = outbox
        self._clock = clock
        # Monotonic time of the last Ironic event, None before the first (read by
        # computed.runtime.metrics for the event lag).
        self.last_event_at: float | None = None
        self._synced: dict[str, tuple[int, Node | None]] = {}  # uuid -> (claim epoch, snapshot)
        self._no_class_logged: set[str] = set()
        self._hints: set[str] = set()
        self._hints_lock = threading.Lock()
        self._wake = threading.Event()

    # --- any thread ------------------------------------------------------------------------

    def hint(self, uuid: str, event_type: str) -> None:
        """An Ironic notification about ``uuid`` (from the listener's thread): look again."""
        self.last_event_at = self._clock()
        if event_type in LISTING_EVENTS:
            self._nodes.request_refresh()
        with self._hints_lock:
            self._hints.add(uuid)
        self._wake.set()

    def wake(self) -> None:
        """Run the next pass now (the listing changed, or the daemon stops)."""
        self._wake.set()

    # --- the node thread -------------------------------------------------------------------

    def wait(self, timeout: float) -> None:
        """Block until a hint or :meth:`wake`, or ``timeout`` seconds."""
        self._wake.wait(timeout)
        self._wake.clear()

    def reread_hinted(self) -> None:
        """Re-read the hinted nodes this daemon holds into the catalog; forget the others."""
        with self._hints_lock:
            hinted, self._hints = self._hints, set()
        held = self._fleet.claims.held()
        for uuid in hinted & held.keys():
            try:
                node = self._driver.get_node(uuid)
            except DriverError as exc:
                LOG.warning("cannot re-read node %s after an event: %s", uuid, exc)
                continue
            self._catalog.update(uuid, node)

    def sync_claimed(self) -> int:
        """Sync every claimed node whose snapshot or claim changed; returns how many."""
        view = self._catalog.view()
        listed = view.nodes if view is not None else {}
        held = self._fleet.claims.held()
        released = self._synced.keys() - held.keys()
        for uuid in released:
            del self._synced[uuid]
        if released:
            self._outbox.forget(released)
        synced = 0
        for uuid, claim in held.items():
            node = listed.get(uuid)
            if node is None and not self._nodes.is_known_provider(uuid):
                continue  # not listed yet, and nothing to report as gone
            if self._synced.get(uuid) == (claim.epoch, node):
                continue
            if self._fleet.act(uuid, "sync", functools.partial(self._offer, uuid, node),
                               provision_state=node.provision_state if node else None,
                               maintenance=node.maintenance if node else None,
                               gone=node is None):
                self._synced[uuid] = (claim.epoch, node)
                synced += 1
        if synced:
            self._outbox.kick()
        return synced

    def _offer(self, uuid: str, node: Node | None, claim: Claim) -> None:
        """Offer ``node``'s provider state under ``claim`` (run by Fleet.act, fence checked)."""
        if node is None:
            self._outbox.offer(uuid, claim.epoch, None)  # gone from Ironic
            return
        state = provider_from_node(node)
        if state is None:
            if uuid not in self._no_class_logged:
                self._no_class_logged.add(uuid)
                LOG.warning("node %s has no resource class: not reported to Placement", uuid)
            return
        self._outbox.offer(uuid, claim.epoch, state)
