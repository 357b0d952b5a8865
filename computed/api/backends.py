"""The services behind the compute API, connected once per process.

Owns connecting (and closing) what the controllers use: computed's database, Placement
(keystoneauth adapter from ``[placement]``), Glance (``[glance]``, :mod:`computed.api.glance`),
the RPC transport to the daemons, and a ZooKeeper session (a tooz coordinator on
``[coordination] backend_url``, waited for at most ``api_connect_timeout`` seconds, that joins
no group: the API only reads members, claims and drain markers, and writes drain markers, as
``computed-manage fleet`` does).
:class:`Backends` holds them with the :class:`~computed.instances.rpcapi.ServerAPI` and
the policy enforcer built on them, and the queue that places what creates admitted
(:mod:`computed.api.pending`, with its threads).

Threads: the connections are made once per process and shared by the server's request
threads (SQLAlchemy's pool, keystoneauth's session, oslo.messaging's transport and kazoo's
client are each safe to share between threads); kazoo runs its own threading handler.
"""

from __future__ import annotations

import dataclasses
from concurrent import futures
from typing import Any

from oslo_config import cfg
from oslo_policy import policy as oslo_policy
from sqlalchemy.engine import Engine
from tooz import coordination

from computed.api import glance, pending, policy
from computed.conf.errors import ConfigError
from computed.db import engine as db_engine
from computed.fleet.membership import drain_markers_path, fleet_root
from computed.fleet.zookeeper import NotZooKeeper, group_path, kazoo_client
from computed.instances import scheduler
from computed.instances.rpcapi import ComputeAPI, ServerAPI
from computed.runtime import keystone, rpc
from computed.scheduling import loader as scheduling_loader
from computed.upgrade import records as upgrade_records

MEMBER = 'computed-api'


@dataclasses.dataclass
class Backends:
    conf: cfg.ConfigOpts
    engine: Engine
    placement: Any  # keystoneauth Adapter
    servers: ServerAPI
    coordinator: coordination.CoordinationDriver
    zookeeper: Any  # KazooClient
    enforcer: oslo_policy.Enforcer
    transport: Any
    #: Places the servers a create admitted (:mod:`computed.api.pending`).
    builds: pending.BuildQueue
    #: :class:`computed.api.glance.Glance`; None: no Image service (imageRef is a URL).
    glance: Any = None

    @property
    def group(self) -> str:
        return self.conf.coordination.group

    def close(self) -> None:
        self.builds.stop()  # placements in flight finish first: they cast
        self.transport.cleanup()
        self.zookeeper.stop()
        self.zookeeper.close()
        self.engine.dispose()


def connect(conf: cfg.ConfigOpts, coordinator_url: str) -> Backends:
    """Connect everything the API uses; ConfigError for a missing or unusable option."""
    if not conf.database.connection:
        raise ConfigError('database', 'connection', 'required by the compute API')
    # Before connecting anything: a filter or weigher that cannot be loaded stops the start.
    pipeline = scheduling_loader.pipeline_from_conf(conf)
    placement = keystone.load_adapter(conf, 'placement')
    engine = db_engine.engine_from_conf(conf)
    coordinator = coordination.get_coordinator(coordinator_url, MEMBER.encode())
    try:
        client = kazoo_client(coordinator)
    except NotZooKeeper as exc:
        raise ConfigError('coordination', 'backend_url', str(exc)) from None
    client.start(timeout=conf.coordination.api_connect_timeout)
    transport = rpc.get_transport(conf, 'api')
    owner_of = scheduler.zookeeper_owner(client, fleet_root(conf.coordination.group))
    group = conf.coordination.group
    # [upgrade_levels] instances: "auto" follows the daemons' published versions.
    cast_version = upgrade_records.instance_levels(
        conf.upgrade_levels.instances, client, group_path(coordinator, group),
        drain_markers_path(group))
    servers = ServerAPI(engine, placement, ComputeAPI(transport, version=cast_version), owner_of,
                        pipeline=pipeline)
    builds = pending.BuildQueue(
        servers, engine, placement,
        futures.ThreadPoolExecutor(conf.api.scheduling_threads, 'scheduling'),
        conf.api.pending_build_timeout)
    builds.start()
    return Backends(conf=conf, engine=engine, placement=placement, servers=servers,
                    coordinator=coordinator, zookeeper=client,
                    enforcer=policy.enforcer(conf), transport=transport, builds=builds,
                    glance=glance.Glance(conf))
