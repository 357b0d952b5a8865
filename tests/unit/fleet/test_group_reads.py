"""The group is read only when something may have changed: a watch fired, the session moved,
a join, a drain marker written, or the safety interval passed (membership.GroupFreshness, pure,
and Membership over a counting stand-in for kazoo). Before, every pass read it: 2 get_children
+ 1 get per member, D + 2 requests a pass."""

from __future__ import annotations

import functools
import threading
import types
from collections import defaultdict

from kazoo.protocol.states import EventType, KeeperState, WatchedEvent
from tooz import utils as tooz_utils

from computed.fleet import membership
from computed.fleet.audit import AuditLog
from computed.fleet.fence import Fence, SessionState
from computed.fleet.membership import (
    REREAD_AFTER,
    GroupFreshness,
    GroupView,
    MemberInfo,
    Membership,
)
from computed.fleet.reconciler import Fleet
from tests.unit.fleet.fakes import Clock, Done, Ensemble, FakeClaims

MEMBERS = "/tooz/fleet"
DRAINING = "/computed/fleet/draining"
SESSION = 0x77


def view(*names):
    return GroupView([MemberInfo(name, 1, False, i) for i, name in enumerate(names)], [])


# --- GroupFreshness (pure) ---------------------------------------------------------------------

def test_a_new_freshness_has_no_view():
    assert GroupFreshness().fresh(0.0) is None


def test_a_view_is_used_until_a_change_is_counted():
    freshness = GroupFreshness()
    read = freshness.begin(0.0)
    assert freshness.done(read, view("a"))
    assert freshness.fresh(1.0) == view("a")
    freshness.changed()
    assert freshness.fresh(1.0) is None


def test_a_change_during_a_read_leaves_its_view_stale():
    freshness = GroupFreshness()
    read = freshness.begin(0.0)
    freshness.changed()  # the watch of a change the read may not have seen
    assert freshness.done(read, view("a"))
    assert freshness.fresh(0.1) is None


def test_a_view_is_read_again_after_the_safety_interval():
    freshness = GroupFreshness(reread_after=30.0)
    freshness.done(freshness.begin(100.0), view("a"))
    assert freshness.fresh(129.9) == view("a")
    assert freshness.fresh(130.0) is None


def test_of_two_overlapping_reads_the_later_one_is_kept_whichever_ends_first():
    freshness = GroupFreshness()
    first = freshness.begin(0.0)
    freshness.changed()
    second = freshness.begin(0.1)
    assert freshness.done(second, view("a", "b"))
    assert not freshness.done(first, view("a"))  # older: it may miss b
    assert freshness.fresh(0.2) == view("a", "b")


def test_an_empty_view_is_never_kept():
    """The group's folder missing reads as no members, and leaves no watch on it."""
    freshness = GroupFreshness()
    freshness.done(freshness.begin(0.0), view("a"))
    freshness.changed()
    assert freshness.done(freshness.begin(1.0), GroupView([], []))
    assert freshness.fresh(1.1) is None


# --- Membership over a stand-in for kazoo --------------------------------------------------------

