"""``/os-quota-sets/{project_id}`` and ``/limits``: a project's limits and usage, and the quota
check of a build.

Owns counting (seed 004) and admitting builds: a project's servers are its instances in
computed's database that are not DELETED (ERROR ones included); its usage of a resource class
is what its live instances hold, and at least what Placement's ``GET /usages?project_id=``
says. :func:`reserved` admits a build before it is scheduled, under the project's lock in the
database, counting the builds admitted before whose row does not exist yet; a 403 names the
resource, the limit and the usage. Guarantee: whatever the interleaving of concurrent
creates, failures and deletes, a project never holds more servers (or units of a class) than
its limit, nor more cores or RAM than its limits of them, counted from the flavors of its
servers and builds (a limit lowered below the usage refuses new builds only).

The quota set shows Nova's keys of the microversion (``instances``; ``cores``, ``ram`` and the
rest: what the project set, else the defaults in force: the quota class ``default``'s, else
``[quota]``'s and Nova's, :func:`default_limits`) plus one key per resource class the project
has a limit of its own for (``CUSTOM_GOLD``). Every key the quota set shows can be set, so that
a client's read-modify-write works; ``instances``, ``cores``, ``ram`` and ``CUSTOM_*`` are
enforced here, and ``metadata_items`` on each server's metadata (:func:`check_metadata_items`).
"""

from __future__ import annotations

import contextlib
from collections.abc import Iterator
from typing import Any

import webob

from computed.api import errors, policy, quota_rules, schemas
from computed.api import limits as input_limits
from computed.api.backends import Backends
from computed.api.request import Call, empty, json_response
from computed.db import instances as db_instances
from computed.db import quotas as db_quotas
from computed.placement import allocations

SHOW = 'compute:quotas:show'
UPDATE = 'compute:quotas:update'
LIMITS = 'compute:limits'
#: Seconds a build's reservation counts without its row: longer than any build takes to be
#: placed (Placement's timeouts included); past it, the reservation of a process that died
#: mid-build stops counting.
RESERVATION_TTL = 600

#: Nova's other quota keys and their defaults. A project may set each (so that a client's
#: read-modify-write of its quota set works) and reads back what it set. Enforced: ``cores``
#: and ``ram`` (:func:`reserve`), ``metadata_items`` (:func:`check_metadata_items`),
#: ``key_pairs`` (:mod:`computed.api.keypairs`); the others are not (docs/api.md says why),
#: besides ``instances`` and ``CUSTOM_*``.
FIXED = {'cores': -1, 'ram': -1, 'metadata_items': 128, 'key_pairs': 100,
         'server_groups': 10, 'server_group_members': 10}
FIXED_BEFORE_2_57 = {'injected_files': 5, 'injected_file_content_bytes': 10240,
                     'injected_file_path_bytes': 255}
FIXED_BEFORE_2_36 = {'fixed_ips': -1, 'floating_ips': -1, 'security_groups': -1,
                     'security_group_rules': -1}
#: Taken by PUT before 2.36 (as Nova's schema), never shown.
NETWORKS_BEFORE_2_36 = 'networks'
CORES, RAM = 'cores', 'ram'
#: The quota class whose values are every project's defaults (Nova's).
DEFAULT_CLASS = 'default'


def configured_defaults(backends: Backends) -> dict[str, int]:
    """Every Nova quota key's configured default: ``[quota] instances``, Nova's for the
    others."""
    return {quota_rules.INSTANCES: backends.conf.quota.instances, **FIXED,
            **FIXED_BEFORE_2_57, **FIXED_BEFORE_2_36}


def default_limits(backends: Backends) -> dict[str, int]:
    """The defaults in force: the quota class ``default``'s values
    (:mod:`computed.api.quota_classes`), else :func:`configured_defaults`."""
    return {**configured_defaults(backends),
            **db_quotas.quota_class_limits(backends.engine, DEFAULT_CLASS)}


def limit_in_force(backends: Backends, project_id: str, resource: str) -> int:
    """The project's limit of one of Nova's keys: its own, else the default in force."""
    own = db_quotas.quota_limits(backends.engine, project_id)
    return quota_rules.limit_of(resource, own, default_limits(backends),
                                backends.conf.quota.resource_class)


def _limits(backends: Backends, project_id: str) -> tuple[dict[str, int], dict[str, int]]:
    """(the project's own limits, the limits in force: every Nova key and its own
    classes)."""
    own = db_quotas.quota_limits(backends.engine, project_id)
    return own, {**default_limits(backends), **own}


def usage_in_placement(backends: Backends, project_id: str) -> dict[str, int]:
    """The project's Placement usages by class; 503 naming Placement when it fails."""
    try:
        return allocations.project_usages(backends.placement, project_id)
    except Exception as exc:  # PlacementError / PlacementUnavailable
        raise errors.ServiceUnavailable(f'cannot count the usage of project {project_id} '
                                        f'in Placement: {exc}') from None


