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
* **No event is lost to a handover.** Every daemon hears every event. A hint about a node this
  daemon does not hold is kept until a listing that started after it has read the node anyway;
  if the daemon claims the node before that (a peer died or left), the node is re-read then. So a
  change made during a failover reaches Placement as soon as the node is claimed again, not at
  the next listing. An event that adds or removes a node, and a node a fleet-wide listing found
  differing at two rounds in a row (changed with no event, or with no provider applied yet:
  :mod:`computed.daemon.listing`), is re-read by every daemon, so each
  one's set of nodes to share out follows without a full listing of its own.
* A node is synced again only when its snapshot or its claim changed since it was last synced, so
  a pass over unchanged nodes offers nothing; and a pass whose inputs are those of the last pass
  (same catalog view, claims and known providers) that left nothing to retry looks at no node
  at all (:func:`unchanged`): the every-second pass costs nothing per node while nothing
  changes.
* **Only Ironic's word about one node deletes its provider.** A claimed node the listing does
  not show, whose provider computed reported, is looked up alone and unfiltered
  (:meth:`BaremetalDriver.get_node`): not found, it is offered as gone (state None); found, it
  left this fleet's filter and is marked foreign (:meth:`FleetNodes.mark_foreign`): released,
  its provider left alone; no answer, it is asked again at the next pass. A re-read node outside
  the filter is marked foreign the same way. At most :data:`CONFIRMATIONS_PER_PASS` such
  look-ups per pass, so an empty listing never stalls the events behind thousands of them.
* **One bad node stops nothing else.** A node whose state cannot be reported (a trait Placement
  would refuse, say) is logged with its uuid once per snapshot, counted
  (:attr:`NodeSync.failing`, :attr:`NodeSync.failures`) and tried again at the next pass; the
  others are synced as if it were not there.
* A node without resource class is not reported, and logged once per process.
* A claim that goes away drops the node's pending reports (:meth:`Outbox.forget`); at send time
  :class:`ReportGate` drops a report whose claim changed claim epoch and holds one while the fence
  is closed.

