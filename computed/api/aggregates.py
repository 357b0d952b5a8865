"""``/os-aggregates``: Nova's host aggregates, named groups of compute hosts with metadata,
where a host is a daemon (as in ``/os-services`` and ``/os-hosts``).

Owns the aggregate documents, the request schemas and the checks before anything is written
(the rows are :mod:`computed.db.aggregates`'). Everything is an admin's, each action under its
own rule as Nova's (``compute:aggregates:index``, ``create``, ``show``, ``update``, ``delete``,
``add_host``, ``remove_host``, ``set_metadata``; others a 403, checked first).

What an aggregate does here: nothing places by it. Nova uses aggregates three ways, and
computed has none of them: (1) availability zones (an aggregate's ``availability_zone``):
computed has one zone, ``nova`` (:mod:`computed.api.zones`), so an aggregate's zone may only be
``nova`` (any other, at creation, update or as the ``availability_zone`` metadata key, is a
400: it would be a zone no server could be built in); (2) the scheduler's aggregate filters
(``AggregateInstanceExtraSpecsFilter``...), which computed's scheduler does not have
(:mod:`computed.scheduling.filters`); (3) Placement aggregates: Nova puts the resource
providers of a host's compute nodes in a Placement aggregate of the same uuid, for
``member_of`` requests; computed does not, because a daemon's nodes are its share of the hash
ring, which moves with every join and leave (the providers' aggregates would have to follow
each rebalance), and a flavor's ``member_of`` names Placement aggregates directly. So an
aggregate records a grouping of daemons and its metadata for operators and their tools.

Checks, with Nova's codes, nothing written when one fails: an id that is not an integer 400,
no such aggregate 404, a name taken 409, a body Nova's schema refuses 400; adding a host that is
no daemon 404 (``Compute host ... could not be found.``), one already in it 409; removing a host
not in it 404; deleting an aggregate that has hosts 400.
"""

from __future__ import annotations

import re
from typing import Any

import webob

from computed.api import errors, limits, policy, schemas, services, zones
from computed.api.request import Call, empty, json_response, microsecond_time
from computed.db import aggregates as db_aggregates

RULE = 'compute:aggregates:%s'
AZ_KEY = 'availability_zone'

_AZ = {'type': ['string', 'null'], 'minLength': 1, 'maxLength': 255}
_HOST = {'type': 'string', 'minLength': 1, 'maxLength': 255, 'pattern': r'^[a-zA-Z0-9-._]*$'}
#: A name as an update takes it: spaces around it are dropped (Nova's normalize_name).
_PADDED_NAME = {'type': 'string', 'minLength': 1, 'maxLength': 255,
                'pattern': schemas.PRINTABLE}


def _body(name: str, fields: dict[str, Any], required: list[str] | None = None,
          **extra: Any) -> dict[str, Any]:
    inner: dict[str, Any] = {'type': 'object', 'properties': fields,
                             'additionalProperties': False, **extra}
    if required:
        inner['required'] = required
    return {'type': 'object', 'properties': {name: inner}, 'required': [name],
            'additionalProperties': False}


CREATE = _body('aggregate', {'name': schemas.NAME, AZ_KEY: _AZ}, ['name'])
UPDATE = _body('aggregate', {'name': _PADDED_NAME, AZ_KEY: _AZ},
               anyOf=[{'required': ['name']}, {'required': [AZ_KEY]}])
ACTIONS = {
    'add_host': _body('add_host', {'host': _HOST}, ['host']),
    'remove_host': _body('remove_host', {'host': _HOST}, ['host']),
    'set_metadata': _body('set_metadata', {'metadata': {
        'type': 'object',
        'patternProperties': {r'^[a-zA-Z0-9-_:. ]{1,255}$': {
            'type': ['string', 'null'], 'maxLength': 255}},
        'additionalProperties': False}}, ['metadata']),
}
_INTEGER = re.compile(r'^-?[0-9]+$')


def view(call: Call, row: db_aggregates.AggregateRow, members: bool = True) -> dict[str, Any]:
    """Nova's aggregate document (``uuid`` from 2.41); a create's answer has no ``hosts``
    nor ``metadata``, as Nova's."""
    document: dict[str, Any] = {
        'id': row.id, 'name': row.name, AZ_KEY: row.metadata.get(AZ_KEY),
        'created_at': microsecond_time(row.created_at),
        'updated_at': microsecond_time(row.updated_at), 'deleted_at': None, 'deleted': False}
    if members:
        document.update(hosts=list(row.hosts), metadata=dict(row.metadata))
    if call.at_least(2, 41):
        document['uuid'] = row.uuid
    return document


def check_zone(value: str | None) -> None:
    """400 unless ``value`` (an aggregate's zone; None removes it) is one computed has."""
    if value is not None and value.strip() != zones.ZONE:
        raise errors.BadRequest(f'Invalid availability_zone {value[:64]!r}: computed has one '
                                f'availability zone, {zones.ZONE!r}, and an aggregate\'s zone '
                                'can only be that one')


def _authorized(call: Call, action: str) -> None:
    policy.authorize(call.backends.enforcer, RULE % action, call.context)


