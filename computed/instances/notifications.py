"""Versioned notifications about instances, in Nova's shape, for tools that follow servers.

Owns which notification each instance operation emits and what its payload holds. The daemon's
:class:`computed.instances.worker.InstanceWorker` calls :meth:`InstanceNotifier.start` before an
operation and :meth:`InstanceNotifier.end` with the row the operation left; they send through an
``oslo_messaging.Notifier``, so the driver (``messagingv2``, ``log``, ``noop``...), the topics and
the transport are oslo.messaging's ``[oslo_messaging_notifications]`` options, and nothing is
sent while no driver is configured (the default).

Event types, as Nova's compute service emits them::

    build_instance   instance.create.start  -> instance.create.end | instance.create.error
    delete_instance  instance.delete.start  -> instance.delete.end | instance.delete.error
    reboot_instance  instance.reboot.start  -> instance.reboot.end | instance.reboot.error
    stop_instance    instance.power_off.start -> instance.power_off.end | ...error
    start_instance   instance.power_on.start  -> instance.power_on.end  | ...error
    rebuild_instance instance.rebuild.start -> instance.rebuild.end | instance.rebuild.error

``.error`` (priority ERROR) when the operation ended in ERROR or with a fault; no ``.end``
after a build handed to another node (:mod:`computed.instances.retries`): the next node's
daemon emits its own ``instance.create.start`` and the outcome.

The payload is an ``InstanceActionPayload`` (``InstanceCreatePayload`` for create events) as a
versioned object: ``nova_object.name``, ``.namespace`` (``nova``, so that consumers of Nova's
notifications parse it unchanged), ``.version`` and ``.data`` with ``uuid``, ``state`` and
``task_state`` (Nova's vm and task states), ``display_name``, ``host``, ``node``, ``tenant_id``
and ``user_id``, ``image_uuid`` (the image reference), ``metadata``, ``flavor`` (the instance's
copy of its flavor; for an instance made without one, the resource class and required traits
as the extra specs a flavor for them has) and ``fault`` (an ``ExceptionPayload``) when there is
one.

Guarantees: a notification that cannot be sent never fails the operation (oslo.messaging logs
it); :func:`event_for` and :func:`payload` are pure.

Threads: one :class:`InstanceNotifier` per daemon is shared by the instance worker's pool
threads, several operations at once. It keeps nothing that changes: ``enabled`` is set once in
the constructor, and its ``oslo_messaging.Notifier`` may be sent through from several threads
(each message takes a pooled connection of the transport's).
"""

from __future__ import annotations

from typing import Any

import oslo_messaging

from computed.db import models
from computed.db.instances import InstanceRow

#: Operation (RPC method) -> Nova's action name in the event type.
ACTIONS = {
    'build_instance': 'create',
    'delete_instance': 'delete',
    'reboot_instance': 'reboot',
    'stop_instance': 'power_off',
    'start_instance': 'power_on',
    'rebuild_instance': 'rebuild',
}
PAYLOAD_VERSION = '1.0'
NAMESPACE = 'nova'

# computed's states as Nova's vm_state and task_state.
_VM_STATES = {
    models.BUILDING: ('building', 'spawning'),
    models.ACTIVE: ('active', None),
    models.STOPPING: ('active', 'powering-off'),
    models.STOPPED: ('stopped', None),
    models.STARTING: ('stopped', 'powering-on'),
    models.REBOOTING: ('active', 'rebooting'),
    models.ERROR: ('error', None),
    models.DELETING: ('active', 'deleting'),
    models.DELETED: ('deleted', None),
    models.REBUILDING: ('active', 'rebuilding'),
    models.REBUILDING_OFF: ('stopped', 'rebuilding'),
}
# The states each operation ends in when it succeeds (a rebuild: the power state it had).
_DONE = {
    'build_instance': {models.ACTIVE},
    'delete_instance': {models.DELETED},
    'reboot_instance': {models.ACTIVE},
    'stop_instance': {models.STOPPED},
    'start_instance': {models.ACTIVE},
    'rebuild_instance': {models.ACTIVE, models.STOPPED},
}


