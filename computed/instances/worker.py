"""The daemon's instance worker: the RPC endpoint that runs instance operations on owned nodes.

Owns the server side of :mod:`computed.instances.rpcapi` (topic ``computed``, one queue per
host): ``build_instance``, ``delete_instance``, ``reboot_instance``, ``stop_instance`` and
``start_instance``, each with an ``instance_uuid``. The calls are casts: the endpoint validates
the uuid, queues the operation and returns; a pool of worker threads runs the operations of
:mod:`computed.instances.lifecycle`, which block while Ironic works.

Guarantees:

* An operation runs only through :meth:`computed.fleet.reconciler.Fleet.act`, i.e. while this
  daemon holds the claim on the instance's node and its fence allows acting. A node can be
  sticky to this daemon before its claim is taken (a build cast right after scheduling, an
  instance just re-homed): the worker waits for the claim up to ``claim_wait`` seconds, then
  leaves the instance to :meth:`resume_all`, which the daemon runs after every (re)join and
  adoption.
* Every database write of an operation is a compare-and-set on (host, member epoch)
  (:mod:`computed.instances.lifecycle`), so an operation started by a daemon that lost the
  instance stops at its first write.
* One operation per instance at a time in this process; a second request for an instance that
  is busy waits its turn.
* Each operation is announced by the versioned notifications of
  :mod:`computed.instances.notifications` (``instance.create.start`` ... ``.end``/``.error``).
* A build that failed on its node and was moved to another one (:mod:`computed.instances.
  reschedule`) is cast to the new node's owner (``build_instance`` on its host's queue), which
  may be this daemon.
* A malformed request (not a uuid) is logged and dropped; an operation that fails is logged with
  the instance uuid and never kills the worker.
"""

from __future__ import annotations

import logging
import threading
import time
import uuid as uuid_lib
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from typing import Any

from computed.db import api as db_api
from computed.db import models
from computed.instances import lifecycle, rpcapi
from computed.instances.notifications import InstanceNotifier

LOG = logging.getLogger(__name__)

OPERATIONS = {
    "build_instance": lifecycle.build,
    "delete_instance": lifecycle.delete,
    "reboot_instance": lifecycle.reboot,
    "stop_instance": lifecycle.stop,
    "start_instance": lifecycle.start,
}


