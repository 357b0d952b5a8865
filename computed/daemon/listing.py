"""Full listings of Ironic's nodes: when a daemon lists, and when one daemon lists for the fleet.

Owns the listing thread's decisions (pure: :func:`own_listing_due`, :func:`round_due`,
:func:`differing`) and their executor, :class:`Listings`. A full listing exists to catch
what Ironic's events missed; at 10,000 nodes one costs Ironic about ten CPU seconds, so how often
it runs is the steady-state cost of the fleet.

Guarantees:

* **One listing at start, with the stream trusted from before it.** A daemon's first listing
  waits (at most ``frequent`` seconds: :func:`first_listing_wait`) until its own heartbeat came
  back on time (:meth:`StreamWatch.trusted`). The listener is bound before the first heartbeat
  is sent (:mod:`computed.daemon.service` starts it first), and oslo.messaging declares every
  binding of the listener's one queue before it consumes from it, so the heartbeat heard proves
  Ironic's events were being queued from before the listing began. Nothing between the bind and
  the end of that listing is lost: a change made before the listing started is read by it (it
  reads every node after it starts); an event that arrives during it is queued, heard, and its
  node re-read after the listing (:mod:`computed.daemon.sync` keeps a hint newer than the
  listing's start, and the catalog keeps a re-read newer than a listing). So when heartbeats kept
  coming back on time through the listing, the stream is trusted since before it and no second
  listing is due; a daemon whose stream never proved itself in ``frequent`` seconds lists
  anyway, as below.
* **While the event stream cannot be trusted, each daemon lists every node itself**, every
  ``frequent`` seconds (``[fleet] node_refresh_interval``): notifications off, this daemon's
  heartbeat not back on time (:class:`computed.baremetal.events.StreamWatch`), or the stream in
  doubt at any moment since this daemon's last listing started (events in a gap may be lost, so
  the first listing after the gap is due at once).
* **While it can, one daemon per round lists for the fleet**, every ``rare`` seconds (``[fleet]
  fleet_listing_interval``), and every ``frequent`` seconds after a round that found changes no
  event had announced (Ironic may not be publishing). Rounds are claimed in ZooKeeper
  (:class:`ListingRound`: one znode holding the last round's start, replaced by a versioned
  write, so two daemons never claim one round; a lister that dies costs one round). The lister
  compares every node's provider state with the one computed last applied (the ``providers``
  table all daemons share) and announces the nodes that differed the same way at its previous
  round too (a difference seen once may be a report on its way), at most
  :data:`ANNOUNCE_PER_ROUND` per round (changes first, :func:`to_announce`), on the event
  stream (:meth:`computed.baremetal.events.Heartbeat.announce_missed`): every daemon re-reads
  those nodes alone, the owner reports them (a node with no provider applied yet did not
  change in Ironic: only its owner, and a daemon that does not list it, re-reads it). Only a
  node that differs from an applied state (or an applied provider whose node is not listed) is
  a change with no event, and warned about; a
  listed node with no provider applied yet is a report not applied yet as often (a cold start
  has thousands, for minutes), announced all the same but logged at INFO
  (:func:`round_findings`). A listed node that cannot make a provider at all (a field
  Placement would refuse: :func:`unreportable`) differs from every applied state for as long
  as it stays so; it is announced once, and then no more while it differs the same way (its
  owner re-read it and logs why it cannot report it; announcing it every round made every
  daemon re-read it and kept the rounds ``frequent``, with a warning each): such nodes are not
  counted as missed. The last round's lister keeps the rounds while it lives
  (others wait :data:`HANDOFF` seconds longer), so it can confirm what it found. A round won
  less than ``frequent`` seconds after this daemon's own listing ended compares that listing
  (kept current by events since) instead of listing again (:func:`round_lists_again`): the
  first round of a new fleet is no second listing at start. So does a round that confirms what
  this daemon's last round found (:func:`confirming_round`), while its listing is younger than
  ``rare``, and it compares only the nodes that round found (:func:`round_compares_all`): a
  change no event announced differs in the kept listing as in a new one, a report on its way
  does not once applied (a cold start is thousands of those: its rounds compare, they do not
  list), and the kept listing's other nodes changed since only by events, which their owners
  heard and report. Ironic's API cannot filter by hash-ring share, so a per-daemon partial
  listing is not possible; one full listing per round is N times cheaper than N.
* **What a round guarantees**, while the stream is trusted: a node whose provider state differs
  from what Ironic's node makes, by a change no event announced (a lost event, Ironic not
  publishing), is found by the first round that lists after the change and announced to its
  owner by the next round, ``frequent`` seconds later, if it still differs the same way: within
  about ``rare`` + 2 x ``frequent`` seconds and a listing's time of the change (a round lists at
  least when its listing is ``rare`` old; :data:`HANDOFF` more when the lister changes). The
  same holds for a provider whose node Ironic no longer lists. A difference an event caused is
  its owner's to report (the owner heard the event too; a stream in doubt makes it list on its
  own, a report that fails is retried by its outbox): a round that compares every node (one
  that lists, or the first after a round that found nothing) announces it if it outlived the
  next round, but a confirming round does not look for new differences: it confirms or clears
  the last round's.
* Between listings the providers computed reported are re-read every ``frequent`` seconds (one
  database query; :mod:`computed.daemon.sync` re-reads them at once when an event says a node
  is gone), so a node deleted from Ironic stays shared out until its owner confirms it gone.

Threads: :class:`Listings` and :class:`ListingRound` are used by the listing thread alone (their
clocks, the round's version, what the last round found, the counters read by tests): no lock.
What they share is guarded where it lives: the catalog and :class:`FleetNodes` (locks), the
:class:`StreamWatch` the listener threads feed (a lock), and the :class:`Heartbeat`, whose
oslo.messaging notifier the heartbeat thread also sends through (the transport takes a pooled
connection per message, so two sends never share one).
"""

