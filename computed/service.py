"""The compute service: one daemon's parts wired together, and the threads that run them.

Owns the daemon's threads and their lifetimes:

* the **fleet** thread (:class:`computed.fleet.Fleet`): membership, claims, handover;
* the **lease** thread: a round trip to ZooKeeper every quarter of the session timeout, which
  keeps the fence's lease fresh (:mod:`computed.epoch`);
* the **node** thread: lists Ironic's nodes every ``node_refresh_interval`` and, every tick, syncs
  each claimed node whose snapshot or claim changed since it was last synced, through
  :meth:`Fleet.act` (so only while the claim is provably ours).

The node list follows the last-good rule of :class:`computed.node.NodeCatalog`: when Ironic cannot
be reached, the last list that was read stays in force, so an Ironic outage never empties the
fleet's view (which would release every claim). Until a first list is read the fleet claims nothing.

Syncing a node is where reporting it to Placement plugs in (issue 5); today a sync is recorded in
the audit log with the node's state.
"""

from __future__ import annotations

import logging
import threading
import time
from typing import Any, Callable
from urllib import parse

from kazoo.client import KazooState

from computed.audit import AuditLog
from computed.driver import BaremetalDriver, DriverError, Node
from computed.epoch import Fence
from computed.fleet import Fleet
from computed.membership import Membership, MembershipError, fleet_root, kazoo_client
from computed.node import NodeCatalog

LOG = logging.getLogger(__name__)

# tooz's ZooKeeper driver uses a 10 s session when the URL names no timeout.
DEFAULT_SESSION_TIMEOUT = 10.0


def session_timeout(backend_url: str) -> float:
    """The ZooKeeper session timeout a tooz URL asks for (``?timeout=N``)."""
    values = parse.parse_qs(parse.urlsplit(backend_url).query).get("timeout")
    return float(values[-1]) if values else DEFAULT_SESSION_TIMEOUT


class ComputeService:
    def __init__(self, coordinator: Any, driver: BaremetalDriver, host: str, group: str,
                 session_timeout: float, weight: int = 1, node_refresh_interval: float = 30.0,
                 audit_path: str | None = None, join_timeout: float = 30.0,
                 drain_timeout: float = 60.0, on_sync: Callable[[Node], None] | None = None):
        self._coordinator = coordinator
        self._client = kazoo_client(coordinator)
        self._driver = driver
        self._refresh_interval = node_refresh_interval
        self._drain_timeout = drain_timeout
        self._on_sync = on_sync
        self.fence = Fence(session_timeout, on_change=self._session_changed)
        self.membership = Membership(coordinator, group, host, weight,
                                     on_change=lambda: self.fleet.wake())
        self.audit = AuditLog(audit_path, self.membership.host)
        self.fleet = Fleet(self._client, self.membership, self.fence, fleet_root(group),
                           nodes=self.node_uuids, audit=self.audit, join_timeout=join_timeout)
        self.catalog = NodeCatalog(driver)
        self._synced: dict[str, tuple[int, Node]] = {}
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
        view = self.catalog.view()
        return None if view is None else list(view.nodes)

    def refresh_nodes(self) -> bool:
        """Read Ironic's node list (the catalog keeps the last good one); True when the set of
        nodes changed."""
        before = self.catalog.view()
        try:
            after = self.catalog.refresh()
        except DriverError:
            return False  # nothing listed yet; the catalog logged why
        return before is None or before.nodes.keys() != after.nodes.keys()

    def sync_claimed(self) -> int:
        """Sync every claimed node whose snapshot or claim changed; returns how many."""
        view = self.catalog.view()
        nodes = view.nodes if view is not None else {}
        held = self.fleet.claims.held()
        for gone in self._synced.keys() - held.keys():
            del self._synced[gone]
        synced = 0
        for uuid, claim in held.items():
            node = nodes.get(uuid)
            if node is None or self._synced.get(uuid) == (claim.epoch, node):
                continue
            if self.fleet.act(uuid, "sync", self._sync_one(node),
                              provision_state=node.provision_state,
                              maintenance=node.maintenance):
                self._synced[uuid] = (claim.epoch, node)
                synced += 1
        return synced

    def _sync_one(self, node: Node) -> Callable[[Any], None] | None:
        if self._on_sync is None:
            return None
        return lambda _claim: self._on_sync(node)

    def _node_loop(self) -> None:
        next_refresh = 0.0
        while not self._stop.is_set():
            if time.monotonic() >= next_refresh:
                if self.refresh_nodes():
                    self.fleet.wake()
                next_refresh = time.monotonic() + self._refresh_interval
            try:
                self.sync_claimed()
            except Exception:  # one bad pass must not stop syncing
                LOG.exception("node sync pass failed")
            self._stop.wait(min(1.0, self._refresh_interval))

    # --- lifetime ----------------------------------------------------------------------

    def start(self) -> None:
        self._coordinator.start(start_heart=True)
        if self._client.connected:
            self.fence.connected()
        for name, target in (("lease", self._lease_loop), ("nodes", self._node_loop),
                             ("fleet", self._run_fleet)):
            thread = threading.Thread(target=target, name=name, daemon=True)
            thread.start()
            self._threads.append(thread)

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
        self.wait(5)
        try:
            self._coordinator.stop()
        finally:
            self.audit.close()
            self._driver.close()
