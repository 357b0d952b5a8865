"""The instance lifecycle, run by the daemon that owns the instance.

Owns every change an instance goes through after :mod:`computed.instances.scheduler` recorded
it: build, delete, reboot, stop, start, rebuild, and :func:`resume` of an instance found in a
transitional state.
Each is a small function over an :class:`Owner` (the injected collaborators: database engine,
bare metal driver, Placement adapter, and the daemon's identity ``host`` / ``member_epoch``).
The daemon's RPC endpoint calls them; they block (Ironic is polled), so it runs them in worker
threads. Nothing here imports eventlet.

State machine (``*`` marks the transitional states, written *before* acting on Ironic)::

    schedule --> BUILDING* --deploy ok------------------------------> ACTIVE
                    |  deploy fails: clear node, remove allocation       |  ^
                    +--> another node (BUILDING*, retries.py) or ERROR   |  |
                                                                         |  |
        ACTIVE/STOPPED --reboot--> REBOOTING* --rebooted--> ACTIVE <-----+  |
        ACTIVE --stop--> STOPPING* --power off--> STOPPED --start--> STARTING* --power on--+

        any live state --delete--> DELETING* --undeploy, remove allocation--> DELETED

        ACTIVE/ERROR --rebuild--> REBUILDING*     --Ironic rebuild-------------> ACTIVE
        STOPPED      --rebuild--> REBUILDING_OFF* --Ironic rebuild, power off--> STOPPED

A failed power action records the fault and lands on what the node's power really is
(power on: ACTIVE, off: STOPPED). A failed undeploy lands in ERROR with the fault, node kept,
so ``delete`` can be repeated. A rebuild is recorded by whoever asks for it
(:meth:`computed.instances.rpcapi.ServerAPI.rebuild`: the new image, name, key and user data on
the row with the transitional state, in one write); the daemon redeploys the node with what the
row says (:meth:`~computed.baremetal.driver.BaremetalDriver.rebuild`, a new config drive from
the row) and, for REBUILDING_OFF, powers it off again. A failed rebuild lands in ERROR with
Ironic's reason, node and allocation kept (Nova's rebuild leaves the server in ERROR too): it
can be rebuilt again or deleted.

What the transitions guarantee:

* **Fenced.** Every write is a compare-and-set carrying ``expect_host``/``expect_member_epoch``
  (and the expected state): a daemon that lost the instance (re-homed to another daemon after it
  was presumed dead) gets :class:`~computed.db.instances.InstanceConflict` on its first write and
  stops; it never overwrites the new owner's state. An operation refuses to start on an
  instance that is not (host, member epoch)'s.
* **Guarded on Ironic.** Every Ironic write (and every poll while waiting) of an operation is
  preceded by ``owner.guard.check()`` (the driver checks it, each retry included), and so is the
  removal of an allocation: the daemon's :class:`computed.fleet.claims.ClaimGuard` raises
  ``NotOurs`` once its claim on the node is released, lost or deleted, or its fence refuses, and
  the operation stops there, writing nothing more, the instance left in its transitional state
  for whoever holds the node next. A daemon cut off from ZooKeeper, whose peer re-homed and
  redeployed the instance, therefore never unwinds (undeploys) the peer's deployment.
* **Never stuck.** The transitional state is written before Ironic is touched and left only
  after Ironic answered, so a daemon dying mid-operation leaves the instance in a transitional
  state, and whoever owns it next calls :func:`resume`, which looks at the node's real state in
  Ironic and finishes the operation (BUILDING and node active with this instance -> ACTIVE;
  BUILDING and node free -> deploy again; DELETING -> finish the delete; REBOOTING -> reboot
  (again, if it had happened: the lesser harm than a reboot lost); STARTING -> power on;
  STOPPING -> power off; REBUILDING[_OFF] -> wait for Ironic's deploy of the row's image if one
  runs, else rebuild, since an ``active`` node does not say whether it was rebuilt yet). Every
  step is idempotent, so resuming twice is harmless (a resumed rebuild may redeploy a node that
  was already rebuilt: slower, not wrong). ``preserve_ephemeral`` travels in the cast only (no
  column holds it): a resumed rebuild preserves the ephemeral partition, the choice that loses
  nothing.
* **Failed builds unwind, then retry.** A failed attempt has its node cleared (undeployed if
  needed, instance_uuid and instance_info removed) and its allocation removed first; then
  :mod:`computed.instances.retries` decides: another node (up to ``max_attempts`` nodes, never
  one that failed the build; :mod:`computed.instances.reschedule` moves the BUILDING row there
  and the worker casts the build to its owner), or ERROR with every attempt's node and Ironic's
  reason as the fault, the node released in the database (``node_uuid`` emptied, as Nova nils
  an instance's node after a failed build), so it can take the next instance at once. Should
  the node not clear (Ironic down), the build is not retried and the instance keeps
  ``node_uuid`` so that a later ``delete`` clears it. The unwinding runs before ERROR or the move
  is written: a daemon dying during it leaves BUILDING, which ``resume`` re-drives.
* **Idempotent delete.** Deleting a DELETED instance is a no-op; deleting a BUILDING one is
  allowed: the deploy in flight is waited for and torn down, and the build, finding DELETING
  instead of BUILDING, leaves the instance alone.

Threads: the functions run on the instance worker's pool threads, several at once for different
instances (the worker runs one operation per instance at a time in a process). They keep no
state between calls; an :class:`Owner` is frozen, and what it carries is safe to share between
threads (SQLAlchemy's engine and pool, a keystoneauth adapter, the bare metal driver, the claim
guard, which reads the claim table and the fence under their locks). Operations on one instance
from two daemons, or from a delete racing a build, are ordered by the database's
compare-and-set, not by anything in this process.
"""

