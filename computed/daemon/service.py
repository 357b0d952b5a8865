"""The compute service: one daemon's parts wired together, and the threads that run them.

Owns the daemon's threads and their lifetimes:

* the **fleet** thread (:class:`computed.fleet.reconciler.Fleet`): membership, claims, handover;
* the **lease** thread: a round trip to ZooKeeper every quarter of the session timeout, which
  keeps the fence's lease fresh (:mod:`computed.fleet.fence`);
* the **listing** thread: lists Ironic's nodes every ``node_refresh_interval`` (and soon after an
  event that adds or removes a node), on its own so that a listing of thousands of nodes never
  delays an event;
* the **node** thread: re-reads single nodes that Ironic's notifications hint at
  (:mod:`computed.baremetal.events`), and syncs every claimed node whose snapshot or claim changed since it
  was last synced, through :meth:`Fleet.act` (so only while the claim is provably ours). Syncing a
  node offers its provider state to the outbox. It also re-homes orphaned instances when due;
* the **report** thread: sends the outbox to the reporters (:class:`computed.providers.outbox.Outbox`).

What the fleet manages is every node Ironic lists plus every provider computed reported whose node
Ironic no longer lists: the owner of such a uuid reports it gone, and the reporter deletes the
provider if it has no allocations. A provider is never deleted because its owner changed.

The node list follows the last-good rule of :class:`computed.baremetal.catalog.NodeCatalog`: when Ironic cannot
be reached, the last list read stays in force, so an Ironic outage never empties the fleet's view
(which would release every claim). Until a first list is read the fleet claims nothing.
"""

from __future__ import annotations

import logging
import threading
import time
from typing import Any, Callable, Mapping
from urllib import parse

from kazoo.client import KazooState

from computed.fleet.audit import AuditLog
from computed.fleet.claims import Claim
from computed.db import api as db_api
from computed.baremetal.driver import BaremetalDriver, DriverError, Node
from computed.fleet.fence import Fence
from computed.fleet.reconciler import Fleet
from computed.fleet.membership import Membership, MembershipError, fleet_root, kazoo_client
from computed.baremetal.catalog import NodeCatalog
from computed.providers.state import provider_from_node
from computed.fleet.rehome import Rehomer, readopt_own
from computed.providers.outbox import Outbox, Verdict

LOG = logging.getLogger(__name__)

# tooz's ZooKeeper driver uses a 10 s session when the URL names no timeout.
DEFAULT_SESSION_TIMEOUT = 10.0
# Seconds between two looks for this host's instances left in a transitional state.
RESUME_INTERVAL = 60.0
# Events that can add or remove nodes: they call for a full listing, not a single re-read.
LISTING_EVENTS = ("baremetal.node.create.end", "baremetal.node.delete.end")


def session_timeout(backend_url: str) -> float:
    """The ZooKeeper session timeout a tooz URL asks for (``?timeout=N``)."""
    values = parse.parse_qs(parse.urlsplit(backend_url).query).get("timeout")
    return float(values[-1]) if values else DEFAULT_SESSION_TIMEOUT


