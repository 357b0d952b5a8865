"""The daemon's metrics and health: what a :class:`ComputeService` shows at scrape time.

Owns what ``/metrics`` and ``/healthz`` of a ``computed`` daemon say (served by
:mod:`computed.runtime.metrics`): the fleet state, the ZooKeeper session and lease, members,
claims, the node list from Ironic, reports, events, the sync pass and the instances' hosting,
read from the service's parts when scraped. A daemon is healthy when its ZooKeeper session is
connected, it is an active member of the fleet (not joining, suspended or draining) and it has a
node list from Ironic (a stale list is still healthy: the last-good rule keeps it in force).

Guarantees: nothing here writes; the health check does no I/O; only the member count reads
ZooKeeper, and only while the session is connected; a failing read leaves its metric out rather
than failing the scrape. Threads: the metrics endpoint's request threads read the parts, each of
which is safe to read from any thread (see their modules).
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable, Iterator
from typing import TYPE_CHECKING

from oslo_config import cfg
from prometheus_client.core import Metric

from computed.fleet.fence import SessionState
from computed.fleet.reconciler import FleetState
from computed.runtime import metrics
from computed.runtime.metrics import Health, counter, gauge, states

if TYPE_CHECKING:  # only for hints: the service imports every part of the daemon
    from computed.daemon.service import ComputeService

LOG = logging.getLogger(__name__)


def daemon_health(service: ComputeService) -> Health:
    """Whether a :class:`ComputeService` does its job now, and why not (no I/O)."""
    if service.stopped:
        return Health(False, "stopped")
    if service.stopping:
        # From the signal on, not from the fleet thread's next pass: a load balancer takes the
        # daemon out before its drain has begun.
        return Health(False, "stopping: draining, then leaving")
    session = service.fence.state
    if session is not SessionState.CONNECTED:
        return Health(False, f"zookeeper session {session.value}")
    state = service.fleet.state
    if state is not FleetState.ACTIVE:
        return Health(False, f"fleet state {state.value}")
    view = service.catalog.view()
    if view is None:
        return Health(False, "no node list from Ironic yet")
    stale = f", Ironic unreachable for {view.failures} listing(s)" if view.stale else ""
    return Health(True, f"ok: {len(service.fleet.claims.held())} nodes owned of "
                  f"{len(view)} listed{stale}")


def describe(service: ComputeService) -> str:
    """One line for ``systemctl status``: fleet state, session, nodes, reports."""
    view = service.catalog.view()
    listed = "no node list yet" if view is None else f"{len(view)} listed"
    text = (f"{service.fleet.state.value}, session {service.fence.state.value}; "
            f"{len(service.fleet.claims.held())} nodes owned, {listed}")
    return text + f"; {service.outbox.pending()} reports pending"


class DaemonCollector:
    """Reads a :class:`ComputeService` at scrape time."""

    def __init__(self, service: ComputeService, clock: Callable[[], float] = time.monotonic):
        self._service = service
        self._clock = clock

    def collect(self) -> Iterator[Metric]:
        service = self._service
        fleet, fence = service.fleet, service.fence
        yield gauge("up", "1 while /healthz answers 200 (see its reason otherwise).",
                    1.0 if daemon_health(service).ok else 0.0)
        yield states("fleet_state", "This daemon's state in the fleet.", fleet.state,
                     FleetState)
        yield states("zookeeper_session_state", "The fence's view of the ZooKeeper session.",
                     fence.state, SessionState)
        yield gauge("lease_remaining_seconds", "Seconds the fence may still act without a "
                    "ZooKeeper round trip (0: acting on nothing).", fence.lease_remaining())
        yield gauge("zookeeper_session_timeout_seconds", "The session timeout ZooKeeper "
                    "granted (it clamps the one backend_url asks for); the lease is 2/3 of it.",
                    fence.session_timeout)
        yield gauge("member_epoch", "Epoch of this daemon's fleet membership (new on every "
                    "join).", float(service.membership.member_epoch))
        yield from self._members()
        yield gauge("nodes_owned", "Nodes this daemon holds a claim on.",
                    float(len(fleet.claims.held())))
        yield from self._claim_events()
        yield counter("fleet_passes", "Reconcile passes of the fleet "
                      "thread.", value=float(fleet.passes))
        yield from self._ironic()
        yield from self._reports()
        yield from self._events()
        yield from self._sync()
        yield from self._hosting()

    def _members(self) -> Iterator[Metric]:
        # The only read that leaves the process: skip it when the session is in doubt, so a
        # scrape never waits on a ZooKeeper that is away.
        if self._service.fence.state is not SessionState.CONNECTED:
            return
        try:
            members = self._service.membership.members()
        except Exception as exc:
            LOG.debug("metrics: cannot read the fleet's members: %s", exc)
            return
        yield gauge("fleet_members", "Live members of the fleet, this daemon included.",
                    float(len(members)))
        yield gauge("fleet_members_draining", "Members of the fleet marked draining.",
                    float(sum(1 for m in members if m.draining)))
        yield gauge("fleet_group_entries_ignored", "Children of the fleet's group that are "
                    "not live daemons (e.g. a persistent znode planted there): never on the "
                    "ring; 'computed-manage fleet status' names them.",
                    float(len(self._service.membership.ignored())))

    def _claim_events(self) -> Iterator[Metric]:
        family = counter("claim_events", "Claims this process made and "
                         "released (handovers and drains; claims dropped with a "
                         "lost session are not counted).", labels=["event"])
        family.add_metric(["claim"], float(self._service.fleet.claimed))
        family.add_metric(["release"], float(self._service.fleet.released))
        yield family

    def _ironic(self) -> Iterator[Metric]:
        view = self._service.catalog.view()
        if view is None:
            yield gauge("ironic_nodes_listed", "Nodes in the last good list from Ironic.", 0.0)
            return
        yield gauge("ironic_nodes_listed", "Nodes in the last good list from Ironic.",
                    float(len(view)))
        yield gauge("ironic_list_age_seconds", "Seconds since the node list in force was "
                    "read from Ironic.", view.age(self._clock()))
        yield gauge("ironic_list_stale", "1 when the last listing failed and the last good "
                    "list is kept.", 1.0 if view.stale else 0.0)
        yield gauge("ironic_list_failures", "Listings from Ironic failed in a row.",
                    float(view.failures))

    def _reports(self) -> Iterator[Metric]:
        outbox = self._service.outbox
        yield counter("reports_sent", "Provider reports sent to the "
                      "reporters (a report sent again counts again).",
                      value=float(outbox.sent))
        yield gauge("reports_pending", "Provider reports waiting to be sent or confirmed.",
                    float(outbox.pending()))
        yield gauge("report_send_failures", "Batches of reports that failed in a row "
                    "(broker or reporters away); 0 after a success.", float(outbox.failures))

    def _sync(self) -> Iterator[Metric]:
        sync = self._service.sync
        yield gauge("nodes_sync_failing", "Claimed nodes whose provider state cannot be "
                    "reported (the log names each); retried every pass.", float(len(sync.failing)))
        yield counter("node_sync_failures", "Attempts to sync a node that "
                      "failed (a node that cannot become a provider).",
                      value=float(sync.failures))

    def _hosting(self) -> Iterator[Metric]:
        hosting = self._service.hosting
        yield gauge("instances_readopt_pending", "1 while this host's instances are not yet "
                    "under its current member epoch (a re-adoption at join failed and is being "
                    "retried); nothing of this host is resumed meanwhile.",
                    1.0 if hosting.readopt_pending else 0.0)
        yield counter("instances_readopt_failures", "Re-adoptions of this "
                      "host's instances at a join that failed (the database; "
                      "retried with backoff, the log names the cause).",
                      value=float(hosting.readopt_failures))

    def _events(self) -> Iterator[Metric]:
        last = self._service.sync.last_event_at
        if last is not None:
            yield gauge("ironic_last_event_age_seconds", "Seconds since the last Ironic "
                        "notification arrived.", self._clock() - last)


def serve_daemon(conf: cfg.ConfigOpts, service: ComputeService) -> metrics.Endpoint:
    """Start the daemon's endpoint on ``[metrics] port`` (a no-op object when it is 0)."""
    return metrics.serve(conf.metrics.bind_host, conf.metrics.port, DaemonCollector(service),
                         lambda: daemon_health(service), "port")