class InstanceWorker:
    """Queues instance operations and runs them while the node's claim is held."""

    def __init__(self, fleet: Any, owner: Callable[[], lifecycle.Owner], workers: int = 8,
                 claim_wait: float = 30.0, compute: rpcapi.ComputeAPI | None = None,
                 notifier: InstanceNotifier | None = None):
        self._fleet = fleet
        self._owner = owner
        self._compute = compute  # where a build moved to another node is handed over
        self._notifier = notifier
        self._claim_wait = claim_wait
        self._pool = ThreadPoolExecutor(max(1, workers), thread_name_prefix="instance")
        self._stripes = [threading.Lock() for _ in range(64)]
        self._stopping = False

    # --- RPC endpoint (oslo.messaging dispatches on these names) --------------------------

    def build_instance(self, ctxt: Any, instance_uuid: Any = None) -> None:
        self.submit("build_instance", instance_uuid)

    def delete_instance(self, ctxt: Any, instance_uuid: Any = None) -> None:
        self.submit("delete_instance", instance_uuid)

    def reboot_instance(self, ctxt: Any, instance_uuid: Any = None) -> None:
        self.submit("reboot_instance", instance_uuid)

    def stop_instance(self, ctxt: Any, instance_uuid: Any = None) -> None:
        self.submit("stop_instance", instance_uuid)

    def start_instance(self, ctxt: Any, instance_uuid: Any = None) -> None:
        self.submit("start_instance", instance_uuid)

    # --- running operations ----------------------------------------------------------------

    def submit(self, operation: str, instance_uuid: Any) -> bool:
        try:
            instance_uuid = str(uuid_lib.UUID(str(instance_uuid)))
        except ValueError:
            LOG.error("dropping %s: %r is not an instance uuid", operation, instance_uuid)
            return False
        if self._stopping:
            LOG.warning("not running %s %s: stopping", operation, instance_uuid)
            return False
        self._pool.submit(self._run, operation, instance_uuid)
        return True

    def _run(self, operation: str, instance_uuid: str) -> None:
        with self._stripes[hash(instance_uuid) % len(self._stripes)]:
            try:
                self._run_locked(operation, instance_uuid)
            except Exception:
                LOG.exception("%s of instance %s failed", operation, instance_uuid)

    def _run_locked(self, operation: str, instance_uuid: str) -> None:
        owner = self._owner()
        row = db_api.get_instance(owner.engine, instance_uuid)
        if row is None:
            LOG.error("%s: no instance %s", operation, instance_uuid)
            return
        if row.node_uuid is None:
            # A failed build released its node; only a delete still has work to do.
            self._operate(operation, owner, row)
            return
        if not self._wait_for_claim(row.node_uuid):
            LOG.warning("%s of instance %s: this daemon does not hold node %s; left for "
                        "whoever owns it to resume", operation, instance_uuid, row.node_uuid)
            return
        done = self._fleet.act(row.node_uuid, operation.replace("_instance", ""),
                               lambda _claim: self._operate(operation, owner, row),
                               instance=instance_uuid)
        if not done:
            LOG.warning("%s of instance %s: lost the claim on node %s before starting",
                        operation, instance_uuid, row.node_uuid)

    def _operate(self, operation: str, owner: lifecycle.Owner,
                 before: db_api.InstanceRow) -> None:
        """Run ``operation`` between its start and end notifications, then hand a build moved
        to another node over."""
        if self._notifier is not None:
            self._notifier.start(operation, before)
        row = OPERATIONS[operation](owner, before.uuid)
        if self._notifier is not None:
            self._notifier.end(operation, row)
        self._hand_over(row)

    def _hand_over(self, row: db_api.InstanceRow) -> None:
        """Cast the build of an instance still BUILDING after an operation to its owner: the
        operation moved it to another node after a failed attempt."""
        if row.state != models.BUILDING:
            return
        if self._compute is None:
            LOG.warning("instance %s moved to node %s: no RPC client to hand it to %s; left "
                        "for its owner to resume", row.uuid, row.node_uuid, row.host)
            return
        self._compute.build_instance(row.host, row.uuid)

    def _wait_for_claim(self, node: str) -> bool:
        deadline = time.monotonic() + self._claim_wait
        while self._fleet.claim_for(node) is None:
            if time.monotonic() > deadline or self._stopping:
                return False
            self._fleet.wake()
            time.sleep(0.2)
        return True

    def resume_all(self) -> None:
        """Queue a resume of this host's transitional instances (after a join or adoption)."""
        self._pool.submit(self._resume_all)

    def _resume_all(self) -> None:
        owner = self._owner()
        for row in db_api.instances_by_host(owner.engine, owner.host):
            if row.member_epoch != owner.member_epoch or row.node_uuid is None:
                continue
            if row.state not in models.TRANSITIONAL_STATES:
                continue
            self._pool.submit(self._run_resume, row.uuid, row.node_uuid)

    def _run_resume(self, instance_uuid: str, node: str) -> None:
        with self._stripes[hash(instance_uuid) % len(self._stripes)]:
            try:
                if self._wait_for_claim(node):
                    self._fleet.act(node, "resume",
                                    lambda _claim: self._hand_over(
                                        lifecycle.resume(self._owner(), instance_uuid)),
                                    instance=instance_uuid)
            except Exception:
                LOG.exception("resuming instance %s failed", instance_uuid)

    def stop(self) -> None:
        self._stopping = True
        self._pool.shutdown(wait=False, cancel_futures=True)
