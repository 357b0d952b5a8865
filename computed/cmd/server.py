"""``computed-manage server ...``: create, list, show and operate instances.

``create`` schedules through Placement (:mod:`computed.instances.scheduler`), records the
instance and casts the build to the daemon owning the chosen node
(:mod:`computed.instances.rpcapi`); ``--wait`` polls the database until the instance is ACTIVE
or ERROR (exit 1 on ERROR). ``delete``, ``reboot``, ``stop`` and ``start`` cast to the
instance's current host as the database says, after checking that the instance's state allows
the action (``stop`` of a DELETED instance is refused here, in one line, rather than dropped
by the daemon; ``stop`` of a STOPPED one is, as in the lifecycle, a no-op); with ``--wait`` they
poll until the instance has settled after the action (exit 1 when it did not end where the
action leads: ERROR, or a power action that failed). Only ``create`` needs ZooKeeper (to find
the owner of the chosen node) and Placement. ``list`` and ``show`` read the database only
(``--json``: stable documents, see
:func:`document`).

Bad input (an unknown resource class or trait, a malformed uuid, an unknown instance) and
unreachable services end with one line on stderr and exit 1, never a traceback.
"""

from __future__ import annotations

import contextlib
import json
import sys
from collections.abc import Callable, Iterator
from typing import Any, TypeVar

from oslo_config import cfg

from computed.cmd import common
from computed.conf.errors import ConfigError

PROG = 'computed-manage'
EXIT_FAILED = 1
#: Seconds between two reads of the instance while ``--wait`` waits.
WAIT_INTERVAL = 0.2

T = TypeVar('T')

FIELDS = ('uuid', 'state', 'node_uuid', 'host', 'member_epoch', 'resource_class', 'traits',
          'image', 'fault', 'created_at', 'updated_at', 'deleted_at')


def document(row: Any) -> dict[str, Any]:
    """An instance as a JSON-ready dict (times ISO 8601, UTC)."""
    doc = {}
    for field in FIELDS:
        value = getattr(row, field)
        if hasattr(value, 'isoformat'):
            value = value.isoformat() + 'Z'
        elif isinstance(value, tuple):
            value = list(value)
        doc[field] = value
    return doc


def _engine(conf: cfg.ConfigOpts) -> Any:
    from computed.db import engine as db_engine
    if not conf.database.connection:
        raise ConfigError('database', 'connection', 'required by server commands')
    return db_engine.engine_from_conf(conf)


def _guard(body: Callable[[], T]) -> T:
    """Run ``body``; the expected failures become one line and exit 1."""
    from sqlalchemy import exc as sa_exc

    from computed.baremetal.driver import DriverError
    from computed.db.common import DatabaseError
    from computed.instances import scheduler
    from computed.instances.rpcapi import NoHost
    from computed.placement.http import PlacementError
    try:
        return body()
    except (scheduler.BadRequest, scheduler.NoValidHost, DatabaseError, PlacementError, NoHost,
            DriverError, TimeoutError, Refused) as exc:
        common.fail(PROG, str(exc), EXIT_FAILED)
    except sa_exc.SQLAlchemyError as exc:
        common.fail(PROG, f'database: {" ".join(str(getattr(exc, "orig", exc)).split())}',
                    EXIT_FAILED)
    except Exception as exc:  # oslo.messaging, kazoo: transport failures
        if type(exc).__module__.split('.')[0] in ('oslo_messaging', 'kazoo', 'keystoneauth1'):
            common.fail(PROG, f'{type(exc).__name__}: {exc}', EXIT_FAILED)
        raise


