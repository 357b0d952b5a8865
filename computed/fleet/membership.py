"""Membership: which computed daemons are live in the fleet, with their weight and drain flag.

Owns the daemon's membership of the fleet's tooz group and the drain markers. A member is the
ephemeral znode tooz creates when the daemon joins (``/<namespace>/<group>/<host>``, the
namespace ``tooz`` unless the backend URL names another; capabilities :func:`capabilities`:
``{"host", "weight", "version", "rpc"}``, the last two what :mod:`computed.upgrade` reads: the
release and the instance RPC API the daemon serves; release 0.1.0 wrote host and weight only);
it disappears when the daemon leaves or its ZooKeeper session expires. Joining and leaving go
through tooz's API; reads and watches through the kazoo client of the same session
(:mod:`computed.fleet.zookeeper`).
A *drain marker* ``/computed/<group>/draining/<host>`` takes a member's free nodes away from it:
``computed-manage fleet drain HOST`` writes a persistent one (until ``undrain``), a daemon
stopping on SIGTERM writes an ephemeral one (gone with its session, so a restart is not drained).

Guarantees:

* Changes are events: the one-shot watches every read of the group leaves (on the group's list,
  the drain markers' list and every member's znode) set ``wake`` (the fleet's wake-up, a
  ``threading.Event``) as soon as ZooKeeper reports a change (tooz's own watchers poll). A watch
  that fired, or that kazoo dropped with a connection (it calls it then), made the view stale,
  so the next pass reads the group and leaves the watches again. kazoo's ``ChildrenWatch`` is
  not used: it made a read of its own on each change (without a limit, and the first in the
  caller's thread) and counted the change a second time after that read's round trip, when
  the one-shot watch's count had already started the daemon's read: every change read twice.
* A member epoch is the creation zxid of the member's znode: unique, and larger on every join.
* Host names are normalised (lower case, no trailing dot) before they name a member or a marker:
  Nova's ring split when one service said ``Host-1`` and another ``host-1``.
* Only a live daemon is a member: a child of the group is one only if it is an *ephemeral* znode
  (``ephemeralOwner != 0``: a session keeps it, and it goes with that session) whose data are
  the capabilities a daemon writes (``{"host": <its own name>, "weight": <positive int>}``).
  Anything else in the group (a persistent znode planted there, unreadable or foreign data) is
  an :class:`IgnoredEntry`: never on the ring, logged once per znode (not on every pass), and
  listed by ``computed-manage fleet status`` and the daemon's metrics. A planted persistent
  znode was once taken as a member of weight 1 and given a quarter of the nodes, which then had
  no daemon behind them.

Bounded: every wait for ZooKeeper (tooz's ``.get()``, kazoo's requests) ends within the session
timeout (``answer_within``; :mod:`computed.fleet.zookeeper`, "Bounded waits"). A join or read not
answered in time raises :class:`computed.fleet.zookeeper.NoAnswer` (a ConnectionLoss: the fleet
retries it as it does a dropped connection); a leave not answered in time is given up with one
line naming the host and the group: the member is an ephemeral znode, gone when the session
expires.

Read only when something may have changed (:class:`GroupFreshness`, pure). Every pass asks
for the members, but the group is read again (2 ``get_children`` + 1 ``get`` per member) only
when the last view may be out of date: a watch fired since that read began (the children
watches above, and a data watch each read leaves on every member's znode, so a member's
capabilities changed in place count too; the drain markers are children, their presence all
that is read), the session changed state (:meth:`Membership.invalidate`, from
:meth:`computed.fleet.reconciler.Fleet.session_changed`: kazoo also fires every watch it drops
with a lost session), this daemon joined or wrote its drain marker, or :data:`REREAD_AFTER`
seconds passed since the read began (the net under a watch lost to a bug). Reading on every
1 s pass cost D + 2 requests a second per daemon, D^2 + 2D for the fleet (1,680/s at 40
daemons). ZooKeeper sends a watch's event before any read can see the change it reports, and
the view is dated by the count of events at the start of its read, so a change made during a
read leaves the view stale and the next pass reads again. One change counts once (a leave fires
the group's watch and the member's; only the group's counts: :func:`member_event_is_change`),
so it costs each daemon one read of the group. Claims stay exclusive whatever a
daemon's view (ZooKeeper creates a claim znode once): a view late by a change delays a
handover, it never gives one node two owners.

Threads: the fleet thread joins, leaves, watches, sets the drain marker and asks for the
members on every pass; kazoo's event thread runs the watches, which only set ``wake`` (an
Event) and count a change, and kazoo's connection thread calls :meth:`Membership.invalidate`
(through the fleet): both take the membership's lock only for that count, never across I/O,
so kazoo's threads never wait on the fleet; the metrics endpoint's request threads call
:meth:`Membership.members` and :meth:`Membership.ignored` too (served from the same view, and
reading the group when it is stale: each read is numbered, and one that ends after a later one
is not kept). The freshness (:class:`GroupFreshness`: event count, the view and its read's
number and start), the ignored entries and the ones already logged are changed and read under
the membership's lock, so two readers log a planted znode once. :attr:`Membership.member_epoch`
has one writer, the fleet thread's join; the node thread (re-homing), the instance worker's
threads (the member epoch they act under) and the metrics read it as one int. The kazoo
client is kazoo's, safe to share.
"""

