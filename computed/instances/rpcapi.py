"""The compute daemons' RPC API, and the server API other services call.

Owns the client side of the daemon's instance endpoint: topic :data:`TOPIC`, one queue per
daemon (``server=<host>``), methods ``build_instance``, ``delete_instance``,
``reboot_instance``, ``stop_instance``, ``start_instance`` and (1.2) ``rebuild_instance``, each
taking ``instance_uuid`` and, from version 1.1, ``member_epoch``: the sender's view of the
target's member epoch (the instance row's), which the target compares with its own and refuses
on a mismatch (see :mod:`computed.instances.worker`). The daemon reads everything else from the
database (a rebuild's new image, name, key and user data are on the row before it is cast), so
a message can never carry stale state; the one exception is ``rebuild_instance``'s
``preserve_ephemeral``, a request option the row has no column for. All are casts: the daemon
records progress and the outcome in the instance row, which callers poll.

Versions: 1.0 casts carried ``instance_uuid`` only; 1.1 adds ``member_epoch`` (optional on the
server side, so a 1.0 sender is still served); 1.2 adds ``rebuild_instance``. Clients send 1.2,
or the version ``[upgrade_levels] instances`` allows (:mod:`computed.upgrade.levels`: at 1.0
without ``member_epoch``); below 1.2 :meth:`ServerAPI.rebuild` refuses before recording
anything (:class:`NeedsUpgrade`), so no daemon is sent a method it does not serve.

:class:`ServerAPI` is the whole build/operate path as a library (what ``computed-manage
server`` runs): schedule (:mod:`computed.instances.scheduler`), then cast to the instance's
*current* host as the database says, so an instance re-homed since it was built is routed to
its new owner.

Guarantees (nothing a caller was told was sent is lost):

* **Recorded before cast.** A cast is only sent after the instance row records the request: a
  build's row exists in BUILDING, and an action first moves the row to its transitional state
  (DELETING, REBOOTING, STOPPING, STARTING, REBUILDING[_OFF]) with a compare-and-set on the
  state it may start from and on the (host, member epoch) the cast goes to. A request the
  instance's state does not allow is refused at once
  (:class:`~computed.db.instances.InstanceConflict`), never sent to be dropped.
* **Carried out, or a visible error.** oslo.messaging acknowledges a cast before the daemon runs
  it, and queues are not durable: a cast can be lost. The recorded transitional state is what
  makes the request durable: the owner resumes every transitional instance it is not already
  working on (:func:`computed.instances.lifecycle.resume`) after every (re)join and adoption and
  every ``[fleet] resume_interval`` seconds, so a lost cast still ends in the requested state, or
  in ERROR with the fault, and a dead owner's instances are re-homed and resumed by the adopter.
  A cast that cannot be sent at all (the bus down) raises to the caller, but the request stays
  recorded and is carried out the same way: an error here means "not sent", never "not done".
"""

from __future__ import annotations

import time
import uuid as uuidlib
from collections.abc import Callable, Iterable, Mapping
from typing import Any

from sqlalchemy.engine import Engine

from computed.db import instances as db_instances
from computed.db import models
from computed.db.instances import InstanceConflict, InstanceNotFound, InstanceRow
from computed.instances import lifecycle, reschedule, scheduler
from computed.runtime import rpc
from computed.scheduling.pipeline import Pipeline
from computed.upgrade import levels

TOPIC = 'computed'
VERSION = '1.2'
#: Each action: the transitional state recorded before it is cast, the states it may start
#: from (its own transitional state included: asking again re-sends it), and the states in
#: which it has nothing to do (nothing is recorded nor cast).
ACTIONS = {
    'delete': (models.DELETING, lifecycle.DELETE_FROM | {models.DELETING}, {models.DELETED}),
    'reboot': (models.REBOOTING, lifecycle.REBOOT_FROM | {models.REBOOTING}, set()),
    'stop': (models.STOPPING, lifecycle.STOP_FROM | {models.STOPPING}, {models.STOPPED}),
    'start': (models.STARTING, lifecycle.START_FROM | {models.STARTING}, {models.ACTIVE}),
}
#: The start of the fault of a build that found no host, as Nova words it.
NO_VALID_HOST = 'No valid host was found'
#: States a build ends in.
BUILD_DONE = frozenset({models.ACTIVE, models.ERROR, models.DELETED})