@contextlib.contextmanager
def _server_api(conf: cfg.ConfigOpts, engine: Any, scheduling: bool = True) -> Iterator[Any]:
    """A ServerAPI; without ``scheduling`` (the actions on an existing instance) it reaches
    no Placement, and ZooKeeper only for ``[upgrade_levels] instances = auto`` (the daemons'
    published versions)."""
    from computed.fleet.membership import fleet_root
    from computed.fleet.zookeeper import kazoo_client
    from computed.instances import scheduler
    from computed.instances.rpcapi import ComputeAPI, ServerAPI
    from computed.runtime import keystone, rpc
    transport = rpc.get_transport(conf, 'manage')
    try:
        with contextlib.ExitStack() as stack:
            if not scheduling:
                yield ServerAPI(engine, None, ComputeAPI(
                    transport, version=_cast_version(conf, stack)), _no_owner)
                return
            coordinator = stack.enter_context(common.zookeeper_coordinator(conf))
            compute = ComputeAPI(transport, version=_cast_version(conf, stack, coordinator))
            owner_of = scheduler.zookeeper_owner(kazoo_client(coordinator),
                                                 fleet_root(conf.coordination.group))
            yield ServerAPI(engine, keystone.load_adapter(conf, 'placement'), compute, owner_of)
    finally:
        transport.cleanup()


def _cast_version(conf: cfg.ConfigOpts, stack: contextlib.ExitStack,
                  coordinator: Any = None) -> Callable[[], str]:
    """The version of the casts ([upgrade_levels] instances); ``auto`` reads the daemons'
    through ``coordinator``, or a session of its own opened on ``stack``."""
    from computed.fleet.membership import drain_markers_path
    from computed.fleet.zookeeper import group_path, kazoo_client
    from computed.upgrade import levels, records
    pin, group = conf.upgrade_levels.instances, conf.coordination.group
    if pin != levels.AUTO:
        return lambda: pin
    if coordinator is None:
        try:
            coordinator = stack.enter_context(common.zookeeper_coordinator(conf))
        except ConfigError:
            # Not a ZooKeeper backend: no daemon can run on it, none publishes anything.
            return lambda: levels.newest('instances')
        except common.ServiceUnreachable as exc:
            # The action is recorded either way; the oldest version is served by every daemon.
            oldest = levels.HISTORY['instances'][0]
            print(f'{PROG}: warning: {exc}: casting at [upgrade_levels] instances {oldest}',
                  file=sys.stderr)
            return lambda: oldest
    return records.instance_levels(pin, kazoo_client(coordinator),
                                   group_path(coordinator, group), drain_markers_path(group))


def _no_owner(node: str) -> Any:
    raise AssertionError(f'node {node}: an action on an existing instance schedules nothing')


def _check_request(args: Any) -> None:
    """Refuse a bad resource class or trait before any service is reached."""
    from computed.instances import scheduler
    from computed.providers.state import is_trait_name
    scheduler.placement_class(args.resource_class)
    for trait in args.trait or ():
        if not is_trait_name(trait):
            raise scheduler.BadRequest(f'not a trait name: {trait!r}')


def server_create(conf: cfg.ConfigOpts) -> int:
    from computed.db import models
    args = conf.category
    _guard(lambda: _check_request(args))
    engine = _engine(conf)

    def create() -> Any:
        with _server_api(conf, engine) as api:
            row = api.create(args.resource_class, args.trait or (), args.image)
            print(f'instance {row.uuid}: BUILDING on node {row.node_uuid} '
                  f'(host {row.host})')
            if args.wait:
                row = api.wait(row.uuid, timeout=args.timeout)
                print(f'instance {row.uuid}: {row.state}'
                      + (f': {row.fault}' if row.fault else ''))
            return row

    try:
        row = _guard(create)
    finally:
        engine.dispose()
    return EXIT_FAILED if row.state == models.ERROR else 0


class Refused(Exception):
    """The instance's state does not allow the action; names both."""


def _allowed_from(action: str) -> frozenset:
    from computed.instances import lifecycle
    return {'delete': lifecycle.DELETE_FROM, 'reboot': lifecycle.REBOOT_FROM,
            'stop': lifecycle.STOP_FROM, 'start': lifecycle.START_FROM}[action]