class Zoo:
    """Znodes {path: (data, ephemeralOwner, czxid)} with ZooKeeper's one-shot data and child
    watches, left by reads. ``reads`` counts every get_children and get.

    A change calls the watches it fires with kazoo's event (type and path), as kazoo does: all
    of one znode's watches at once (a set), a deletion's data watches before its parent's child
    watches. With ``queued``, the calls wait in ``events`` until the test runs them, as kazoo's
    event thread runs them while the fleet thread reads."""

    default_acl = None
    client_id = (SESSION, b"")

    def __init__(self):
        self.znodes = {MEMBERS: (b"", 0, 1), DRAINING: (b"", 0, 2)}
        self.zxid = 10
        self.reads = 0
        self.data_watches = defaultdict(set)
        self.child_watches = defaultdict(set)
        self.queued = False
        self.events: list = []

    def children(self, path):
        return sorted(p.rsplit("/", 1)[1] for p in self.znodes if p.rsplit("/", 1)[0] == path)

    def get_children_async(self, path, watch=None):
        self.reads += 1
        if watch is not None:
            self.child_watches[path].add(watch)
        return Done(self.children(path))

    def get_async(self, path, watch=None):
        self.reads += 1
        data, owner, czxid = self.znodes[path]
        if watch is not None:
            self.data_watches[path].add(watch)
        return Done((data, types.SimpleNamespace(ephemeralOwner=owner, czxid=czxid)))

    def ensure_path_async(self, path):
        return Done(path)

    # changes, as ZooKeeper reports them
    def create(self, path, data=b"", ephemeral=True):
        self.zxid += 1
        self.znodes[path] = (data, SESSION if ephemeral else 0, self.zxid)
        self._fire(self.child_watches, path.rsplit("/", 1)[0], EventType.CHILD)

    def delete(self, path):
        del self.znodes[path]
        self._fire(self.data_watches, path, EventType.DELETED)
        self._fire(self.child_watches, path.rsplit("/", 1)[0], EventType.CHILD)

    def set(self, path, data):
        _old, owner, czxid = self.znodes[path]
        self.znodes[path] = (data, owner, czxid)
        self._fire(self.data_watches, path, EventType.CHANGED)

    def _fire(self, watches, path, kind):
        event = WatchedEvent(kind, KeeperState.CONNECTED, path)
        for watch in watches.pop(path, ()):
            self.events.append(functools.partial(watch, event))
        if not self.queued:
            self.deliver()

    def deliver(self, count=None):
        """Run the first ``count`` watch calls waiting (all: None)."""
        while self.events and count != 0:
            self.events.pop(0)()
            count = None if count is None else count - 1


def caps(host, weight=1):
    return tooz_utils.dumps(membership.capabilities(host, weight))


class ZooMembership(Membership):
    """Membership on a :class:`Zoo`: its join creates the member znode as tooz would."""

    def join(self, timeout, stopping):
        path = f"{self.members_path}/{self.host}"
        if path not in self._client.znodes:
            self._client.create(path, caps(self.host, self.weight))
        self.member_epoch = self._client.znodes[path][2]
        self.invalidate()
        return self.member_epoch


def zoo_membership(monkeypatch, zoo, clock=None, host="c00"):
    monkeypatch.setattr(membership.zookeeper, "kazoo_client", lambda _c: zoo)
    monkeypatch.setattr(membership.zookeeper, "group_path", lambda _c, g: f"/tooz/{g}")
    return ZooMembership(object(), "fleet", host, 1, wake=threading.Event(),
                         clock=clock or Clock())


def a_fleet_of(zoo, count):
    for i in range(1, count):
        zoo.create(f"{MEMBERS}/c{i:02d}", caps(f"c{i:02d}"))


class Passes:
    """One daemon's Fleet on the Zoo (real Membership, fence and audit; claims in memory)."""

    def __init__(self, monkeypatch, tmp_path, zoo, clock):
        self.fence = Fence(10.0, clock=clock)
        self.fence.connected()
        assert self.fence.renew(lambda: None)
        self.membership = zoo_membership(monkeypatch, zoo, clock)
        self.fleet = Fleet(self.membership, FakeClaims(Ensemble(), "c00"), self.fence,
                           nodes=self, hosting=self, audit=AuditLog(None, "c00"),
                           join_timeout=1.0, drain_timeout=1.0, tick=0.01)
        self.fleet.join()
        self.membership.watch()
        self.fleet.reconcile()

    def uuids(self):
        return [f"node-{i}" for i in range(50)]

    def hosts(self):
        return {}

    def joined(self, member_epoch):
        pass


def reads_over(zoo, passes, count):
    before = zoo.reads
    for _ in range(count):
        passes.fleet.reconcile()
    return zoo.reads - before


def test_passes_with_nothing_changed_read_nothing(monkeypatch, tmp_path):
    """40 members, 100 passes, no change: 0 reads (before: D + 2 = 42 a pass, 4,200)."""
    zoo, clock = Zoo(), Clock()
    a_fleet_of(zoo, 40)
    daemon = Passes(monkeypatch, tmp_path, zoo, clock)
    assert [m.name for m in daemon.membership.members()][:2] == ["c00", "c01"]
    assert len(daemon.membership.members()) == 40
    assert reads_over(zoo, daemon, 100) == 0