class NeedsUpgrade(Exception):
    """``[upgrade_levels] instances`` (a pin, or ``auto`` with a daemon of an older release
    live) does not allow the cast: nothing was recorded nor sent."""

    def __init__(self, method: str, version: str):
        self.method = method
        self.version = version
        super().__init__(f'{method} needs instance RPC version '
                         f'{levels.INSTANCE_METHODS_SINCE.get(method, "1.0")}, and casts are '
                         f'sent at {version} ([upgrade_levels] instances): every daemon must '
                         'run a release that serves it, and the pin must allow it')


class NoHost(Exception):
    """The instance has no host to send the request to."""

    def __init__(self, instance_uuid: str):
        self.instance_uuid = instance_uuid
        super().__init__(f'instance {instance_uuid} has no host')


def _admitted(row: InstanceRow) -> bool:
    """Admitted by the compute API and not placed yet (:meth:`ServerAPI.admit`)."""
    return row.state == models.BUILDING and row.host is None and row.node_uuid is None


class ComputeAPI:
    """Casts to one daemon's instance endpoint."""

    def __init__(self, transport: Any, topic: str = TOPIC,
                 version: Callable[[], str] | None = None):
        # ``version``: the version [upgrade_levels] instances allows now
        # (computed.upgrade.records.Levels); None: this code's.
        self._transport = transport
        self._topic = topic
        self._version = version or (lambda: VERSION)

    def can_send(self, method: str) -> str | None:
        """None when ``method`` may be cast now, else the version casts are sent at (below
        the one that brought ``method``)."""
        version = self._version()
        return None if levels.sends(version, method) else version

    def _cast(self, host: str, method: str, instance_uuid: str,
              member_epoch: int | None, **extra: Any) -> None:
        version = self._version()
        if not levels.sends(version, method):
            raise NeedsUpgrade(method, version)
        client = rpc.get_client(self._transport, self._topic, server=host,
                                version=version).prepare(version_cap=version)
        # Below 1.1 the member epoch stays home: a 1.0 daemon would refuse the argument.
        client.cast({}, method, **levels.instance_arguments(version, instance_uuid,
                                                            member_epoch, **extra))

    # ``member_epoch``: the member epoch of ``host`` the instance row records (the daemon
    # refuses the cast when it is not its current one); None sends none (1.0's behaviour).

    def build_instance(self, host: str, instance_uuid: str,
                       member_epoch: int | None = None) -> None:
        self._cast(host, 'build_instance', instance_uuid, member_epoch)

    def delete_instance(self, host: str, instance_uuid: str,
                        member_epoch: int | None = None) -> None:
        self._cast(host, 'delete_instance', instance_uuid, member_epoch)

    def reboot_instance(self, host: str, instance_uuid: str,
                        member_epoch: int | None = None) -> None:
        self._cast(host, 'reboot_instance', instance_uuid, member_epoch)

    def stop_instance(self, host: str, instance_uuid: str,
                      member_epoch: int | None = None) -> None:
        self._cast(host, 'stop_instance', instance_uuid, member_epoch)

    def start_instance(self, host: str, instance_uuid: str,
                       member_epoch: int | None = None) -> None:
        self._cast(host, 'start_instance', instance_uuid, member_epoch)

    def rebuild_instance(self, host: str, instance_uuid: str, member_epoch: int | None = None,
                         preserve_ephemeral: bool = False) -> None:
        """1.2: :class:`NeedsUpgrade` at a lower version."""
        self._cast(host, 'rebuild_instance', instance_uuid, member_epoch,
                   preserve_ephemeral=bool(preserve_ephemeral))


