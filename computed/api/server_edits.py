"""What a server's owner changes after creating it: ``PUT /servers/{id}`` (name, description,
access addresses), ``/servers/{id}/metadata[/{key}]`` and ``/servers/{id}/tags[/{tag}]``
(2.26; 404 before).

Owns these controllers. A server may hold as many metadata items as its project's
``metadata_items`` quota, as Nova's (the project's own, else Nova's default 128; -1 unlimited);
more is a 403 naming the limit, at creation (:func:`computed.api.quotas.check_metadata_items`)
as on every write here. Each write is one read-modify-write
under the instance's row lock (:func:`computed.db.instances.edit_instance`): two merges at once keep
both, and the count is checked against what is written.

A server holds at most 50 tags of 1 to 60 characters without ``/`` nor ``,`` (Nova's rules;
a 400 otherwise), once each, in the order they were added. Metadata and tag writes take an
ACTIVE or SHUTOFF server without a task, as Nova's (a server being built, rebooted, deleted or
in ERROR is a 409), and so are metadata writes on a locked server by a non-admin
(:func:`computed.api.servers.check_unlocked`); renaming takes any live server. A bad body is
a 400 naming the field, another project's server a 404 (:func:`computed.api.servers.get`),
and nothing is written for either.
"""

from __future__ import annotations

import urllib.parse
from collections.abc import Callable
from typing import Any

import webob

from computed.api import errors, policy, quotas, schemas, server_status, servers
from computed.api.request import Call, empty, json_response
from computed.db import instances as db_instances
from computed.db import models

UPDATE = 'compute:servers:update'
METADATA_READ = 'compute:servers:metadata:read'
METADATA_WRITE = 'compute:servers:metadata:write'
TAGS_READ = 'compute:servers:tags:read'
TAGS_WRITE = 'compute:servers:tags:write'
#: The states metadata may be written in (Nova: active, paused, suspended, stopped; no task).
WRITABLE = frozenset({models.ACTIVE.value, models.STOPPED.value})


def _server(call: Call, rule: str) -> db_instances.InstanceRow:
    row = servers.get(call, call.params['server_id'])
    policy.authorize(call.backends.enforcer, rule, call.context, {'project_id': row.project_id})
    return row


def _edit(call: Call, row: db_instances.InstanceRow,
          change: Callable[[db_instances.InstanceRow], dict[str, Any]]) -> db_instances.InstanceRow:
    try:
        return db_instances.edit_instance(call.backends.engine, row.uuid, change)
    except db_instances.InstanceNotFound:
        raise errors.NotFound(f'Instance {row.uuid} could not be found.') from None


def _writable(action: str, row: db_instances.InstanceRow) -> None:
    """409 unless the server is in a state Nova lets metadata change in."""
    if row.state not in WRITABLE:
        shown = server_status.view(row.state)
        raise errors.Conflict(f"Cannot '{action}' instance {row.uuid} while it is in vm_state "
                              f'{shown.vm_state}' + (f' (task {shown.task_state})'
                                                     if shown.task_state else ''))


def _edit_metadata(call: Call, action: str,
                   new: Callable[[dict[str, str]], dict[str, str]]) -> db_instances.InstanceRow:
    """Write ``new(metadata as it is)`` under the row lock, within the project's limit."""
    row = _server(call, METADATA_WRITE)
    servers.check_unlocked(call, action, row)  # as Nova's: a locked server's metadata stays
    _writable(action, row)
    limit = quotas.metadata_items_limit(call.backends, row.project_id)

    def change(current: db_instances.InstanceRow) -> dict[str, Any]:
        _writable(action, current)  # as it is under the lock, not as first read
        metadata = new(dict(current.metadata))
        reason = quotas.metadata_items_over(len(metadata), limit)
        if reason:
            raise errors.Forbidden(reason)
        return {'metadata': metadata}
    return _edit(call, row, change)


# -- PUT /servers/{id} ----------------------------------------------------------------------

def update(call: Call) -> webob.Response:
    """``PUT /servers/{id}``: name, description (2.19), ``accessIPv4``/``accessIPv6``;
    ``OS-DCF:diskConfig`` is taken and has no effect (docs/api.md)."""
    body = call.body(schemas.SERVER_UPDATE)['server']
    if 'description' in body and not call.at_least(2, 19):
        raise errors.BadRequest('description needs microversion 2.19 or later')
    for field, version in (('accessIPv4', 4), ('accessIPv6', 6)):
        if field in body:
            body[field] = servers.access_ip(field, body[field], version)
    row = _server(call, UPDATE)
    values: dict[str, Any] = {}
    if 'name' in body:
        values['name'] = body['name']
    if 'description' in body:
        values['description'] = body['description']
    if 'accessIPv4' in body:
        values['access_ip_v4'] = body['accessIPv4'] or None
    if 'accessIPv6' in body:
        values['access_ip_v6'] = body['accessIPv6'] or None
    row = _edit(call, row, lambda _current: values)
    # Nova's answer before 2.75: without the attributes that once were extensions.
    return json_response(200, {'server': servers.document(call, row,
                                                          servers._sees_hosts(call),
                                                          full=False)})


# -- /servers/{id}/metadata -----------------------------------------------------------------

def metadata_index(call: Call) -> webob.Response:
    row = _server(call, METADATA_READ)
    return json_response(200, {'metadata': row.metadata})


def metadata_merge(call: Call) -> webob.Response:
    """``POST``: the items given are added or replace theirs; the others stay."""
    given = call.body(schemas.SERVER_METADATA)['metadata']
    row = _edit_metadata(call, 'update metadata', lambda current: {**current, **given})
    return json_response(200, {'metadata': row.metadata})


