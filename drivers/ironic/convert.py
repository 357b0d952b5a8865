"""Turning Ironic API node records into :class:`computed.baremetal.driver.Node`.

Owns the list of fields computed asks Ironic for and the checks on what
comes back. Guarantees: :func:`node_from_api` either returns a complete,
well-typed ``Node`` or raises :class:`MalformedNode` naming the node uuid
(when readable) and the field; it never lets a ``KeyError``/``TypeError``
out, so one bad record cannot break a listing.
"""

from __future__ import annotations

import re
import sys
import uuid as uuidlib
from collections.abc import Mapping
from typing import Any

from computed.baremetal.driver import NO_PROPERTIES, MalformedNode, Node, shared_uuid

#: What ``GET /v1/nodes?fields=`` asks for. ``updated_at`` is not in this
#: list: Ironic (39.0, API 1.115) rejects it in ``fields`` ("not a valid
#: field"), so it is only available from the detailed listing.
LIST_FIELDS = ('uuid', 'name', 'resource_class', 'provision_state',
               'target_provision_state', 'power_state', 'maintenance',
               'instance_uuid', 'traits', 'conductor_group', 'shard',
               'last_error', 'properties')

_OPTIONAL_STR = ('name', 'resource_class', 'provision_state',
                 'target_provision_state', 'power_state', 'shard',
                 'last_error', 'updated_at')
#: Values thousands of nodes repeat: one shared string each (a daemon keeps
#: every node of the fleet; a parsed listing makes a new string per node).
_SHARED = frozenset(('resource_class', 'provision_state',
                     'target_provision_state', 'power_state', 'shard'))
#: A uuid as Ironic writes it (lower case, hyphens): taken as it is, without a UUID object.
_CANONICAL = re.compile(r'[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}')


def node_from_api(record: Any) -> Node:
    """A ``Node`` from one element of Ironic's ``nodes`` list (or a node)."""
    if not isinstance(record, Mapping):
        raise MalformedNode(None, '<record>',
                            f'expected an object, got {type(record).__name__}')
    node_uuid = _uuid(record.get('uuid'))
    values: dict[str, Any] = {'uuid': node_uuid}
    for field in _OPTIONAL_STR:
        value = _optional_str(record, field, node_uuid)
        values[field] = (sys.intern(value) if value is not None and field in _SHARED
                         else value)
    values['instance_uuid'] = _instance_uuid(record, node_uuid)
    values['maintenance'] = _maintenance(record, node_uuid)
    values['traits'] = _traits(record, node_uuid)
    # None and '' both mean Ironic's default (unnamed) conductor group.
    values['conductor_group'] = sys.intern(
        _optional_str(record, 'conductor_group', node_uuid) or '')
    values['properties'] = _properties(record, node_uuid)
    return Node(**values)


def _uuid(value: Any) -> str:
    """The node's uuid in canonical form, as the one string the daemon keeps for it
    (:func:`~computed.baremetal.driver.shared_uuid`): a listing's copy of a known node's uuid
    is dropped at once, and the catalog, the providers and the plan share one string."""
    if not isinstance(value, str):
        raise MalformedNode(None, 'uuid', f'expected a string, got {value!r}')
    if _CANONICAL.fullmatch(value) is None:
        try:
            value = str(uuidlib.UUID(value))
        except ValueError:
            raise MalformedNode(None, 'uuid', f'not a UUID: {value!r}')
    return shared_uuid(value)


def _optional_str(record: Mapping, field: str, node_uuid: str) -> str | None:
    value = record.get(field)
    if value is not None and not isinstance(value, str):
        raise MalformedNode(node_uuid, field,
                            f'expected a string or null, got {value!r}')
    return value


def _instance_uuid(record: Mapping, node_uuid: str) -> str | None:
    value = _optional_str(record, 'instance_uuid', node_uuid)
    if value is None:
        return None
    try:
        return str(uuidlib.UUID(value))
    except ValueError:
        raise MalformedNode(node_uuid, 'instance_uuid',
                            f'not a UUID: {value!r}')


def _maintenance(record: Mapping, node_uuid: str) -> bool:
    value = record.get('maintenance', False)
    # bool('false') is True: accept only real booleans.
    if not isinstance(value, bool):
        raise MalformedNode(node_uuid, 'maintenance',
                            f'expected a boolean, got {value!r}')
    return value


def _traits(record: Mapping, node_uuid: str) -> tuple[str, ...]:
    value = record.get('traits')
    if value is None:
        return ()
    if not isinstance(value, list):
        raise MalformedNode(node_uuid, 'traits',
                            f'expected a list, got {value!r}')
    for trait in value:
        if not isinstance(trait, str):
            raise MalformedNode(node_uuid, 'traits',
                                f'expected strings, got {trait!r}')
    return tuple(sorted({sys.intern(trait) for trait in value}))


def _properties(record: Mapping, node_uuid: str) -> Mapping[str, str]:
    value = record.get('properties')
    if value is None:
        return NO_PROPERTIES
    if not isinstance(value, Mapping):
        raise MalformedNode(node_uuid, 'properties',
                            f'expected an object, got {value!r}')
    capabilities = value.get('capabilities')
    if capabilities is None:
        return NO_PROPERTIES
    if not isinstance(capabilities, str):
        raise MalformedNode(node_uuid, 'properties.capabilities',
                            f'expected a string, got {capabilities!r}')
    return {'capabilities': capabilities}