from __future__ import annotations

import json
import logging
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from kazoo import exceptions as zk_exc
from kazoo.protocol.states import EventType
from tooz import coordination
from tooz import utils as tooz_utils

from computed.conf.coordination import DEFAULT_SESSION_TIMEOUT
from computed.conf.default import normalise_host
from computed.fleet import zookeeper
from computed.fleet.claims import claims_path
from computed.fleet.zookeeper import Deadline, NoAnswer
from computed.upgrade import levels
from computed.version import VERSION
from hashring.ownership import Member

LOG = logging.getLogger(__name__)


#: Seconds after which a view of the group is read again though no watch fired: the net under a
#: watch lost to a bug (ZooKeeper delivers every watch of a live session, and a session change
#: forces a read anyway). 30 s is ``[fleet] node_refresh_interval``'s default, the bound the
#: fleet already accepts on its view of Ironic when events cannot be trusted; a view late by
#: it only delays a handover (claims stay exclusive), and it costs (D + 2) / 30 requests a
#: second per daemon: 1.4/s at D = 40.
REREAD_AFTER = 30.0


class MembershipError(RuntimeError):
    """The daemon could not become (or stay) a member; the message names host and group."""


@dataclass(frozen=True)
class MemberInfo:
    """A live member as read from ZooKeeper, with its member epoch."""

    name: str
    weight: int
    draining: bool
    member_epoch: int
    version: str | None = None  # its release; None: unpublished (0.1.0) or unreadable
    rpc: tuple[tuple[str, str], ...] = ()  # (interface, version) it serves, as published

    def serves(self, interface: str) -> str | None:
        """The version of ``interface`` it published; None when it published none."""
        return dict(self.rpc).get(interface)

    def as_ring_member(self) -> Member:
        return Member(self.name, self.weight, self.draining)


@dataclass(frozen=True)
class IgnoredEntry:
    """A child of the group that is not a live daemon, and why; ``czxid`` tells two
    plantings of one name apart."""

    name: str
    reason: str
    czxid: int


@dataclass(frozen=True)
class GroupView:
    """What the group folder holds: the members, and the entries that are not members."""

    members: list[MemberInfo]
    ignored: list[IgnoredEntry]


@dataclass(frozen=True)
class GroupRead:
    """One read of the group as :class:`GroupFreshness` dated it when it began."""

    number: int  # reads begun before it, plus one
    changes: int  # the change count when it began
    began: float  # the clock when it began


class GroupFreshness:
    """Whether the last view of the group may still be used, or the group must be read (pure:
    no I/O, no clock of its own, no lock: :class:`Membership` calls it under its lock).

    A view is used while no change was counted since its read began and less than
    ``reread_after`` seconds passed since then. Of two reads that overlap, the view of the one
    that began last is kept, whichever ends first. An empty view is never kept: the group's
    folder may be missing (:func:`read_group` answers an empty view), and a missing folder
    leaves no watch to say when it comes."""

    def __init__(self, reread_after: float = REREAD_AFTER):
        self.reread_after = reread_after
        self.changes = 0
        self._begun = 0
        self._view: GroupView | None = None
        self._read: GroupRead | None = None  # the kept view's

    def changed(self) -> None:
        """Something the view holds may have changed (a watch fired, the session moved)."""
        self.changes += 1

    def fresh(self, now: float) -> GroupView | None:
        """The kept view if it may still be used at ``now``, else None (read the group)."""
        read = self._read
        if (read is None or read.changes != self.changes
                or not now - read.began < self.reread_after):
            return None
        return self._view

    def begin(self, now: float) -> GroupRead:
        """A read of the group begins at ``now``."""
        self._begun += 1
        return GroupRead(self._begun, self.changes, now)

    def done(self, read: GroupRead, view: GroupView) -> bool:
        """``read`` answered ``view``; True when it is kept (no later read was kept before)."""
        if self._read is not None and self._read.number > read.number:
            return False
        if not view.members and not view.ignored:
            self._read = self._view = None  # read again next time
            return True
        self._read, self._view = read, view
        return True