def metadata_replace(call: Call) -> webob.Response:
    """``PUT``: the items given are the server's metadata, the others removed."""
    given = call.body(schemas.SERVER_METADATA)['metadata']
    row = _edit_metadata(call, 'update metadata', lambda _current: dict(given))
    return json_response(200, {'metadata': row.metadata})


def _not_found(server_id: str, key: str) -> errors.NotFound:
    return errors.NotFound(f'Metadata item {key} was not found on instance {server_id}.')


def metadata_show(call: Call) -> webob.Response:
    row = _server(call, METADATA_READ)
    key = call.params['key']
    if key not in row.metadata:
        raise _not_found(row.uuid, key)
    return json_response(200, {'meta': {key: row.metadata[key]}})


def metadata_set(call: Call) -> webob.Response:
    """``PUT /metadata/{key}`` with ``{"meta": {key: value}}``: the key of the body must be the
    key of the URL (400 otherwise, as Nova)."""
    (key, value), = call.body(schemas.SERVER_METADATA_ITEM)['meta'].items()
    if key != call.params['key']:
        raise errors.BadRequest('Request body and URI mismatch')
    _edit_metadata(call, 'update metadata', lambda current: {**current, key: value})
    return json_response(200, {'meta': {key: value}})


def metadata_delete(call: Call) -> webob.Response:
    key = call.params['key']

    def without(current: dict[str, str]) -> dict[str, str]:
        if key not in current:
            raise _not_found(call.params['server_id'], key)
        return {k: v for k, v in current.items() if k != key}
    _edit_metadata(call, 'delete metadata', without)
    return empty(204)


# -- /servers/{id}/tags (2.26) --------------------------------------------------------------

#: Nova's limits of a server's tags.
MAX_TAGS = 50
TAG_LENGTH = 60


def tag_problem(tag: str) -> str | None:
    """Why ``tag`` cannot be a tag (Nova's rules: 1 to 60 characters, no ``/`` nor ``,``, no
    control character here), or None. Pure."""
    if not 1 <= len(tag) <= TAG_LENGTH:
        return f'Tag {tag[:TAG_LENGTH]!r} must be 1 to {TAG_LENGTH} characters long'
    if ',' in tag or '/' in tag:
        return f"Tag {tag!r} must not hold ',' nor '/'"
    if any(ord(ch) < 0x20 or ord(ch) == 0x7f for ch in tag):
        return 'A tag must not hold control characters'
    return None


def _tags_version(call: Call) -> None:
    if not call.at_least(2, 26):
        raise errors.NotFound('Server tags need microversion 2.26 or later')


def _edit_tags(call: Call, new: Callable[[tuple[str, ...]], list[str]]
               ) -> db_instances.InstanceRow:
    """Write ``new(tags as they are)`` under the row lock, within Nova's 50."""
    row = _server(call, TAGS_WRITE)
    _writable('update tags', row)

    def change(current: db_instances.InstanceRow) -> dict[str, Any]:
        _writable('update tags', current)
        tags = list(dict.fromkeys(new(current.tags)))  # once each, in order
        if len(tags) > MAX_TAGS:
            raise errors.BadRequest(f'The number of tags exceeded the per-server limit '
                                    f'{MAX_TAGS}')
        return {'tags': tags}
    return _edit(call, row, change)


def tags_index(call: Call) -> webob.Response:
    _tags_version(call)
    return json_response(200, {'tags': list(_server(call, TAGS_READ).tags)})


def tags_replace(call: Call) -> webob.Response:
    _tags_version(call)
    given = call.body(schemas.SERVER_TAGS)['tags']
    for tag in given:
        problem = tag_problem(tag)
        if problem:
            raise errors.BadRequest(problem)
    row = _edit_tags(call, lambda _current: list(given))
    return json_response(200, {'tags': list(row.tags)})


def tags_clear(call: Call) -> webob.Response:
    _tags_version(call)
    _edit_tags(call, lambda _current: [])
    return empty(204)


def tag_show(call: Call) -> webob.Response:
    _tags_version(call)
    tag = call.params['tag']
    if tag not in _server(call, TAGS_READ).tags:
        raise errors.NotFound(f"Tag '{tag}' could not be found for instance "
                              f"{call.params['server_id']}.")
    return empty(204)


def tag_add(call: Call) -> webob.Response:
    """``PUT /tags/{tag}``: 201 with its Location when added, 204 when it was there."""
    _tags_version(call)
    tag = call.params['tag']
    problem = tag_problem(tag)
    if problem:
        raise errors.BadRequest(problem)
    if call.request.body:
        call.body(schemas.SERVER_TAG)
    before: list[tuple[str, ...]] = []

    def add(current: tuple[str, ...]) -> list[str]:
        before.append(current)
        return [*current, tag]
    _edit_tags(call, add)
    if tag in before[-1]:
        return empty(204)
    location = f"{call.base_url}/servers/{call.params['server_id']}/tags/" \
               f"{urllib.parse.quote(tag, safe='')}"
    return empty(201, {'Location': location})


def tag_delete(call: Call) -> webob.Response:
    _tags_version(call)
    tag = call.params['tag']

    def without(current: tuple[str, ...]) -> list[str]:
        if tag not in current:
            raise errors.NotFound(f"Tag '{tag}' could not be found for instance "
                                  f"{call.params['server_id']}.")
        return [t for t in current if t != tag]
    _edit_tags(call, without)
    return empty(204)