from __future__ import annotations

import dataclasses
import json
import logging
import time
from collections.abc import Callable, Iterable, Mapping, Set
from typing import Any

from kazoo.exceptions import BadVersionError, NodeExistsError, NoNodeError
from sqlalchemy.engine import Engine

from computed.baremetal.catalog import NodeCatalog
from computed.baremetal.driver import Node
from computed.baremetal.events import Heartbeat, StreamWatch
from computed.conf.coordination import DEFAULT_SESSION_TIMEOUT
from computed.daemon.nodes import FleetNodes
from computed.db import providers as db_providers
from computed.fleet import zookeeper
from computed.fleet.membership import fleet_root
from computed.providers.state import InvalidProvider, provider_from_node

LOG = logging.getLogger(__name__)

#: Seconds between two looks at the round while the stream is trusted (one ZooKeeper read).
ROUND_CHECK = 5.0
#: Extra seconds before a round is due for a daemon that did not run the last one.
HANDOFF = 2 * ROUND_CHECK
#: Nodes one fleet-wide listing announces at most (see :func:`to_announce`).
ANNOUNCE_PER_ROUND = 100
#: Seconds between two looks at the stream while the first listing waits for it.
FIRST_LOOK = 0.25


def round_path(group: str) -> str:
    """The znode holding ``group``'s last fleet-wide listing (:class:`ListingRound`)."""
    return f"{fleet_root(group)}/listing-round"


# --- pure decisions -----------------------------------------------------------------------------

def own_listing_due(trusted_since_own: bool, own_age: float | None, frequent: float) -> float:
    """Seconds until this daemon must list every node itself (0: now; ``inf``: not while the
    stream stays trusted). ``trusted_since_own``: the stream is trusted and was never in doubt
    since this daemon's last listing started, ``own_age`` seconds ago (None: never listed)."""
    if own_age is None:
        return 0.0
    if trusted_since_own:
        return float("inf")
    return max(0.0, frequent - own_age)


