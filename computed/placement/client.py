"""Writing provider states to OpenStack Placement, with few requests.

Owns the resource providers computed reports: their inventory, custom resource
classes and traits. Requests go through the HTTP layer every Placement request
shares (:mod:`computed.placement.http`: microversion, errors); instance
allocations are :mod:`computed.placement.allocations`'. Guarantees:

* :meth:`PlacementClient.apply` makes Placement hold a
  :class:`computed.providers.state.ProviderState` (provider, custom resource class,
  inventory, custom traits, provider traits) and is idempotent: a state the
  client already applied, and that its cache says Placement still holds,
  costs no request at all. A cache miss re-reads (two GETs) and writes only
  what differs. The cache is one process's memory: a caller that knows what
  was last applied by anyone (the reporter's database row, shared by its
  replicas) passes it as ``last_applied``, and a cache that disagrees with it
  is not trusted.
* New providers in bulk: :meth:`PlacementClient.create` (one ``POST``, no read
  first) then :meth:`PlacementClient.set_new_inventories` (``POST /reshaper``:
  the inventories of up to :data:`RESHAPE_MAX` providers in one request). A
  reshaper Placement refuses writes nothing and returns the providers for
  :meth:`PlacementClient.apply` one by one; a 403 (the default policy wants the
  ``service`` role) or 404 (Placement older than 1.30) stops the client asking.
* Generation conflicts (``placement.concurrent_update``) are retried after
  re-reading the provider, a bounded number of times.
* Inventory of another class that still has allocations is never removed
  against Placement's will: it is kept beside the new class, logged, and
  removed by a later apply that finds it free (a cache miss or ``verify``).
* :meth:`PlacementClient.delete` never deletes a provider with allocations.
* :meth:`PlacementClient.generations` lists every provider's generation in one
  request (Placement does not page ``GET /resource_providers``), and
  :meth:`PlacementClient.generation` says which generation this client last saw
  for a provider it applied: together they tell the resync what someone else
  changed, without reading each provider.
* Errors are :class:`~computed.placement.http.PlacementError` (a refusal:
  4xx, bad answer) or :class:`~computed.placement.http.PlacementUnavailable`
  (connection failure, timeout, 5xx: retry later), each naming the provider;
  no 4xx is swallowed.
* Thread-safe: calls for one provider are serialised, calls for different
  providers run in parallel. No eventlet here.

Threads: in the reporter, one client is shared by the RPC server's workers,
the applier's pool threads and (through :meth:`PlacementClient.forget`) the
resync thread (which has its own client besides, used by it alone). The
cache of providers is a dict read and changed under its own lock (entries
are immutable, replaced whole). :meth:`PlacementClient.apply`,
:meth:`PlacementClient.create` and :meth:`PlacementClient.delete` hold one
of 64 striped locks, chosen by uuid, from their read to their write, so one
provider's read-modify-write never interleaves with another's;
:meth:`PlacementClient.set_new_inventories` does not take them: its caller
holds the providers (the applier's :class:`~computed.reporter.applier.
ProviderLocks`). The names of resource classes and traits already created
are a set without a lock (a membership test and an ``add`` are atomic on a
built-in set; two threads may both PUT a name, which is idempotent); the
"reshaper works" flag only ever goes from True to False (an atomic
assignment). The HTTP layer counts its requests under its own lock.
"""

from __future__ import annotations

import dataclasses
import enum
import logging
import threading
import zlib
from collections.abc import Mapping, Sequence
from typing import Any

from computed.placement import http
from computed.placement.http import PlacementError
from computed.providers.state import InvalidProvider, ProviderState, inventory, is_custom_name

LOG = logging.getLogger(__name__)

CONCURRENT_UPDATE = 'placement.concurrent_update'
INVENTORY_IN_USE = 'placement.inventory.inuse'
PROVIDER_IN_USE = 'placement.resource_provider.inuse'

# The fields computed sets on an inventory record; Placement returns them all.
_INVENTORY_FIELDS = ('total', 'reserved', 'min_unit', 'max_unit',
                     'step_size', 'allocation_ratio')
_LOCK_STRIPES = 64
#: Providers whose inventories one ``POST /reshaper`` sets (~200 bytes each in the request).
RESHAPE_MAX = 250


