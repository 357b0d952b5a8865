"""``/os-quota-class-sets/{class}``: the default quotas (Nova's quota class ``default``).

Owns these controllers (admins: policies ``compute:quota_classes:show`` and ``:update``). As
Nova's: a quota class has Nova's quota keys of the microversion (before 2.50 without
``server_groups``/``server_group_members``, from 2.50 without the network keys, from 2.57
without the injected-file keys); its values are what was set for it, else the configured
defaults (:func:`computed.api.quotas.configured_defaults`: ``[quota]`` and Nova's). Only the
class ``default`` is read by the quotas: its values are the limits of every project that has
none of its own (:mod:`computed.api.quotas`); another class's values are kept and shown, and
used by nothing, as in Nova. ``PUT`` takes any of the keys the microversion shows (an integer
from -1, unlimited), records them at once and answers the class's set without its ``id``; a
bad body is a 400 naming the key, and nothing is written.
"""

from __future__ import annotations

from typing import Any

import webob

from computed.api import errors, limits, policy, quota_rules, quotas, schemas
from computed.api.request import Call, json_response
from computed.db import quotas as db_quotas

SHOW = 'compute:quota_classes:show'
UPDATE = 'compute:quota_classes:update'
#: Nova's quota class keys (every quota but ``networks``) and when they are shown.
BEFORE_2_50 = frozenset({'server_groups', 'server_group_members'})
NETWORK_KEYS = frozenset(quotas.FIXED_BEFORE_2_36)
INJECTED_KEYS = frozenset(quotas.FIXED_BEFORE_2_57)
KEYS = frozenset({quota_rules.INSTANCES, *quotas.FIXED, *NETWORK_KEYS, *INJECTED_KEYS})


def keys(call: Call) -> frozenset[str]:
    """The keys the quota class sets of this request's microversion have."""
    if not call.at_least(2, 50):
        return KEYS - BEFORE_2_50
    if not call.at_least(2, 57):
        return KEYS - NETWORK_KEYS
    return KEYS - NETWORK_KEYS - INJECTED_KEYS


def _class_set(call: Call, class_name: str) -> dict[str, int]:
    own = db_quotas.quota_class_limits(call.backends.engine, class_name)
    values = {**quotas.configured_defaults(call.backends), **own}
    return {key: values[key] for key in sorted(keys(call))}


def show(call: Call) -> webob.Response:
    policy.authorize(call.backends.enforcer, SHOW, call.context)
    class_name = call.params['quota_class']
    return json_response(200, {'quota_class_set': {**_class_set(call, class_name),
                                                   'id': class_name}})


def update(call: Call) -> webob.Response:
    policy.authorize(call.backends.enforcer, UPDATE, call.context)
    class_name = call.params['quota_class']
    if len(class_name) > limits.MAX_ID_LENGTH:
        raise errors.BadRequest(f'quota_class_name: longer than {limits.MAX_ID_LENGTH} '
                                'characters')
    body: dict[str, Any] = call.body(schemas.QUOTA_CLASS_UPDATE)['quota_class_set']
    allowed = keys(call)
    for key in body:
        if key not in allowed:
            raise errors.BadRequest(f'Quota class key {key} is not taken at microversion '
                                    f'{call.version}')
    values = {key: limits.integer(value, f'Quota class limit of {key}', quota_rules.UNLIMITED)
              for key, value in body.items()}
    db_quotas.set_quota_class_limits(call.backends.engine, class_name, values)
    return json_response(200, {'quota_class_set': _class_set(call, class_name)})
