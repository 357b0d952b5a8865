"""Ironic's versioned notifications, turned into "look at this node again" hints.

Owns the daemon's notification listener. Every daemon listens in a pool of its own (named after
its host), so each one receives every event and acts on the nodes it holds; a shared pool would
split one node's events across daemons.

An event is a hint, never the truth: payloads can be snapshots taken before the change finished,
some transitions emit no ``.end``, ``updated_at`` has one-second resolution. So the listener only
extracts the node's uuid and calls ``hints.hint(uuid, event_type)`` (the daemon's
:class:`computed.daemon.sync.NodeSync`), which re-reads that node through the API and reports
what it reads. A missed event (a broker restart loses a non-durable queue) is covered by the
periodic full listing.

A malformed notification is logged and dropped (acknowledged), so it is never redelivered forever.
"""

from __future__ import annotations

import logging
from typing import Any, Protocol

LOG = logging.getLogger(__name__)

NODE_EVENT_PREFIX = "baremetal.node."


def node_uuid(event_type: str, payload: Any) -> str | None:
    """The uuid of the node an Ironic notification is about, or None if it is not about one."""
    if not isinstance(event_type, str) or not event_type.startswith(NODE_EVENT_PREFIX):
        return None
    if not isinstance(payload, dict):
        return None
    data = payload.get("ironic_object.data")
    if not isinstance(data, dict):
        return None
    uuid = data.get("uuid")
    return uuid if isinstance(uuid, str) and uuid else None


class NodeHints(Protocol):
    def hint(self, uuid: str, event_type: str) -> None:
        """Node ``uuid`` may have changed (``event_type`` says how); called from the listener's
        thread, so it must not block."""


class NotificationEndpoint:
    """oslo.messaging notification endpoint: every priority goes to the same handler."""

    def __init__(self, hints: NodeHints):
        self._hints = hints

    def _handle(self, ctxt: Any, publisher_id: str, event_type: str, payload: Any,
                metadata: Any) -> None:
        try:
            uuid = node_uuid(event_type, payload)
        except Exception:  # a payload we cannot read must not stop the listener
            LOG.exception("dropping unreadable notification %s", event_type)
            return None
        if uuid is not None:
            self._hints.hint(uuid, event_type)
        return None

    info = audit = warn = error = critical = debug = sample = _handle


def listener(transport: Any, topic: str, exchange: str, pool: str, hints: NodeHints) -> Any:
    """A notification listener on ``topic`` in ``exchange`` for pool ``pool``, not started yet
    (its owner starts and stops it)."""
    import oslo_messaging
    target = oslo_messaging.Target(topic=topic, exchange=exchange)
    return oslo_messaging.get_notification_listener(
        transport, [target], [NotificationEndpoint(hints)], executor="threading", pool=pool)
