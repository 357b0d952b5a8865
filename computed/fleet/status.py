"""The fleet as an operator sees it: a read-only snapshot of members, claims and nodes.

Owns the format of ``computed-manage fleet status --json``, which is stable: fields are only ever
added, never renamed or removed (the one exception, before any release: both ``epoch`` fields
were renamed to say which epoch they are, see docs/upgrades.md). The document::

    {
      "group": "computed",                      # the tooz group
      "members": [                              # live daemons, sorted by host
        {"host": "c1", "weight": 1, "draining": false,
         "member_epoch": 7,                      # zxid of its membership znode (new every join)
         "nodes": 106}                           # claims it holds
      ],
      "nodes": [                                # every node known to Ironic or claimed, by uuid
        {"uuid": "...", "owner": "c1",          # owner: claiming host, or null if unclaimed
         "claim_epoch": 123,                     # fencing token of the claim, null if unclaimed
         "in_ironic": true}                      # false: claimed but no longer listed by Ironic
      ],
      "ignored": [                              # children of the group that are not live
        {"name": "x", "reason": "a persistent znode: no daemon session keeps it"}
      ],                                        # daemons: never on the ring
      "summary": {"nodes": 300, "claimed": 300, "unclaimed": 0,
                  "claims_by_non_members": 0,    # claims of a daemon whose session is expiring
                  "ignored": 0}
    }

When the command has no Ironic access configured, ``nodes`` lists the claimed nodes only and every
``in_ironic`` is null.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

from computed.fleet.claims import ClaimRecord
from computed.fleet.membership import IgnoredEntry, MemberInfo


def snapshot(group: str, members: list[MemberInfo], claims: dict[str, ClaimRecord],
             ironic_nodes: Iterable[str] | None,
             ignored: list[IgnoredEntry] = ()) -> dict[str, Any]:
    """Build the status document from what was read (pure)."""
    counts: dict[str, int] = {}
    for record in claims.values():
        counts[record.host] = counts.get(record.host, 0) + 1
    listed = None if ironic_nodes is None else set(ironic_nodes)
    uuids = sorted(set(claims) | (listed or set()))
    nodes = []
    for uuid in uuids:
        record = claims.get(uuid)
        nodes.append({"uuid": uuid,
                      "owner": record.host if record else None,
                      "claim_epoch": record.epoch if record else None,
                      "in_ironic": None if listed is None else uuid in listed})
    names = {member.name for member in members}
    return {
        "group": group,
        "members": [{"host": m.name, "weight": m.weight, "draining": m.draining,
                     "member_epoch": m.member_epoch, "nodes": counts.get(m.name, 0)}
                    for m in members],
        "nodes": nodes,
        "ignored": [{"name": entry.name, "reason": entry.reason} for entry in ignored],
        "summary": {
            "nodes": len(uuids),
            "claimed": sum(1 for node in nodes if node["owner"] is not None),
            "unclaimed": sum(1 for node in nodes if node["owner"] is None),
            "claims_by_non_members": sum(1 for r in claims.values() if r.host not in names),
            "ignored": len(ignored),
        },
    }


def render_text(document: dict[str, Any]) -> str:
    """The human form: members table, summary, then one line per node."""
    lines = [f"group {document['group']}: {len(document['members'])} member(s)",
             f"{'HOST':<32} {'WEIGHT':>6} {'DRAINING':>8} {'MEMBER EPOCH':>12} {'NODES':>7}"]
    for m in document["members"]:
        lines.append(f"{m['host']:<32} {m['weight']:>6} {'yes' if m['draining'] else 'no':>8} "
                     f"{m['member_epoch']:>12} {m['nodes']:>7}")
    for entry in document["ignored"]:
        lines.append(f"IGNORED {entry['name']}: {entry['reason']} (not a member, gets no nodes)")
    s = document["summary"]
    lines.append(f"nodes: {s['nodes']} ({s['claimed']} claimed, {s['unclaimed']} unclaimed, "
                 f"{s['claims_by_non_members']} claimed by non-members)")
    lines.append(f"{'NODE':<36} {'OWNER':<32} {'CLAIM EPOCH':>12}")
    for node in document["nodes"]:
        owner = node["owner"] or "-"
        claim_epoch = node["claim_epoch"] if node["claim_epoch"] is not None else "-"
        gone = "" if node["in_ironic"] is not False else "  (not in Ironic)"
        lines.append(f"{node['uuid']:<36} {owner:<32} {claim_epoch:>12}{gone}")
    return "\n".join(lines)
