"""``/os-keypairs``: each user's key pairs, as Nova's (list, show, create or import, delete).

Owns the key pair documents of each microversion and the checks before anything is written.
A key pair belongs to a user, not a project: a user sees, uses and deletes only their own,
and a name is unique per user. From 2.10 an admin names another user (``user_id`` in the
query, or in the body of a create; policy ``compute:keypairs:*`` with the target's
``user_id``, as Nova's ``os_compute_api:os-keypairs:*``). 2.2 adds ``type`` (``ssh`` or
``x509``) and answers a create with 201 and a delete with 204 (before: 200 and 202); 2.35
pages the listing by ``limit``/``marker`` (a name).

A create without ``public_key`` generates the key pair (:mod:`computed.api.public_keys`) and
returns the private key once; it is never stored. An imported key must be one of its type
(400 naming ``public_key`` otherwise). The ``key_pairs`` quota (the project's own value, else
the default quota class's, else Nova's default of 100) bounds each user's key pairs, as Nova
counts them: checked before the insert and again after it (the insert is undone if concurrent
creates went past the limit), so a user never keeps more than the limit. A server built with
a key pair keeps a copy of its public key (:mod:`computed.api.servers`): deleting the key pair
changes no server.

Threads: request threads only; nothing is shared but the database (one transaction a call).
"""

from __future__ import annotations

from typing import Any

import webob

from computed.api import errors, policy, public_keys, quotas, schemas
from computed.api.request import Call, empty, json_response
from computed.db import key_pairs as db_key_pairs

INDEX = 'compute:keypairs:index'
SHOW = 'compute:keypairs:show'
CREATE = 'compute:keypairs:create'
DELETE = 'compute:keypairs:delete'
QUOTA_KEY = 'key_pairs'


def _time(value: Any) -> str:
    return value.strftime('%Y-%m-%dT%H:%M:%S.%f')


def _document(call: Call, row: db_key_pairs.KeyPairRow, fields: tuple[str, ...]) -> dict[str, Any]:
    doc: dict[str, Any] = {'name': row.name, 'public_key': row.public_key,
                           'fingerprint': row.fingerprint}
    if 'user_id' in fields:
        doc['user_id'] = row.user_id
    if 'show' in fields:
        # Nova's soft-delete fields: never set, shown as Nova shows them.
        doc.update({'created_at': _time(row.created_at), 'deleted': False,
                    'deleted_at': None, 'updated_at': None, 'id': row.id})
    if call.at_least(2, 2):
        doc['type'] = row.type
    return doc


def _user(call: Call, rule: str, requested: str | None = None) -> str:
    """The user whose key pairs the call is about: the caller, or from 2.10 the ``user_id``
    an admin named; 403 naming ``rule`` when the caller may not act for that user."""
    user_id = call.context.user_id
    if call.at_least(2, 10):
        user_id = requested or call.query('user_id') or user_id
    policy.authorize(call.backends.enforcer, rule, call.context,
                     {'user_id': user_id, 'project_id': call.context.project_id})
    return user_id


def _not_found(user_id: str, name: str) -> errors.NotFound:
    return errors.NotFound(f'Keypair {name} not found for user {user_id}')


def index(call: Call) -> webob.Response:
    user_id = _user(call, INDEX)
    limit = marker = None
    if call.at_least(2, 35):
        marker, limit = call.query('marker'), call.limit()
    try:
        rows = db_key_pairs.list_key_pairs(call.backends.engine, user_id, marker=marker,
                                           limit=limit)
    except db_key_pairs.KeyPairNotFound:
        raise errors.BadRequest(f'marker [{marker}] not found') from None
    body: dict[str, Any] = {'keypairs': [{'keypair': _document(call, row, ())}
                                         for row in rows]}
    if limit is not None and rows and len(rows) == limit:
        body['keypairs_links'] = call.next_links('/os-keypairs', rows[-1].name, limit)
    return json_response(200, body)


def show(call: Call) -> webob.Response:
    name = call.params['name']
    user_id = _user(call, SHOW)
    try:
        row = db_key_pairs.get_key_pair(call.backends.engine, user_id, name)
    except db_key_pairs.KeyPairNotFound:
        raise _not_found(user_id, name) from None
    return json_response(200, {'keypair': _document(call, row, ('user_id', 'show'))})


def _schema(call: Call) -> dict[str, Any]:
    if call.at_least(2, 10):
        return schemas.KEYPAIR_CREATE_2_10
    return schemas.KEYPAIR_CREATE_2_2 if call.at_least(2, 2) else schemas.KEYPAIR_CREATE


def key_pair_limit(call: Call) -> int:
    """The ``key_pairs`` limit of the caller's project: its own, else the default in force
    (-1: unlimited)."""
    return quotas.limit_in_force(call.backends, call.context.project_id, QUOTA_KEY)


def _over_quota(call: Call, user_id: str, adding: int) -> bool:
    limit = key_pair_limit(call)
    count = db_key_pairs.count_key_pairs(call.backends.engine, user_id)
    return limit >= 0 and count + adding > limit


def create(call: Call) -> webob.Response:
    body = call.body(_schema(call))['keypair']
    name = body['name']
    key_type = body.get('type', public_keys.SSH)
    user_id = _user(call, CREATE, body.get('user_id'))
    over = errors.Forbidden(f'Quota exceeded, too many key pairs (user {user_id}, limit '
                            f'{key_pair_limit(call)}): key pair {name!r} not created')
    if _over_quota(call, user_id, 1):
        raise over
    private_key = None
    if 'public_key' in body:
        public_key = body['public_key']
        try:
            fingerprint = public_keys.fingerprint(public_key, key_type)
        except public_keys.InvalidKey as exc:
            raise errors.BadRequest(f'Keypair data is invalid: public_key of key pair '
                                    f'{name!r}: {exc}') from None
    else:
        private_key, public_key, fingerprint = public_keys.generate(key_type, user_id)
    engine = call.backends.engine
    try:
        row = db_key_pairs.create_key_pair(engine, user_id, name, key_type, public_key, fingerprint)
    except db_key_pairs.KeyPairExists:
        raise errors.Conflict(f"Key pair '{name}' already exists.") from None
    if _over_quota(call, user_id, 0):  # concurrent creates went past the limit: undo ours
        db_key_pairs.delete_key_pair(engine, user_id, name)
        raise over
    doc = _document(call, row, ('user_id',))
    if private_key is not None:
        doc['private_key'] = private_key
    return json_response(201 if call.at_least(2, 2) else 200, {'keypair': doc})


def delete(call: Call) -> webob.Response:
    name = call.params['name']
    user_id = _user(call, DELETE)
    try:
        db_key_pairs.delete_key_pair(call.backends.engine, user_id, name)
    except db_key_pairs.KeyPairNotFound:
        raise _not_found(user_id, name) from None
    return empty(204 if call.at_least(2, 2) else 202)