def first_listing_wait(stream_ok: bool, waited: float, limit: float) -> float:
    """Seconds this daemon's first listing still waits for its event stream (0: list now).

    ``stream_ok``: its own heartbeat came back on time (the listener is bound and delivers);
    ``waited``: seconds since the first listing was first due. Waiting makes the first listing
    the only one at start (see the module docstring); ``limit`` bounds it (a broker down at start
    must not keep the daemon from listing: it then lists untrusted, and again once trusted)."""
    if stream_ok:
        return 0.0
    return max(0.0, limit - waited)


def round_lists_again(own_done: float | None, frequent: float, rare: float,
                      confirming: bool = False) -> bool:
    """Whether this daemon's round of the fleet-wide listing lists again (False: it compares
    the daemon's own listing, which ended ``own_done`` seconds ago, None: never, kept current by
    events since). A listing that ended less than ``frequent`` ago is as good as a new one: a
    stream in doubt would have listed no sooner.

    ``confirming``: this daemon's last round found differences, and this round is to confirm
    them (:func:`to_announce`). A node changed with no event differs the same way in the kept
    listing as in a new one, while a report that was on its way has been applied since: so the
    kept listing confirms or clears them as well, and lists again only once it is ``rare``
    seconds old (the audit's own interval). Listing again for it cost a cold start of 50,000
    nodes a full listing (66-94 s of Ironic's CPU) every round until the last report landed."""
    if own_done is None:
        return True
    return own_done >= (rare if confirming else frequent)


@dataclasses.dataclass(frozen=True)
class RoundRecord:
    """The last fleet-wide listing: when it started and when it finished (wall clock; None
    while it runs), who ran it, and how many nodes it found differing from what computed applied
    (None while it runs; :func:`differing`)."""

    started: float
    host: str
    missed: int | None = None
    finished: float | None = None

    def to_bytes(self) -> bytes:
        return json.dumps(dataclasses.asdict(self)).encode()

    @classmethod
    def from_bytes(cls, data: bytes) -> RoundRecord | None:
        """None for data that is not a record (the next round replaces it)."""
        try:
            raw = json.loads(data.decode())
            return cls(started=float(raw["started"]), host=str(raw["host"]),
                       missed=None if raw.get("missed") is None else int(raw["missed"]),
                       finished=None if raw.get("finished") is None
                       else float(raw["finished"]))
        except (ValueError, TypeError, KeyError, AttributeError, UnicodeDecodeError):
            return None


def round_due(now: float, last: RoundRecord | None, rare: float, frequent: float,
              host: str = "") -> bool:
    """Whether a fleet-wide listing is due for ``host`` at wall time ``now``: ``rare`` seconds
    after the last one, ``frequent`` after one that found differences; :data:`HANDOFF` seconds
    later for a host other than the last round's (the last lister, if alive, keeps the rounds:
    it remembers what it found, see :func:`to_announce`). Counted from the end of the last
    round when it finished: a listing of 50,000 nodes takes longer than ``frequent`` +
    :data:`HANDOFF`, so counted from its start the next round was due for every daemon the
    moment it finished, and another daemon won it (and listed again) before the lister's next
    look."""
    if last is None:
        return True
    interval = frequent if last.missed else rare
    if last.host != host:
        interval += HANDOFF
    since = last.started if last.finished is None else max(last.started, last.finished)
    return now - since >= interval


def not_applied(how: tuple[Node | None, Any]) -> bool:
    """Whether a difference (as :func:`differing` says how) is a listed node with no provider
    state applied at all (never reported, or its provider deleted since): its owner's report may
    simply not have been applied yet (a cold start has thousands, for minutes), so it is not
    evidence that something changed with no event, as a listed node that differs from an applied
    state, or an applied provider whose node is not listed, is."""
    return how[0] is not None and how[1] is None


def unreportable(how: tuple[Node | None, Any]) -> bool:
    """Whether a difference (as :func:`differing` says how) is a listed node that cannot make
    a provider at all (:class:`InvalidProvider`): no report can make it agree with an applied
    state; only a change of the node in Ironic can."""
    return how[0] is not None and _listed_state(how[0]) is _INVALID


