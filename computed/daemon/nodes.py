"""The nodes a fleet shares out: every node Ironic lists, plus every provider whose node is gone.

Owns :class:`FleetNodes`, the answer to the fleet's "which uuids are there to divide among the
members?" (:meth:`FleetNodes.uuids`), and when that answer is read again.

Guarantees:

* **Last good.** Ironic's nodes come from :class:`computed.baremetal.catalog.NodeCatalog`: when
  Ironic cannot be reached, the last list read stays in force, so an Ironic outage never empties
  the fleet's view (which would release every claim). Until a first list is read, ``uuids()`` is
  None and the fleet claims nothing.
* **Gone nodes are still owned, until Ironic says which way they went.** A provider computed
  reported (computed's database) whose node Ironic no longer lists is shared out too, so that one
  daemon looks at it: its owner asks Ironic for that node alone (unfiltered, see
  :mod:`computed.daemon.sync`). A 404 means gone: the owner reports it gone and the reporter
  deletes the provider if it has no allocations. A node that still exists has only left this
  fleet's filter (another shard or conductor group): the owner marks it *foreign*
  (:meth:`FleetNodes.mark_foreign`), nobody here shares it out any more, and its provider is left
  alone: it is another fleet's node now. A listing that shows the node again makes it this
  fleet's again. So neither a filtered listing nor an empty one deletes a provider: only Ironic's
  word about that one node does. A provider is never deleted because its owner changed. The
  database is only a hint here: when it cannot be read, the last set read is kept.
* **Unchanged is cheap to tell.** :meth:`FleetNodes.uuids` returns the same set object, and
  :attr:`FleetNodes.version` the same number, while nothing changed: the fleet's and the sync
  pass's every-second passes see "nothing new" without looking at a node (issue 13 item 7). An
  event that changed a node's data, not the catalog's set of uuids
  (:attr:`computed.baremetal.catalog.NodeView.uuids_version`), builds no set either.
* **A listing on demand.** :meth:`FleetNodes.request_refresh` (an Ironic event that adds or removes
  a node, or the daemon stopping) cuts the listing thread's wait short.

Threads: the listing thread calls :meth:`FleetNodes.refresh`, :meth:`FleetNodes.wait_for_refresh`
and (between listings) :meth:`FleetNodes.refresh_providers`; the node thread calls
:meth:`FleetNodes.refresh_providers` too (an event says a node is gone) and
:meth:`FleetNodes.mark_foreign`; the fleet thread reads :meth:`FleetNodes.uuids`, the node thread
:meth:`FleetNodes.is_known_provider`, :meth:`FleetNodes.is_foreign` and :attr:`FleetNodes.version`;
any thread may call :meth:`FleetNodes.request_refresh` (an Event). The known providers (a frozenset
swapped whole), the foreign nodes, the version and the last answer of :meth:`FleetNodes.uuids`
change only under the lock; reading the providers or the version without it is an atomic read of
one reference. The database is read outside the lock, so two threads may read the providers at
once: the answer of the read that started last wins, whichever finishes last (a read that
started earlier may hold a provider reported since, or miss one).
"""

from __future__ import annotations

import logging
import threading

from sqlalchemy.engine import Engine

from computed.baremetal.catalog import NodeCatalog
from computed.baremetal.driver import DriverError, shared_uuid
from computed.db import providers as db_providers

LOG = logging.getLogger(__name__)


class FleetNodes:
    """Ironic's listing (last good) and the providers whose node is gone."""

    def __init__(self, catalog: NodeCatalog, engine: Engine):
        self._catalog = catalog
        self._engine = engine
        self._providers: frozenset[str] = frozenset()
        self._foreign: set[str] = set()  # exist in Ironic, outside this fleet's filter
        self.version = 0  # bumped when the known providers or the foreign nodes change
        self._lock = threading.Lock()
        self._refresh_due = threading.Event()
        # The last answer of uuids() and what it was made from (the catalog's uuids_version,
        # the version): the same inputs give the same object.
        self._shared: frozenset[str] | None = None
        self._shared_from: tuple[int, int] | None = None
        # Provider reads started, and the latest started whose answer is kept (see the module
        # docstring): both under the lock.
        self._provider_reads = 0
        self._providers_from = 0

    def uuids(self) -> frozenset[str] | None:
        """What the fleet shares out; None until Ironic was listed once. The same set object
        while nothing changed (the catalog's view, the providers, the foreign nodes), so a caller
        can tell "unchanged" without looking at the nodes."""
        view = self._catalog.view()
        if view is None:
            return None
        with self._lock:
            if self._shared_from != (view.uuids_version, self.version):
                shared = frozenset(view.nodes.keys() | self._providers) - self._foreign
                if shared != self._shared:
                    self._shared = shared
                self._shared_from = (view.uuids_version, self.version)
            return self._shared

    def is_known_provider(self, uuid: str) -> bool:
        """Whether computed reported a provider for ``uuid`` (at the last refresh)."""
        return uuid in self._providers

    def mark_foreign(self, uuid: str) -> None:
        """``uuid`` exists in Ironic outside this fleet's filter: stop sharing it out."""
        with self._lock:
            if uuid not in self._foreign:
                self._foreign.add(uuid)
                self.version += 1

    def is_foreign(self, uuid: str) -> bool:
        with self._lock:
            return uuid in self._foreign

    def refresh(self) -> bool:
        """Read Ironic's node list (the catalog keeps the last good one) and the known providers;
        True when the set of uuids to share changed."""
        before = self.uuids()
        try:
            self._catalog.refresh()
        except DriverError:
            return False  # nothing listed yet; the catalog logged why
        view = self._catalog.view()
        if view is not None and not view.stale:
            with self._lock:  # listed again: this fleet's node again
                if not self._foreign.isdisjoint(view.nodes):
                    self._foreign.difference_update(view.nodes)
                    self.version += 1
        self._read_providers()
        after = self.uuids()
        return before is None or before != after

    def refresh_providers(self) -> bool:
        """Read the known providers again, without listing Ironic (the listing is rare while
        events flow); True when the set of uuids to share changed."""
        before = self.uuids()
        self._read_providers()
        return before is not None and before != self.uuids()

    def _read_providers(self) -> None:
        with self._lock:
            self._provider_reads += 1
            read = self._provider_reads
        try:
            # The listing's strings (shared_uuid): the set shares them instead of holding a
            # copy of every uuid per read.
            providers = frozenset(map(shared_uuid, db_providers.provider_uuids(self._engine)))
        except Exception as exc:  # the database is a hint here: keep the last set
            LOG.warning("cannot read known providers: %s", exc)
            return
        with self._lock:
            if read < self._providers_from:
                return  # a read that started later already answered: this answer is older
            self._providers_from = read
            if providers != self._providers:
                self._providers = providers
                self.version += 1

    def request_refresh(self) -> None:
        """List again now rather than at the end of the interval (from any thread)."""
        self._refresh_due.set()

    def wait_for_refresh(self, timeout: float) -> None:
        """Block the listing thread until the next listing is due."""
        self._refresh_due.wait(timeout)
        self._refresh_due.clear()