def usage(backends: Backends, project_id: str) -> dict[str, int]:
    """What the project uses now: its servers, the cores and RAM of their flavors and its
    Placement usages by class."""
    used = usage_in_placement(backends, project_id)
    used[quota_rules.INSTANCES] = db_instances.count_live_instances(backends.engine, project_id)
    used[CORES], used[RAM] = db_quotas.flavor_usage(backends.engine, project_id)
    return used


def reserve(backends: Backends, project_id: str, resource_class: str,
            instance_uuid: str, cores: int = 0, ram: int = 0) -> bool:
    """Admit one more server of ``resource_class`` for the project, or 403 naming the limit.

    The decision is taken under the project's lock in the database
    (:func:`computed.db.quotas.reserve_quota`), counting every server that may stay: live rows
    (ERROR ones too) and builds admitted before whose row does not exist yet. An admitted build
    is reserved until :func:`release`, which the caller runs once the build's row exists (or
    the build gave up without one). Resource-class units are counted the same way; Placement's
    usage, read first, is a floor (allocations computed did not make, e.g. left over). So are
    ``cores`` and ``ram``, the flavor's ``vcpus`` and ``ram`` (Nova's legacy quotas), when the
    flavor asks for some and the project has a limit of them.
    False when no limit applies (nothing reserved)."""
    own = db_quotas.quota_limits(backends.engine, project_id)
    defaults = default_limits(backends)
    limits = {resource: quota_rules.limit_of(resource, own, defaults,
                                             backends.conf.quota.resource_class)
              for resource in (quota_rules.INSTANCES, resource_class, CORES, RAM)}
    if all(limit == quota_rules.UNLIMITED for limit in limits.values()):
        return False
    # A flavor without vcpus or RAM (bare-metal flavors often have 0) never counts against
    # those limits; counting them costs one more statement under the lock.
    sizes = {resource: amount for resource, amount in ((CORES, cores), (RAM, ram))
             if amount > 0 and limits[resource] != quota_rules.UNLIMITED}
    in_placement = 0
    if limits[resource_class] != quota_rules.UNLIMITED:
        in_placement = usage_in_placement(backends, project_id).get(resource_class, 0)

    def decide(counted: db_quotas.QuotaUsage) -> None:
        used = {quota_rules.INSTANCES: counted.instances,
                resource_class: max(counted.resource_class, in_placement),
                CORES: counted.cores, RAM: counted.ram}
        found = quota_rules.over(limits, used,
                                 {quota_rules.INSTANCES: 1, resource_class: 1, **sizes})
        if found:
            raise errors.Forbidden('; '.join(str(item) for item in found))
    db_quotas.reserve_quota(backends.engine, project_id, instance_uuid, resource_class, decide,
                            ttl=RESERVATION_TTL, cores=cores, ram=ram,
                            count_flavors=bool(sizes))
    return True


METADATA_ITEMS = 'metadata_items'


def metadata_items_limit(backends: Backends, project_id: str) -> int:
    """The project's ``metadata_items`` limit: its own, else the default in force (-1:
    none)."""
    return limit_in_force(backends, project_id, METADATA_ITEMS)


def metadata_items_over(count: int, limit: int) -> str | None:
    """Why a server's ``count`` metadata items exceed ``limit`` (Nova's words), or None."""
    if limit != quota_rules.UNLIMITED and count > limit:
        return f'Maximum number of metadata items exceeds {limit}'
    return None


def check_metadata_items(backends: Backends, project_id: str, count: int) -> None:
    """403 (as Nova's) when ``count`` metadata items on a server of the project are more than
    its ``metadata_items`` quota."""
    reason = metadata_items_over(count, metadata_items_limit(backends, project_id))
    if reason:
        raise errors.Forbidden(reason)


def release(backends: Backends, instance_uuid: str) -> None:
    """The build's row exists now (it counts itself), or never will: forget its reservation."""
    db_quotas.release_quota_reservation(backends.engine, instance_uuid)


@contextlib.contextmanager
def reserved(backends: Backends, project_id: str, resource_class: str,
             instance_uuid: str) -> Iterator[None]:
    """:func:`reserve` (403 when over a limit), then the block (which records the build's row,
    whatever its outcome), then :func:`release`."""
    held = reserve(backends, project_id, resource_class, instance_uuid)
    try:
        yield
    finally:
        if held:
            release(backends, instance_uuid)


def _shown(call: Call, key: str) -> bool:
    """Whether the quota sets of this request's microversion have ``key``."""
    if key == NETWORKS_BEFORE_2_36:
        return False
    if key in FIXED_BEFORE_2_36:
        return not call.at_least(2, 36)
    return not (key in FIXED_BEFORE_2_57 and call.at_least(2, 57))


