"""The fleet status document (pure)."""

from computed.fleet.claims import ClaimRecord
from computed.fleet.membership import IgnoredEntry, MemberInfo
from computed.fleet.status import render_text, snapshot


def members():
    return [MemberInfo("c1", 1, False, 7), MemberInfo("c2", 2, True, 9)]


def test_document_counts_claims_per_member_and_lists_every_node():
    claims = {"n1": ClaimRecord("n1", "c1", 100, 7), "n2": ClaimRecord("n2", "c1", 101, 7),
              "n9": ClaimRecord("n9", "gone-host", 50, 3)}
    doc = snapshot("computed", members(), claims, ironic_nodes=["n1", "n2", "n3"])
    assert doc["members"] == [
        {"host": "c1", "weight": 1, "draining": False, "member_epoch": 7, "nodes": 2},
        {"host": "c2", "weight": 2, "draining": True, "member_epoch": 9, "nodes": 0}]
    assert doc["nodes"] == [
        {"uuid": "n1", "owner": "c1", "claim_epoch": 100, "in_ironic": True},
        {"uuid": "n2", "owner": "c1", "claim_epoch": 101, "in_ironic": True},
        {"uuid": "n3", "owner": None, "claim_epoch": None, "in_ironic": True},
        {"uuid": "n9", "owner": "gone-host", "claim_epoch": 50, "in_ironic": False}]
    assert doc["summary"] == {"nodes": 4, "claimed": 3, "unclaimed": 1,
                              "claims_by_non_members": 1, "ignored": 0}


def test_without_ironic_only_claimed_nodes_are_listed():
    doc = snapshot("computed", members(), {"n1": ClaimRecord("n1", "c2", 5, 9)}, None)
    assert doc["nodes"] == [{"uuid": "n1", "owner": "c2", "claim_epoch": 5, "in_ironic": None}]


def test_text_form_names_members_and_owners():
    doc = snapshot("computed", members(), {"n1": ClaimRecord("n1", "c1", 100, 7)}, ["n1", "n2"])
    text = render_text(doc)
    assert "group computed: 2 member(s)" in text
    assert "nodes: 2 (1 claimed, 1 unclaimed, 0 claimed by non-members)" in text
    assert any(line.startswith("n2") and " - " in line for line in text.splitlines())


def test_entries_of_the_group_that_are_not_members_are_listed():
    ignored = [IgnoredEntry("planted", "a persistent znode: no daemon session keeps it", 3)]
    doc = snapshot("computed", members(), {}, None, ignored)
    assert doc["ignored"] == [{"name": "planted",
                               "reason": "a persistent znode: no daemon session keeps it"}]
    assert doc["summary"]["ignored"] == 1
    assert "IGNORED planted: a persistent znode" in render_text(doc)
    assert snapshot("computed", members(), {}, None)["ignored"] == []
