"""The compute service: the daemon's threads and their lifetimes.

Owns the threads that run the parts :mod:`computed.cmd.daemon` builds, and the order in which they
start and stop:

* the **fleet** thread runs :meth:`computed.fleet.reconciler.Fleet.run`: join, move claims on every
  event, and on :meth:`ComputeService.stop` drain and leave. When it ends, for whatever reason,
  every other thread ends too;
* the **lease** thread makes a round trip to ZooKeeper every quarter of the session timeout, which
  keeps the fence's lease fresh (:mod:`computed.fleet.fence`);
* the **listing** thread lists Ironic's nodes when :class:`computed.daemon.listing.Listings` says
  one is due (often while the event stream cannot be trusted, rarely and by one daemon for the
  fleet while it can), on its own so that a listing of thousands of nodes never delays an event;
  a changed set wakes the fleet;
* the **heartbeat** thread (with notifications on) sends the event stream's heartbeat
  (:class:`computed.baremetal.events.Heartbeat`; every second until the first comes back);
* the **node** thread runs the sync pass (:mod:`computed.daemon.sync`: re-read the nodes events
  hint at, offer changed claimed nodes to the outbox), then retries a failed re-adoption of this
  host's instances, re-homes orphaned instances and resumes this host's unfinished instance
  operations when due (:mod:`computed.daemon.hosting`);
* the **report** thread sends the outbox to the reporters
  (:meth:`computed.providers.outbox.Outbox.run`); the end of the service does not wait for it,
  which may be in a call to the reporters (``[reporter] call_timeout``);

and the parts that bring threads of their own: the notification listener (optional), the instance
worker's RPC server and its pool. It also relays kazoo's connection states (from kazoo's
connection thread) to the fence, and each change the fence takes to the fleet
(:meth:`computed.fleet.reconciler.Fleet.session_changed`): two plain calls, neither blocks.

The parts come in three groups, built by :mod:`computed.cmd.daemon` in this order: the fleet's
(:class:`FleetParts`: session, membership, claims, fence), the provider reporting's
(:class:`ReportingParts`: Ironic, the node list, sync, outbox, events) and the instances'
(:class:`InstanceParts`: the worker and its RPC server, and hosting, built with the fleet,
which asks it on every pass).

Start: the ZooKeeper session, the listener, the threads, then the RPC server. The listener first,
so that its queue is bound before the heartbeat thread's first beats and the listing thread's
first listing, which waits for a heartbeat's round trip (:mod:`computed.daemon.listing`: one
listing at start). The listener and the RPC server are :class:`computed.runtime.rpc.Serving`,
whose start does not wait for the message bus: a daemon started before its broker joins, claims
and stays killable, and serves once the broker is up.
Stop: :meth:`stop` asks the fleet to drain and leave (or to leave at once); :meth:`close` stops
the RPC server, the worker, the threads and the listener, then the session, the audit log and the
driver. Every wait of a stop is bounded, ZooKeeper gone included: the fleet's leave waits at most
a session timeout per step (:mod:`computed.fleet.reconciler`), the caller waits for the threads
with a limit (:meth:`wait`), and the session ends through
:func:`computed.fleet.zookeeper.stop_session`, not tooz's ``stop()`` (unbounded); the
coordinator runs no tooz heartbeat (kazoo keeps the session alive, the lease thread makes the
fence's round trips), whose request would wait for ever on a ZooKeeper that is gone.

The parts the metrics read at scrape time (:mod:`computed.daemon.metrics`) are public attributes.

Threads: the service's own state is its Events (``_stop``, ``_stopping``), :attr:`error`
(written once by the fleet thread before it ends, read by the main thread after
:meth:`ComputeService.wait` joined it) and the list of threads (the main thread's alone: start,
wait, close). Each loop above is the only thread that runs its part's passes; what the parts
share between those threads, kazoo's, the listener's, the RPC server's and the metrics
endpoint's is guarded in the parts, and each module's docstring says how.
"""

from __future__ import annotations

import dataclasses
import logging
import threading
import time
from collections.abc import Callable
from typing import Any

from kazoo import exceptions as zk_exc
from kazoo.client import KazooState

from computed.baremetal.catalog import NodeCatalog
from computed.baremetal.driver import BaremetalDriver
from computed.baremetal.events import Heartbeat
from computed.daemon.hosting import Hosting
from computed.daemon.listing import Listings
from computed.daemon.nodes import FleetNodes
from computed.daemon.sync import NodeSync
from computed.fleet import zookeeper
from computed.fleet.audit import AuditLog
from computed.fleet.fence import Fence, SessionState
from computed.fleet.membership import Membership, MembershipError, fleet_root
from computed.fleet.reconciler import Fleet
from computed.instances.worker import InstanceWorker
from computed.providers.outbox import Outbox
from computed.runtime import rpc
from computed.runtime.rpc import Serving

