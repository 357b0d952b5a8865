"""Who is a member: only a live daemon (pure decisions, and the once-only log of the rest)."""

import logging
import threading
import types

import pytest
from kazoo import exceptions as zk_exc
from tooz import utils as tooz_utils

from computed.fleet import membership
from computed.fleet.membership import IgnoredEntry, MemberInfo, member_from_znode, read_group
from tests.unit.fleet.fakes import Done

SESSION = 0x1234


def caps(**fields):
    return tooz_utils.dumps(fields)


def test_an_ephemeral_znode_with_a_daemons_capabilities_is_a_member():
    assert member_from_znode("c1", caps(host="c1", weight=3), SESSION, 42, True) == \
        MemberInfo("c1", 3, True, 42)


@pytest.mark.parametrize("data, owner, reason", [
    (caps(host="c1", weight=1), 0, "persistent znode"),
    (b"\xc1 not msgpack", SESSION, "cannot be read"),
    (b"", SESSION, "cannot be read"),
    (tooz_utils.dumps([1, 2]), SESSION, "not an object"),
    (caps(host="other", weight=1), SESSION, "name host 'other'"),
    (caps(weight=1), SESSION, "name host None"),
    (caps(host="c1"), SESSION, "weight None"),
    (caps(host="c1", weight=0), SESSION, "weight 0"),
    (caps(host="c1", weight=True), SESSION, "weight True"),
    (caps(host="c1", weight="9"), SESSION, "weight '9'"),
])
def test_anything_else_in_the_group_is_ignored_with_the_reason(data, owner, reason):
    entry = member_from_znode("c1", data, owner, 7, False)
    assert isinstance(entry, IgnoredEntry)
    assert entry.name == "c1" and entry.czxid == 7
    assert reason in entry.reason


def test_a_huge_foreign_value_is_named_briefly():
    entry = member_from_znode("c1", caps(host="x" * 100_000, weight=1), SESSION, 7, False)
    assert len(entry.reason) < 200


class Group:
    """The group folder as kazoo reads it: {name: (data, ephemeralOwner, czxid)}; a read with
    ``watch`` leaves a one-shot watch that :meth:`plant` and :meth:`remove` fire."""

    def __init__(self, children):
        self.children = children
        self.watches = []

    def get_children_async(self, path, watch=None):
        if path.endswith("/draining"):
            return Done(zk_exc.NoNodeError())
        if watch is not None:
            self.watches.append(watch)
        return Done(list(self.children))

    def get_async(self, path, watch=None):
        data, owner, czxid = self.children[path.rsplit("/", 1)[1]]
        return Done((data, types.SimpleNamespace(ephemeralOwner=owner, czxid=czxid)))

    def plant(self, name, value):
        self.children[name] = value
        self._fire()

    def remove(self, name):
        del self.children[name]
        self._fire()

    def _fire(self):
        watches, self.watches = self.watches, []
        for watch in watches:
            watch(None)


def test_read_group_splits_members_from_planted_entries():
    group = Group({"c1": (caps(host="c1", weight=1), SESSION, 5),
                   "planted": (b"", 0, 6)})
    view = read_group(group, "/tooz/g", "/computed/g/draining")
    assert view.members == [MemberInfo("c1", 1, False, 5)]
    assert [entry.name for entry in view.ignored] == ["planted"]


def test_membership_logs_each_planted_znode_once_and_again_if_planted_anew(monkeypatch, caplog):
    group = Group({"c1": (caps(host="c1", weight=1), SESSION, 5), "planted": (b"", 0, 6)})
    monkeypatch.setattr(membership.zookeeper, "kazoo_client", lambda _c: group)
    monkeypatch.setattr(membership.zookeeper, "group_path", lambda _c, g: f"/tooz/{g}")
    member = membership.Membership(object(), "g", "c1", 1, wake=threading.Event())
    with caplog.at_level(logging.ERROR, logger=membership.__name__):
        for _ in range(5):
            assert [m.name for m in member.members()] == ["c1"]
        assert len(caplog.records) == 1
        assert "/tooz/g/planted" in caplog.text and "persistent znode" in caplog.text
        assert [entry.name for entry in member.ignored()] == ["planted"]
        group.remove("planted")
        member.members()
        assert member.ignored() == []
        group.plant("planted", (b"", 0, 9))  # planted again: a new znode, a new line
        member.members()
        assert len(caplog.records) == 2