from __future__ import annotations

import dataclasses
import logging
from typing import Any

from sqlalchemy.engine import Engine

from computed.baremetal.driver import (
    POWER_OFF,
    POWER_ON,
    REBOOT,
    BaremetalDriver,
    DriverError,
    Node,
    WriteGuard,
)
from computed.db import instances as db_instances
from computed.db import models
from computed.db.instances import ExpectedStates, InstanceConflict, InstanceNotFound, InstanceRow
from computed.db.models import InstanceState
from computed.instances import configdrive, reschedule, retries, scheduler
from computed.placement import allocations
from computed.placement.http import PlacementError
from computed.scheduling.pipeline import Pipeline

LOG = logging.getLogger(__name__)

DEFAULT_DEPLOY_TIMEOUT = 1800.0
DEFAULT_POWER_TIMEOUT = 300.0

#: From where each power action may start.
REBOOT_FROM = frozenset({models.ACTIVE, models.STOPPED})
STOP_FROM = frozenset({models.ACTIVE})
START_FROM = frozenset({models.STOPPED})
DELETE_FROM = models.LIVE_STATES - {models.DELETING}
#: What :func:`resume` asks Ironic for in each transitional power state. REBOOTING reboots
#: again rather than powering on: whether the first reboot happened is unknown (the daemon may
#: have died before it, or the cast been lost), and a power-on of a node that is on would end
#: the request in ACTIVE without the reboot the user asked for. A reboot done twice is the
#: lesser harm, and what Nova's compute does with an instance it finds rebooting at start.
RESUME_POWER = {models.REBOOTING: REBOOT, models.STARTING: POWER_ON, models.STOPPING: POWER_OFF}
#: From where a rebuild may be asked (Nova's: active, stopped, error; no task in progress).
REBUILD_FROM = frozenset({models.ACTIVE, models.STOPPED, models.ERROR})
REBUILDING_STATES = frozenset({models.REBUILDING, models.REBUILDING_OFF})
#: What a resumed rebuild does with the ephemeral partition (the cast's choice is lost).
RESUMED_PRESERVE_EPHEMERAL = True


