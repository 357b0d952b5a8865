"""Ironic's versioned notifications, turned into "look at this node again" hints.

Owns the daemon's notification listener. Every daemon listens in a pool of its own
(:func:`pool_name`: named after its fleet's group and its host), so each one receives every event
and acts on the nodes it holds; a shared pool would split one node's events across daemons, and
so would two daemons of one host name in two groups on one vhost if the name left the group out.
The name is the same on every start, so a restarted daemon consumes the queue it left (what
Ironic sent while it was down is still there).

An event is a hint, never the truth: payloads can be snapshots taken before the change finished,
some transitions emit no ``.end``, ``updated_at`` has one-second resolution. So the listener only
extracts the node's uuid and calls ``hints.hint(uuid, event_type)`` (the daemon's
:class:`computed.daemon.sync.NodeSync`), which re-reads that node through the API and reports
what it reads. A missed event (a broker restart loses a non-durable queue) is covered by the
full listing.

**Whether the stream can be trusted** (:class:`StreamWatch`) decides how often full listings run
(:mod:`computed.daemon.listing`). Ironic sends nothing while nothing changes, so silence proves
nothing; instead each daemon sends a heartbeat (:class:`Heartbeat`, event type
:data:`HEARTBEAT_EVENT`) every ``heartbeat_interval`` seconds into a topic its own listener is
bound to. oslo.messaging binds every target of a pooled listener to one queue (named after the
pool), so the heartbeat travels the very queue Ironic's events travel: its own heartbeat coming
back proves the broker, the queue and the listener work, and the time it took is the queue's lag.
The stream is trusted while the daemon's last heartbeat came back within ``max_event_lag`` seconds
and the previous one no longer than ``heartbeat_interval + max_event_lag`` before it.

**At start** the stream is in doubt until the first heartbeat comes back (events before the bind
were never queued), and it is trusted from that moment on: the listener is bound first, and
oslo.messaging declares every binding of the pool's queue (Ironic's topic and the heartbeat's)
before it consumes from it, so a heartbeat heard proves that Ironic's events are queued since
before it was heard. The daemon's first listing waits for that (:mod:`computed.daemon.listing`),
so it covers everything before the bind and the queue everything after: the first listing is the
only one at start. To make that round trip short, :class:`Heartbeat` beats every
:data:`START_BEAT` seconds until its first heartbeat came back (at most :data:`START_BEATS` times:
a broker down at start is not hammered), then every ``heartbeat_interval`` (:func:`beat_wait`).
It cannot
prove that Ironic itself publishes (a misconfigured Ironic sends nothing): the fleet-wide listing
catches that, and what it finds is announced on the same topic (:data:`MISSED_EVENT`) so that
every daemon re-reads those nodes (a node with no provider applied yet: its holder, and a daemon
that does not list it).

A malformed notification is logged and dropped (acknowledged), so it is never redelivered forever.

Threads: oslo.messaging's threading executor runs :class:`NotificationEndpoint` on several
listener threads at once; the endpoint keeps no state and hands each event to
:meth:`StreamWatch.heard` or to the hints (:meth:`computed.daemon.sync.NodeSync.hint`), both
locked. The listing thread asks :class:`StreamWatch` whether the stream can be trusted; its
heartbeat times and its last doubt are written under its lock only (the heartbeat thread reads
:attr:`StreamWatch.last_heard`, one reference: an atomic read). :class:`Heartbeat` is used by the
heartbeat thread (:meth:`Heartbeat.beat`, :meth:`Heartbeat.next_wait` and the count of beats
they share, that thread's alone) and the listing thread (:meth:`Heartbeat.announce_missed`,
which uses nothing but the notifier, which oslo.messaging lets several threads send through: a
pooled connection per message).
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable, Iterable, Set
from typing import Any, Protocol

LOG = logging.getLogger(__name__)

NODE_EVENT_PREFIX = "baremetal.node."
#: A daemon's heartbeat: ``{"host": ..., "sent": wall-clock seconds}``.
HEARTBEAT_EVENT = "computed.heartbeat"
#: Nodes a fleet-wide listing found differing from what computed applied at two rounds in a row
#: (changed with no event, or with no provider applied yet): ``{"host": ..., "nodes": [uuid,
#: ...], "unapplied": [uuid, ...]}``. ``unapplied`` (optional) names those of ``nodes`` with no
#: provider applied yet: their Ironic data did not change, so a daemon that lists the node and
#: does not hold it need not re-read it (a cold start's rounds announce thousands). A daemon of
#: an earlier release reads ``nodes`` alone and re-reads them all, as before; a message without
#: ``unapplied`` is re-read everywhere.
MISSED_EVENT = "computed.node.missed"
#: The hint (:class:`NodeHints`) a :data:`MISSED_EVENT` gives a node of its ``unapplied`` list;
#: a hint kind, never sent.
MISSED_UNAPPLIED = "computed.node.missed.unapplied"
#: The hint kinds that come from a listing round's announcement, not from Ironic.
ANNOUNCED = frozenset({MISSED_EVENT, MISSED_UNAPPLIED})
#: Uuids per :data:`MISSED_EVENT` message (a message stays well under the broker's frame size).
MISSED_PER_MESSAGE = 500
#: Seconds between heartbeats until the first comes back (the first listing waits for it) ...
START_BEAT = 1.0
#: ... for at most this many beats.
START_BEATS = 10


def beat_wait(heard: bool, beats: int, interval: float) -> float:
    """Seconds until the next heartbeat, after ``beats`` were sent: :data:`START_BEAT` while
    none came back yet (``heard`` False) and fewer than :data:`START_BEATS` went, else
    ``interval``. A heartbeat sent before the listener was bound is lost (no queue yet): sending
    the next one soon brings the first round trip, and the first listing, forward."""
    if not heard and beats < START_BEATS:
        return min(START_BEAT, interval)
    return interval


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


def missed_nodes(payload: Any) -> list[str]:
    """The uuids of a :data:`MISSED_EVENT` payload (the malformed ones left out)."""
    return _uuids(payload, "nodes")


def unapplied_nodes(payload: Any) -> set[str]:
    """The uuids a :data:`MISSED_EVENT` payload names as having no provider applied yet (its
    ``unapplied`` list; none when it has none or it is malformed)."""
    return set(_uuids(payload, "unapplied"))


def _uuids(payload: Any, key: str) -> list[str]:
    listed = payload.get(key) if isinstance(payload, dict) else None
    if not isinstance(listed, list):
        return []
    return [uuid for uuid in listed if isinstance(uuid, str) and uuid]


class StreamWatch:
    """Whether this daemon's notification stream can be trusted now, from its own heartbeats.

    Pure bookkeeping over two clocks: ``wall`` (what a heartbeat carries, read again when it
    comes back on the same host) and ``clock`` (monotonic, for "how long since"). Thread-safe: the
    listener thread calls :meth:`heard`, the listing thread the queries.
    """

    def __init__(self, host: str, heartbeat_interval: float, max_lag: float,
                 clock: Callable[[], float] = time.monotonic,
                 wall: Callable[[], float] = time.time):
        self.host = host
        self.heartbeat_interval = heartbeat_interval
        self.max_lag = max_lag
        self._clock = clock
        self._wall = wall
        self._lock = threading.Lock()
        self.last_heard: float | None = None  # monotonic time own heartbeat last came back
        self.last_lag: float | None = None    # seconds it took
        # Latest monotonic time at which the stream was seen in doubt (start: in doubt).
        self._doubted_at = clock()

    def heard(self, payload: Any) -> None:
        """A heartbeat came back through the listener (any host's; only ours counts)."""
        if not isinstance(payload, dict) or payload.get("host") != self.host:
            return
        sent = payload.get("sent")
        if not isinstance(sent, (int, float)) or isinstance(sent, bool):
            return
        now, lag = self._clock(), max(0.0, self._wall() - sent)
        with self._lock:
            gap_ok = (self.last_heard is not None
                      and now - self.last_heard <= self.heartbeat_interval + self.max_lag)
            if not gap_ok or lag > self.max_lag:
                self._doubted_at = now  # a gap or a lag: events in it may be late or lost
            self.last_heard, self.last_lag = now, lag

    def trusted(self) -> bool:
        """True while heartbeats come back on time; a False answer is remembered as a doubt."""
        now = self._clock()
        with self._lock:
            ok = (self.last_heard is not None and self.last_lag is not None
                  and self.last_lag <= self.max_lag
                  and now - self.last_heard <= self.heartbeat_interval + self.max_lag)
            if not ok:
                self._doubted_at = now
            return ok

    def trusted_since(self, since: float) -> bool:
        """True when the stream is trusted now and was not in doubt at any moment seen since
        the monotonic time ``since`` (a listing that started then covers what came before)."""
        trusted = self.trusted()
        with self._lock:
            return trusted and self._doubted_at < since


class Heartbeat:
    """Sends this daemon's heartbeats and the listing's :data:`MISSED_EVENT` announcements.

    ``notifier`` is an ``oslo_messaging.Notifier`` on the heartbeat topic (see :func:`notifier`).
    A failed send is logged and otherwise ignored: the heartbeat not coming back is the signal.
    """

    def __init__(self, notifier: Any, host: str, wall: Callable[[], float] = time.time,
                 watch: StreamWatch | None = None):
        self._notifier = notifier
        self._host = host
        self._wall = wall
        self._watch = watch  # whose first heartbeat back ends the quick start beats
        self.beats = 0  # heartbeats sent or tried (the heartbeat thread's alone)

    def next_wait(self, interval: float) -> float:
        """Seconds the heartbeat thread waits before the next beat (:func:`beat_wait`)."""
        heard = self._watch is None or self._watch.last_heard is not None
        return beat_wait(heard, self.beats, interval)

    def beat(self) -> None:
        self.beats += 1
        try:
            self._notifier.info({}, HEARTBEAT_EVENT, {"host": self._host, "sent": self._wall()})
        except Exception as exc:  # the broker is down: the missing heartbeat says so
            LOG.warning("cannot send the event stream heartbeat: %s", exc)

    def announce_missed(self, uuids: Iterable[str], unapplied: Set[str] = frozenset()) -> bool:
        """Tell every daemon to re-read ``uuids``, those of ``unapplied`` (no provider applied
        yet) only their holder and a daemon that does not list them; False when a message could
        not be sent."""
        uuids = sorted(uuids)
        for start in range(0, len(uuids), MISSED_PER_MESSAGE):
            chunk = uuids[start:start + MISSED_PER_MESSAGE]
            payload: dict[str, Any] = {"host": self._host, "nodes": chunk}
            marked = [uuid for uuid in chunk if uuid in unapplied]
            if marked:
                payload["unapplied"] = marked
            try:
                self._notifier.info({}, MISSED_EVENT, payload)
            except Exception as exc:
                LOG.warning("cannot announce %d node(s) the listing found changed: %s",
                            len(uuids), exc)
                return False
        return True


class NodeHints(Protocol):
    def hint(self, uuid: str, event_type: str) -> None:
        """Node ``uuid`` may have changed (``event_type`` says how); called from the listener's
        thread, so it must not block."""


class NotificationEndpoint:
    """oslo.messaging notification endpoint: every priority goes to the same handler.

    Ironic's node events become hints; a heartbeat goes to ``watch``; a :data:`MISSED_EVENT`
    becomes a hint per node it names."""

    def __init__(self, hints: NodeHints, watch: StreamWatch | None = None):
        self._hints = hints
        self._watch = watch

    def _handle(self, ctxt: Any, publisher_id: str, event_type: str, payload: Any,
                metadata: Any) -> None:
        try:
            if event_type == HEARTBEAT_EVENT:
                if self._watch is not None:
                    self._watch.heard(payload)
                return None
            if event_type == MISSED_EVENT:
                unapplied = unapplied_nodes(payload)
                for uuid in missed_nodes(payload):
                    self._hints.hint(uuid, MISSED_UNAPPLIED if uuid in unapplied
                                     else MISSED_EVENT)
                return None
            uuid = node_uuid(event_type, payload)
        except Exception:  # a payload we cannot read must not stop the listener
            LOG.exception("dropping unreadable notification %s", event_type)
            return None
        if uuid is not None:
            self._hints.hint(uuid, event_type)
        return None

    info = audit = warn = error = critical = debug = sample = _handle


def pool_name(group: str, host: str) -> str:
    """The notification pool of the daemon ``host`` (normalised) in the fleet's ``group``, which
    is also the name of its queue on the broker (oslo.messaging names a pooled listener's queue
    after its pool): ``computed/GROUP/HOST``. Unambiguous: neither a group nor a host may contain
    ``/`` (each names a znode, :mod:`computed.conf.checks`), so two (group, host) pairs never
    share a pool. Release 0.x named it ``computed-HOST`` (docs/upgrades.md)."""
    return f"computed/{group}/{host}"


def listener(transport: Any, topic: str, exchange: str, pool: str, hints: NodeHints,
             heartbeat_topic: str | None = None, watch: StreamWatch | None = None) -> Any:
    """A notification listener on ``topic`` in ``exchange`` (and on ``heartbeat_topic`` in the
    transport's own exchange) for pool ``pool``, not started yet (its owner starts and stops
    it). The pool's one queue receives both."""
    import oslo_messaging
    targets = [oslo_messaging.Target(topic=topic, exchange=exchange)]
    if heartbeat_topic:
        targets.append(oslo_messaging.Target(topic=heartbeat_topic))
    return oslo_messaging.get_notification_listener(
        transport, targets, [NotificationEndpoint(hints, watch)], executor="threading",
        pool=pool)


def notifier(transport: Any, host: str, heartbeat_topic: str) -> Any:
    """The ``oslo_messaging.Notifier`` :class:`Heartbeat` sends through (no retry: a heartbeat
    that cannot go now is simply missing)."""
    import oslo_messaging
    return oslo_messaging.Notifier(transport, publisher_id=f"computed.{host}",
                                   driver="messagingv2", topics=[heartbeat_topic], retry=0)