def withheld(differing: Mapping[str, Any], announced: Mapping[str, Any]) -> set[str]:
    """The differences not to announce again: announced before (``announced``: uuid -> how it
    differed then), differing the same way now, and :func:`unreportable`. Only these are
    looked at (a provider state made for each), so a round's cost does not grow with the
    nodes it finds."""
    return {uuid for uuid, how in announced.items()
            if differing.get(uuid) == how and unreportable(how)}


def still_announced(differing: Mapping[str, Any], announced: Mapping[str, Any],
                    announce: Iterable[str]) -> dict[str, Any]:
    """What stays remembered as announced after a round: the nodes it announces and those
    announced before that differ the same way still, each with how it differs."""
    kept = {uuid: how for uuid, how in announced.items() if differing.get(uuid) == how}
    kept.update((uuid, differing[uuid]) for uuid in announce)
    return kept


def to_announce(differing: Mapping[str, Any], previous: Mapping[str, Any],
                limit: int, skip: Set[str] = frozenset()) -> list[str]:
    """The nodes to announce: those that differed the same way (same listed node, same applied
    state) at the previous round too, at most ``limit`` of them. A difference seen once may be a
    report still on its way (a cold start has thousands); one that outlived a whole round was
    missed. The cap bounds the re-reads a round causes (each daemon re-reads each announced
    node); the rest are announced by the next rounds, ``frequent`` seconds apart. Nodes changed
    with no event come before nodes with nothing applied yet (:func:`not_applied`): a cold
    start's backlog of first reports must not hold back a change Ironic never announced.
    ``skip``: nodes not to announce again (:func:`withheld`)."""
    confirmed = sorted((not_applied(how), uuid) for uuid, how in differing.items()
                       if uuid in previous and previous[uuid] == how and uuid not in skip)
    return [uuid for _, uuid in confirmed[:limit]]


@dataclasses.dataclass(frozen=True)
class RoundFindings:
    """What a round found, by kind, for its log line (:func:`round_findings`)."""

    #: announced: differed the same way at the last round, with a provider state applied (or an
    #: applied provider whose node is not listed): changed with no event, or its event lost
    changed: int
    #: announced: listed, no provider state applied at the last round nor now (reports not
    #: applied yet, or a first report lost: the owner re-reads the node and reports it)
    unapplied: int
    #: differing, not announced: first seen by this round (a report may be on its way), or
    #: beyond the round's cap
    pending: int
    #: differing, not announced again: cannot make a provider, announced before (its owner
    #: logs why); not a missed change
    unreportable: int = 0

    def missed(self) -> int:
        """What the round records as found (a round that found any is followed by another
        ``frequent`` seconds later): every difference but the known unreportable ones."""
        return self.changed + self.unapplied + self.pending

    def level(self) -> int:
        """WARNING only for what is evidence of a change no event announced; a cold start's
        rounds, which find thousands of nodes whose first report is not applied yet, log at
        INFO."""
        return logging.WARNING if self.changed else logging.INFO

    def describe(self, examples: Iterable[str]) -> str:
        """One log line; ``examples``: some of the announced uuids."""
        total = self.missed() + self.unreportable
        return (f"the fleet-wide listing found {total} node(s) whose provider differs from what "
                f"computed applied: {self.changed} changed with no event (differing the same "
                f"way at the last round too), {self.unapplied} with no provider applied yet "
                f"(at the last round too: their reports not applied yet, or lost), "
                f"{self.pending} not announced (seen differing for the first time: a report may "
                f"be on its way; or beyond {ANNOUNCE_PER_ROUND} a round), "
                f"{self.unreportable} that cannot make a provider, announced before (their "
                f"owners log why); announcing {self.changed + self.unapplied} to their owners, "
                f"e.g. {', '.join(examples) or 'none'}")