@dataclasses.dataclass(frozen=True)
class Owner:
    """The daemon acting on its instances, and what it acts through.

    ``placement`` is a keystoneauth ``Adapter`` for Placement; ``member_epoch`` the daemon's
    member epoch (what :func:`computed.instances.scheduler.schedule` recorded from the node's
    claim); ``guard`` what every write to Ironic and Placement is checked against (the claim on
    the node the operation runs under; the daemon always gives one, None is for tools and tests
    that hold no claim). A failed build is retried on up to ``max_attempts`` nodes
    (``[scheduler] max_attempts``), found through ``owner_of``; without ``owner_of`` it is not
    retried. ``pipeline`` filters and orders a retry's candidates (``[filter_scheduler]``,
    :func:`computed.scheduling.loader.pipeline_from_conf`); None: the default configuration's.
    """

    engine: Engine
    driver: BaremetalDriver
    placement: Any
    host: str
    member_epoch: int
    deploy_timeout: float = DEFAULT_DEPLOY_TIMEOUT
    power_timeout: float = DEFAULT_POWER_TIMEOUT
    guard: WriteGuard | None = None
    max_attempts: int = 1
    owner_of: scheduler.OwnerOf | None = None
    pipeline: Pipeline | None = None


# -- the operations -------------------------------------------------------------------------

def build(owner: Owner, instance_uuid: str) -> InstanceRow:
    """Deploy a BUILDING instance on its node; the row after (ACTIVE, or ERROR with the fault).

    :raises InstanceNotFound: no such instance.
    :raises InstanceConflict: the instance is not BUILDING, or not (host, member epoch)'s: another
        daemon owns it now, or it was deleted meanwhile.
    """
    row = _mine(owner, instance_uuid, {models.BUILDING})
    if row.node_uuid is None:
        return _fail_build(owner, row, 'instance has no node')
    try:
        # The key pair and user data reach the node in it (computed.instances.configdrive).
        drive = configdrive.build(row)
    except configdrive.InvalidUserData as exc:
        return _fail_build(owner, row, f'user data: {exc}')
    try:
        owner.driver.deploy(row.node_uuid, row.uuid, row.image, timeout=owner.deploy_timeout,
                            guard=owner.guard, configdrive=drive)
    except DriverError as exc:
        LOG.warning('instance %s: deploy on node %s failed: %s', row.uuid, row.node_uuid, exc)
        return _fail_build(owner, row, exc.reason)
    # The fault keeps the attempts that failed before (retries.py), if any.
    return _set(owner, row.uuid, models.ACTIVE, expect=models.BUILDING, fault=row.fault)


def delete(owner: Owner, instance_uuid: str) -> InstanceRow:
    """Undeploy the node, remove the allocation, mark DELETED; the row after (DELETED, or ERROR
    with the fault when the node could not be undeployed). A DELETED instance is returned
    as it is.

    :raises InstanceNotFound, InstanceConflict: as for :func:`build`.
    """
    row = _get(owner, instance_uuid)
    if row.state == models.DELETED:
        return row
    if row.state != models.DELETING:
        row = _set(owner, row.uuid, models.DELETING, expect=DELETE_FROM, fault=row.fault)
    else:
        _check_owner(owner, row)
    return _finish_delete(owner, row)


def reboot(owner: Owner, instance_uuid: str) -> InstanceRow:
    """Power-cycle (a STOPPED instance is powered on); ACTIVE after."""
    return _power_action(owner, instance_uuid, REBOOT_FROM, models.REBOOTING, REBOOT)


def stop(owner: Owner, instance_uuid: str) -> InstanceRow:
    """Power off; STOPPED after. Stopping a STOPPED instance is a no-op."""
    row = _get(owner, instance_uuid)
    if row.state == models.STOPPED:
        _check_owner(owner, row)
        return row
    return _power_action(owner, instance_uuid, STOP_FROM, models.STOPPING, POWER_OFF)


def start(owner: Owner, instance_uuid: str) -> InstanceRow:
    """Power on; ACTIVE after. Starting an ACTIVE instance is a no-op."""
    row = _get(owner, instance_uuid)
    if row.state == models.ACTIVE:
        _check_owner(owner, row)
        return row
    return _power_action(owner, instance_uuid, START_FROM, models.STARTING, POWER_ON)