def _quota_set(call: Call, project_id: str, values: dict[str, Any]) -> dict[str, Any]:
    """The quota set of ``values`` (every key in force), the keys of this microversion."""
    document = {key: value for key, value in values.items() if _shown(call, key)}
    document['id'] = project_id
    return {'quota_set': document}


def show(call: Call) -> webob.Response:
    project_id = call.params['project_id']
    policy.authorize(call.backends.enforcer, SHOW, call.context, {'project_id': project_id})
    _own, in_force = _limits(call.backends, project_id)
    return json_response(200, _quota_set(call, project_id, in_force))


def detail(call: Call) -> webob.Response:
    project_id = call.params['project_id']
    policy.authorize(call.backends.enforcer, SHOW, call.context, {'project_id': project_id})
    _own, in_force = _limits(call.backends, project_id)
    used = usage(call.backends, project_id)
    # Usage of what computed counts (instances, cores, ram, classes); 0 for the rest.
    return json_response(200, _quota_set(call, project_id, {
        resource: {'limit': limit, 'in_use': used.get(resource, 0), 'reserved': 0}
        for resource, limit in in_force.items()}))


def defaults(call: Call) -> webob.Response:
    project_id = call.params['project_id']
    policy.authorize(call.backends.enforcer, SHOW, call.context, {'project_id': project_id})
    return json_response(200, _quota_set(call, project_id, default_limits(call.backends)))


def update(call: Call) -> webob.Response:
    project_id = call.params['project_id']
    policy.authorize(call.backends.enforcer, UPDATE, call.context, {'project_id': project_id})
    body = call.body(schemas.QUOTA_UPDATE)['quota_set']
    body.pop('force', None)
    for key in body:
        if key in FIXED_BEFORE_2_36 or key == NETWORKS_BEFORE_2_36:
            if call.at_least(2, 36):
                raise errors.BadRequest(f'Quota key {key} is not taken from microversion 2.36 '
                                        'on (network quotas are the Network service\'s)')
        elif key in FIXED_BEFORE_2_57 and call.at_least(2, 57):
            raise errors.BadRequest(f'Quota key {key} is not taken from microversion 2.57 on '
                                    '(no injected files)')
    limits = {resource: input_limits.integer(value, f'Quota limit of {resource}',
                                             quota_rules.UNLIMITED)
              for resource, value in body.items()}
    db_quotas.set_quota_limits(call.backends.engine, project_id, limits)
    _own, in_force = _limits(call.backends, project_id)
    document = _quota_set(call, project_id, in_force)
    document['quota_set'].pop('id')
    return json_response(200, document)


def reset(call: Call) -> webob.Response:
    project_id = call.params['project_id']
    policy.authorize(call.backends.enforcer, UPDATE, call.context, {'project_id': project_id})
    db_quotas.delete_quota_limits(call.backends.engine, project_id)
    return empty(202)


def limits(call: Call) -> webob.Response:
    policy.authorize(call.backends.enforcer, LIMITS, call.context)
    project_id = call.query('tenant_id') or call.context.project_id
    if project_id != call.context.project_id:
        policy.authorize(call.backends.enforcer, SHOW, call.context,
                         {'project_id': project_id})
    _own, in_force = _limits(call.backends, project_id)

    def value(key: str) -> int:
        return in_force[key]
    servers = db_instances.count_live_instances(call.backends.engine, project_id)
    cores, ram = db_quotas.flavor_usage(call.backends.engine, project_id)
    absolute = {'maxTotalInstances': in_force[quota_rules.INSTANCES],
                'totalInstancesUsed': servers,
                'maxTotalCores': value('cores'), 'totalCoresUsed': cores,
                'maxTotalRAMSize': value('ram'), 'totalRAMUsed': ram,
                'maxServerMeta': value('metadata_items'), 'maxImageMeta': 128,
                'maxTotalKeypairs': value('key_pairs'),
                'maxServerGroups': value('server_groups'),
                'maxServerGroupMembers': value('server_group_members'),
                'totalServerGroupsUsed': 0}
    if not call.at_least(2, 57):
        absolute.update({'maxPersonality': value('injected_files'),
                         'maxPersonalitySize': value('injected_file_content_bytes')})
    if not call.at_least(2, 36):
        absolute.update({'maxSecurityGroups': value('security_groups'),
                         'maxSecurityGroupRules': value('security_group_rules'),
                         'maxTotalFloatingIps': value('floating_ips'),
                         'totalFloatingIpsUsed': 0, 'totalSecurityGroupsUsed': 0})
    return json_response(200, {'limits': {'rate': [], 'absolute': absolute}})