LOG = logging.getLogger(__name__)


@dataclasses.dataclass(frozen=True)
class FleetParts:
    """The daemon in the fleet: its ZooKeeper session, and what acts on it."""

    coordinator: Any  # the tooz coordinator, which owns the session
    zookeeper: Any  # the KazooClient of the coordinator's session
    fence: Fence
    membership: Membership
    fleet: Fleet  # holds the claims
    audit: AuditLog


@dataclasses.dataclass(frozen=True)
class ReportingParts:
    """Ironic's nodes to Placement's providers: node list, events, sync pass, outbox."""

    driver: BaremetalDriver
    catalog: NodeCatalog
    nodes: FleetNodes
    listings: Listings
    sync: NodeSync
    outbox: Outbox
    listener: Serving | None  # Ironic's notifications ([ironic] notifications)
    heartbeat: Heartbeat | None  # the event stream's heartbeat (with notifications)
    heartbeat_interval: float


@dataclasses.dataclass(frozen=True)
class InstanceParts:
    """This daemon's instances: stickiness and re-homing, the worker and its RPC server."""

    hosting: Hosting
    worker: InstanceWorker
    rpc_server: Serving


class ComputeService:
    """Runs one daemon's parts in their threads, from start to close."""

    def __init__(self, fleet: FleetParts, reporting: ReportingParts, instances: InstanceParts):
        self._coordinator = fleet.coordinator
        self._zookeeper = fleet.zookeeper
        self.fence = fleet.fence
        self.membership = fleet.membership
        self.fleet = fleet.fleet
        self._audit = fleet.audit
        self._driver = reporting.driver
        self.catalog = reporting.catalog
        self._nodes = reporting.nodes
        self._listings = reporting.listings
        self.sync = reporting.sync
        self.outbox = reporting.outbox
        self._listener = reporting.listener
        self._heartbeat = reporting.heartbeat
        self._heartbeat_interval = reporting.heartbeat_interval
        self.hosting = instances.hosting
        self._worker = instances.worker
        self._rpc_server = instances.rpc_server
        self.error: Exception | None = None  # why the fleet thread ended, if it failed
        self._stop = threading.Event()
        self._stopping = threading.Event()  # stop() was called: draining to leave
        self._threads: list[threading.Thread] = []
        self._session_started = False  # start() started the coordinator: close() stops it
        self._zookeeper.add_listener(self._kazoo_state)

    # --- session -----------------------------------------------------------------------

    def _kazoo_state(self, state: str) -> None:
        # Called from kazoo's connection thread: record and wake, never block here.
        if state == KazooState.CONNECTED:
            self._session_connected()
        elif state == KazooState.SUSPENDED:
            if self.fence.suspended():
                self.fleet.session_changed(SessionState.SUSPENDED)
        elif state == KazooState.LOST:
            if self.fence.lost():
                self.fleet.session_changed(SessionState.LOST)

    def _session_connected(self) -> None:
        if self.fence.connected():
            self.fleet.session_changed(SessionState.CONNECTED)

    def _lease_loop(self) -> None:
        period = self.fence.session_timeout / 4
        root = fleet_root(self.membership.group)
        while not self._stop.is_set():
            self.fence.renew(lambda: self._zookeeper.exists_async(root).get(timeout=period))
            self._stop.wait(period)

    # --- nodes and instances -------------------------------------------------------------

    def _listing_loop(self) -> None:
        """Full listings, apart from the node thread: at 10,000 nodes a listing takes seconds,
        and an event's node must not wait behind it (issue 5's latency goal)."""
        while not self._stop.is_set():
            wait = 1.0
            failed = ""
            try:
                changed, wait = self._listings.step()
                if changed:
                    self.fleet.wake()
            except (zk_exc.ConnectionLoss, zk_exc.SessionExpiredError) as exc:
                # The listing round's record is in ZooKeeper: its trouble is the session's,
                # which the fence already acts on; one line, not a trace.
                failed = str(exc) or type(exc).__name__
            except Exception:  # a failed listing must not end the listings
                LOG.exception("node listing failed")
            if failed:  # logged outside the except: oslo.log would append the exception
                LOG.warning("node listing skipped: %s", failed)
            self.sync.wake()  # sync what the listing changed
            self._nodes.wait_for_refresh(wait)

    def _heartbeat_loop(self) -> None:
        while self._heartbeat is not None and not self._stop.is_set():
            self._heartbeat.beat()
            self._stop.wait(self._heartbeat.next_wait(self._heartbeat_interval))

    def _node_loop(self) -> None:
        while not self._stop.is_set():
            try:
                self.sync.reread_hinted()
                self.sync.sync_claimed()
            except Exception:  # one bad pass must not stop syncing
                LOG.exception("node sync pass failed")
            try:
                self.hosting.readopt()  # a re-adoption at join that failed: retry when due
                if self.hosting.rehome_orphans(self.fleet.plan, self.fleet):
                    self.fleet.wake()  # the adopted instances' nodes move to this daemon
                if self.hosting.resume_due():
                    self._worker.resume_all()
            except Exception:  # nor one bad look at instances
                LOG.exception("instance pass failed")
            self.sync.wait(1.0)

    # --- lifetime ----------------------------------------------------------------------

    def start(self, stop: threading.Event | None = None) -> bool:
        """Start the session and every thread; raises tooz's error when the session cannot be
        had (nothing is left running then; :meth:`close` still releases the parts). False,
        with nothing started, when ``stop`` was set before the session was had: the start
        waits for ZooKeeper at most a few session timeouts, and no longer once asked to stop
        (:func:`computed.fleet.zookeeper.start_session`)."""
        # No tooz heartbeat: kazoo's pings keep the session alive and the lease thread makes
        # the round trips the fence needs; tooz's heartbeat thread would only add a request
        # that, with ZooKeeper gone, waits for ever (and tooz's stop() waits for it).
        if not zookeeper.start_session(self._coordinator, self.fence.session_timeout,
                                       stop or threading.Event()):
            return False
        self._session_started = True
        # The lease must come from the timeout the server granted, not the one asked for.
        self.fence.granted(zookeeper.granted_session_timeout(
            self._zookeeper, self.fence.requested_session_timeout))
        if self._zookeeper.connected:
            self._session_connected()
        if self._listener is not None:
            # First, so its queue is bound soonest: the first listing waits for a heartbeat's
            # round trip through it, and is then the only one at start (daemon/listing.py).
            self._listener.start()
        targets: list[tuple[str, Callable[[], None]]] = [
            ("lease", self._lease_loop), ("listing", self._listing_loop),
            ("nodes", self._node_loop), ("fleet", self._run_fleet),
            ("report", self._report_loop), ("heartbeat", self._heartbeat_loop)]
        for name, target in targets:
            thread = threading.Thread(target=target, name=name, daemon=True)
            thread.start()
            if name != "report":
                self._threads.append(thread)
        self._rpc_server.start()  # instance operations (computed.instances.worker)
        return True

    def _report_loop(self) -> None:
        # Not waited for at the end: it may be in a call to the reporters for up to
        # [reporter] call_timeout, and nothing needs its answer once the daemon leaves (what is
        # not confirmed is reported again by the nodes' next holders; a late apply is fenced).
        self.outbox.run(self._stop)

    def _run_fleet(self) -> None:
        try:
            self.fleet.run()
        except MembershipError as exc:
            self.error = exc
        except Exception as exc:
            LOG.exception("the fleet thread failed; stopping the daemon")
            self.error = exc
        finally:
            self._end_threads()

    def _end_threads(self) -> None:
        self._stop.set()
        self.sync.wake()
        self._nodes.request_refresh()

    def stop(self, drain: bool = True) -> None:
        """Drain and leave (the fleet thread does it; with ``drain`` false it leaves at once),
        then stop the other threads."""
        self._stopping.set()
        self.fleet.request_stop(drain=drain)

    @property
    def stopping(self) -> bool:
        """True once :meth:`stop` was called (the drain may not have begun yet)."""
        return self._stopping.is_set()

    def wait(self, timeout: float | None = None) -> bool:
        """Wait for the service to end (the report thread aside); True when it did."""
        deadline = None if timeout is None else time.monotonic() + timeout
        for thread in self._threads:
            remaining = None if deadline is None else max(0.0, deadline - time.monotonic())
            thread.join(remaining)
        return not any(thread.is_alive() for thread in self._threads)

    @property
    def stopped(self) -> bool:
        return self._stop.is_set()

    def close(self) -> None:
        # Both servers at once: each stop waits out its poll of the broker (rpc.stop_together).
        servers = [self._rpc_server] + ([self._listener] if self._listener else [])
        rpc.stop_together(servers)
        self._worker.stop()
        # The casts in flight only hand work to the worker's pool, the notifications in flight
        # only mark nodes: short. A wait also closes its server's connection to the broker (and
        # the thread that acknowledges its messages). Both at once (rpc.wait_together).
        rpc.wait_together(servers)
        self._end_threads()
        self.wait(5)
        try:
            if self._session_started:
                # Bounded even with ZooKeeper gone (tooz's stop() is not): see stop_session.
                zookeeper.stop_session(self._coordinator, self.fence.session_timeout)
        finally:
            self._audit.close()
            self._driver.close()