def rebuild(owner: Owner, instance_uuid: str,
            preserve_ephemeral: bool | None = None) -> InstanceRow:
    """Redeploy the node of a recorded rebuild (REBUILDING or REBUILDING_OFF) with the row's
    image and a config drive from the row; ACTIVE after (STOPPED from REBUILDING_OFF), or ERROR
    with the fault. ``preserve_ephemeral`` None (not known: a resume) keeps the ephemeral
    partition (:data:`RESUMED_PRESERVE_EPHEMERAL`).

    :raises InstanceNotFound, InstanceConflict: as for :func:`build`; also when no rebuild is
        recorded (a daemon never starts one: the new image is the requester's).
    """
    row = _mine(owner, instance_uuid, set(REBUILDING_STATES))
    return _finish_rebuild(owner, row, preserve_ephemeral)


def resume(owner: Owner, instance_uuid: str) -> InstanceRow:
    """Finish whatever a transitional instance was doing, from the node's real state.

    A non-transitional instance is returned unchanged.

    :raises InstanceNotFound, InstanceConflict: as for :func:`build`.
    """
    row = _get(owner, instance_uuid)
    _check_owner(owner, row)
    if row.state not in models.TRANSITIONAL_STATES:
        return row
    LOG.info('instance %s: resuming %s on node %s', row.uuid, row.state, row.node_uuid)
    if row.state == models.BUILDING:
        return _resume_build(owner, row)
    if row.state == models.DELETING:
        return _finish_delete(owner, row)
    if row.state in REBUILDING_STATES:
        return _finish_rebuild(owner, row, None)
    return _finish_power(owner, row, RESUME_POWER[row.state])


def resume_all(owner: Owner) -> list[InstanceRow]:
    """:func:`resume` every transitional instance of (host, member epoch); the rows after. One
    instance failing (a conflict: re-homed meanwhile) does not stop the others."""
    done = []
    for row in db_instances.instances_by_host(owner.engine, owner.host):
        if row.state not in models.TRANSITIONAL_STATES or row.member_epoch != owner.member_epoch:
            continue
        try:
            done.append(resume(owner, row.uuid))
        except (InstanceConflict, InstanceNotFound) as exc:
            LOG.info('instance %s: not resumed: %s', row.uuid, exc)
    return done


# -- build ----------------------------------------------------------------------------------

def _resume_build(owner: Owner, row: InstanceRow) -> InstanceRow:
    if row.node_uuid is None:
        return _fail_build(owner, row, 'instance has no node')
    try:
        node = owner.driver.get_node(row.node_uuid)
    except DriverError as exc:
        raise _Retry(row, exc)
    if node is None:
        return _fail_build(owner, row, f'node {row.node_uuid} no longer exists in Ironic')
    if node.instance_uuid not in (None, row.uuid):
        return _fail_build(owner, row, f'node {node.uuid} hosts instance {node.instance_uuid}')
    if node.instance_uuid == row.uuid and node.provision_state == 'active':
        return _set(owner, row.uuid, models.ACTIVE, expect=models.BUILDING, fault=row.fault)
    if node.instance_uuid == row.uuid and node.provision_state == 'deploy failed':
        return _fail_build(owner, row, node.last_error or 'deploy failed')
    return build(owner, row.uuid)  # free, or still deploying: deploy() waits or starts it


def _fail_build(owner: Owner, row: InstanceRow, reason: str) -> InstanceRow:
    """Unwind a failed attempt (node cleared, allocation removed), then the build on another
    node (BUILDING, moved there) or ERROR with every attempt in the fault."""
    # Unwind only while still ours and BUILDING: a concurrent delete unwinds by itself.
    row = _mine(owner, row.uuid, {models.BUILDING})
    previous = retries.attempts(row.fault)
    if row.node_uuid is None:
        return _set_error(owner, row.uuid, retries.fault(previous, reason),
                          expect=models.BUILDING)
    problems = []
    released = True
    try:
        owner.driver.clear_instance(row.node_uuid, row.uuid, timeout=owner.deploy_timeout,
                                    guard=owner.guard)
    except DriverError as exc:
        LOG.error('instance %s: node %s not cleared after a failed build: %s', row.uuid,
                  row.node_uuid, exc)
        problems.append(f'node {row.node_uuid} not cleared: {exc.reason}')
        released = False
    consumer = None
    try:
        _check_guard(owner)
        consumer = allocations.project_and_user(owner.placement, row.uuid)
        allocations.remove(owner.placement, row.uuid)
    except PlacementError as exc:
        LOG.error('instance %s: allocation not removed after a failed build: %s', row.uuid, exc)
        problems.append(f'allocation not removed: {exc}')
    decision = retries.after_failure(previous, retries.Attempt(row.node_uuid, reason),
                                     owner.max_attempts,
                                     can_retry=not problems and owner.owner_of is not None)
    if isinstance(decision, retries.NextAttempt):
        decision = _next_attempt(owner, row, decision, consumer)
        if isinstance(decision, InstanceRow):
            return decision
    fault = '\n'.join([decision.fault, *problems])
    return _set_error(owner, row.uuid, fault, expect=models.BUILDING, release_node=released)