def member_event_is_change(event_type: str | None) -> bool:
    """Whether an event of the one-shot watch a read left on a member's znode may change the
    view (pure). Its deletion does not count: ZooKeeper reports it to the watch on the group's
    list too, which every read that left this watch also left (listed before the members are
    read), and a second count of one leave made the view stale again when the first count had
    already started the read that sees it: two reads of the group for one leave. A change of
    its data (capabilities set in place) counts; so does kazoo's NONE, sent to every watch it
    drops with the connection (the read after it sets them again)."""
    return event_type != EventType.DELETED


def capabilities(host: str, weight: int) -> dict[str, Any]:
    """What a daemon publishes as its member's capabilities (read by :func:`member_from_znode`
    and by :mod:`computed.upgrade`: ``[upgrade_levels] instances = auto``, the upgrade check)."""
    return {"host": host, "weight": weight, "version": VERSION,
            "rpc": {"instances": levels.newest("instances")}}


def fleet_root(group: str) -> str:
    """Where computed keeps its own znodes for ``group`` (claims, drain markers)."""
    return f"/computed/{group}"


def drain_markers_path(group: str) -> str:
    """Where the drain markers of ``group`` live (one child per draining host)."""
    return f"{fleet_root(group)}/draining"


class Membership:
    """This daemon's membership, and the live view of everybody's."""

    def __init__(self, coordinator: coordination.CoordinationDriver, group: str, host: str,
                 weight: int, wake: threading.Event,
                 answer_within: Callable[[], float] = lambda: DEFAULT_SESSION_TIMEOUT,
                 reread_after: float = REREAD_AFTER,
                 clock: Callable[[], float] = time.monotonic):
        self._coordinator = coordinator
        # Seconds to wait for one answer of ZooKeeper: the session timeout (see the module).
        self._answer_within = answer_within
        self._client = zookeeper.kazoo_client(coordinator)
        self.group = group
        self.host = normalise_host(host)
        self.weight = weight
        self._wake = wake  # set from kazoo's event thread: never blocks it
        self.members_path = zookeeper.group_path(coordinator, group)
        self.draining_path = drain_markers_path(group)
        self.member_epoch = 0  # of the last join
        self._ignored: list[IgnoredEntry] = []
        self._reported: set[tuple[str, int]] = set()  # ignored entries already logged
        self._lock = threading.Lock()
        self._freshness = GroupFreshness(reread_after)
        self._clock = clock

    def join(self, timeout: float, stopping: Callable[[], bool]) -> int:
        """Join the group and return the member epoch.

        A member with our name may be our own previous session that has not expired yet (a
        restart right after a crash): that conflict is retried until ``timeout``. One made by
        this very session is our own join, whose answer a dropped connection lost: it stands.
        """
        group = self.group.encode()
        try:
            self._tooz(self._coordinator.create_group(group), f"the creation of group {self.group}")
        except coordination.GroupAlreadyExist:
            pass
        deadline = time.monotonic() + timeout
        while True:
            try:
                self._tooz(self._coordinator.join_group(
                    group, capabilities=capabilities(self.host, self.weight)),
                    f"host {self.host}'s join of group {self.group}")
                break
            except coordination.MemberAlreadyExist:
                if self._ours(f"{self.members_path}/{self.host}"):
                    break  # our own join, whose answer a dropped connection lost
                if stopping() or time.monotonic() >= deadline:
                    raise MembershipError(
                        f"host {self.host} is already a member of group {self.group}: another "
                        f"computed runs with the same [DEFAULT] host") from None
                time.sleep(0.2)
        stat = self._exists(f"{self.members_path}/{self.host}")
        if stat is None:
            raise MembershipError(f"host {self.host} joined group {self.group} but its "
                                  f"membership znode is gone")
        self.member_epoch = stat.czxid
        self.invalidate()  # our own member is new
        return self.member_epoch

    def _tooz(self, request: Any, what: str) -> Any:
        """The answer to a tooz request, waited for at most the session timeout; tooz's own
        timeout becomes :class:`NoAnswer`, which the fleet retries like a lost connection."""
        limit = self._answer_within()
        try:
            return request.get(timeout=limit)
        except coordination.OperationTimedOut:
            raise NoAnswer(what, limit) from None

    def _exists(self, path: str) -> Any:
        return zookeeper.answer(self._client.exists_async(path), self._answer_within(),
                                f"a look at {path}")

    def _ours(self, path: str) -> bool:
        """True when ``path`` is an ephemeral znode of this client's own session."""
        stat = self._exists(path)
        session = self._client.client_id
        return stat is not None and session is not None and stat.ephemeralOwner == session[0]

    def leave(self) -> None:
        """Leave the group, waiting at most the session timeout for ZooKeeper to confirm it;
        unconfirmed, the member goes when the session expires (one line says so)."""
        try:
            self._tooz(self._coordinator.leave_group(self.group.encode()),
                       f"host {self.host}'s leave of group {self.group}")
            return
        except (coordination.ToozError, zk_exc.KazooException) as exc:
            reason = str(exc) or type(exc).__name__
        # Logged outside the except: oslo.log would append the exception to the line again.
        LOG.warning("host %s leaves group %s without ZooKeeper confirming it: %s; its member "
                    "znode is ephemeral and goes when the session expires",
                    self.host, self.group, reason)

    def watch(self) -> None:
        """Make the drain markers' folder (and protect the fleet's containers): the watches
        that set ``wake`` on every change of members or drain markers are left by each read of
        the group (:meth:`members`, :func:`read_group`)."""
        # Containers made before credentials were configured are open: close them first.
        root = fleet_root(self.group)
        zookeeper.protect(self._client,
                          [root, claims_path(root), self.draining_path, self.members_path],
                          self._answer_within())
        zookeeper.answer(self._client.ensure_path_async(self.draining_path),
                         self._answer_within(), f"the creation of {self.draining_path}")

    def _touched(self, _event: Any) -> None:
        """A one-shot watch a read left on the group's or the markers' list fired."""
        self.invalidate()
        self._wake.set()

    def _member_touched(self, event: Any) -> None:
        """A one-shot watch a read left on a member's znode fired."""
        if member_event_is_change(getattr(event, "type", None)):
            self.invalidate()
            self._wake.set()

    def invalidate(self) -> None:
        """The group may have changed: the next :meth:`members` reads it (never blocks on I/O)."""
        with self._lock:
            self._freshness.changed()

    def members(self) -> list[MemberInfo]:
        """The live members, read again only when the last view may be out of date (see the
        module); what else sits in the group is logged once and kept for :meth:`ignored`."""
        with self._lock:
            view = self._freshness.fresh(self._clock())
            if view is not None:
                return view.members
            read = self._freshness.begin(self._clock())
        view = read_group(self._client, self.members_path, self.draining_path,
                          self._answer_within(), watch=self._touched,
                          member_watch=self._member_touched)
        with self._lock:
            if not self._freshness.done(read, view):
                return view.members  # a later read was kept: its entries stand
            self._ignored = view.ignored
            fresh = [entry for entry in view.ignored
                     if (entry.name, entry.czxid) not in self._reported]
            self._reported = {(entry.name, entry.czxid) for entry in view.ignored}
        for entry in fresh:
            # The name is anybody's choice: cut it to fit one line.
            name = entry.name if len(entry.name) <= 80 else _short(entry.name)
            LOG.error("group %s: ignoring %s/%s, it is not a live computed daemon (%s); it "
                      "gets no nodes. Delete it if nobody should have put it there.",
                      self.group, self.members_path, name, entry.reason)
        return view.members

    def ignored(self) -> list[IgnoredEntry]:
        """The entries of the group that the last :meth:`members` did not take as members."""
        with self._lock:
            return list(self._ignored)

    def set_draining(self, reason: str, persistent: bool) -> None:
        try:
            mark_draining(self._client, self.draining_path, self.host, reason, persistent,
                          self._answer_within())
        finally:
            self.invalidate()  # written, or maybe written: read the markers again


