"""Who may do what: the compute API's oslo.policy rules, defined in code.

Owns the rule names and their defaults: admins for flavor writes, quotas and services;
project members for their own servers (the target of a server rule is its project); users
for their own key pairs (the target is the key pair's user); anyone authenticated may read
flavors and their own limits. A policy file (``[oslo_policy]
policy_file``) overrides any rule. :func:`list_rules` is the ``oslo.policy.policies`` entry
point ``computed``: ``oslopolicy-sample-generator --namespace computed`` lists them.

A refusal is a 403 naming the rule (:func:`authorize`).

Threads: one :class:`Enforcer` per process is shared by the server's request threads. oslo.policy
reloads a policy file whose modification time changed from inside ``enforce`` and builds the new
rule set in steps (the file's rules first, the in-code defaults added after), with no lock: a
check on another thread meanwhile could find a default missing and refuse a request it allows.
Under eventlet a reload could not be interleaved (it does no green I/O); :class:`Enforcer` makes
each check, reload included, one critical section (a check is microseconds of CPU).
"""

from __future__ import annotations

import threading
from collections.abc import Iterable
from typing import Any

from oslo_config import cfg
from oslo_policy import policy

from computed.api import errors

ADMIN = 'role:admin'
MEMBER = 'role:member or role:admin'
OWNER = 'role:admin or (role:member and project_id:%(project_id)s)'
OWNER_READER = 'role:admin or project_id:%(project_id)s'
#: Key pairs belong to a user (Nova's os_compute_api:os-keypairs:* default).
KEY_OWNER = 'role:admin or user_id:%(user_id)s'
ANYONE = '@'
#: Other services' users (Nova's service_or_admin).
SERVICE = 'role:service or role:admin'

BASE = [
    policy.RuleDefault('context_is_admin', ADMIN, 'Administrators.'),
    policy.RuleDefault('admin_api', ADMIN, 'Administrative requests.'),
    policy.RuleDefault('project_member', MEMBER, 'Members of a project (or admins).'),
    policy.RuleDefault('owner', OWNER, 'Members of the project owning the target (or admins).'),
]


def _rule(name: str, check: str, description: str,
          operations: Iterable[tuple[str, str]]) -> policy.DocumentedRuleDefault:
    return policy.DocumentedRuleDefault(
        name, check, description,
        [{'method': method, 'path': path} for method, path in operations])