def _next_attempt(owner: Owner, row: InstanceRow, decision: retries.NextAttempt,
                  consumer: tuple[str, str] | None) -> InstanceRow | retries.GiveUp:
    """The row moved to another node, or why not (no node left, Placement's error)."""
    # The allocation's consumer, else the row's (the allocation was gone already).
    project_id, user_id = consumer or (row.project_id or scheduler.DEFAULT_PROJECT,
                                       row.user_id or scheduler.DEFAULT_USER)
    _check_guard(owner)  # the next attempt allocates and moves the row: still ours?
    try:
        moved = reschedule.next_node(owner.placement, owner.engine, row, decision,
                                     owner_of=owner.owner_of, project_id=project_id,
                                     user_id=user_id, pipeline=owner.pipeline)
    except PlacementError as exc:
        LOG.error('instance %s: no retry, Placement: %s', row.uuid, exc)
        return retries.no_other_node(decision, f'build given up: Placement: {exc}')
    return moved if moved is not None else retries.no_other_node(decision)


# -- delete ---------------------------------------------------------------------------------

def _finish_delete(owner: Owner, row: InstanceRow) -> InstanceRow:
    if row.node_uuid is not None:
        try:
            owner.driver.clear_instance(row.node_uuid, row.uuid, timeout=owner.deploy_timeout,
                                        guard=owner.guard)
        except DriverError as exc:
            LOG.error('instance %s: undeploy of node %s failed: %s', row.uuid, row.node_uuid,
                      exc)
            return _set_error(owner, row.uuid, f'delete failed: {exc.reason}',
                              expect=models.DELETING)
    _check_guard(owner)
    allocations.remove(owner.placement, row.uuid)
    return _set(owner, row.uuid, models.DELETED, expect=models.DELETING)


# -- rebuild --------------------------------------------------------------------------------

def _finish_rebuild(owner: Owner, row: InstanceRow,
                    preserve_ephemeral: bool | None) -> InstanceRow:
    if row.node_uuid is None:
        return _set_error(owner, row.uuid, 'rebuild failed: instance has no node',
                          expect=row.state)
    try:
        drive = configdrive.build(row)
    except configdrive.InvalidUserData as exc:
        return _set_error(owner, row.uuid, f'rebuild failed: user data: {exc}',
                          expect=row.state)
    preserve = RESUMED_PRESERVE_EPHEMERAL if preserve_ephemeral is None else preserve_ephemeral
    try:
        owner.driver.rebuild(row.node_uuid, row.uuid, row.image, timeout=owner.deploy_timeout,
                             guard=owner.guard, configdrive=drive, preserve_ephemeral=preserve)
    except DriverError as exc:
        LOG.warning('instance %s: rebuild on node %s failed: %s', row.uuid, row.node_uuid, exc)
        return _set_error(owner, row.uuid, f'rebuild failed: {exc.reason}', expect=row.state)
    if row.state != models.REBUILDING_OFF:
        return _set(owner, row.uuid, models.ACTIVE, expect=row.state)
    # Ironic's rebuild boots the new image; the server was stopped and stays so (Nova's).
    try:
        owner.driver.set_power(row.node_uuid, POWER_OFF, timeout=owner.power_timeout,
                               guard=owner.guard)
    except DriverError as exc:
        LOG.warning('instance %s: power off after the rebuild failed: %s', row.uuid, exc)
        return _settle_power(owner, row, f'power off after the rebuild failed: {exc.reason}')
    return _set(owner, row.uuid, models.STOPPED, expect=row.state)