def read_members(client: Any, members_path: str, draining_path: str,
                 timeout: float = DEFAULT_SESSION_TIMEOUT) -> list[MemberInfo]:
    """Every live member with its weight, drain flag and member epoch (pipelined reads)."""
    return read_group(client, members_path, draining_path, timeout).members


def read_group(client: Any, members_path: str, draining_path: str,
               timeout: float = DEFAULT_SESSION_TIMEOUT,
               watch: Callable[[Any], None] | None = None,
               member_watch: Callable[[Any], None] | None = None) -> GroupView:
    """The group's members and the entries that are not members (pipelined reads, each round
    answered within ``timeout`` seconds, else :class:`NoAnswer`). With ``watch``, the reads of
    both lists leave a one-shot watch that calls it; with ``member_watch`` (``watch`` if not
    given), so does the read of every member's znode."""
    member_watch = member_watch or watch
    lists = [client.get_children_async(members_path, watch=watch),
             client.get_children_async(draining_path, watch=watch)]
    deadline = Deadline(timeout)
    try:
        names = zookeeper.answer(lists[0], deadline, f"the list of {members_path}")
    except zk_exc.NoNodeError:
        return GroupView([], [])
    try:
        draining = set(zookeeper.answer(lists[1], deadline, f"the list of {draining_path}"))
    except zk_exc.NoNodeError:
        draining = set()
    deadline = Deadline(timeout)
    pending = [(name, client.get_async(f"{members_path}/{name}", watch=member_watch))
               for name in names]
    members, ignored = [], []
    for name, async_result in pending:
        try:
            data, stat = zookeeper.answer(async_result, deadline,
                                          f"a read of {members_path}/{name}")
        except zk_exc.NoNodeError:
            continue  # left while we looked
        entry = member_from_znode(name, data, stat.ephemeralOwner, stat.czxid,
                                  name in draining)
        (members if isinstance(entry, MemberInfo) else ignored).append(entry)
    return GroupView(sorted(members, key=lambda member: member.name),
                     sorted(ignored, key=lambda entry: entry.name))


