"""``computed-manage fleet ...``: look at the fleet and drain or undrain a member.

``status`` reads ZooKeeper (members, drain markers, claims) and, when ``[ironic]`` has an
``auth_type``, Ironic's node list, and prints who owns every node (``--json``: the stable
document of :mod:`computed.fleet.status`). It finds the group where the daemons join it: under
the namespace of ``[coordination] backend_url`` (tooz's ``?namespace=``, ``tooz`` by default),
located by :func:`computed.fleet.zookeeper.group_path` as in the daemon. ``drain HOST`` writes a
persistent drain marker: the member hands its free nodes to its peers and keeps only the nodes
hosting its instances, until ``undrain HOST``.

A command waits for no service: an Ironic or a ZooKeeper that does not answer ends it within
seconds with one line naming the service and its address (exit 1), never a traceback and never
the daemon's retries (Ironic is asked once, with :data:`IRONIC_TIMEOUT` unless ``[ironic]
timeout`` says otherwise).
"""

from __future__ import annotations

import json

from oslo_config import cfg

from computed.baremetal.driver import DriverError, DriverUnavailable
from computed.cmd import common
from computed.conf.default import normalise_host
from computed.fleet import status
from computed.fleet.claims import read_claims
from computed.fleet.membership import (
    clear_draining,
    drain_markers_path,
    fleet_root,
    mark_draining,
    read_group,
    read_members,
)
from computed.fleet.zookeeper import group_path, kazoo_client

EXIT_BACKEND = 1
#: Seconds one Ironic request of a command may take: the daemon's retries ([ironic]
#: api_max_retries, with backoff) made a status with Ironic down take 55 s to fail.
IRONIC_TIMEOUT = 10


def _ironic_nodes(conf: cfg.ConfigOpts) -> list[str] | None:
    if not conf.ironic.auth_type:
        return None
    conf.set_override('api_max_retries', 0, group='ironic')
    if conf.ironic.timeout is None:
        conf.set_override('timeout', IRONIC_TIMEOUT, group='ironic')
    with common.baremetal_driver(conf) as driver:
        return [node.uuid for node in driver.list_nodes()]


def _ironic_address(conf: cfg.ConfigOpts) -> str:
    if conf.ironic.endpoint_override:
        return conf.ironic.endpoint_override
    keystone = conf.ironic.auth_url if "auth_url" in conf.ironic else None
    return f"the {conf.ironic.service_type} endpoint in the catalog of {keystone or 'Keystone'}"


def fleet_status(conf: cfg.ConfigOpts) -> int:
    group = conf.coordination.group
    try:
        ironic = _ironic_nodes(conf)
    except DriverUnavailable as exc:
        # The driver's reason starts by saying what this line already says.
        reason = exc.reason.removeprefix("Ironic unreachable: ")
        raise common.ServiceUnreachable("Ironic", _ironic_address(conf), reason) from None
    except DriverError as exc:
        common.fail("computed-manage", f"Ironic at {_ironic_address(conf)}: cannot list nodes: "
                    f"{exc.reason}", EXIT_BACKEND)
    with common.zookeeper_coordinator(conf) as coordinator:
        client = kazoo_client(coordinator)
        view = read_group(client, group_path(coordinator, group), drain_markers_path(group))
        claims = read_claims(client, fleet_root(group))
    document = status.snapshot(group, view.members, claims, ironic, view.ignored)
    if conf.category.json:
        print(json.dumps(document, indent=2, sort_keys=True))
    else:
        print(status.render_text(document))
    return 0


def fleet_drain(conf: cfg.ConfigOpts) -> int:
    group = conf.coordination.group
    draining_path = drain_markers_path(group)
    host = normalise_host(conf.category.member)
    with common.zookeeper_coordinator(conf) as coordinator:
        client = kazoo_client(coordinator)
        members = [m.name for m in read_members(client, group_path(coordinator, group),
                                                draining_path)]
        if host not in members:  # a typo would otherwise drain nobody, silently
            common.fail("computed-manage", f"{host} is not a member of group {group} "
                        f"(members: {', '.join(members) or 'none'}): nothing to drain",
                        EXIT_BACKEND)
        mark_draining(client, draining_path, host, "operator", persistent=True)
    print(f"{conf.category.member}: draining (its free nodes move to its peers; "
          f"'fleet undrain {conf.category.member}' ends it)")
    return 0


def fleet_undrain(conf: cfg.ConfigOpts) -> int:
    draining_path = drain_markers_path(conf.coordination.group)
    with common.zookeeper(conf) as client:
        cleared = clear_draining(client, draining_path, conf.category.member)
    print(f"{conf.category.member}: " + ("no longer draining" if cleared else "was not draining"))
    return 0
