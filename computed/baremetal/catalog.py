"""The daemon's view of Ironic's nodes, with the last-good rule.

Owns :class:`NodeCatalog`, the one place the daemon asks "which nodes
exist?", and :class:`NodeView`, the immutable answer. The rule it
guarantees: **a failed listing never replaces a good one.** When the driver
raises (Ironic down, retries exhausted, a refused request), the catalog
keeps serving the last complete list it got, marked stale, with its age and
the error. Acting on an empty or partial list would make the fleet drop
every node's resource provider during an Ironic outage (Nova's bug
1841481 shows what a provider deleted in such a window costs).

States: EMPTY (no listing has succeeded yet; :meth:`NodeCatalog.view`
returns None and :meth:`NodeCatalog.refresh` re-raises, since there is no
last good list to fall back to) -> FRESH (the last refresh succeeded) <->
STALE (the last refresh failed; nodes are those of the last success).

An empty list that Ironic *did* return is a valid answer and replaces the
previous one: it is the driver's errors, not the list's size, that mark a
view stale.

Each view says which set of uuids it holds (:attr:`NodeView.uuids_version`):
two views of one catalog with the same number hold the same uuids, so a
reader that derives something from the uuids alone (the set the fleet shares
out, :class:`~computed.daemon.nodes.FleetNodes`) need not build it again after
an event changed one node's data, which is most events (at 50,000 nodes that
rebuild was ~5 MB of sets made and thrown away per event).

An event's update does not copy the listing: a view after events is the listing's own
mapping with the nodes re-read since (:class:`NodesSinceListing`), until those re-reads are
a sixteenth of the listing and it is copied once. Copying 50,000 entries per event (2.6 MB,
freed at once) left 4-6 MB more resident in every daemon after a burst of events: glibc
raises its mmap threshold after a large free, so the next copies come from the heap and
their freed space stays mapped.

Thread-safe: refreshes may run concurrently with readers; each reader gets a
consistent view object.

Threads: the listing thread calls :meth:`NodeCatalog.refresh`, the node
thread :meth:`NodeCatalog.update` (a re-read after an event); the fleet,
node and listing threads and the metrics endpoint's and systemd status
loop's threads call :meth:`NodeCatalog.view`. A view is immutable (a frozen
dataclass over a read-only mapping that nothing writes after it is made),
replaced whole under the catalog's lock and read without it (one reference:
an atomic read). The nodes re-read since a listing started (``_touched``)
are read and written under the lock only; a listing compares nodes outside
it, so an event's update never waits for thousands of comparisons.
"""

from __future__ import annotations

import dataclasses
import enum
import logging
import threading
import time
from collections.abc import Callable, Iterator, Mapping
from types import MappingProxyType

from computed.baremetal.driver import BaremetalDriver, DriverError, Node

LOG = logging.getLogger(__name__)


class Freshness(enum.Enum):
    FRESH = 'fresh'
    STALE = 'stale'


@dataclasses.dataclass(frozen=True)
class NodeView:
    """One consistent set of nodes and how much to trust it.

    ``listed_at`` is the monotonic time of the listing the nodes come
    from; ``error`` is the failure that made the view stale (None when
    fresh); ``failures`` counts refreshes failed in a row;
    ``uuids_version`` is the same number in two views of one catalog only
    when their nodes' uuids are the same set.
    """

    nodes: Mapping[str, Node]
    freshness: Freshness
    listed_at: float
    error: DriverError | None = None
    failures: int = 0
    uuids_version: int = 0

    @property
    def stale(self) -> bool:
        return self.freshness is Freshness.STALE

    def age(self, now: float | None = None) -> float:
        """Seconds since the nodes were listed (monotonic clock)."""
        return (time.monotonic() if now is None else now) - self.listed_at

    def __len__(self) -> int:
        return len(self.nodes)

    def __contains__(self, uuid: object) -> bool:
        return uuid in self.nodes


#: A view's re-reads since its listing are folded into one new mapping once they are this
#: share of the listing's nodes (or :data:`FOLD_AT_LEAST` when that is more): each event's
#: update copies the re-reads, so folding bounds that copy while keeping it rare.
FOLD_SHARE = 16
FOLD_AT_LEAST = 256