class DeleteOutcome(enum.Enum):
    """What :meth:`PlacementClient.delete` did."""

    DELETED = 'deleted'
    #: There was no such provider.
    ABSENT = 'absent'
    #: It has allocations, so it was not deleted (logged with the consumers).
    KEPT = 'kept'


@dataclasses.dataclass(frozen=True)
class ProviderView:
    """What Placement holds for one provider, as last read or written.

    ``name`` is None when it was not read (the apply path skips that GET).
    """

    uuid: str
    generation: int
    inventories: Mapping[str, Mapping[str, Any]]
    traits: tuple[str, ...]
    name: str | None = None


@dataclasses.dataclass(frozen=True)
class _Entry:
    view: ProviderView
    # The state applied when ``view`` was written; None when the last apply
    # could not complete it (so the next apply compares with ``view``).
    state: ProviderState | None
    # In-use classes kept beside the state's class (see _put_inventory).
    leftovers: frozenset[str] = frozenset()


class Unknown(enum.Enum):
    """``last_applied`` not given: the caller is the only writer, trust the cache."""

    UNKNOWN = 'unknown'


class PlacementClient:
    """Placement operations on the providers computed reports.

    ``max_attempts`` bounds the re-read-and-retry rounds after generation
    conflicts (or a provider deleted under our feet).
    """

    def __init__(self, adapter: Any, microversion: str = http.MICROVERSION,
                 max_attempts: int = 5):
        self._http = http.PlacementHTTP(adapter, microversion)
        self._max_attempts = max_attempts
        self._cache: dict[str, _Entry] = {}
        self._cache_lock = threading.Lock()
        self._locks = [threading.Lock() for _ in range(_LOCK_STRIPES)]
        self._known_names: set[str] = set()
        # False once Placement refused POST /reshaper for good (policy, microversion).
        self._reshaper_works = True

    # -- public API ---------------------------------------------------------

    @property
    def request_count(self) -> int:
        """HTTP requests sent so far (for measurements and tests)."""
        return self._http.request_count

    def apply(self, state: ProviderState, verify: bool = False,
              assume_new: bool = False,
              last_applied: ProviderState | None | Unknown = Unknown.UNKNOWN) -> bool:
        """Make Placement hold ``state``; True if Placement was changed.

        ``verify`` ignores the cache and re-reads the provider first (for a
        periodic resync that must also repair changes made by others).
        ``assume_new`` (the caller never applied this provider) creates it
        first and reads only if it turns out to exist: a cold start of
        thousands of providers saves one request each. ``last_applied`` is the
        state last applied to this provider by any writer (None: deleted or
        never applied); when this client's cache remembers another one, some
        other writer came in between and the cache is dropped.

        :raises PlacementUnavailable: Placement unreachable or failing.
        :raises PlacementError: a refusal, or conflicts that outlasted the
            retries.
        """
        with self._lock_for(state.uuid):
            entry = None if verify else self._cached(state.uuid)
            if (entry is not None and last_applied is not Unknown.UNKNOWN
                    and entry.state != last_applied):
                self._forget(state.uuid)  # another replica wrote since this one did
                entry = None
            if entry is not None and entry.state == state:
                return False
            changed = False
            for attempt in range(1, self._max_attempts + 1):
                try:
                    fresh = assume_new and attempt == 1 and entry is None
                    return self._apply_once(state, entry, fresh) or changed
                except KeyError as exc:
                    raise PlacementError(state.uuid, 'apply',
                                         detail=f'answer lacks {exc}')
                except _Retry as retry:
                    changed = changed or retry.changed
                    LOG.debug('provider %s: %s, re-reading (attempt %d)',
                              state.uuid, retry.reason, attempt)
                    self._forget(state.uuid)
                    entry = None
            raise PlacementError(state.uuid, 'apply',
                                 detail=f'still conflicting after '
                                 f'{self._max_attempts} attempts')

    def create(self, state: ProviderState) -> bool:
        """Create the provider with ``POST /resource_providers`` and no read first (for a
        provider the caller never applied), then set its traits; True if this created it. A
        created provider is remembered with its traits and no inventory, so
        :meth:`set_new_inventories` (or :meth:`apply`) writes only its inventory: it becomes
        schedulable (it has inventory) only once its traits are right. False: it exists already
        (or its name is taken), nothing is remembered, and :meth:`apply` finds out the rest.

        :raises PlacementUnavailable: Placement unreachable or failing.
        :raises PlacementError: a refusal.
        """
        uuid = state.uuid
        with self._lock_for(uuid):
            resp = self._http.request('POST', '/resource_providers', uuid,
                                      {'uuid': uuid, 'name': state.name})
            if resp.status_code == 409:
                self._forget(uuid)
                return False
            body = http.json_body(uuid, 'create provider', resp)
            try:
                view = ProviderView(uuid, body['generation'], {}, (), body.get('name'))
                if state.traits:
                    view = self._put_traits(state, view)
            except KeyError as exc:
                raise PlacementError(uuid, 'create provider', detail=f'answer lacks {exc}')
            except _Retry:  # written by someone else already: apply() reads what is there
                self._forget(uuid)
                return True
            self._remember(uuid, _Entry(view, None))
            return True

    def set_new_inventories(self, states: Sequence[ProviderState]) -> list[ProviderState]:
        """Set the inventories of providers :meth:`create` just created, many per request
        (``POST /reshaper``, microversion 1.30+, at most :data:`RESHAPE_MAX` providers a
        request, no allocations moved); the states it did NOT set are returned, for the caller
        to :meth:`apply` one by one: a provider this client does not remember as just created,
        and every provider of a request Placement refused (a generation conflict: someone
        wrote to one of them; a 400; a 403 from the default policy, which keeps the reshaper to
        the ``service`` role; a 404 from a Placement older than 1.30). After a 403 or a 404 the
        client stops asking (one WARNING). A provider it did set is remembered with its
        inventory and the generation after (the reshaper answers none: it is read from one
        provider of the request, one GET a request), complete.

        :raises PlacementUnavailable: Placement unreachable or failing (nothing is known of
            the request's outcome; the providers involved are forgotten).
        :raises PlacementError: a refusal creating a custom resource class.
        """
        todo: list[tuple[ProviderState, ProviderView]] = []
        rest: list[ProviderState] = []
        for state in states:
            entry = self._cached(state.uuid)
            if (self._reshaper_works and entry is not None and entry.state is None
                    and not entry.view.inventories
                    and tuple(sorted(entry.view.traits)) == state.traits):
                todo.append((state, entry.view))
            else:
                rest.append(state)
        for start in range(0, len(todo), RESHAPE_MAX):
            chunk = todo[start:start + RESHAPE_MAX]
            if not self._reshaper_works or not self._reshape(chunk):
                rest.extend(state for state, _ in chunk)
        return rest

    def delete(self, uuid: str) -> DeleteOutcome:
        """Delete the provider unless it has allocations."""
        with self._lock_for(uuid):
            consumers = self._allocations(uuid)
            if consumers is None:
                self._forget(uuid)
                return DeleteOutcome.ABSENT
            if consumers:
                LOG.warning('provider %s kept: it has allocations of '
                            'consumer(s) %s', uuid, ', '.join(sorted(consumers)))
                return DeleteOutcome.KEPT
            resp = self._http.request('DELETE', f'/resource_providers/{uuid}', uuid)
            self._forget(uuid)
            if resp.status_code == 204:
                return DeleteOutcome.DELETED
            if resp.status_code == 404:
                return DeleteOutcome.ABSENT
            if resp.status_code == 409 and http.error_code(resp) == PROVIDER_IN_USE:
                # An allocation arrived between our check and the delete.
                LOG.warning('provider %s kept: allocations appeared while '
                            'deleting it', uuid)
                return DeleteOutcome.KEPT
            raise http.error(uuid, 'delete provider', resp)

    def generations(self) -> dict[str, int]:
        """``{uuid: generation}`` of every provider in Placement, in one request.

        Placement answers ``GET /resource_providers`` whole (no paging), computed's providers
        among any others. Any write to a provider (inventory, traits, allocations) bumps its
        generation.

        :raises PlacementUnavailable: Placement unreachable or failing.
        :raises PlacementError: a refusal or an unusable answer.
        """
        resp = self._http.request('GET', '/resource_providers')
        body = http.json_body(None, 'list providers', resp)
        try:
            return {rp['uuid']: rp['generation'] for rp in body['resource_providers']}
        except (KeyError, TypeError) as exc:
            raise PlacementError(None, 'list providers', detail=f'answer lacks {exc}')

    def generation(self, uuid: str) -> int | None:
        """The provider's generation after this client's last apply of it, None when this client
        holds nothing for it (deleted, forgotten, or the apply failed)."""
        entry = self._cached(uuid)
        return None if entry is None else entry.view.generation

    def has_allocations(self, uuid: str) -> bool:
        """Whether any consumer holds allocations on the provider."""
        return bool(self._allocations(uuid))

    def read(self, uuid: str) -> ProviderView | None:
        """What Placement holds for ``uuid`` (three GETs), None if absent."""
        for _ in range(self._max_attempts):
            resp = self._http.request('GET', f'/resource_providers/{uuid}', uuid)
            if resp.status_code == 404:
                return None
            body = http.json_body(uuid, 'read provider', resp)
            view = self._read_view(uuid)
            if view is None:
                return None
            if view.generation == body.get('generation'):
                return dataclasses.replace(view, name=body.get('name'))
        raise PlacementError(uuid, 'read provider',
                             detail='kept changing while being read')

    def get(self, uuid: str) -> ProviderState | None:
        """The provider as a state (for tests and audits), None if absent.

        :raises PlacementError: the provider does not hold exactly one custom
            resource class, or its data is not a valid state.
        """
        view = self.read(uuid)
        if view is None:
            return None
        classes = sorted(view.inventories)
        if len(classes) != 1 or not is_custom_name(classes[0]):
            raise PlacementError(uuid, 'get provider',
                                 detail=f'expected one custom resource class'
                                 f', found {classes}')
        try:
            return ProviderState(
                uuid=uuid, name=view.name or uuid, resource_class=classes[0],
                reserved=view.inventories[classes[0]].get('reserved'),
                traits=tuple(sorted(view.traits)))
        except InvalidProvider as exc:
            raise PlacementError(uuid, 'get provider', detail=str(exc))

    def forget(self, uuid: str | None = None) -> None:
        """Drop the cache for one provider (or all): the next apply re-reads."""
        if uuid is not None:
            self._forget(uuid)
            return
        with self._cache_lock:
            self._cache.clear()

    # -- apply --------------------------------------------------------------

    def _apply_once(self, state: ProviderState, entry: _Entry | None,
                    assume_new: bool = False) -> bool:
        uuid = state.uuid
        changed = False
        leftovers: frozenset[str] = frozenset()
        if entry is not None:
            view = entry.view
        else:
            view = None if assume_new else self._read_view(uuid)
        if entry is not None:
            leftovers = entry.leftovers
        if view is None:
            view = self._create(state)
            changed = True
        try:
            if view.name is not None and view.name != state.name:
                view = self._rename(view, state.name)
                changed = True
            # A provider without inventory cannot be scheduled on: it gets its traits first,
            # so that it is never schedulable with traits it should not have (or without ones
            # a flavor asks for). Otherwise inventory first: a node going into maintenance
            # stops being schedulable with the first write.
            traits_first = not view.inventories
            if traits_first and tuple(sorted(view.traits)) != state.traits:
                view = self._put_traits(state, view)
                changed = True
            wanted = _wanted_inventories(state, view, leftovers)
            if not _same_inventories(view.inventories, wanted):
                view, leftovers = self._put_inventory(state, view, wanted)
                changed = True
            if tuple(sorted(view.traits)) != state.traits:
                view = self._put_traits(state, view)
                changed = True
        except _Retry as retry:
            retry.changed = retry.changed or changed
            raise
        self._remember(uuid, _Entry(view, state, leftovers))
        return changed

    def _create(self, state: ProviderState) -> ProviderView:
        uuid = state.uuid
        resp = self._http.request('POST', '/resource_providers', uuid,
                             {'uuid': uuid, 'name': state.name})
        if resp.status_code == 200:
            body = http.json_body(uuid, 'create provider', resp)
            return ProviderView(uuid, body['generation'], {}, (),
                                body.get('name'))
        if resp.status_code == 409:
            # Created meanwhile (another reporter), or the name is taken by
            # another provider: only a read tells which.
            view = self._read_view(uuid)
            if view is not None:
                return view
        raise http.error(uuid, 'create provider', resp)

    def _reshape(self, chunk: list[tuple[ProviderState, ProviderView]]) -> bool:
        """One ``POST /reshaper`` setting the chunk's inventories; True if Placement did."""
        first = chunk[0][0].uuid
        for name in sorted({state.resource_class for state, _ in chunk}):
            self._ensure_name('resource_classes', name, first)
        body = {'inventories': {view.uuid: {'resource_provider_generation': view.generation,
                                            'inventories': inventory(state)}
                                for state, view in chunk},
                'allocations': {}}
        try:
            resp = self._http.request('POST', '/reshaper', first, body)
        except PlacementError:
            for state, _ in chunk:
                self._forget(state.uuid)
            raise
        if resp.status_code != 204:
            if resp.status_code in (403, 404):
                self._reshaper_works = False
                LOG.warning('Placement refuses POST /reshaper (%s): inventories of new '
                            'providers are set one provider a request from now on; give '
                            'computed\'s Placement user the service role (Placement 1.30+) '
                            'to batch them', http.error(first, 'reshape', resp))
            else:
                LOG.info('%s (%d providers): setting their inventories one by one',
                         http.error(first, 'reshape', resp), len(chunk))
            return False
        # Placement answers no generation: the step it added is read from one provider.
        step = self._generation_step(first, chunk[0][1].generation)
        for state, view in chunk:
            if step is None:
                self._forget(state.uuid)  # the next apply re-reads it
                continue
            self._remember(state.uuid, _Entry(dataclasses.replace(
                view, generation=view.generation + step, inventories=inventory(state)), None))
        return True

    def _generation_step(self, uuid: str, before: int) -> int | None:
        """How much the reshaper bumped the provider's generation (None: cannot tell)."""
        resp = self._http.request('GET', f'/resource_providers/{uuid}', uuid)
        if resp.status_code != 200:
            return None
        try:
            step = resp.json()['generation'] - before
        except (ValueError, KeyError, TypeError):
            return None
        return step if step > 0 else None

    def _rename(self, view: ProviderView, name: str) -> ProviderView:
        uuid = view.uuid
        resp = self._http.request('PUT', f'/resource_providers/{uuid}', uuid,
                             {'name': name})
        self._check_write(uuid, 'rename provider', resp)
        body = http.json_body(uuid, 'rename provider', resp)
        return dataclasses.replace(view, name=name,
                                   generation=body['generation'])

    def _put_inventory(self, state: ProviderState, view: ProviderView,
                       wanted: dict[str, Any]
                       ) -> tuple[ProviderView, frozenset[str]]:
        uuid = state.uuid
        self._ensure_name('resource_classes', state.resource_class, uuid)
        resp = self._write_inventory(view, wanted)
        if resp.status_code == 409 and http.error_code(resp) == INVENTORY_IN_USE:
            # Placement refuses to drop a class with allocations (the
            # resource class of the node changed under an instance): keep
            # those classes as they are, and retry their removal later.
            in_use = self._classes_in_use(uuid) & set(view.inventories)
            kept = {rc: dict(view.inventories[rc]) for rc in in_use}
            LOG.warning('provider %s: keeping inventory of %s beside %s: '
                        'it has allocations', uuid, ', '.join(sorted(kept)),
                        state.resource_class)
            wanted = {**kept, **inventory(state)}
            resp = self._write_inventory(view, wanted)
            leftovers = frozenset(kept) - {state.resource_class}
        else:
            leftovers = frozenset()
        if resp.status_code == 400:
            # Perhaps the class was deleted since we created it.
            self._known_names.discard(f'resource_classes/'
                                      f'{state.resource_class}')
        self._check_write(uuid, 'set inventory', resp)
        body = http.json_body(uuid, 'set inventory', resp)
        return (dataclasses.replace(
            view, generation=body['resource_provider_generation'],
            inventories=body['inventories']), leftovers)

    def _write_inventory(self, view: ProviderView, wanted: dict[str, Any]):
        return self._http.request(
            'PUT', f'/resource_providers/{view.uuid}/inventories', view.uuid,
            {'resource_provider_generation': view.generation,
             'inventories': wanted})

    def _put_traits(self, state: ProviderState,
                    view: ProviderView) -> ProviderView:
        uuid = state.uuid
        for trait in state.traits:
            if is_custom_name(trait):
                self._ensure_name('traits', trait, uuid)
        resp = self._http.request(
            'PUT', f'/resource_providers/{uuid}/traits', uuid,
            {'resource_provider_generation': view.generation,
             'traits': list(state.traits)})
        self._check_write(uuid, 'set traits', resp)
        body = http.json_body(uuid, 'set traits', resp)
        return dataclasses.replace(
            view, generation=body['resource_provider_generation'],
            traits=tuple(sorted(body['traits'])))

    def _ensure_name(self, kind: str, name: str, uuid: str) -> None:
        """Create a custom resource class or trait once per client."""
        # No lock: two threads may both PUT the name (idempotent), and set
        # membership and add are atomic.
        key = f'{kind}/{name}'
        if key in self._known_names:
            return
        resp = self._http.request('PUT', f'/{key}', uuid)
        if resp.status_code not in (201, 204):
            raise http.error(uuid, f'create {kind} {name}', resp)
        self._known_names.add(key)

    def _check_write(self, uuid: str, what: str, resp: Any) -> None:
        if resp.status_code == 200:
            return
        if resp.status_code == 409 and http.error_code(resp) == CONCURRENT_UPDATE:
            raise _Retry('generation conflict')
        if resp.status_code == 404:
            raise _Retry('provider deleted meanwhile')
        raise http.error(uuid, what, resp)

    # -- reads --------------------------------------------------------------

    def _read_view(self, uuid: str) -> ProviderView | None:
        """Inventories and traits, with one generation; None if absent."""
        for _ in range(self._max_attempts):
            inv = self._http.request(
                'GET', f'/resource_providers/{uuid}/inventories', uuid)
            if inv.status_code == 404:
                return None
            inv_body = http.json_body(uuid, 'read inventory', inv)
            trt = self._http.request('GET', f'/resource_providers/{uuid}/traits',
                                uuid)
            if trt.status_code == 404:
                return None
            trt_body = http.json_body(uuid, 'read traits', trt)
            generation = inv_body['resource_provider_generation']
            # A write between the two GETs: read again for one snapshot.
            if trt_body['resource_provider_generation'] == generation:
                return ProviderView(uuid, generation,
                                    inv_body['inventories'],
                                    tuple(sorted(trt_body['traits'])))
        raise PlacementError(uuid, 'read provider',
                             detail='kept changing while being read')

    def _allocations(self, uuid: str) -> dict[str, Any] | None:
        """Consumer uuid -> allocation on the provider; None if absent."""
        resp = self._http.request(
            'GET', f'/resource_providers/{uuid}/allocations', uuid)
        if resp.status_code == 404:
            return None
        return http.json_body(uuid, 'read allocations', resp)['allocations']

    def _classes_in_use(self, uuid: str) -> set[str]:
        resp = self._http.request('GET', f'/resource_providers/{uuid}/usages',
                             uuid)
        usages = http.json_body(uuid, 'read usages', resp)['usages']
        return {rc for rc, used in usages.items() if used}

    # -- plumbing -----------------------------------------------------------

    def _lock_for(self, uuid: str) -> threading.Lock:
        return self._locks[zlib.crc32(uuid.encode()) % _LOCK_STRIPES]

    def _cached(self, uuid: str) -> _Entry | None:
        with self._cache_lock:
            return self._cache.get(uuid)

    def _remember(self, uuid: str, entry: _Entry) -> None:
        with self._cache_lock:
            self._cache[uuid] = entry

    def _forget(self, uuid: str) -> None:
        with self._cache_lock:
            self._cache.pop(uuid, None)


class _Retry(Exception):
    """The provider changed under a write: re-read and try again."""

    def __init__(self, reason: str):
        super().__init__(reason)
        self.reason = reason
        self.changed = False


def _wanted_inventories(state: ProviderState, view: ProviderView,
                        leftovers: frozenset[str]) -> dict[str, Any]:
    wanted = inventory(state)
    for rc in leftovers:
        if rc in view.inventories and rc != state.resource_class:
            wanted[rc] = dict(view.inventories[rc])
    return wanted


def _same_inventories(have: Mapping[str, Mapping[str, Any]],
                      want: Mapping[str, Mapping[str, Any]]) -> bool:
    if set(have) != set(want):
        return False
    return all(have[rc].get(f) == want[rc].get(f)
               for rc in want for f in _INVENTORY_FIELDS)