# -- power ----------------------------------------------------------------------------------

def _power_action(owner: Owner, instance_uuid: str, allowed: frozenset[InstanceState],
                  transitional: InstanceState, target: str) -> InstanceRow:
    row = _get(owner, instance_uuid)
    _check_owner(owner, row)
    if row.state != transitional:  # already recorded by whoever asked (ServerAPI.action)
        row = _set(owner, instance_uuid, transitional, expect=allowed)
    return _finish_power(owner, row, target)


def _finish_power(owner: Owner, row: InstanceRow, target: str) -> InstanceRow:
    final = models.STOPPED if target == POWER_OFF else models.ACTIVE
    if row.node_uuid is None:
        return _set_error(owner, row.uuid, f'{target}: instance has no node', expect=row.state)
    try:
        owner.driver.set_power(row.node_uuid, target, timeout=owner.power_timeout,
                               guard=owner.guard)
    except DriverError as exc:
        LOG.warning('instance %s: %s failed: %s', row.uuid, target, exc)
        return _settle_power(owner, row, f'{target} failed: {exc.reason}')
    return _set(owner, row.uuid, final, expect=row.state)


def _settle_power(owner: Owner, row: InstanceRow, fault: str) -> InstanceRow:
    """After a failed power action: the state the node's real power says, with the fault."""
    node: Node | None
    try:
        node = owner.driver.get_node(row.node_uuid) if row.node_uuid else None
    except DriverError:
        node = None
    if node is None or node.power_state not in (POWER_ON, POWER_OFF):
        return _set_error(owner, row.uuid, fault, expect=row.state)
    state = models.ACTIVE if node.power_state == POWER_ON else models.STOPPED
    return _set(owner, row.uuid, state, expect=row.state, fault=fault)


# -- fenced reads and writes ----------------------------------------------------------------

class _Retry(DriverError):
    """Ironic could not be read to resume an instance; it stays transitional for a later try."""

    def __init__(self, row: InstanceRow, cause: DriverError):
        super().__init__(f'instance {row.uuid}', f'cannot resume {row.state}: {cause}')


def _check_guard(owner: Owner) -> None:
    if owner.guard is not None:
        owner.guard.check()


def _get(owner: Owner, instance_uuid: str) -> InstanceRow:
    row = db_instances.get_instance(owner.engine, instance_uuid)
    if row is None:
        raise InstanceNotFound(instance_uuid)
    return row


def _check_owner(owner: Owner, row: InstanceRow) -> None:
    if (row.host, row.member_epoch) != (owner.host, owner.member_epoch):
        raise InstanceConflict(row.uuid, f'host {owner.host}, member epoch {owner.member_epoch}',
                               f'host {row.host}, member epoch {row.member_epoch}')


def _mine(owner: Owner, instance_uuid: str, states: set[InstanceState]) -> InstanceRow:
    """The instance, if it is (host, member epoch)'s and in one of ``states``."""
    row = _get(owner, instance_uuid)
    _check_owner(owner, row)
    if row.state not in states:
        raise InstanceConflict(row.uuid, f"state {', '.join(sorted(states))}",
                               f'state {row.state}')
    return row


def _set(owner: Owner, instance_uuid: str, state: InstanceState, *, expect: ExpectedStates,
         fault: str | None = None, release_node: bool = False) -> InstanceRow:
    return db_instances.set_instance_state(owner.engine, instance_uuid, state, fault,
                                           expect_state=expect, expect_host=owner.host,
                                           expect_member_epoch=owner.member_epoch,
                                           release_node=release_node)


def _set_error(owner: Owner, instance_uuid: str, fault: str, *, expect: ExpectedStates,
               release_node: bool = False) -> InstanceRow:
    """ERROR with ``fault``; ``release_node`` also empties ``node_uuid`` (same fenced
    statement), freeing the node for the next instance."""
    return _set(owner, instance_uuid, models.ERROR, expect=expect, fault=fault,
                release_node=release_node)
