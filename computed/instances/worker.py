"""The daemon's instance worker: the RPC endpoint that runs instance operations on owned nodes.

Owns the server side of :mod:`computed.instances.rpcapi` (topic ``computed``, one queue per
host, version 1.2): ``build_instance``, ``delete_instance``, ``reboot_instance``,
``stop_instance``, ``start_instance`` and (1.2) ``rebuild_instance``, each with an
``instance_uuid`` and (1.1) the sender's ``member_epoch``; ``rebuild_instance`` also takes
``preserve_ephemeral`` (a boolean). The calls are casts: the endpoint validates the request,
queues the operation and returns; a pool of worker threads runs the operations of
:mod:`computed.instances.lifecycle`, which block while Ironic works.

Guarantees:

* **Addressed to this daemon's life.** A cast carrying a member epoch that is not this daemon's
  current one (sent for a previous life of this host, before it rejoined) is refused with one
  warning line and runs nothing; the instance's recorded transitional state is resumed instead
  (below), under the member epoch the row now has. A cast without one (a 1.0 sender) is served.
* An operation runs only through :meth:`computed.fleet.reconciler.Fleet.act`, i.e. while this
  daemon holds the claim on the instance's node and its fence allows acting, and under the
  claim's :class:`computed.fleet.claims.ClaimGuard`, checked before every Ironic write: once the
  claim is lost the operation stops writing (one warning line), leaving the instance in its
  transitional state for the node's next holder. A node can be sticky to this daemon before its
  claim is taken (a build cast right after scheduling, an instance just re-homed): the operation
  is *parked* (no worker thread waits) and run as soon as the claim is held, for up to
  ``claim_wait`` seconds, then left to :meth:`resume_all` with one log line. One waiter thread
  looks at the parked operations every :data:`PARK_POLL` seconds, so casts for nodes this
  daemon does not hold never hold up the others.
* **Only this daemon's instances.** An operation on an instance whose row names another host,
  or another member epoch of this one, is refused at once in one line (its owner runs it, or
  the re-adoption of this host's instances has not happened yet): it never waits for a claim.
* **Nothing recorded is lost.** :meth:`resume_all` (the daemon calls it after every (re)join and
  adoption and every ``[fleet] resume_interval`` seconds) resumes every instance of this host
  and member epoch that is in a transitional state and not queued or running here: the ones
  whose cast was lost, or whose previous owner died mid-operation.
* Every database write of an operation is a compare-and-set on (host, member epoch)
  (:mod:`computed.instances.lifecycle`), so an operation started by a daemon that lost the
  instance stops at its first write (one warning line: fencing at work, not a failure; so does a
  build whose instance a delete moved to DELETING meanwhile, the delete then tearing it down).
* One operation per instance at a time in this process; a second request for an instance that
  is busy waits its turn.
* Each operation is announced by the versioned notifications of
  :mod:`computed.instances.notifications` (``instance.create.start`` ... ``.end``/``.error``).
* A build that failed on its node and was moved to another one (:mod:`computed.instances.
  reschedule`) is cast to the new node's owner (``build_instance`` on its host's queue, with
  the row's member epoch), which may be this daemon.
* What the bus may call is :attr:`InstanceWorker.rpc_methods` only, and a message reaches it
  only once :mod:`computed.runtime.rpc` accepted its envelope (signed when ``[messaging]
  signing_keys`` is set). A malformed request (not a canonical uuid, a member epoch that is not
  an integer, a ``preserve_ephemeral`` that is not a boolean, an unknown argument) is logged in
  one line and dropped, and an operation the instance's state or owner does not allow is logged
  as stopped, in one line; an operation that fails is logged with the instance uuid and never
  kills the worker.

Threads: oslo.messaging's dispatch threads call the endpoint methods (which only queue); the
pool's threads run operations and resumes; the waiter thread moves parked operations back to
the pool. ``_busy`` and ``_parked`` are behind their locks.
"""

from __future__ import annotations

import collections
import dataclasses
import logging
import threading
import time
import uuid as uuid_lib
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from typing import Any

import oslo_messaging

from computed.db import instances as db_instances
from computed.db import models
from computed.db.instances import InstanceConflict, InstanceNotFound
from computed.fleet.claims import Claim, NotOurs
from computed.fleet.membership import Membership
from computed.instances import lifecycle, rpcapi
from computed.instances.notifications import InstanceNotifier

LOG = logging.getLogger(__name__)

#: Seconds between two looks of the waiter thread at the parked operations' claims.
PARK_POLL = 0.2