def round_findings(found: Mapping[str, tuple[Node | None, Any]],
                   announce: Iterable[str], skipped: Set[str] = frozenset()) -> RoundFindings:
    """Sorts a round's differences (``found``, from :func:`differing`), what it announces
    (from :func:`to_announce`) and what it did not announce again (``skipped``, from
    :func:`withheld`) into :class:`RoundFindings`."""
    announced = list(announce)
    unapplied = sum(1 for uuid in announced if not_applied(found[uuid]))
    return RoundFindings(changed=len(announced) - unapplied, unapplied=unapplied,
                         pending=len(found) - len(announced) - len(skipped),
                         unreportable=len(skipped))


def round_compares_all(relist: bool, confirming: bool) -> bool:
    """Whether a round compares every node (True) or only those the last round found (False).

    A round that lists compares every node: a listing is how a change no event announced is
    seen at all. So does a round that is not confirming (the fleet's first, or one after a round
    that found nothing or that another daemon ran). A confirming round that keeps this daemon's
    listing compares only what the last round found: since that round, the kept listing's
    other nodes changed only by events, which every daemon heard, their owners included, and
    their owners report (a difference no event caused can only be seen by listing again); and
    an applied state changes only by a report of its owner. Comparing all 50,000 of them every
    confirming round (every ``frequent`` seconds through a cold start) made every provider state
    again and read every applied state: the daemons' CPU of a 50,000-node cold start 104 -> 130
    s."""
    return relist or not confirming


def confirming_round(replaced: RoundRecord | None, ours: RoundRecord | None,
                     found: Mapping[str, Any]) -> bool:
    """Whether the round just claimed confirms what this daemon's last round found: that round
    (``ours``) found something, and it is the fleet's last round, the one the claim replaced
    (``replaced``). Findings from before another daemon's round are not the last round's: a
    round after them compares every node."""
    return (bool(found) and replaced is not None and ours is not None
            and replaced.host == ours.host and replaced.started == ours.started)


def differing(listed: Mapping[str, Node], applied: Iterable[tuple[str, str | None]],
              previous: Mapping[str, tuple[Node | None, Any]] | None = None,
              only: Set[str] | None = None) -> dict[str, tuple[Node | None, Any]]:
    """Nodes whose provider state from ``listed`` differs from the state computed last applied,
    plus applied providers whose node is not listed, each with how it differs (its listed node,
    None when not listed, and the applied state's JSON text), for :func:`to_announce` to compare
    one round with the next.

    ``applied``: ``(uuid, state)`` pairs, each uuid once, the state as the JSON text stored (None
    for a deleted provider); a uuid absent from them was never applied. They are read one at a
    time (a fleet-wide listing compares every node: holding every applied state parsed at once
    cost a daemon tens of MB at 50,000 nodes). A node that cannot make a provider counts as
    differing (its owner logs why).

    ``only``: compare those uuids alone (a confirming round: :func:`round_compares_all`); pairs
    of other uuids are skipped. ``previous``: what the last round found; a node whose listed
    object and applied text are the ones it found differs the same way without its provider
    state made again (how it differs is a function of the two: a cold start's confirming round
    finds tens of thousands of nodes that have not changed)."""
    previous = previous or {}
    found: dict[str, tuple[Node | None, Any]] = {}
    compared: set[str] = set()
    for uuid, text in applied:
        if only is not None and uuid not in only:
            continue
        compared.add(uuid)
        how = _differs(listed.get(uuid), text, previous.get(uuid))
        if how is not None:
            found[uuid] = how
    for uuid in (listed if only is None else only):
        if uuid not in compared:
            how = _differs(listed.get(uuid), None, previous.get(uuid))
            if how is not None:
                found[uuid] = how
    return found


def _differs(node: Node | None, text: str | None,
             before: tuple[Node | None, Any] | None) -> tuple[Node | None, Any] | None:
    """How ``node`` (None: not listed) differs from the applied state ``text`` (None: none or
    deleted), or None when it does not; ``before``: how it differed at the last round."""
    if before is not None and before[0] is node and before[1] == text:
        return before
    if node is None:
        return None if text is None else (None, text)
    if _listed_state(node) != (None if text is None else json.loads(text)):
        return node, text
    return None