Threads: :meth:`NodeSync.hint` runs on the notification listener's executor threads (several
at once), :meth:`NodeSync.wake` on any thread; the hints and :attr:`NodeSync.last_event_at` are
written under the hints lock, each keeping the latest event time, and the node thread takes
its due hints under the same lock. Everything else (the synced snapshots, the settled inputs,
:attr:`NodeSync.failing`, the counters :attr:`NodeSync.failures` and :attr:`NodeSync.examined`)
has one writer, the node thread; the metrics endpoint's request threads read ``len(failing)``
and the counters, atomic reads of built-ins. The catalog, the claims, the known providers and
the outbox guard themselves (their modules say how). :class:`ReportGate` runs on the report
thread and only reads the claim table and the fence, both locked.
"""

from __future__ import annotations

import functools
import logging
import threading
import time
from collections.abc import Callable, Mapping

from computed.baremetal.catalog import NodeCatalog
from computed.baremetal.driver import BaremetalDriver, DriverError, Node
from computed.baremetal.events import ANNOUNCED, MISSED_EVENT, MISSED_UNAPPLIED
from computed.daemon.nodes import FleetNodes
from computed.fleet.claims import Claim, ClaimTable
from computed.fleet.fence import Fence
from computed.fleet.reconciler import Fleet
from computed.providers.outbox import Outbox, Verdict
from computed.providers.state import provider_from_node

LOG = logging.getLogger(__name__)

# Events that can add or remove nodes: every daemon re-reads that node (the set of nodes shared
# out changes), not only its holder. So does a node a fleet-wide listing found changed with no
# event (computed.daemon.listing). A node it found with no provider applied yet
# (MISSED_UNAPPLIED) did not change in Ironic: a daemon that lists it and does not hold it keeps
# its listed copy; one that does not list it re-reads it (its creation may be the missed event).
LISTING_EVENTS = ("baremetal.node.create.end", "baremetal.node.delete.end")
REREAD_EVERYWHERE = frozenset(LISTING_EVENTS) | {MISSED_EVENT}
# Unfiltered look-ups of unlisted nodes per pass (see the module docstring).
CONFIRMATIONS_PER_PASS = 100


def unchanged(last: tuple[Mapping[str, Node], Mapping[str, Claim], object],
              listed: Mapping[str, Node], held: Mapping[str, Claim], version: object) -> bool:
    """Whether a sync pass's inputs are those of the ``last`` one: the same catalog mapping
    (a listing or an update makes a new one), equal claims (compared by identity first: the claim
    table hands out the same objects) and the same version of the known providers."""
    last_listed, last_held, last_version = last
    return listed is last_listed and version == last_version and held == last_held


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
        # computed.daemon.metrics for the event lag).
        self.last_event_at: float | None = None
        self._synced: dict[str, tuple[int, Node | None]] = {}  # uuid -> (claim epoch, snapshot)
        self._no_class_logged: set[str] = set()
        # Nodes whose state could not be offered -> the snapshot that failed (logged once each).
        self.failing: dict[str, Node | None] = {}
        self.failures = 0  # failed attempts since start (read by computed.daemon.metrics)
        # uuid -> (monotonic time of its latest event, re-read even if not held)
        self._hints: dict[str, tuple[float, bool]] = {}
        self._hints_lock = threading.Lock()
        self._wake = threading.Event()
        # The inputs of the last pass that left nothing to retry (see sync_claimed), and the
        # nodes passes looked at since start (read by tests: an idle pass looks at none).
        self._settled: tuple[Mapping[str, Node], Mapping[str, Claim], object] | None = None
        self.examined = 0

    # --- any thread ------------------------------------------------------------------------

    def hint(self, uuid: str, event_type: str) -> None:
        """An Ironic notification about ``uuid`` (from the listener's thread): look again."""
        now = self._clock()
        everywhere = event_type in REREAD_EVERYWHERE or (event_type == MISSED_UNAPPLIED
                                                         and not self._lists(uuid))
        with self._hints_lock:
            # Listener threads race: a time read earlier may get here later. The later time
            # stays, or a listing started between two events would drop the second one's hint.
            at, before = self._hints.get(uuid, (now, False))
            self._hints[uuid] = (max(at, now), everywhere or before)
            if event_type not in ANNOUNCED and (self.last_event_at is None
                                                or now > self.last_event_at):
                self.last_event_at = now
        self._wake.set()

    def _lists(self, uuid: str) -> bool:
        """Whether the catalog lists ``uuid`` (one reference read: any thread)."""
        view = self._catalog.view()
        return view is not None and uuid in view.nodes

    def wake(self) -> None:
        """Run the next pass now (the listing changed, or the daemon stops)."""
        self._wake.set()

    # --- the node thread -------------------------------------------------------------------

    def wait(self, timeout: float) -> None:
        """Block until a hint or :meth:`wake`, or ``timeout`` seconds."""
        self._wake.wait(timeout)
        self._wake.clear()

    def reread_hinted(self) -> None:
        """Re-read into the catalog the hinted nodes this daemon holds, and those whose event
        may add or remove a node (:data:`REREAD_EVERYWHERE`). Other hints wait for a claim, or
        for a listing that started after them."""
        view = self._catalog.view()
        if view is None:
            return  # nothing listed yet: the first listing reads every node
        held = self._fleet.claims.held()
        with self._hints_lock:
            due = [uuid for uuid, (_, everywhere) in self._hints.items()
                   if everywhere or uuid in held]
            for uuid in due:
                del self._hints[uuid]
            for uuid in [u for u, (at, _) in self._hints.items() if at < view.listed_at]:
                del self._hints[uuid]  # the listing read the node after its event
        shared_changed = False
        for uuid in due:
            try:
                node = self._driver.get_node(uuid)
            except DriverError as exc:
                LOG.warning("cannot re-read node %s after an event: %s", uuid, exc)
                if uuid not in held:  # ask again at the next pass: a node may come or go
                    with self._hints_lock:
                        self._hints.setdefault(uuid, (self._clock(), True))
                continue
            known = uuid in view.nodes
            if node is not None and not self._driver.lists(node):
                if known or uuid in held:
                    self._leave_to_another_fleet(uuid)
                continue  # another fleet's node: not ours to list
            if node is None and known:
                # Gone from Ironic: it stays shared out while its provider exists, so read the
                # providers first (this one may have been reported since the last read).
                self._nodes.refresh_providers()
            self._catalog.update(uuid, node)
            shared_changed = shared_changed or known != (node is not None)
        if shared_changed:
            self._fleet.wake()  # a node came or went: the plan changes

    def _leave_to_another_fleet(self, uuid: str) -> None:
        LOG.info("node %s is outside this fleet's filter now: releasing it, its provider is "
                 "left alone", uuid)
        self._nodes.mark_foreign(uuid)
        self._catalog.update(uuid, None)
        self._fleet.wake()

    def sync_claimed(self) -> int:
        """Sync every claimed node whose snapshot or claim changed; returns how many.

        A pass whose inputs (the catalog's nodes, the claims, the known providers) are those of
        the last pass, when that pass left nothing to retry, looks at no node."""
        view = self._catalog.view()
        listed = view.nodes if view is not None else {}
        held = self._fleet.claims.held()
        version = self._nodes.version
        if self._settled is not None and unchanged(self._settled, listed, held, version):
            return 0
        released = self._synced.keys() - held.keys()
        for uuid in released:
            del self._synced[uuid]
        if released:
            self._outbox.forget(released)
        for uuid in list(self.failing):
            if uuid not in held:
                del self.failing[uuid]
        synced = 0
        lookups = CONFIRMATIONS_PER_PASS
        complete = True  # every node synced or unchanged: nothing to retry at the next pass
        for uuid, claim in held.items():
            self.examined += 1
            node = listed.get(uuid)
            if node is None and (not self._nodes.is_known_provider(uuid)
                                 or self._nodes.is_foreign(uuid)):
                continue  # not listed yet (or another fleet's): nothing to report as gone
            record = self._synced.get(uuid)
            if record is not None and record[0] == claim.epoch and record[1] == node:
                # The catalog keeps an unchanged node's object; an equal copy here is a node that
                # changed and changed back: keep it, so the next look is by identity.
                if record[1] is not node:
                    self._synced[uuid] = (claim.epoch, node)
                continue
            if node is None:
                if lookups == 0:
                    complete = False
                    continue  # the next pass asks
                lookups -= 1
                if not self._confirmed_gone(uuid):
                    complete = False
                    continue
            if self._sync_one(uuid, node, claim):
                self._synced[uuid] = (claim.epoch, node)
                synced += 1
            else:
                complete = False
        self._settled = (listed, held, version) if complete else None
        if synced:
            self._outbox.kick()
        return synced

    def _confirmed_gone(self, uuid: str) -> bool:
        """Ask Ironic for the unlisted node ``uuid`` alone: True when it is gone (a 404)."""
        try:
            node = self._driver.get_node(uuid)
        except DriverError as exc:
            LOG.warning("node %s is not listed and cannot be looked up (%s): its provider "
                        "stays until Ironic answers", uuid, exc)
            return False
        if node is None:
            return True
        if self._driver.lists(node):
            self._catalog.update(uuid, node)  # listed meanwhile: synced from this copy
            return False
        self._leave_to_another_fleet(uuid)
        return False

    def _sync_one(self, uuid: str, node: Node | None, claim: Claim) -> bool:
        """Sync one node through Fleet.act; a failure is this node's alone."""
        try:
            acted = self._fleet.act(uuid, "sync", functools.partial(self._offer, uuid, node),
                                    provision_state=node.provision_state if node else None,
                                    maintenance=node.maintenance if node else None,
                                    gone=node is None)
        except Exception as exc:  # this node's state cannot be reported: the others go on
            self.failures += 1
            if uuid not in self.failing or self.failing[uuid] != node:
                LOG.error("node %s cannot be reported, retrying at every pass: %s", uuid, exc)
            self.failing[uuid] = node
            return False
        self.failing.pop(uuid, None)
        return acted

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
