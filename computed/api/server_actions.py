"""Server actions besides the lifecycle's (``reboot``, ``os-stop``, ``os-start``,
``os-resetState``: :mod:`computed.api.servers`; ``rebuild``: :mod:`computed.api.server_rebuild`):
a server's security groups, ``forceDelete``, and Nova's actions computed does not serve.

Owns these actions' answers, each as Nova's: the server is looked up first (another project's
or an unknown server is a 404, :func:`computed.api.servers.get`), then the policy, then the
state. Guarantees:

* ``addSecurityGroup``/``removeSecurityGroup``: a server here has no ports, so no group is
  applied to anything. ``default`` (the group a server is created in, as Nova's create answer
  says) is taken and changes nothing (202); any other group does not exist here (404 naming
  it, as Nova answers for a group Neutron does not have).
* Nova's other actions (:data:`UNSUPPORTED`): a 404 for a server that does not exist, a 409
  when Nova would refuse the server's state (a ``restore`` of a server that is not soft
  deleted: computed never soft deletes), else a 400 saying computed does not serve it and why.
  A name Nova does not know either is a 400 ("There is no such action"). ``forceDelete`` is
  a delete (Nova's deletes in any state; there is no soft delete here to skip).
"""

from __future__ import annotations

from collections.abc import Callable

import webob

from computed.api import errors, policy, schemas, server_rebuild, server_status, servers
from computed.api.request import Call, empty
from computed.db import instances as db_instances

SECURITY_GROUPS = 'compute:servers:security_groups'
#: The only security group a server is in (Nova's create answer names it).
DEFAULT_GROUP = 'default'

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
    'addSecurityGroup': lambda call: security_group(call, 'addSecurityGroup'),
    'removeSecurityGroup': lambda call: security_group(call, 'removeSecurityGroup'),
    'forceDelete': force_delete,
    'rebuild': server_rebuild.rebuild,
    **{name: (lambda call, name=name: unsupported(call, name)) for name in UNSUPPORTED},
}