def member_from_znode(name: str, data: bytes, ephemeral_owner: int, czxid: int,
                      draining: bool) -> MemberInfo | IgnoredEntry:
    """Decide whether one child of the group is a live daemon (pure)."""
    if not ephemeral_owner:
        return IgnoredEntry(name, "a persistent znode: no daemon session keeps it", czxid)
    try:
        capabilities = tooz_utils.loads(data)
    except Exception:  # tooz raises its own SerializationError, or whatever msgpack does
        return IgnoredEntry(name, "its capabilities cannot be read", czxid)
    if not isinstance(capabilities, dict):
        return IgnoredEntry(name, f"its capabilities are a {type(capabilities).__name__}, "
                            f"not an object", czxid)
    host, weight = capabilities.get("host"), capabilities.get("weight")
    if host != name:
        return IgnoredEntry(name, f"its capabilities name host {_short(host)}, not {name!r}",
                            czxid)
    if not isinstance(weight, int) or isinstance(weight, bool) or weight < 1:
        return IgnoredEntry(name, f"its weight {_short(weight)} is not a positive integer",
                            czxid)
    # What it publishes for upgrades never makes it less of a member: unreadable is unknown.
    version = capabilities.get("version")
    rpc = capabilities.get("rpc")
    served = tuple(sorted((key, value) for key, value in rpc.items()
                          if isinstance(key, str) and isinstance(value, str))
                   ) if isinstance(rpc, dict) else ()
    return MemberInfo(name, weight, draining, czxid,
                      version if isinstance(version, str) else None, served)


def _short(value: Any, limit: int = 80) -> str:
    text = repr(value)
    return text if len(text) <= limit else f"{text[:limit]}... ({len(text)} characters)"


def mark_draining(client: Any, draining_path: str, host: str, reason: str,
                  persistent: bool, timeout: float = DEFAULT_SESSION_TIMEOUT) -> None:
    """Write the drain marker of ``host`` (idempotent), answered within ``timeout`` seconds
    (else :class:`NoAnswer`: it may still be written)."""
    value = json.dumps({"reason": reason, "at": time.time()}).encode()
    path = f"{draining_path}/{normalise_host(host)}"
    try:
        zookeeper.answer(client.create_async(path, value, ephemeral=not persistent,
                                             makepath=True),
                         timeout, f"the creation of {path}")
    except zk_exc.NodeExistsError:
        pass


def clear_draining(client: Any, draining_path: str, host: str,
                   timeout: float = DEFAULT_SESSION_TIMEOUT) -> bool:
    """Remove the drain marker of ``host``; False when there was none. Answered within
    ``timeout`` seconds, else :class:`NoAnswer`."""
    path = f"{draining_path}/{normalise_host(host)}"
    try:
        zookeeper.answer(client.delete_async(path), timeout, f"the delete of {path}")
    except zk_exc.NoNodeError:
        return False
    return True