def _target(action: str) -> Any:
    from computed.db import models
    return {'delete': models.DELETED, 'reboot': models.ACTIVE, 'stop': models.STOPPED,
            'start': models.ACTIVE}[action]


def _settled(before: Any, row: Any) -> bool:
    """Whether ``row`` is where the action cast on ``before`` ended: written since, and in a
    state that is not transitional (a reboot of an ACTIVE instance ends ACTIVE again, so the
    state alone cannot tell)."""
    from computed.db import models
    changed = (row.state, row.updated_at, row.fault) != (before.state, before.updated_at,
                                                        before.fault)
    return changed and row.state not in models.TRANSITIONAL_STATES


def _action(name: str) -> Callable[[cfg.ConfigOpts], int]:
    def run(conf: cfg.ConfigOpts) -> int:
        import time

        args = conf.category
        engine = _engine(conf)

        def act() -> Any:
            with _server_api(conf, engine, scheduling=False) as api:
                row = api.get(args.instance)
                if name != 'reboot' and row.state == _target(name):
                    # No-ops in the lifecycle too: nothing to send, nothing to wait for.
                    print(f'instance {row.uuid}: already {str(row.state).lower()}')
                    return row, row
                allowed = _allowed_from(name)
                if row.state not in allowed:
                    raise Refused(f'instance {row.uuid} is {row.state}: {name} needs '
                                  f"{' or '.join(sorted(allowed))}")
                before = api.action(name, row.uuid)
                print(f'instance {before.uuid}: {name} sent to {before.host}')
                if not args.wait:
                    return before, before
                deadline = time.monotonic() + args.timeout
                while not _settled(before, row := api.get(before.uuid)):
                    if time.monotonic() >= deadline:
                        raise TimeoutError(f'instance {row.uuid}: still {row.state} '
                                           f'{args.timeout:g} s after {name}')
                    time.sleep(WAIT_INTERVAL)
                print(f'instance {row.uuid}: {row.state}'
                      + (f': {row.fault}' if row.fault and row.fault != before.fault else ''))
                return before, row
        try:
            before, row = _guard(act)
        finally:
            engine.dispose()
        if before is row or row.state == _target(name):
            return 0
        return EXIT_FAILED
    return run


def server_list(conf: cfg.ConfigOpts) -> int:
    from computed.db import instances as db_instances
    engine = _engine(conf)
    try:
        rows = _guard(lambda: db_instances.live_instances(engine))
    finally:
        engine.dispose()
    if conf.category.json:
        print(json.dumps([document(row) for row in rows], indent=2, sort_keys=True))
        return 0
    header = ('UUID', 'STATE', 'NODE', 'HOST', 'RESOURCE CLASS')
    lines = [header] + [(r.uuid, r.state, r.node_uuid or '-', r.host or '-', r.resource_class)
                        for r in rows]
    widths = [max(len(line[i]) for line in lines) for i in range(len(header))]
    for line in lines:
        print('  '.join(cell.ljust(width) for cell, width in zip(line, widths)).rstrip())
    return 0


def server_show(conf: cfg.ConfigOpts) -> int:
    from computed.db import instances as db_instances
    from computed.instances import scheduler
    engine = _engine(conf)

    def show() -> Any:
        uuid = scheduler.check_uuid(conf.category.instance)
        row = db_instances.get_instance(engine, uuid)
        if row is None:
            raise db_instances.InstanceNotFound(uuid)
        return row
    try:
        row = _guard(show)
    finally:
        engine.dispose()
    doc = document(row)
    if conf.category.json:
        print(json.dumps(doc, indent=2, sort_keys=True))
    else:
        for field in FIELDS:
            value = doc[field]
            print(f'{field:15} {",".join(value) if isinstance(value, list) else value}')
    return 0


server_delete = _action('delete')
server_reboot = _action('reboot')
server_stop = _action('stop')
server_start = _action('start')