class NodesSinceListing(Mapping[str, Node]):
    """A listing's nodes with the nodes re-read since: the listing's mapping shared, not copied.

    ``reread`` maps a uuid to its node as re-read, or to None when the re-read found it gone.
    Immutable: neither mapping is written after it is given here.
    """

    __slots__ = ('_listed', '_reread', '_len')

    def __init__(self, listed: Mapping[str, Node], reread: dict[str, Node | None]):
        self._listed = listed
        self._reread = reread
        self._len = len(listed)
        for uuid, node in reread.items():
            if uuid in listed:
                self._len -= node is None
            else:
                self._len += node is not None

    def after(self, uuid: str, node: Node | None) -> Mapping[str, Node]:
        """These nodes with ``uuid`` re-read as ``node`` (None: gone): a copy of the re-reads
        only, or one mapping of all the nodes once the re-reads are many."""
        reread = dict(self._reread)
        reread[uuid] = node
        if len(reread) <= max(FOLD_AT_LEAST, len(self._listed) // FOLD_SHARE):
            return NodesSinceListing(self._listed, reread)
        return MappingProxyType(dict(NodesSinceListing(self._listed, reread).items()))

    @property
    def reread(self) -> int:
        """How many nodes were re-read since the listing."""
        return len(self._reread)

    def __getitem__(self, uuid: str) -> Node:
        if uuid in self._reread:
            node = self._reread[uuid]
            if node is None:
                raise KeyError(uuid)
            return node
        return self._listed[uuid]

    def __contains__(self, uuid: object) -> bool:
        if uuid in self._reread:
            return self._reread[uuid] is not None
        return uuid in self._listed

    def __iter__(self) -> Iterator[str]:
        reread = self._reread
        for uuid in self._listed:
            if uuid not in reread or reread[uuid] is not None:
                yield uuid
        for uuid, node in reread.items():
            if node is not None and uuid not in self._listed:
                yield uuid

    def __len__(self) -> int:
        return self._len


class NodeCatalog:
    """Lists nodes through a driver and remembers the last good list."""

    def __init__(self, driver: BaremetalDriver,
                 clock: Callable[[], float] = time.monotonic):
        self._driver = driver
        self._clock = clock
        self._lock = threading.Lock()
        self._view: NodeView | None = None
        self._touched: dict[str, float] = {}  # uuid -> when update() last replaced it
        self._uuids_versions = 0  # the last NodeView.uuids_version given (under the lock)

    def view(self) -> NodeView | None:
        """The current view, or None before the first successful listing."""
        return self._view

    def refresh(self) -> NodeView:
        """List the nodes again; on failure keep the last good list.

        :returns: the new view, FRESH on success, STALE on failure.
        :raises DriverError: the listing failed and no listing ever
            succeeded (there is nothing good to keep).
        """
        started = self._clock()
        current = self._view
        try:
            # An unchanged node is the current view's object (any view will do: only equal
            # nodes are reused), compared as the driver parses it, outside the lock, so that an
            # event's update() never waits for a comparison of thousands of nodes.
            nodes = self._driver.list_nodes_reusing({} if current is None else current.nodes)
        except DriverError as exc:
            return self._keep_last_good(exc)
        listed = {node.uuid: node for node in nodes}
        del nodes
        with self._lock:
            # A slower refresh that started earlier must not overwrite a
            # newer listing that finished first.
            current = self._view
            if current is None or current.listed_at <= started:
                self._keep_newer_updates(listed, current, started)
                # The same uuids as the current view: the same number (a comparison of keys,
                # allocating nothing, once per listing).
                same = current is not None and listed.keys() == current.nodes.keys()
                self._view = NodeView(nodes=MappingProxyType(listed),
                                      freshness=Freshness.FRESH, listed_at=started,
                                      uuids_version=(current.uuids_version if same
                                                     else self._new_uuids_version()))
            return self._view

    def _new_uuids_version(self) -> int:
        self._uuids_versions += 1
        return self._uuids_versions

    def _keep_newer_updates(self, listed: dict[str, Node],
                            current: NodeView | None, started: float) -> None:
        """Nodes re-read (``update``) after this listing started are newer than the listing's
        copy of them: keep those."""
        for uuid, touched in list(self._touched.items()):
            if touched < started:
                del self._touched[uuid]
                continue
            node = current.nodes.get(uuid) if current is not None else None
            if node is None:
                listed.pop(uuid, None)
            else:
                listed[uuid] = node

    def _keep_last_good(self, error: DriverError) -> NodeView:
        with self._lock:
            current = self._view
            if current is None:
                LOG.error('Cannot list nodes and no earlier listing to fall '
                          'back to: %s', error)
                raise error
            stale = dataclasses.replace(
                current, freshness=Freshness.STALE, error=error,
                failures=current.failures + 1)
            self._view = stale
        LOG.warning('Cannot list nodes (%d failure(s) in a row); keeping the '
                    'last good list of %d node(s), %.1f s old: %s',
                    stale.failures, len(stale), stale.age(self._clock()),
                    error)
        return stale

    def update(self, uuid: str, node: Node | None) -> None:
        """Replace one node (None: it is gone) in the current view, e.g. after an event.

        Does nothing before the first listing: one node is not a list to fall back on. An
        unchanged node leaves the view as it is (still marked as re-read: a listing in flight
        does not replace it).
        """
        with self._lock:
            current = self._view
            if current is None:
                return
            self._touched[uuid] = self._clock()
            if node is not None and current.nodes.get(uuid) == node:
                return  # unchanged: the view and the node's object stay, as in a listing
            if node is None and uuid not in current.nodes:
                return  # gone, and not in the view either
            since = current.nodes
            if not isinstance(since, NodesSinceListing):
                since = NodesSinceListing(since, {})
            nodes = since.after(uuid, node)
            # One uuid replaced, added or removed: the same set when the count is the same.
            uuids_version = (current.uuids_version if len(nodes) == len(current.nodes)
                             else self._new_uuids_version())
            self._view = dataclasses.replace(current, nodes=nodes,
                                             uuids_version=uuids_version)