def _aggregate_id(call: Call) -> int:
    """The id of the path: 400 unless an integer (Nova's), 404 beyond the database's."""
    text = call.params['aggregate_id']
    if not _INTEGER.fullmatch(text):
        raise errors.BadRequest(f'id must be an integer, not {text[:64]!r}')
    value = int(text)
    if abs(value) > limits.MAX_INT:
        raise _not_found(value)
    return value


def _not_found(aggregate_id: int) -> errors.NotFound:
    return errors.NotFound(f'Aggregate {aggregate_id} could not be found.')


def _answer(call: Call, row: db_aggregates.AggregateRow) -> webob.Response:
    return json_response(200, {'aggregate': view(call, row)})


def index(call: Call) -> webob.Response:
    _authorized(call, 'index')
    rows = db_aggregates.list_aggregates(call.backends.engine)
    return json_response(200, {'aggregates': [view(call, row) for row in rows]})


def create(call: Call) -> webob.Response:
    _authorized(call, 'create')
    spec = call.body(CREATE)['aggregate']
    zone = spec.get(AZ_KEY)
    check_zone(zone)
    metadata = {} if zone is None else {AZ_KEY: zone.strip()}
    try:
        row = db_aggregates.create_aggregate(call.backends.engine, spec['name'], metadata)
    except db_aggregates.AggregateExists:
        raise errors.Conflict(f"Aggregate {spec['name']} already exists.") from None
    return json_response(200, {'aggregate': view(call, row, members=False)})


def show(call: Call) -> webob.Response:
    _authorized(call, 'show')
    aggregate_id = _aggregate_id(call)
    try:
        return _answer(call, db_aggregates.get_aggregate(call.backends.engine, aggregate_id))
    except db_aggregates.AggregateNotFound:
        raise _not_found(aggregate_id) from None


def update(call: Call) -> webob.Response:
    _authorized(call, 'update')
    spec = call.body(UPDATE)['aggregate']
    aggregate_id = _aggregate_id(call)
    name = spec['name'].strip() if 'name' in spec else None
    if name == '':
        raise errors.BadRequest('Invalid input for field/attribute name: empty once stripped')
    metadata: dict[str, str | None] = {}
    if AZ_KEY in spec:
        check_zone(spec[AZ_KEY])
        metadata[AZ_KEY] = None if spec[AZ_KEY] is None else spec[AZ_KEY].strip()
    return _answer(call, _changed(call, aggregate_id, name=name, metadata=metadata))


def _changed(call: Call, aggregate_id: int, **changes: Any) -> db_aggregates.AggregateRow:
    try:
        return db_aggregates.update_aggregate(call.backends.engine, aggregate_id, **changes)
    except db_aggregates.AggregateNotFound:
        raise _not_found(aggregate_id) from None
    except db_aggregates.AggregateExists:
        raise errors.Conflict(f"Aggregate {changes.get('name')} already exists.") from None


def delete(call: Call) -> webob.Response:
    _authorized(call, 'delete')
    aggregate_id = _aggregate_id(call)
    try:
        db_aggregates.delete_aggregate(call.backends.engine, aggregate_id)
    except db_aggregates.AggregateNotFound:
        raise _not_found(aggregate_id) from None
    except db_aggregates.AggregateNotEmpty:
        raise errors.BadRequest(f'Cannot delete aggregate {aggregate_id}: it has hosts (remove '
                                'them first)') from None
    return empty(200)


def action(call: Call) -> webob.Response:
    """``POST /os-aggregates/{id}/action``: ``add_host``, ``remove_host``, ``set_metadata``."""
    raw = call.body({'type': 'object', 'minProperties': 1, 'maxProperties': 1})
    (name,) = raw
    if name not in ACTIONS:
        raise errors.BadRequest(f'Unknown aggregate action {name[:64]!r}: one of '
                                f'{", ".join(sorted(ACTIONS))}')
    _authorized(call, name)
    schemas.validate(ACTIONS[name], raw)
    aggregate_id = _aggregate_id(call)
    engine = call.backends.engine
    try:
        if name == 'set_metadata':
            metadata = raw[name]['metadata']
            if AZ_KEY in metadata:
                check_zone(metadata[AZ_KEY])
            return _answer(call, _changed(call, aggregate_id, metadata=metadata))
        host = raw[name]['host']
        if name == 'add_host':
            if host not in {daemon['host'] for daemon in services.daemons(call.backends)}:
                raise errors.NotFound(f'Compute host {host} could not be found.')
            try:
                return _answer(call, db_aggregates.add_host(engine, aggregate_id, host))
            except db_aggregates.HostInAggregate:
                raise errors.Conflict(f'Aggregate {aggregate_id} already has host '
                                      f'{host}.') from None
        try:
            return _answer(call, db_aggregates.remove_host(engine, aggregate_id, host))
        except db_aggregates.HostNotInAggregate:
            raise errors.NotFound(f'Cannot remove host {host} in aggregate '
                                  f'{aggregate_id}') from None
    except db_aggregates.AggregateNotFound:
        raise _not_found(aggregate_id) from None