def test_every_kind_of_change_is_read_on_the_next_pass(monkeypatch, tmp_path):
    zoo, clock = Zoo(), Clock()
    a_fleet_of(zoo, 5)
    daemon = Passes(monkeypatch, tmp_path, zoo, clock)
    d_plus_2 = 5 + 2

    def names():
        return {m.name: (m.weight, m.draining) for m in daemon.membership.members()}

    zoo.create(f"{MEMBERS}/c05", caps("c05"))  # a join
    assert reads_over(zoo, daemon, 3) == d_plus_2 + 1
    assert "c05" in names()
    zoo.delete(f"{MEMBERS}/c05")  # a leave
    assert reads_over(zoo, daemon, 3) == d_plus_2
    assert "c05" not in names()
    zoo.create(f"{DRAINING}/c01", b"{}")  # a drain marker, written by computed-manage
    assert reads_over(zoo, daemon, 3) == d_plus_2
    assert names()["c01"] == (1, True)
    zoo.delete(f"{DRAINING}/c01")  # undrain
    assert reads_over(zoo, daemon, 3) == d_plus_2
    assert names()["c01"] == (1, False)
    zoo.set(f"{MEMBERS}/c02", caps("c02", weight=3))  # capabilities changed in place
    assert reads_over(zoo, daemon, 3) == d_plus_2
    assert names()["c02"] == (3, False)
    assert reads_over(zoo, daemon, 3) == 0


def test_a_session_change_and_the_safety_interval_read_again(monkeypatch, tmp_path):
    zoo, clock = Zoo(), Clock()
    a_fleet_of(zoo, 3)
    daemon = Passes(monkeypatch, tmp_path, zoo, clock)
    assert reads_over(zoo, daemon, 3) == 0
    daemon.fleet.session_changed(SessionState.CONNECTED)  # e.g. reconnected, same session
    assert reads_over(zoo, daemon, 3) == 3 + 2
    clock.now += REREAD_AFTER - 1
    assert daemon.fence.renew(lambda: None)
    assert reads_over(zoo, daemon, 3) == 0
    clock.now += 1
    assert daemon.fence.renew(lambda: None)
    assert reads_over(zoo, daemon, 3) == 3 + 2


def test_a_change_no_watch_reported_is_read_within_the_safety_interval(monkeypatch, tmp_path):
    zoo, clock = Zoo(), Clock()
    a_fleet_of(zoo, 3)
    daemon = Passes(monkeypatch, tmp_path, zoo, clock)
    zoo.znodes[f"{MEMBERS}/c09"] = (caps("c09"), SESSION, 99)  # a lost watch: nobody told
    reads_over(zoo, daemon, 3)
    assert "c09" not in {m.name for m in daemon.membership.members()}
    clock.now += REREAD_AFTER
    assert daemon.fence.renew(lambda: None)
    reads_over(zoo, daemon, 1)
    assert "c09" in {m.name for m in daemon.membership.members()}


def test_one_change_costs_each_daemon_one_read_of_the_group(monkeypatch, tmp_path):
    """kazoo runs the watches' calls on its event thread while the fleet thread reads: a pass
    may come between two calls of one change. A join, a leave (the member's watch and the
    group's fire), a drain marker: one read of the group each (D + 2), whenever the passes
    come. Before: a join cost 2 (D + 2) + 1 (kazoo's ChildrenWatch counted it again after a
    read of its own), a leave 3 (D + 2) + 1."""
    zoo, clock = Zoo(), Clock()
    a_fleet_of(zoo, 5)
    daemon = Passes(monkeypatch, tmp_path, zoo, clock)
    zoo.queued = True

    def reads_of(change):
        before = zoo.reads
        change()
        while zoo.events:
            zoo.deliver(1)  # one watch call, then a pass
            daemon.fleet.reconcile()
        reads_over(zoo, daemon, 3)
        return zoo.reads - before

    assert reads_of(lambda: zoo.create(f"{MEMBERS}/c05", caps("c05"))) == 6 + 2
    assert reads_of(lambda: zoo.delete(f"{MEMBERS}/c05")) == 5 + 2
    assert reads_of(lambda: zoo.create(f"{DRAINING}/c01", b"{}")) == 5 + 2
    assert reads_of(lambda: zoo.set(f"{MEMBERS}/c02", caps("c02", weight=3))) == 5 + 2
    assert {m.name: m.weight for m in daemon.membership.members()}["c02"] == 3


def test_a_member_deleted_counts_through_the_groups_watch_only():
    assert not membership.member_event_is_change(EventType.DELETED)
    assert membership.member_event_is_change(EventType.CHANGED)
    assert membership.member_event_is_change(EventType.NONE)  # kazoo dropped it: read again