RULES = [
    _rule('compute:servers:index', 'rule:project_member', 'List the project\'s servers.',
          [('GET', '/servers'), ('GET', '/servers/detail')]),
    _rule('compute:servers:index:all_tenants', 'rule:admin_api',
          'List the servers of every project (all_tenants=1).',
          [('GET', '/servers?all_tenants=1')]),
    _rule('compute:servers:show', 'rule:owner', 'Show a server.',
          [('GET', '/servers/{server_id}')]),
    _rule('compute:servers:show:host', 'rule:admin_api',
          'See the daemon (OS-EXT-SRV-ATTR:host) and node (hypervisor_hostname) of a server, '
          'and the host filter.', [('GET', '/servers/{server_id}')]),
    _rule('compute:servers:create', 'rule:project_member', 'Create a server.',
          [('POST', '/servers')]),
    _rule('compute:servers:create:forced_host', 'rule:admin_api',
          'Name a host in availability_zone ("nova:HOST[:NODE]") when creating a server '
          '(Nova\'s os_compute_api:servers:create:forced_host).',
          [('POST', '/servers')]),
    _rule('compute:servers:delete', 'rule:owner', 'Delete a server.',
          [('DELETE', '/servers/{server_id}')]),
    _rule('compute:servers:update', 'rule:owner',
          'Change a server\'s name, description and access addresses.',
          [('PUT', '/servers/{server_id}')]),
    _rule('compute:servers:metadata:read', 'rule:owner', 'List and show a server\'s metadata.',
          [('GET', '/servers/{server_id}/metadata'),
           ('GET', '/servers/{server_id}/metadata/{key}')]),
    _rule('compute:servers:metadata:write', 'rule:owner',
          'Set, replace and delete a server\'s metadata items.',
          [('POST', '/servers/{server_id}/metadata'), ('PUT', '/servers/{server_id}/metadata'),
           ('PUT', '/servers/{server_id}/metadata/{key}'),
           ('DELETE', '/servers/{server_id}/metadata/{key}')]),
    _rule('compute:servers:tags:read', 'rule:owner', 'List a server\'s tags, check one (2.26).',
          [('GET', '/servers/{server_id}/tags'), ('GET', '/servers/{server_id}/tags/{tag}')]),
    _rule('compute:servers:tags:write', 'rule:owner',
          'Replace, add and delete a server\'s tags (2.26).',
          [('PUT', '/servers/{server_id}/tags'), ('DELETE', '/servers/{server_id}/tags'),
           ('PUT', '/servers/{server_id}/tags/{tag}'),
           ('DELETE', '/servers/{server_id}/tags/{tag}')]),
    _rule('compute:servers:reset_state', 'rule:admin_api',
          'Set a server\'s state to active or error (Nova\'s os-resetState).',
          [('POST', '/servers/{server_id}/action (os-resetState)')]),
    _rule('compute:servers:reboot', 'rule:owner', 'Reboot a server.',
          [('POST', '/servers/{server_id}/action (reboot)')]),
    _rule('compute:servers:stop', 'rule:owner', 'Power a server off.',
          [('POST', '/servers/{server_id}/action (os-stop)')]),
    _rule('compute:servers:start', 'rule:owner', 'Power a server on.',
          [('POST', '/servers/{server_id}/action (os-start)')]),
    _rule('compute:servers:lock', 'rule:owner',
          'Lock a server (its lifecycle actions, metadata and deletion refused to '
          'non-admins until unlocked).', [('POST', '/servers/{server_id}/action (lock)')]),
    _rule('compute:servers:unlock', 'rule:owner', 'Unlock a server locked by the caller\'s '
          'kind (its owner, or an admin).', [('POST', '/servers/{server_id}/action (unlock)')]),
    _rule('compute:servers:unlock:override', 'rule:admin_api',
          'Unlock a server that someone else locked (an owner undoing an admin\'s lock).',
          [('POST', '/servers/{server_id}/action (unlock)')]),
    _rule('compute:servers:security_groups', 'rule:owner',
          'Add a server to, or remove it from, a security group (only "default" exists: a '
          'server here has no ports).',
          [('POST', '/servers/{server_id}/action (addSecurityGroup)'),
           ('POST', '/servers/{server_id}/action (removeSecurityGroup)')]),
    _rule('compute:servers:diagnostics', 'rule:admin_api',
          'Show what computed knows of a server as Nova\'s diagnostics.',
          [('GET', '/servers/{server_id}/diagnostics')]),
    _rule('compute:servers:rebuild', 'rule:owner',
          'Rebuild a server: redeploy its node with an image (Nova\'s rebuild action).',
          [('POST', '/servers/{server_id}/action (rebuild)')]),
    _rule('compute:keypairs:index', KEY_OWNER, 'List a user\'s key pairs.',
          [('GET', '/os-keypairs')]),
    _rule('compute:keypairs:show', KEY_OWNER, 'Show a user\'s key pair.',
          [('GET', '/os-keypairs/{keypair_name}')]),
    _rule('compute:keypairs:create', KEY_OWNER, 'Create or import a key pair for a user.',
          [('POST', '/os-keypairs')]),
    _rule('compute:keypairs:delete', KEY_OWNER, 'Delete a user\'s key pair.',
          [('DELETE', '/os-keypairs/{keypair_name}')]),
    _rule('compute:flavors:read', ANYONE, 'List and show flavors and their extra specs.',
          [('GET', '/flavors'), ('GET', '/flavors/detail'), ('GET', '/flavors/{flavor_id}'),
           ('GET', '/flavors/{flavor_id}/os-extra_specs')]),
    _rule('compute:flavors:manage', 'rule:admin_api',
          'Create and delete flavors, set and unset their extra specs.',
          [('POST', '/flavors'), ('DELETE', '/flavors/{flavor_id}'),
           ('POST', '/flavors/{flavor_id}/os-extra_specs'),
           ('PUT', '/flavors/{flavor_id}/os-extra_specs/{key}'),
           ('DELETE', '/flavors/{flavor_id}/os-extra_specs/{key}')]),
    _rule('compute:flavors:access', 'rule:admin_api',
          'List the projects a private flavor is for, add and remove one (Nova\'s '
          'os-flavor-access).',
          [('GET', '/flavors/{flavor_id}/os-flavor-access'),
           ('POST', '/flavors/{flavor_id}/action (addTenantAccess)'),
           ('POST', '/flavors/{flavor_id}/action (removeTenantAccess)')]),
    _rule('compute:quota_classes:show', 'rule:admin_api',
          'Show the default quotas (the quota class "default").',
          [('GET', '/os-quota-class-sets/{quota_class}')]),
    _rule('compute:quota_classes:update', 'rule:admin_api',
          'Set the default quotas (the quota class "default").',
          [('PUT', '/os-quota-class-sets/{quota_class}')]),
    _rule('compute:quotas:show', OWNER_READER, 'Show a project\'s quotas.',
          [('GET', '/os-quota-sets/{project_id}')]),
    _rule('compute:quotas:update', 'rule:admin_api', 'Set or reset a project\'s quotas.',
          [('PUT', '/os-quota-sets/{project_id}'), ('DELETE', '/os-quota-sets/{project_id}')]),
    _rule('compute:limits', ANYONE, 'Show the caller\'s project limits and usage.',
          [('GET', '/limits')]),
    _rule('compute:services', 'rule:admin_api', 'List, disable and enable the daemons.',
          [('GET', '/os-services'), ('PUT', '/os-services/{service_id}')]),
    _rule('compute:hosts', 'rule:admin_api',
          'List the daemons as hosts, show what a host\'s servers use, enable and disable one '
          '(Nova\'s deprecated os-hosts, to 2.42).',
          [('GET', '/os-hosts'), ('GET', '/os-hosts/{host_name}'),
           ('PUT', '/os-hosts/{host_name}'), ('GET', '/os-hosts/{host_name}/startup'),
           ('GET', '/os-hosts/{host_name}/shutdown'), ('GET', '/os-hosts/{host_name}/reboot')]),
    _rule('compute:hypervisors', 'rule:admin_api',
          'List and show the nodes as hypervisors, and their statistics.',
          [('GET', '/os-hypervisors'), ('GET', '/os-hypervisors/detail'),
           ('GET', '/os-hypervisors/statistics'), ('GET', '/os-hypervisors/{hypervisor_id}')]),
    _rule('compute:availability_zones:list', ANYONE, 'List the availability zones.',
          [('GET', '/os-availability-zone')]),
    _rule('compute:availability_zones:detail', 'rule:admin_api',
          'List the availability zones with their hosts.',
          [('GET', '/os-availability-zone/detail')]),
    _rule('compute:aggregates:index', 'rule:admin_api', 'List the host aggregates.',
          [('GET', '/os-aggregates')]),
    _rule('compute:aggregates:create', 'rule:admin_api', 'Create a host aggregate.',
          [('POST', '/os-aggregates')]),
    _rule('compute:aggregates:show', 'rule:admin_api', 'Show a host aggregate.',
          [('GET', '/os-aggregates/{aggregate_id}')]),
    _rule('compute:aggregates:update', 'rule:admin_api',
          'Rename a host aggregate or set its zone.', [('PUT', '/os-aggregates/{aggregate_id}')]),
    _rule('compute:aggregates:delete', 'rule:admin_api', 'Delete a host aggregate.',
          [('DELETE', '/os-aggregates/{aggregate_id}')]),
    _rule('compute:aggregates:add_host', 'rule:admin_api',
          'Add a daemon to a host aggregate.',
          [('POST', '/os-aggregates/{aggregate_id}/action')]),
    _rule('compute:aggregates:remove_host', 'rule:admin_api',
          'Remove a daemon from a host aggregate.',
          [('POST', '/os-aggregates/{aggregate_id}/action')]),
    _rule('compute:aggregates:set_metadata', 'rule:admin_api',
          "Set or remove a host aggregate's metadata items.",
          [('POST', '/os-aggregates/{aggregate_id}/action')]),
    _rule('compute:usage:list', 'rule:admin_api', 'Show the usage of every project.',
          [('GET', '/os-simple-tenant-usage')]),
    _rule('compute:usage:show', OWNER_READER, 'Show a project\'s usage.',
          [('GET', '/os-simple-tenant-usage/{tenant_id}')]),
    _rule('compute:extensions', ANYONE, 'List and show the (fixed) extension documents.',
          [('GET', '/extensions'), ('GET', '/extensions/{alias}')]),
    _rule('compute:migrations:index', 'rule:admin_api', 'List the migrations (none).',
          [('GET', '/os-migrations')]),
    _rule('compute:server_external_events:create', SERVICE,
          'Send events about servers (Neutron\'s and Cinder\'s, as to Nova).',
          [('POST', '/os-server-external-events')]),
    _rule('compute:networks:read', ANYONE,
          'List and show the networks of the (pre-2.36) network proxy: none here.',
          [('GET', '/os-networks'), ('GET', '/os-networks/{network_id}')]),
    _rule('compute:usage_audit_log:list', 'rule:admin_api',
          'Show the usage audit log of the last completed period (no host runs the audit).',
          [('GET', '/os-instance_usage_audit_log')]),
    _rule('compute:usage_audit_log:show', 'rule:admin_api',
          'Show the usage audit log of the last period completed before a time.',
          [('GET', '/os-instance_usage_audit_log/{before}')]),
]


