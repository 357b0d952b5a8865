"""``computed-manage fleet ...``: look at the fleet and drain or undrain a member.

``status`` reads ZooKeeper (members, drain markers, claims) and, when ``[ironic]`` has an
``auth_type``, Ironic's node list, and prints who owns every node (``--json``: the stable document
of :mod:`computed.fleet.status`). ``drain HOST`` writes a persistent drain marker: the member hands its
free nodes to its peers and keeps only the nodes hosting its instances, until ``undrain HOST``.
"""

from __future__ import annotations

import json

from oslo_config import cfg
from computed.fleet import status
from computed.fleet.claims import read_claims
from computed.cmd import common
from computed.baremetal.driver import DriverError
from computed.fleet.membership import (clear_draining, fleet_root, mark_draining, read_members,
                                 TOOZ_NAMESPACE)

EXIT_BACKEND = 1


def _paths(conf: cfg.ConfigOpts) -> tuple[str, str]:
    group = conf.coordination.group
    return f"/{TOOZ_NAMESPACE}/{group}", f"{fleet_root(group)}/draining"


def _ironic_nodes(conf: cfg.ConfigOpts) -> list[str] | None:
    if not conf.ironic.auth_type:
        return None
    with common.baremetal_driver(conf) as driver:
        return [node.uuid for node in driver.list_nodes()]


def fleet_status(conf: cfg.ConfigOpts) -> int:
    members_path, draining_path = _paths(conf)
    try:
        ironic = _ironic_nodes(conf)
    except DriverError as exc:
        common.fail("computed-manage", f"cannot list Ironic nodes: {exc}", EXIT_BACKEND)
    with common.zookeeper(conf) as client:
        members = read_members(client, members_path, draining_path)
        claims = read_claims(client, fleet_root(conf.coordination.group))
    document = status.snapshot(conf.coordination.group, members, claims, ironic)
    if conf.category.json:
        print(json.dumps(document, indent=2, sort_keys=True))
    else:
        print(status.render_text(document))
    return 0


def fleet_drain(conf: cfg.ConfigOpts) -> int:
    _, draining_path = _paths(conf)
    with common.zookeeper(conf) as client:
        mark_draining(client, draining_path, conf.category.member, "operator", persistent=True)
    print(f"{conf.category.member}: draining (its free nodes move to its peers; "
          f"'fleet undrain {conf.category.member}' ends it)")
    return 0


def fleet_undrain(conf: cfg.ConfigOpts) -> int:
    _, draining_path = _paths(conf)
    with common.zookeeper(conf) as client:
        cleared = clear_draining(client, draining_path, conf.category.member)
    print(f"{conf.category.member}: " + ("no longer draining" if cleared else "was not draining"))
    return 0
