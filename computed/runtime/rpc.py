"""The RPC bus: oslo.messaging transports, clients and servers for computed's services.

Owns how computed talks oslo.messaging, so that every service builds its transport the same way
from the configuration it was given (never from a global ``cfg.CONF``).

oslo.messaging registers most of its options on the conf it is handed, but its metrics and tracing
options only on the global ``cfg.CONF``; :func:`get_transport` registers them on computed's own
conf so that a client call does not fail with ``NoSuchOptError: oslo_messaging_metrics``.
"""

from __future__ import annotations

import importlib
from collections.abc import Sequence
from typing import Any

import oslo_messaging
from oslo_config import cfg

# (private module, option list = group name) that oslo.messaging only puts on the global CONF.
_GLOBAL_ONLY_OPTS = (("oslo_messaging._metrics.client", "oslo_messaging_metrics"),
                     ("oslo_messaging._tracing.client", "oslo_messaging_tracing"))


def register_opts(conf: cfg.ConfigOpts) -> None:
    """Put oslo.messaging's global-only option groups on ``conf`` too."""
    for module_name, group in _GLOBAL_ONLY_OPTS:
        try:
            opts = getattr(importlib.import_module(module_name), group)
        except (ImportError, AttributeError):  # other releases lay these out differently
            continue
        conf.register_opts(opts, group=group)


def get_transport(conf: cfg.ConfigOpts, url: str | None = None) -> oslo_messaging.Transport:
    """The RPC transport for ``[DEFAULT] transport_url`` (or ``url``)."""
    register_opts(conf)
    return oslo_messaging.get_rpc_transport(conf, url=url)


def get_client(transport: oslo_messaging.Transport, topic: str, server: str | None = None,
               version: str = "1.0", timeout: float | None = None) -> Any:
    """A client for ``topic``; ``server`` aims it at one member's queue."""
    target = oslo_messaging.Target(topic=topic, server=server, version=version)
    return oslo_messaging.get_rpc_client(transport, target, timeout=timeout)


def get_server(transport: oslo_messaging.Transport, topic: str, server: str,
               endpoints: Sequence[object]) -> oslo_messaging.MessageHandlingServer:
    """A server consuming ``topic`` (shared) and ``topic.server`` (its own)."""
    target = oslo_messaging.Target(topic=topic, server=server)
    return oslo_messaging.get_rpc_server(
        transport, target, list(endpoints), executor="threading",
        access_policy=oslo_messaging.DefaultRPCAccessPolicy)