OPERATIONS = {
    "build_instance": lifecycle.build,
    "delete_instance": lifecycle.delete,
    "reboot_instance": lifecycle.reboot,
    "stop_instance": lifecycle.stop,
    "start_instance": lifecycle.start,
    "rebuild_instance": lifecycle.rebuild,
}


class InstanceWorker:
    """Queues instance operations and runs them while the node's claim is held."""

    # The endpoint's RPC version (see computed.instances.rpcapi): 1.1 added member_epoch, 1.2
    # rebuild_instance.
    target = oslo_messaging.Target(version=rpcapi.VERSION)
    # What the bus may call (computed.runtime.rpc): not submit, stop or the other public methods.
    rpc_methods = frozenset(OPERATIONS)

    def __init__(self, fleet: Any, owner: lifecycle.Owner, workers: int = 8,
                 claim_wait: float = 30.0, compute: rpcapi.ComputeAPI | None = None,
                 notifier: InstanceNotifier | None = None, membership: Membership | None = None):
        """``owner`` is the daemon its operations act as; they act under ``membership``'s member
        epoch at the time (the last join's), or the owner's own without a membership (tools,
        tests)."""
        self._fleet = fleet
        self._daemon = owner
        self._membership = membership
        self._compute = compute  # where a build moved to another node is handed over
        self._notifier = notifier
        self._claim_wait = claim_wait
        self._pool = ThreadPoolExecutor(max(1, workers), thread_name_prefix="instance")
        self._stripes = [threading.Lock() for _ in range(64)]
        self._stopping = False
        # Instances with an operation queued or running here (resume_all leaves them alone).
        self._busy: collections.Counter[str] = collections.Counter()
        self._busy_lock = threading.Lock()
        # Operations waiting for their node's claim: (deadline, node, instance, what, retry).
        self._parked: list[tuple[float, str, str, str, Callable[[], None]]] = []
        self._parked_lock = threading.Lock()
        self._waiter: threading.Thread | None = None

    def _owner(self) -> lifecycle.Owner:
        if self._membership is None:
            return self._daemon
        return dataclasses.replace(self._daemon, member_epoch=self._membership.member_epoch)

    # --- RPC endpoint (oslo.messaging dispatches on these names) --------------------------

    def build_instance(self, ctxt: Any, instance_uuid: Any = None, member_epoch: Any = None,
                       **unknown: Any) -> None:
        self.submit("build_instance", instance_uuid, member_epoch, unknown)

    def delete_instance(self, ctxt: Any, instance_uuid: Any = None, member_epoch: Any = None,
                        **unknown: Any) -> None:
        self.submit("delete_instance", instance_uuid, member_epoch, unknown)

    def reboot_instance(self, ctxt: Any, instance_uuid: Any = None, member_epoch: Any = None,
                        **unknown: Any) -> None:
        self.submit("reboot_instance", instance_uuid, member_epoch, unknown)

    def stop_instance(self, ctxt: Any, instance_uuid: Any = None, member_epoch: Any = None,
                      **unknown: Any) -> None:
        self.submit("stop_instance", instance_uuid, member_epoch, unknown)

    def start_instance(self, ctxt: Any, instance_uuid: Any = None, member_epoch: Any = None,
                       **unknown: Any) -> None:
        self.submit("start_instance", instance_uuid, member_epoch, unknown)

    def rebuild_instance(self, ctxt: Any, instance_uuid: Any = None, member_epoch: Any = None,
                         preserve_ephemeral: Any = False, **unknown: Any) -> None:
        if not isinstance(preserve_ephemeral, bool):
            LOG.error("dropping rebuild_instance of instance %.80r: preserve_ephemeral %.80r is "
                      "not a boolean", instance_uuid, preserve_ephemeral)
            return
        self.submit("rebuild_instance", instance_uuid, member_epoch, unknown,
                    {"preserve_ephemeral": preserve_ephemeral})

    # --- running operations ----------------------------------------------------------------

    def submit(self, operation: str, instance_uuid: Any, member_epoch: Any = None,
               unknown: dict | None = None, options: dict[str, Any] | None = None) -> bool:
        """Queue ``operation`` (with ``options``, its own keyword arguments, checked by the
        endpoint); False (and one log line) when the request is refused."""
        if unknown:
            # oslo.messaging would otherwise fail the cast with a TypeError and a traceback.
            LOG.error("dropping %s: unknown argument(s) %s", operation, ", ".join(sorted(unknown)))
            return False
        if not _is_canonical_uuid(instance_uuid):
            # The server API sends str(uuid.UUID(...)); any other spelling is not ours.
            LOG.error("dropping %s: %.80r is not an instance uuid", operation, instance_uuid)
            return False
        if member_epoch is not None:
            if isinstance(member_epoch, bool) or not isinstance(member_epoch, int):
                LOG.error("dropping %s of instance %s: member epoch %.80r is not an integer",
                          operation, instance_uuid, member_epoch)
                return False
            current = self._owner().member_epoch
            if member_epoch != current:
                LOG.warning("refusing %s of instance %s: sent for member epoch %s, this "
                            "daemon's is %s (its recorded state is resumed instead)",
                            operation, instance_uuid, member_epoch, current)
                return False
        if self._stopping:
            LOG.warning("not running %s %s: stopping", operation, instance_uuid)
            return False
        self._queue(instance_uuid, self._run, operation, instance_uuid, None, options)
        return True

    def _queue(self, instance_uuid: str, run: Callable[..., None], *args: Any) -> None:
        """Run ``run(*args)`` in the pool, ``instance_uuid`` busy until it ends."""
        with self._busy_lock:
            self._busy[instance_uuid] += 1
        try:
            self._pool.submit(run, *args)
        except RuntimeError:  # the pool was shut down meanwhile
            self._done(instance_uuid)

    def _done(self, instance_uuid: str) -> None:
        with self._busy_lock:
            self._busy[instance_uuid] -= 1
            if self._busy[instance_uuid] <= 0:
                del self._busy[instance_uuid]

    def busy(self) -> set[str]:
        """Instances with an operation queued or running in this process."""
        with self._busy_lock:
            return set(self._busy)

    def _run(self, operation: str, instance_uuid: str, deadline: float | None = None,
             options: dict[str, Any] | None = None) -> None:
        parked = False
        try:
            with self._stripes[hash(instance_uuid) % len(self._stripes)]:
                try:
                    parked = self._run_locked(operation, instance_uuid, deadline, options)
                except (NotOurs, InstanceConflict, InstanceNotFound) as exc:
                    # Fencing at work (the node or the instance changed hands, or another
                    # request changed its state first) or a refusal: expected, one line.
                    LOG.warning("%s of instance %s stopped: %s", operation, instance_uuid, exc)
                except Exception:
                    LOG.exception("%s of instance %s failed", operation, instance_uuid)
        finally:
            if not parked:  # a parked operation stays busy until it runs or gives up
                self._done(instance_uuid)

    def _guarded(self, claim: Claim) -> lifecycle.Owner:
        """The owner an operation under ``claim`` acts as: every Ironic write checks the claim."""
        return dataclasses.replace(self._owner(), guard=self._fleet.guard(claim))

    def _run_locked(self, operation: str, instance_uuid: str, deadline: float | None,
                    options: dict[str, Any] | None = None) -> bool:
        """Run ``operation``; True when it was parked to wait for its node's claim."""
        owner = self._owner()
        row = db_instances.get_instance(owner.engine, instance_uuid)
        if row is None:
            LOG.error("%s: no instance %s", operation, instance_uuid)
            return False
        if row.node_uuid is None:
            # A failed build released its node; only a delete still has work to do.
            self._operate(operation, owner, row, options)
            return False
        if not self._ours(operation, owner, row):
            return False
        if self._fleet.claim_for(row.node_uuid) is None:
            return self._park(operation, instance_uuid, row.node_uuid, deadline,
                              lambda until: self._run(operation, instance_uuid, until,
                                                      options))
        done = self._fleet.act(row.node_uuid, operation.replace("_instance", ""),
                               lambda claim: self._operate(operation, self._guarded(claim),
                                                           row, options),
                               instance=instance_uuid)
        if not done:
            LOG.warning("%s of instance %s: lost the claim on node %s before starting",
                        operation, instance_uuid, row.node_uuid)
        return False

    @staticmethod
    def _ours(operation: str, owner: lifecycle.Owner, row: db_instances.InstanceRow) -> bool:
        """Whether the row says this daemon (this life of it) manages the instance; one line
        when not. Nothing else would run it: every write is a compare-and-set on them."""
        if (row.host, row.member_epoch) == (owner.host, owner.member_epoch):
            return True
        LOG.warning("%s of instance %s: the instance is managed by %s (member epoch %s), not "
                    "by this daemon (%s, member epoch %s); not run", operation, row.uuid,
                    row.host, row.member_epoch, owner.host, owner.member_epoch)
        return False

    def _park(self, what: str, instance_uuid: str, node: str, deadline: float | None,
              retry: Callable[[float], None]) -> bool:
        """Park an operation whose node this daemon does not hold (yet): the waiter thread
        hands ``retry(deadline)`` back to the pool once the claim is held. False (and one line)
        when its ``claim_wait`` is over."""
        now = time.monotonic()
        deadline = now + self._claim_wait if deadline is None else deadline
        if now >= deadline or self._stopping:
            LOG.warning("%s of instance %s: this daemon does not hold node %s; left for "
                        "whoever owns it to resume", what, instance_uuid, node)
            return False
        with self._parked_lock:
            self._parked.append((deadline, node, instance_uuid, what,
                                 lambda: retry(deadline)))
            if self._waiter is None:
                self._waiter = threading.Thread(target=self._wait_for_claims,
                                                name="instance claims", daemon=True)
                self._waiter.start()
        self._fleet.wake()  # the fleet may be about to take it: now rather than next pass
        return True

    def _wait_for_claims(self) -> None:
        """The waiter thread: parked operations back to the pool once their claim is held, or
        given up at their deadline."""
        while not self._stopping:
            time.sleep(PARK_POLL)
            with self._parked_lock:
                parked, self._parked = self._parked, []
            waiting = []
            for item in parked:
                deadline, node, instance_uuid, what, retry = item
                try:
                    held = self._fleet.claim_for(node) is not None
                except Exception:  # a failed look is a look without the claim
                    LOG.exception("looking for the claim on node %s failed", node)
                    held = False
                if held or time.monotonic() >= deadline or self._stopping:
                    # Back to the pool: it runs, or says in one line that it gives up.
                    try:
                        self._pool.submit(retry)
                    except RuntimeError:  # the pool was shut down meanwhile
                        self._done(instance_uuid)
                else:
                    waiting.append(item)
            if waiting:
                self._fleet.wake()
            with self._parked_lock:
                self._parked = waiting + self._parked

    def _operate(self, operation: str, owner: lifecycle.Owner,
                 before: db_instances.InstanceRow, options: dict[str, Any] | None = None) -> None:
        """Run ``operation`` between its start and end notifications, then hand a build moved
        to another node over."""
        if self._notifier is not None:
            self._notifier.start(operation, before)
        row = OPERATIONS[operation](owner, before.uuid, **(options or {}))
        if self._notifier is not None:
            self._notifier.end(operation, row)
        self._hand_over(row)

    def _hand_over(self, row: db_instances.InstanceRow) -> None:
        """Cast the build of an instance still BUILDING after an operation to its owner: the
        operation moved it to another node after a failed attempt."""
        if row.state != models.BUILDING:
            return
        if self._compute is None:
            LOG.warning("instance %s moved to node %s: no RPC client to hand it to %s; left "
                        "for its owner to resume", row.uuid, row.node_uuid, row.host)
            return
        self._compute.build_instance(row.host, row.uuid, row.member_epoch)

    def resume_all(self) -> None:
        """Queue a resume of this host's transitional instances that are not busy here (after a
        join or adoption, and periodically: a lost cast left its instance transitional)."""
        self._pool.submit(self._resume_all)

    def _resume_all(self) -> None:
        try:
            owner = self._owner()
            busy = self.busy()
            for row in db_instances.instances_by_host(owner.engine, owner.host):
                if row.member_epoch != owner.member_epoch or row.uuid in busy:
                    continue
                if row.state not in models.TRANSITIONAL_STATES:
                    continue
                LOG.info("instance %s is %s and nothing here works on it: resuming", row.uuid,
                         row.state)
                self._queue(row.uuid, self._run_resume, row.uuid, row.node_uuid)
        except Exception:
            LOG.exception("looking for instances to resume failed; retrying at the next look")

    def _run_resume(self, instance_uuid: str, node: str | None,
                    deadline: float | None = None) -> None:
        parked = False
        try:
            with self._stripes[hash(instance_uuid) % len(self._stripes)]:
                try:
                    if node is None:  # nothing on Ironic to guard: resume ends it in the database
                        self._hand_over(lifecycle.resume(self._owner(), instance_uuid))
                    elif self._fleet.claim_for(node) is None:
                        parked = self._park("resume", instance_uuid, node, deadline,
                                            lambda until: self._run_resume(instance_uuid, node,
                                                                           until))
                    else:
                        self._fleet.act(node, "resume",
                                        lambda claim: self._hand_over(lifecycle.resume(
                                            self._guarded(claim), instance_uuid)),
                                        instance=instance_uuid)
                except (NotOurs, InstanceConflict) as exc:
                    LOG.warning("resuming instance %s stopped: %s", instance_uuid, exc)
                except Exception:
                    LOG.exception("resuming instance %s failed", instance_uuid)
        finally:
            if not parked:
                self._done(instance_uuid)

    def stop(self) -> None:
        self._stopping = True
        self._pool.shutdown(wait=False, cancel_futures=True)


def _is_canonical_uuid(value: Any) -> bool:
    try:
        return isinstance(value, str) and str(uuid_lib.UUID(value)) == value
    except ValueError:
        return False