_INVALID = object()  # what _listed_state answers for a node that cannot make a provider


def _listed_state(node: Node) -> Any:
    """The provider state a listed node makes, as its dict (None: no provider)."""
    try:
        state = provider_from_node(node)
    except InvalidProvider:
        return _INVALID
    return None if state is None else state.to_dict()


# --- the executor -------------------------------------------------------------------------------

class ListingRound:
    """The fleet's listing rounds in ZooKeeper: one znode at ``path`` holding a
    :class:`RoundRecord`, claimed by a versioned write. ``client`` is a started KazooClient;
    each request is answered within ``timeout`` seconds (the session timeout) or raises
    :class:`computed.fleet.zookeeper.NoAnswer`: the listing thread must not wait for ever on a
    ZooKeeper that went away (the pass fails, is logged, and the next one tries again)."""

    def __init__(self, client: Any, path: str, host: str,
                 wall: Callable[[], float] = time.time,
                 timeout: float = DEFAULT_SESSION_TIMEOUT):
        self._client = client
        self._timeout = timeout
        self._path = path
        self._host = host
        self._wall = wall
        self._version = -1  # of our record, while our round runs
        #: the fleet's last round, which the round this daemon last won replaced
        self.replaced: RoundRecord | None = None

    def claim(self, rare: float, frequent: float) -> RoundRecord | None:
        """Our new round's record if one is due and this daemon won it, else None."""
        now = self._wall()
        mine = RoundRecord(started=now, host=self._host)
        try:
            data, stat = self._answer(self._client.get_async(self._path), "a read")
        except NoNodeError:
            try:
                self._answer(self._client.create_async(self._path, mine.to_bytes(),
                                                       makepath=True), "the creation")
            except NodeExistsError:
                return None  # another daemon created it first: its round
            self._version = 0
            self.replaced = None
            return mine
        last = RoundRecord.from_bytes(data)
        if not round_due(now, last, rare, frequent, self._host):
            return None
        try:
            self._version = self._answer(self._client.set_async(
                self._path, mine.to_bytes(), version=stat.version), "a write").version
        except BadVersionError:
            return None
        self.replaced = last
        return mine

    def finish(self, record: RoundRecord, missed: int) -> None:
        """Record what our round found (it sets the next round's interval)."""
        try:
            finished = dataclasses.replace(record, missed=missed, finished=self._wall())
            self._answer(self._client.set_async(self._path, finished.to_bytes(),
                                                version=self._version), "a write")
        except BadVersionError:
            pass  # a later round replaced ours already

    def _answer(self, request: Any, what: str) -> Any:
        return zookeeper.answer(request, self._timeout, f"{what} of {self._path}")


