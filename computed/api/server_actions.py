"""Server actions besides the lifecycle's (``reboot``, ``os-stop``, ``os-start``,
``os-resetState``: :mod:`computed.api.servers`; ``rebuild``: :mod:`computed.api.server_rebuild`):
``lock``/``unlock``, a server's security groups, ``forceDelete``, and Nova's actions computed
does not serve.

Owns these actions' answers, each as Nova's: the server is looked up first (another project's
or an unknown server is a 404, :func:`computed.api.servers.get`), then the policy, then the
state. Guarantees:

* ``lock``: the server is locked by its owner (a member of its project) or by an admin (anyone
  else allowed), kept on its row (``locked_by``, Nova's ``owner``/``admin``); locking a server
  its owner locked already changes nothing. A locked server refuses its lifecycle actions,
  metadata writes and deletion to non-admins with a 409
  (:func:`computed.api.servers.check_unlocked`, which those callers run). ``unlock`` by the
  one who locked it (an owner cannot undo an admin's lock without policy
  ``compute:servers:unlock:override``: a 403).
* ``addSecurityGroup``/``removeSecurityGroup``: a server here has no ports, so no group is
  applied to anything; which groups a server is in is kept as a note, shown in its
  ``security_groups`` as Nova shows them (no key when in none). The only group is ``default``
  (a server is created in it, as Nova's create answer says): removing it from a server in it,
  or adding it to one that is not, is a 202; the other way round a 400 (Nova's "not
  associated" / "already associated"); any other group does not exist (404 naming it, as Nova
  answers for a group Neutron does not have).
* Nova's other actions (:data:`UNSUPPORTED`): a 404 for a server that does not exist, a 409
  when Nova would refuse the server's state (a ``restore`` of a server that is not soft
  deleted: computed never soft deletes), else a 400 saying computed does not serve it and why.
  A name Nova does not know either is a 400 ("There is no such action"). ``forceDelete`` is
  a delete (Nova's deletes in any state; there is no soft delete here to skip).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import webob

from computed.api import errors, policy, schemas, server_rebuild, server_status, servers
from computed.api.request import Call, empty
from computed.db import instances as db_instances

LOCK = 'compute:servers:lock'
UNLOCK = 'compute:servers:unlock'
UNLOCK_OVERRIDE = 'compute:servers:unlock:override'
SECURITY_GROUPS = 'compute:servers:security_groups'
#: Nova's ``locked_by``: the project owning the server locked it, or someone else (an admin).
OWNER, ADMIN = 'owner', 'admin'
#: The only security group (Nova's create answer names it).
DEFAULT_GROUP = db_instances.DEFAULT_SECURITY_GROUP

#: Nova's actions computed does not serve: name -> (the vm_states Nova takes it in, why not
#: here). Nova refuses a server in another state with a 409 before anything else; so does
#: computed, then answers 400 with the reason.
UNSUPPORTED: dict[str, tuple[frozenset[str], str]] = {
    'migrate': (frozenset({'active', 'stopped'}),
                'cold migration: a bare-metal server is its node and cannot move to another'),
    'os-migrateLive': (frozenset({'active', 'paused'}),
                       'live migration: a bare-metal server is its node'),
    'resize': (frozenset({'active', 'stopped'}),
               'resize: a bare-metal server is its node; rebuild on a node of another flavor '
               'instead (a new server)'),
    'confirmResize': (frozenset({'resized'}), 'resize'),
    'revertResize': (frozenset({'resized'}), 'resize'),
    'restore': (frozenset({'soft-delete'}),
                'soft delete: a deleted server is deleted at once (Nova\'s '
                'reclaim_instance_interval = 0)'),
    'pause': (frozenset({'active'}), 'pause: Ironic cannot pause a node'),
    'unpause': (frozenset({'paused'}), 'pause: Ironic cannot pause a node'),
    'suspend': (frozenset({'active'}), 'suspend: Ironic cannot suspend a node'),
    'resume': (frozenset({'suspended'}), 'suspend: Ironic cannot suspend a node'),
    'shelve': (frozenset({'active', 'stopped', 'paused', 'suspended'}),
               'shelve: it needs snapshots (no Glance uploads here)'),
    'shelveOffload': (frozenset({'shelved'}), 'shelve'),
    'unshelve': (frozenset({'shelved', 'shelved_offloaded'}), 'shelve'),
    'rescue': (frozenset({'active', 'stopped', 'error'}), 'rescue'),
    'unrescue': (frozenset({'rescued'}), 'rescue'),
    'createImage': (frozenset({'active', 'stopped', 'paused', 'suspended'}),
                    'snapshots: Ironic cannot image a node\'s disk'),
    'createBackup': (frozenset({'active', 'stopped', 'paused', 'suspended'}),
                     'backups: Ironic cannot image a node\'s disk'),
    'changePassword': (frozenset({'active'}), 'passwords: computed sets none on a node'),
}


def _server(call: Call, rule: str) -> db_instances.InstanceRow:
    row = servers.get(call, call.params['server_id'])
    policy.authorize(call.backends.enforcer, rule, call.context, {'project_id': row.project_id})
    return row


def _state_conflict(name: str, row: db_instances.InstanceRow) -> errors.Conflict:
    shown = server_status.view(row.state)
    return errors.Conflict(f"Cannot '{name}' instance {row.uuid} while it is in vm_state "
                           f'{shown.vm_state}' + (f' (task {shown.task_state})'
                                                  if shown.task_state else ''))


def unsupported(call: Call, name: str) -> webob.Response:
    """One of Nova's actions computed does not serve: 404, 409 or 400, as the module says."""
    row = servers.get(call, call.params['server_id'])
    states, why = UNSUPPORTED[name]
    shown = server_status.view(row.state)
    if shown.vm_state not in states or shown.task_state is not None:
        raise _state_conflict(name, row)
    raise errors.BadRequest(f"Action '{name}' is not supported by computed ({why}); "
                            f'instance {row.uuid} is unchanged')