def list_rules() -> list[policy.RuleDefault]:
    """Every rule with its default (the ``oslo.policy.policies`` entry point)."""
    return BASE + RULES


class Enforcer(policy.Enforcer):
    """oslo.policy's enforcer, one check (and the reload it may start) at a time."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self._checking = threading.RLock()  # reentrant: a custom check may enforce again

    def enforce(self, *args: Any, **kwargs: Any) -> Any:
        with self._checking:
            return super().enforce(*args, **kwargs)


def enforcer(conf: cfg.ConfigOpts) -> policy.Enforcer:
    """An enforcer with the in-code defaults, overridden by ``[oslo_policy] policy_file``."""
    result = Enforcer(conf)
    result.register_defaults(list_rules())
    return result


def authorize(enforcer: policy.Enforcer, rule: str, context: Any,
              target: dict[str, Any] | None = None) -> None:
    """403 unless ``context`` passes ``rule`` on ``target`` (default: its own project)."""
    target = target if target is not None else {'project_id': context.project_id}
    try:
        enforcer.authorize(rule, target, context.to_policy_values(), do_raise=True)
    except policy.PolicyNotAuthorized:
        raise errors.Forbidden(f'Policy doesn\'t allow {rule} to be performed.') from None


def allowed(enforcer: policy.Enforcer, rule: str, context: Any,
            target: dict[str, Any] | None = None) -> bool:
    target = target if target is not None else {'project_id': context.project_id}
    return bool(enforcer.authorize(rule, target, context.to_policy_values()))


def is_admin(enforcer: policy.Enforcer, context: Any) -> bool:
    """Whether the caller passes ``context_is_admin`` (oslo.context's own ``is_admin`` is not
    derived from the roles)."""
    return bool(enforcer.authorize('context_is_admin', {}, context.to_policy_values()))