class Listings:
    """Runs the listing thread's passes: :meth:`step` lists if due and says how long to wait.

    ``watch``, ``rounds`` and ``heartbeat`` are None when notifications are off: then every
    daemon lists every ``frequent`` seconds.
    """

    def __init__(self, nodes: FleetNodes, catalog: NodeCatalog, engine: Engine, frequent: float,
                 rare: float,
                 watch: StreamWatch | None = None, rounds: ListingRound | None = None,
                 heartbeat: Heartbeat | None = None,
                 clock: Callable[[], float] = time.monotonic):
        self._nodes = nodes
        self._catalog = catalog
        self._engine = engine
        self._frequent = frequent
        self._rare = rare
        self._watch = watch
        self._rounds = rounds
        self._heartbeat = heartbeat
        self._clock = clock
        self._own_started: float | None = None
        self._first_due: float | None = None  # when the first listing was first due
        self._own_ended: float | None = None  # when the listing that set _own_started ended
        self._providers_read: float | None = None  # when refresh_providers last ran
        self.listings = 0  # full listings this daemon ran (read by tests and logs)
        self.last_missed = 0  # nodes its last fleet-wide listing announced
        self._differing: dict[str, Any] = {}  # what its last round found differing, and how
        # What its rounds announced that still differs the same way, and how (see withheld).
        self._announced: dict[str, Any] = {}
        self._last_round: RoundRecord | None = None  # the round that found them
        self.compared = 0  # nodes its last round compared (read by tests and logs)

    def step(self) -> tuple[bool, float]:
        """One pass: ``(the set of nodes to share changed, seconds to wait)``."""
        now = self._clock()
        if self._own_started is None and self._watch is not None:
            if self._first_due is None:
                self._first_due = now
            stream_ok = self._watch.trusted()
            wait = first_listing_wait(stream_ok, now - self._first_due, self._frequent)
            if wait > 0.0:
                return False, min(wait, FIRST_LOOK)
            if stream_ok:
                # The next look soon: the fleet's first round, won while this listing is
                # fresh, compares it instead of listing again (round_lists_again). Waiting
                # ``frequent`` made the listing exactly that old at the round: a second one.
                return self._list("first listing, the event stream trusted from before it"), \
                    ROUND_CHECK
            return self._list("first listing, events not trusted yet"), self._frequent
        trusted = (self._watch is not None and self._own_started is not None
                   and self._watch.trusted_since(self._own_started))
        own_age = None if self._own_started is None else now - self._own_started
        due = own_listing_due(trusted, own_age, self._frequent)
        if due == 0.0:
            return self._list("events not trusted" if self._watch is not None
                              else "notifications off"), self._frequent
        changed = False
        if self._providers_read is None or now - self._providers_read >= self._frequent:
            self._providers_read = now
            changed = self._nodes.refresh_providers()
        if trusted and self._rounds is not None:
            record = self._rounds.claim(self._rare, self._frequent)
            if record is not None:
                own_done = None if self._own_ended is None else now - self._own_ended
                confirming = confirming_round(self._rounds.replaced, self._last_round,
                                              self._differing)
                relist = round_lists_again(own_done, self._frequent, self._rare, confirming)
                changed = self._list_for_the_fleet(record, relist, confirming) or changed
        return changed, min(due, ROUND_CHECK if trusted else self._frequent)

    def _list(self, why: str) -> bool:
        started = self._clock()
        changed = self._nodes.refresh()
        view = self._catalog.view()
        if view is not None and not view.stale and view.listed_at >= started:
            self._own_started, self._own_ended = started, self._clock()
        self.listings += 1
        LOG.info("listed %d nodes in %.1f s (%s)", len(view or ()), self._clock() - started,
                 why)
        return changed

    def _list_for_the_fleet(self, record: RoundRecord, relist: bool = True,
                            confirming: bool = False) -> bool:
        changed = False
        every = round_compares_all(relist, confirming)
        if relist:
            changed = self._list("this daemon's round of the fleet-wide listing")
        else:
            LOG.info("this daemon's round of the fleet-wide listing compares its own listing, "
                     "which ended %.1f s ago, %s", self._clock() - (self._own_ended or 0.0),
                     "every node" if every else
                     f"for the {len(self._differing)} node(s) its last round found")
        view = self._catalog.view()
        if view is None or view.stale:
            return changed  # the next round is due at the usual time; the catalog logged why
        only = None if every else self._differing.keys()
        found = differing(view.nodes, db_providers.applied_states(self._engine, uuids=only),
                          self._differing, only)
        self.compared = len(view.nodes) if only is None else len(only)
        skip = withheld(found, self._announced)
        announce = to_announce(found, self._differing, ANNOUNCE_PER_ROUND, skip)
        self._announced = still_announced(found, self._announced, announce)
        self._differing = found
        self._last_round = record
        findings = round_findings(found, announce, skip)
        if found:
            LOG.log(findings.level(), "%s", findings.describe(announce[:5]))
            if announce and self._heartbeat is not None:
                self._heartbeat.announce_missed(
                    announce, {uuid for uuid in announce if not_applied(found[uuid])})
        self.last_missed = len(announce)
        self._rounds.finish(record, findings.missed())
        return changed