class ServerAPI:
    """Create and operate instances: schedule, record, cast to the owning daemon."""

    def __init__(self, engine: Engine, placement: Any, compute: ComputeAPI,
                 owner_of: scheduler.OwnerOf, project_id: str = scheduler.DEFAULT_PROJECT,
                 user_id: str = scheduler.DEFAULT_USER, pipeline: Pipeline | None = None):
        # ``pipeline``: the filters and weighers of [filter_scheduler]
        # (computed.scheduling.loader.pipeline_from_conf); None: the default configuration's.
        self._pipeline = pipeline
        self._engine = engine
        self._placement = placement
        self._compute = compute
        self._owner_of = owner_of
        self._project_id = project_id
        self._user_id = user_id

    def create(self, resource_class: str, traits: Iterable[str] = (), image: str | None = None,
               instance_uuid: str | None = None, *, forbidden: Iterable[str] = (),
               project_id: str | None = None, user_id: str | None = None,
               name: str | None = None, metadata: dict[str, str] | None = None,
               flavor: dict[str, Any] | None = None,
               record_failure: bool = False,
               hints: Mapping[str, Any] | None = None) -> InstanceRow:
        """Schedule and cast the build: :meth:`place` then :meth:`start_build`; the row."""
        row = self.place(resource_class, traits, image, instance_uuid, forbidden=forbidden,
                         project_id=project_id, user_id=user_id, name=name,
                         metadata=metadata, flavor=flavor, record_failure=record_failure,
                         hints=hints)
        if row.state == models.BUILDING:
            self.start_build(row)
        return row

    def place(self, resource_class: str, traits: Iterable[str] = (), image: str | None = None,
              instance_uuid: str | None = None, *, forbidden: Iterable[str] = (),
              project_id: str | None = None, user_id: str | None = None,
              name: str | None = None, metadata: dict[str, str] | None = None,
              flavor: dict[str, Any] | None = None,
              record_failure: bool = False,
              hints: Mapping[str, Any] | None = None) -> InstanceRow:
        """Schedule the instance: its allocation and its BUILDING row, not yet cast (see
        :func:`scheduler.schedule` for the errors). ``project_id``/``user_id`` default to this
        API's; ``hints`` are the build's scheduler hints (``os:scheduler_hints``), for the
        filters.

        ``record_failure`` (the compute API's behaviour, Nova's cell0): when no host is found
        (or Placement refuses the request, e.g. a trait no node has ever had) the instance is
        still recorded, in ERROR with the reason as its fault and no node nor allocation, so
        that its owner can see why and delete it; that row is returned instead of raising.
        """
        project_id = project_id or self._project_id
        user_id = user_id or self._user_id
        instance_uuid = scheduler.check_uuid(instance_uuid or str(uuidlib.uuid4()))
        try:
            pipeline = self._pipeline or scheduler.default_pipeline()
            return scheduler.schedule(self._placement, self._engine, resource_class, traits,
                                      image, instance_uuid, owner_of=self._owner_of,
                                      project_id=project_id, user_id=user_id,
                                      forbidden=forbidden, name=name, metadata=metadata,
                                      flavor=flavor, pipeline=pipeline, hints=hints,
                                      limit=pipeline.max_candidates or
                                      scheduler.DEFAULT_CANDIDATES)
        except (scheduler.NoValidHost, scheduler.BadRequest) as exc:
            if not record_failure:
                raise
            return db_instances.create_instance(
                self._engine, instance_uuid, scheduler.placement_class(resource_class),
                traits=traits, image=image, state=models.ERROR,
                fault=f'{NO_VALID_HOST}: {exc}',
                project_id=project_id, user_id=user_id, name=name, metadata=metadata,
                flavor=flavor)

    def admit(self, resource_class: str, traits: Iterable[str], image: str | None,
              instance_uuid: str, *, project_id: str, user_id: str, name: str | None,
              metadata: dict[str, str] | None, flavor: dict[str, Any] | None) -> InstanceRow:
        """Record a server the compute API admitted and will place later
        (:meth:`place_admitted`): BUILDING, with no node nor host (Nova's "scheduling")."""
        return db_instances.create_instance(
            self._engine, scheduler.check_uuid(instance_uuid),
            scheduler.placement_class(resource_class), traits=traits, image=image,
            project_id=project_id, user_id=user_id, name=name, metadata=metadata,
            flavor=flavor)

    def place_admitted(self, row: InstanceRow) -> InstanceRow:
        """Place an admitted server (:func:`scheduler.place_admitted`, with the traits its
        flavor forbids and its recorded scheduler hints); the row, placed, not yet cast."""
        pipeline = self._pipeline or scheduler.default_pipeline()
        return scheduler.place_admitted(
            self._placement, self._engine, row, owner_of=self._owner_of,
            forbidden=reschedule.forbidden_traits(row), hints=row.scheduler_hints,
            pipeline=pipeline, limit=pipeline.max_candidates or scheduler.DEFAULT_CANDIDATES)

    def start_build(self, row: InstanceRow) -> None:
        """Cast the build of a placed instance to its daemon."""
        self._compute.build_instance(row.host, row.uuid, row.member_epoch)

    def action(self, action: str, instance_uuid: str) -> InstanceRow:
        """Record ``action`` (one of :data:`ACTIONS`) as the instance's transitional state, then
        cast it to the instance's current host; the row as recorded. An action with nothing to
        do (deleting a DELETED instance, stopping a STOPPED one, starting an ACTIVE one) records
        and casts nothing. Deleting an instance in ERROR that never had a host (a build that
        found none) marks it DELETED here: no daemon has anything of it, nor is there an
        allocation.

        :raises InstanceNotFound: no such instance.
        :raises InstanceConflict: the instance's state does not allow ``action``, or it changed
            hands or state while this was recorded.
        :raises NoHost: the instance has no host to cast to.
        """
        if action not in ACTIONS:
            raise ValueError(f'action must be one of {sorted(ACTIONS)}, not {action!r}')
        transitional, allowed, done = ACTIONS[action]
        row = self.get(instance_uuid)
        if row.state in done:
            return row
        if action == 'delete' and row.host is None and row.node_uuid is None \
                and row.state == models.ERROR:
            return db_instances.set_instance_state(self._engine, row.uuid, models.DELETED,
                                                   row.fault, expect_state=models.ERROR,
                                                   release_node=True)
        if action == 'delete' and _admitted(row):
            # Not placed yet: nothing on a daemon nor in Placement. Whoever places it finds it
            # DELETED (its compare-and-set fails) and removes the allocation it made.
            return db_instances.set_instance_state(self._engine, row.uuid, models.DELETED,
                                                   expect_state=models.BUILDING,
                                                   expect_unplaced=True)
        if row.host is None:
            raise NoHost(row.uuid)
        if row.state != transitional:
            # A delete keeps the fault it deletes (what failed stays visible until DELETED).
            row = db_instances.set_instance_state(
                self._engine, row.uuid, transitional,
                row.fault if action == 'delete' else None, expect_state=allowed,
                expect_host=row.host, expect_member_epoch=row.member_epoch)
        getattr(self._compute, f'{action}_instance')(row.host, row.uuid, row.member_epoch)
        return row

    def rebuild(self, instance_uuid: str, image: str, *, preserve_ephemeral: bool = False,
                details: Mapping[str, Any] | None = None,
                expect_state: models.InstanceState | None = None) -> InstanceRow:
        """Record a rebuild of the instance on its node with ``image`` and cast it to the
        instance's current host; the row as recorded. The row moves to REBUILDING (from ACTIVE
        or ERROR) or REBUILDING_OFF (from STOPPED: it ends STOPPED again) and takes the new
        image and ``details`` (:data:`computed.db.instances.REBUILD_DETAILS`: name, metadata,
        description, access addresses, the key pair's copy, user data, config drive) in one
        compare-and-set on its state, host and member epoch: a rebuild never half-records.
        ``expect_state``: the state the caller read and judged (the API's checks), so a change
        since is a conflict rather than a rebuild from a state nobody looked at.

        :raises NeedsUpgrade: ``[upgrade_levels] instances`` is below 1.2 (nothing recorded).
        :raises InstanceNotFound: no such instance.
        :raises InstanceConflict: the instance is not ACTIVE, STOPPED or ERROR (a task in
            progress: Nova's 409), or it changed state or hands while this was recorded.
        :raises NoHost: the instance has no host, or no node, to rebuild on.
        """
        refused = self._compute.can_send('rebuild_instance')
        if refused is not None:
            raise NeedsUpgrade('rebuild_instance', refused)
        row = self.get(instance_uuid)
        if row.state not in lifecycle.REBUILD_FROM:
            raise InstanceConflict(row.uuid, 'state ' + ', '.join(sorted(
                lifecycle.REBUILD_FROM)), f'state {row.state}')
        if row.host is None or row.node_uuid is None:
            raise NoHost(row.uuid)
        transitional = models.REBUILDING_OFF if row.state == models.STOPPED \
            else models.REBUILDING
        row = db_instances.record_rebuild(
            self._engine, row.uuid, transitional, image, dict(details or {}),
            expect_state=expect_state or row.state, expect_host=row.host,
            expect_member_epoch=row.member_epoch)
        self._compute.rebuild_instance(row.host, row.uuid, row.member_epoch,
                                       preserve_ephemeral=preserve_ephemeral)
        return row

    def get(self, instance_uuid: str) -> InstanceRow:
        row = db_instances.get_instance(self._engine, scheduler.check_uuid(instance_uuid))
        if row is None:
            raise InstanceNotFound(instance_uuid)
        return row

    def wait(self, instance_uuid: str, states: Iterable[models.InstanceState] = BUILD_DONE,
             timeout: float = 600.0, interval: float = 0.2) -> InstanceRow:
        """Poll the database until the instance is in one of ``states``; the row (raises
        TimeoutError naming the instance and its last state)."""
        states = frozenset(states)
        deadline = time.monotonic() + timeout
        while True:
            row = self.get(instance_uuid)
            if row.state in states:
                return row
            if time.monotonic() >= deadline:
                raise TimeoutError(f'instance {instance_uuid}: still {row.state} after '
                                   f'{timeout:g} s')
            time.sleep(interval)