def event_for(operation: str, row: InstanceRow, phase: str) -> tuple[str, str] | None:
    """``(event_type, priority)`` for ``operation`` at ``phase`` (``start`` or ``end``) given the
    row before (start) or after (end); None when nothing is to be emitted."""
    action = ACTIONS[operation]
    if phase == 'start':
        return f'instance.{action}.start', 'INFO'
    if operation == 'build_instance' and row.state == models.BUILDING:
        return None  # handed to another node: its daemon reports the outcome
    if row.state in _DONE[operation] and not (row.fault and operation != 'build_instance'):
        # A build's fault lists the attempts that failed before it succeeded elsewhere.
        return f'instance.{action}.end', 'INFO'
    return f'instance.{action}.error', 'ERROR'


def payload(row: InstanceRow, action: str) -> dict[str, Any]:
    """The versioned payload of ``row`` for an event of ``action`` (Nova's shape)."""
    # InstanceState members are str: a plain stored string finds them.
    state, task_state = _VM_STATES.get(row.state, (row.state.lower(), None))
    data: dict[str, Any] = {
        'uuid': row.uuid,
        'display_name': row.name,
        'state': state,
        'task_state': task_state,
        'host': row.host,
        'node': row.node_uuid,
        'tenant_id': row.project_id,
        'user_id': row.user_id,
        'image_uuid': row.image,
        'metadata': dict(row.metadata),
        'flavor': _versioned('FlavorPayload', _flavor(row)),
        'created_at': _iso(row.created_at),
        'updated_at': _iso(row.updated_at),
        'deleted_at': _iso(row.deleted_at),
        'fault': None,
    }
    if row.fault:
        data['fault'] = _versioned('ExceptionPayload', {
            'exception': 'BuildFailed' if action == 'create' else 'InstanceFault',
            'exception_message': row.fault, 'module_name': None, 'function_name': None,
            'traceback': None})
    name = 'InstanceCreatePayload' if action == 'create' else 'InstanceActionPayload'
    return _versioned(name, data)


class InstanceNotifier:
    """Sends the instance notifications of one daemon (``publisher_id`` ``computed:<host>``)."""

    def __init__(self, transport: Any, host: str):
        self._notifier = oslo_messaging.Notifier(transport, publisher_id=f'computed:{host}')
        # No driver (the default) sends nothing, as does "noop" (what is_enabled() checks).
        drivers = transport.conf.oslo_messaging_notifications.driver
        self.enabled = bool(drivers) and self._notifier.is_enabled()

    def start(self, operation: str, row: InstanceRow) -> None:
        self._emit(operation, row, 'start')

    def end(self, operation: str, row: InstanceRow) -> None:
        self._emit(operation, row, 'end')

    def _emit(self, operation: str, row: InstanceRow, phase: str) -> None:
        if not self.enabled:
            return
        event = event_for(operation, row, phase)
        if event is None:
            return
        event_type, priority = event
        body = payload(row, ACTIONS[operation])
        if priority == 'ERROR':
            self._notifier.error({}, event_type, body)
        else:
            self._notifier.info({}, event_type, body)


def _flavor(row: InstanceRow) -> dict[str, Any]:
    """Nova's FlavorPayload fields from the instance's flavor copy; without one (an instance
    made by ``computed-manage server``) the extra specs a flavor for its class and traits has."""
    if row.flavor:
        flavor = row.flavor
        return {'flavorid': flavor.get('id'), 'name': flavor.get('name'),
                'vcpus': flavor.get('vcpus'), 'memory_mb': flavor.get('ram'),
                'root_gb': flavor.get('disk'), 'ephemeral_gb': flavor.get('ephemeral'),
                'swap': flavor.get('swap'), 'extra_specs': dict(flavor.get('extra_specs', {}))}
    specs = {f'resources:{row.resource_class}': '1'}
    specs.update({f'trait:{trait}': 'required' for trait in row.traits})
    return {'extra_specs': specs}


def _versioned(name: str, data: dict[str, Any]) -> dict[str, Any]:
    return {'nova_object.name': name, 'nova_object.namespace': NAMESPACE,
            'nova_object.version': PAYLOAD_VERSION, 'nova_object.data': data}


def _iso(value: Any) -> str | None:
    return None if value is None else value.isoformat() + 'Z'