class ComputeService:
    def __init__(self, coordinator: Any, driver: BaremetalDriver, host: str, group: str,
                 session_timeout: float, weight: int = 1, node_refresh_interval: float = 30.0,
                 audit_path: str | None = None, join_timeout: float = 30.0,
                 drain_timeout: float = 60.0,
                 outbox: Callable[[Any], Outbox] | None = None,
                 engine: Any | None = None, rehome_grace: float = 120.0,
                 events: Callable[[Callable[[str, str], None]], Any] | None = None):
        self._coordinator = coordinator
        self._client = kazoo_client(coordinator)
        self._driver = driver
        self._refresh_interval = node_refresh_interval
        self._drain_timeout = drain_timeout
        self._engine = engine
        self.fence = Fence(session_timeout, on_change=self._session_changed)
        self.membership = Membership(coordinator, group, host, weight,
                                     on_change=lambda: self.fleet.wake())
        self.audit = AuditLog(audit_path, self.membership.host)
        self.fleet = Fleet(self._client, self.membership, self.fence, fleet_root(group),
                           nodes=self.node_uuids, audit=self.audit, join_timeout=join_timeout,
                           instance_hosts=self._instance_hosts, on_joined=self._joined)
        self.rehomer = (Rehomer(engine, self.membership.host, rehome_grace)
                        if engine is not None else None)
        self.catalog = NodeCatalog(driver)
        self.outbox = outbox(self) if outbox is not None else None
        self._listener = events(self.node_hint) if events is not None else None
        self._providers: frozenset[str] = frozenset()
        self._sticky: Mapping[str, str] = {}
        self.worker: Any = None  # computed.instances.worker.InstanceWorker, set by the daemon's wiring
        self._synced: dict[str, tuple[int, Node | None]] = {}
        self._no_class_logged: set[str] = set()
        self._hints: set[str] = set()
        self._hints_lock = threading.Lock()
        self._refresh_soon = threading.Event()
        self._node_wake = threading.Event()
        self.error: Exception | None = None  # why the fleet thread ended, if it failed
        self._stop = threading.Event()
        self._threads: list[threading.Thread] = []
        self._client.add_listener(self._kazoo_state)

    # --- session -----------------------------------------------------------------------

    def _kazoo_state(self, state: str) -> None:
        # Called from kazoo's connection thread: record and wake, never block here.
        if state == KazooState.CONNECTED:
            self.fence.connected()
        elif state == KazooState.SUSPENDED:
            self.fence.suspended()
        elif state == KazooState.LOST:
            self.fence.lost()

    def _session_changed(self, state: Any) -> None:
        self.fleet.session_changed(state)

    def _lease_loop(self) -> None:
        period = self.fence.session_timeout / 4
        root = fleet_root(self.membership.group)
        while not self._stop.is_set():
            self.fence.renew(lambda: self._client.exists_async(root).get(timeout=period))
            self._stop.wait(period)

    # --- nodes -------------------------------------------------------------------------

    def node_uuids(self) -> list[str] | None:
        """What the fleet shares out: Ironic's nodes and providers whose node is gone."""
        view = self.catalog.view()
        if view is None:
            return None
        return list(set(view.nodes) | self._providers)

    def refresh_nodes(self) -> bool:
        """Read Ironic's node list (the catalog keeps the last good one) and the known
        providers; True when the set of uuids to share changed."""
        before = self.node_uuids()
        try:
            self.catalog.refresh()
        except DriverError:
            return False  # nothing listed yet; the catalog logged why
        if self._engine is not None:
            try:
                self._providers = frozenset(db_api.provider_uuids(self._engine))
            except Exception as exc:  # the database is a hint here: keep the last set
                LOG.warning("cannot read known providers: %s", exc)
        after = self.node_uuids()
        return before is None or set(before) != set(after or ())

    # --- instances ---------------------------------------------------------------------

    def _instance_hosts(self) -> Mapping[str, str]:
        """Nodes hosting live instances -> the instances' hosts (for stickiness)."""
        if self._engine is None:
            return {}
        try:
            self._sticky = db_api.instance_hosts(self._engine)
        except Exception as exc:  # keep the last answer: dropping stickiness would move nodes
            LOG.warning("cannot read instance hosts, keeping the last ones: %s", exc)
        return self._sticky

    def _joined(self, member_epoch: int) -> None:
        """A (re)join: keep this host's instances under its new member epoch."""
        if self._engine is None:
            return
        moved = readopt_own(self._engine, self.membership.host, member_epoch)
        if moved:
            LOG.info("kept %d instance(s) of this host under member epoch %s", len(moved),
                     member_epoch)
        if self.worker is not None:
            self.worker.resume_all()  # finish what a previous life left half done

    def rehome_orphans(self) -> list[str]:
        """Adopt instances orphaned for longer than the grace period, if this daemon is their
        adopter; returns the adopted instance uuids."""
        ownership = self.fleet.ownership
        if self.rehomer is None or ownership is None:
            return []
        members = [m.as_ring_member() for m in self.fleet.members]
        adopted = self.rehomer.step(members, ownership.orphans, self.membership.epoch)
        for uuid in adopted:
            self.audit.record("rehome", instance=uuid, member_epoch=self.membership.epoch)
        if adopted:
            self.fleet.wake()
            if self.worker is not None:
                self.worker.resume_all()
        return adopted

    # --- events --------------------------------------------------------------------------

    def node_hint(self, uuid: str, event_type: str) -> None:
        """An Ironic notification about ``uuid`` (from the listener's thread): look again."""
        self.last_event_at = time.monotonic()  # read by computed.runtime.metrics (event lag)
        if event_type in LISTING_EVENTS:
            self._refresh_soon.set()
        with self._hints_lock:
            self._hints.add(uuid)
        self._node_wake.set()

    def _reread_hinted(self) -> None:
        with self._hints_lock:
            hinted, self._hints = self._hints, set()
        held = self.fleet.claims.held()
        for uuid in hinted & held.keys():
            try:
                node = self._driver.get_node(uuid)
            except DriverError as exc:
                LOG.warning("cannot re-read node %s after an event: %s", uuid, exc)
                continue
            self.catalog.update(uuid, node)

    def sync_claimed(self) -> int:
        """Sync every claimed node whose snapshot or claim changed; returns how many."""
        view = self.catalog.view()
        nodes = view.nodes if view is not None else {}
        held = self.fleet.claims.held()
        gone = self._synced.keys() - held.keys()
        for uuid in gone:
            del self._synced[uuid]
        if gone and self.outbox is not None:
            self.outbox.forget(gone)
        synced = 0
        for uuid, claim in held.items():
            node = nodes.get(uuid)
            if node is None and uuid not in self._providers:
                continue  # not listed yet, and nothing to report as gone
            if self._synced.get(uuid) == (claim.epoch, node):
                continue
            if self.fleet.act(uuid, "sync", self._reporter(node, uuid),
                              provision_state=node.provision_state if node else None,
                              maintenance=node.maintenance if node else None,
                              gone=node is None):
                self._synced[uuid] = (claim.epoch, node)
                synced += 1
        if synced and self.outbox is not None:
            self.outbox.kick()
        return synced

    def _reporter(self, node: Node | None, uuid: str) -> Callable[[Claim], None] | None:
        if self.outbox is None:
            return None

        def report(claim: Claim) -> None:
            if node is None:
                self.outbox.offer(uuid, claim.epoch, None)  # gone from Ironic
                return
            state = provider_from_node(node)
            if state is None:
                if uuid not in self._no_class_logged:
                    self._no_class_logged.add(uuid)
                    LOG.warning("node %s has no resource class: not reported to Placement",
                                uuid)
                return
            self.outbox.offer(uuid, claim.epoch, state)
        return report

    def _listing_loop(self) -> None:
        """Full listings, apart from the node thread: at 10,000 nodes a listing takes seconds,
        and an event's node must not wait behind it (issue 5's latency goal)."""
        while not self._stop.is_set():
            self._refresh_soon.clear()
            try:
                if self.refresh_nodes():
                    self.fleet.wake()
            except Exception:  # a failed listing must not end the listings
                LOG.exception("node listing failed")
            self._node_wake.set()  # sync what the listing changed
            self._refresh_soon.wait(self._refresh_interval)

    def _node_loop(self) -> None:
        next_resume = time.monotonic() + RESUME_INTERVAL
        while not self._stop.is_set():
            if self.worker is not None and time.monotonic() >= next_resume:
                # A cast sent while no daemon consumed its queue is lost: whatever is left in
                # a transitional state is picked up here.
                self.worker.resume_all()
                next_resume = time.monotonic() + RESUME_INTERVAL
            try:
                self._reread_hinted()
                self.sync_claimed()
                self.rehome_orphans()
            except Exception:  # one bad pass must not stop syncing
                LOG.exception("node sync pass failed")
            self._node_wake.wait(min(1.0, self._refresh_interval))
            self._node_wake.clear()

    # --- lifetime ----------------------------------------------------------------------

    def verdict(self, uuid: str, claim_epoch: int) -> Verdict:
        """The outbox's gate: send; hold (the claim is ours but the fence is closed for now);
        drop (no longer our claim with that claim epoch)."""
        claim = self.fleet.claims.get(uuid)
        if claim is None or claim.epoch != claim_epoch:
            return Verdict.DROP
        return Verdict.SEND if self.fence.may_act(claim.generation) else Verdict.HOLD

    def start(self) -> None:
        self._coordinator.start(start_heart=True)
        if self._client.connected:
            self.fence.connected()
        targets = [("lease", self._lease_loop), ("listing", self._listing_loop),
                   ("nodes", self._node_loop), ("fleet", self._run_fleet)]
        if self.outbox is not None:
            targets.append(("report", lambda: self.outbox.run(self._stop)))
        for name, target in targets:
            thread = threading.Thread(target=target, name=name, daemon=True)
            thread.start()
            self._threads.append(thread)
        if self._listener is not None:
            self._listener.start()

    def _run_fleet(self) -> None:
        try:
            self.fleet.run(drain_timeout=self._drain_timeout)
        except MembershipError as exc:
            self.error = exc
        except Exception as exc:
            LOG.exception("the fleet thread failed; stopping the daemon")
            self.error = exc
        finally:
            self._stop.set()
            self._node_wake.set()
            self._refresh_soon.set()

    def stop(self) -> None:
        """Drain and leave (the fleet thread does it), then stop the other threads."""
        self.fleet.request_stop()

    def wait(self, timeout: float | None = None) -> bool:
        """Wait for the service to end; True when it did."""
        deadline = None if timeout is None else time.monotonic() + timeout
        for thread in self._threads:
            remaining = None if deadline is None else max(0.0, deadline - time.monotonic())
            thread.join(remaining)
        return not any(thread.is_alive() for thread in self._threads)

    @property
    def stopped(self) -> bool:
        return self._stop.is_set()

    def close(self) -> None:
        self._stop.set()
        self._node_wake.set()
        self._refresh_soon.set()
        if self._listener is not None:
            try:
                self._listener.stop()
                self._listener.wait()
            except Exception:
                LOG.exception("stopping the notification listener failed")
        self.wait(5)
        try:
            self._coordinator.stop()
        finally:
            self.audit.close()
            self._driver.close()