def security_group(call: Call, name: str) -> webob.Response:
    """``addSecurityGroup``/``removeSecurityGroup``: ``default`` taken, others a 404."""
    schema = schemas.ADD_SECURITY_GROUP if name == 'addSecurityGroup' \
        else schemas.REMOVE_SECURITY_GROUP
    group = call.body(schema)[name]['name']
    row = _server(call, SECURITY_GROUPS)
    if group != DEFAULT_GROUP:
        raise errors.NotFound(f'Security group {group} not found (instance {row.uuid} has no '
                              f'ports; the only group is {DEFAULT_GROUP!r})')
    adding = name == 'addSecurityGroup'

    def change(current: db_instances.InstanceRow) -> dict[str, Any]:
        if adding == (group in current.security_groups):
            raise errors.BadRequest(
                f'Security group {group} is already associated with the instance '
                f'{current.uuid}' if adding else
                f'Security group {group} not associated with the instance {current.uuid}')
        groups = [*current.security_groups, group] if adding else \
            [name for name in current.security_groups if name != group]
        return {'security_groups': groups}
    _edit(call, row, change)
    return empty(202)


def locked_by(call: Call, row: db_instances.InstanceRow) -> str:
    """Who the caller locks ``row`` as: its owner, or an admin (Nova's rule)."""
    return OWNER if row.project_id == call.context.project_id else ADMIN


def _edit(call: Call, row: db_instances.InstanceRow,
          change: Callable[[db_instances.InstanceRow], dict[str, Any]]) -> None:
    try:
        db_instances.edit_instance(call.backends.engine, row.uuid, change)
    except db_instances.InstanceNotFound:
        raise errors.NotFound(f'Instance {row.uuid} could not be found.') from None


def lock(call: Call) -> webob.Response:
    """``lock``: locked by the caller's role in it; the owner locking again changes nothing
    (an admin's lock stays an admin's)."""
    call.body(schemas.LOCK)
    row = _server(call, LOCK)
    by = locked_by(call, row)
    _edit(call, row, lambda current: {} if current.locked_by and by == OWNER
          else {'locked_by': by})
    return empty(202)


def unlock(call: Call) -> webob.Response:
    """``unlock``: by whoever locked it; an owner undoing an admin's lock needs the override
    rule (a 403)."""
    call.body(schemas.UNLOCK)
    row = _server(call, UNLOCK)
    if row.locked_by and row.locked_by != locked_by(call, row):
        policy.authorize(call.backends.enforcer, UNLOCK_OVERRIDE, call.context,
                         {'project_id': row.project_id})
    _edit(call, row, lambda _current: {'locked_by': None})
    return empty(202)


def force_delete(call: Call) -> webob.Response:
    """``forceDelete``: Nova deletes the server whatever its state; so does computed (there
    is no soft delete to skip: :func:`computed.api.servers.delete`)."""
    call.body(schemas.FORCE_DELETE)
    servers.delete(call)
    return empty(202)


def action(call: Call) -> webob.Response:
    """``POST /servers/{id}/action``: this module's actions, else
    :func:`computed.api.servers.action` (the lifecycle's, and "no such action")."""
    body = call.body({'type': 'object', 'minProperties': 1, 'maxProperties': 1})
    (name,) = body
    controller = ACTIONS.get(name, servers.action)
    return controller(call)


#: Action name -> its controller.
ACTIONS: dict[str, Callable[[Call], webob.Response]] = {
    'lock': lock, 'unlock': unlock,
    'addSecurityGroup': lambda call: security_group(call, 'addSecurityGroup'),
    'removeSecurityGroup': lambda call: security_group(call, 'removeSecurityGroup'),
    'forceDelete': force_delete,
    'rebuild': server_rebuild.rebuild,
    **{name: (lambda call, name=name: unsupported(call, name)) for name in UNSUPPORTED},
}
