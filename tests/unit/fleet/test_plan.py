"""The reconcile plan (pure): examples, then properties over random fleets (hypothesis)."""

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from computed.fleet.plan import OwnershipCache, RingCache, compute_plan
from hashring.ownership import Member, compute_ownership, member_ring

SMALL = 256  # ring partitions: these tests check rules, not balance
EXAMPLES = 60
SETTINGS = settings(max_examples=EXAMPLES, deadline=None, database=None,
                    suppress_health_check=[HealthCheck.too_slow])

NAMES = [f"c{i}" for i in range(6)]
GONE = ["gone-1", "gone-2"]
NODES = [f"node-{i:03d}" for i in range(40)]


@st.composite
def fleets(draw):
    """Live members, the node list, instance hosts, and who holds which claim now.

    Claims are drawn freely among the live members (a node may even be held by two in this
    model: the plans must sort it out without ZooKeeper's exclusivity) and may be on nodes Ironic
    no longer lists.
    """
    names = draw(st.sets(st.sampled_from(NAMES), min_size=1, max_size=5))
    members = [Member(n, draw(st.integers(1, 3)), draw(st.booleans())) for n in sorted(names)]
    nodes = draw(st.lists(st.sampled_from(NODES), max_size=30, unique=True))
    hosts = st.one_of(st.none(), st.sampled_from(sorted(names)), st.sampled_from(GONE))
    instance_hosts = {}
    for node in nodes:
        host = draw(hosts)
        if host is not None:
            instance_hosts[node] = host
    claims = {node: draw(st.sets(st.sampled_from(sorted(names)), max_size=2))
              for node in NODES}
    return members, nodes, instance_hosts, claims


def held_by(claims, host):
    return {node for node, holders in claims.items() if host in holders}


def plan_of(members, nodes, instance_hosts, claims, host, draining=False):
    return compute_plan(members, held_by(claims, host), nodes, instance_hosts, host,
                        draining=draining, ring=member_ring(members, SMALL))


# --- examples -----------------------------------------------------------------------------

def test_a_lone_member_takes_every_node_and_releases_what_ironic_dropped():
    plan = compute_plan([Member("a")], held={"n1", "gone"}, nodes={"n1", "n2"},
                        instance_hosts={}, host="a")
    assert plan.member
    assert (plan.take, plan.release) == ({"n2"}, {"gone"})


def test_a_node_with_an_instance_stays_with_its_host_even_draining():
    members = [Member("a", draining=True), Member("b")]
    plan = compute_plan(members, held={"n1", "n2"}, nodes={"n1", "n2"},
                        instance_hosts={"n1": "a"}, host="a")
    assert (plan.take, plan.release) == (frozenset(), {"n2"})
    other = compute_plan(members, held=set(), nodes={"n1", "n2"}, instance_hosts={"n1": "a"},
                         host="b")
    assert other.take == {"n2"}


def test_draining_to_stop_takes_nothing():
    plan = compute_plan([Member("a", draining=True)], held=set(), nodes={"n1"},
                        instance_hosts={"n1": "a"}, host="a", draining=True)
    assert (plan.take, plan.release) == (frozenset(), frozenset())


def test_not_a_member_releases_everything_and_takes_nothing():
    plan = compute_plan([Member("b")], held={"n1", "n2"}, nodes={"n1", "n2", "n3"},
                        instance_hosts={}, host="a")
    assert not plan.member
    assert (plan.take, plan.release, plan.adopt) == (frozenset(), {"n1", "n2"}, frozenset())


def test_orphans_are_listed_and_adopted_by_their_ring_owner():
    members = [Member("a"), Member("b")]
    orphans = {f"n{i}": "gone" for i in range(20)}
    plans = {m.name: compute_plan(members, set(), set(orphans), orphans, m.name)
             for m in members}
    assert all(dict(plan.orphans) == orphans for plan in plans.values())
    assert plans["a"].adopt | plans["b"].adopt == set(orphans)
    assert not plans["a"].adopt & plans["b"].adopt
    assert not plans["a"].take and not plans["b"].take  # an orphan's node waits for adoption


def test_a_ring_cache_builds_once_per_membership():
    built = []

    def build(members):
        built.append(members)
        return member_ring(members, SMALL)

    rings = RingCache(build)
    first = rings.ring_for([Member("a"), Member("b")])
    assert rings.ring_for([Member("b"), Member("a")]) is first  # same members, any order
    assert len(built) == 1
    for changed in ([Member("a")], [Member("a"), Member("b", 2)],
                    [Member("a"), Member("b", draining=True)], [Member("a"), Member("c")]):
        assert rings.ring_for(changed) is not first
    assert len(built) == 5
    again = rings.ring_for([Member("a"), Member("c")])
    assert len(built) == 5 and dict(again.nodes) == {"a": 1, "c": 1}


# --- properties ---------------------------------------------------------------------------

@SETTINGS
@given(fleets())
def test_each_plan_takes_only_its_own_and_never_takes_what_it_releases(fleet):
    members, nodes, instance_hosts, claims = fleet
    ownership = compute_ownership(members, nodes, instance_hosts, SMALL)
    for member in members:
        held = held_by(claims, member.name)
        plan = plan_of(members, nodes, instance_hosts, claims, member.name)
        assert not plan.take & plan.release
        assert plan.release <= held and not plan.take & held
        # No node is taken that the rules give another live member (or nobody).
        assert all(ownership.owner(node) == member.name for node in plan.take)
        # Everything held that the rules give it is kept.
        assert held - plan.release == held & ownership.managed[member.name]


@SETTINGS
@given(fleets(), st.randoms(use_true_random=False))
def test_once_every_member_applied_its_plan_each_node_has_its_one_owner(fleet, rnd):
    members, nodes, instance_hosts, claims = fleet
    names = {m.name for m in members}
    order = list(members)
    rnd.shuffle(order)
    for member in order:  # one pass each, in any order, on the claims as the others left them
        plan = plan_of(members, nodes, instance_hosts, claims, member.name)
        for node in plan.release:
            claims[node].discard(member.name)
        for node in plan.take:
            claims.setdefault(node, set()).add(member.name)
    ownership = compute_ownership(members, nodes, instance_hosts, SMALL)
    for node in NODES:
        holders = claims.get(node, set())
        assert len(holders) <= 1, (node, holders)
        owner = ownership.owner(node) if node in nodes else None
        assert holders == ({owner} if owner else set()), node
    if any(not m.draining for m in members):
        # Every listed node is owned unless its instance's host is gone (it waits for adoption).
        assert {n for n in nodes if not claims.get(n)} == set(ownership.orphans)
    for node, host in instance_hosts.items():  # an instance's node stays with its live host
        if host in names:
            assert claims[node] == {host}


@SETTINGS
@given(fleets())
def test_a_member_draining_to_stop_only_releases(fleet):
    members, nodes, instance_hosts, claims = fleet
    for member in members:
        plan = plan_of(members, nodes, instance_hosts, claims, member.name, draining=True)
        normal = plan_of(members, nodes, instance_hosts, claims, member.name)
        assert plan.take == frozenset() and plan.release == normal.release


@SETTINGS
@given(fleets(), st.sampled_from(["c-new", "c9"]), st.integers(1, 3))
def test_a_join_moves_only_the_nodes_the_newcomer_gets(fleet, newcomer, weight):
    members, nodes, instance_hosts, _ = fleet
    before = compute_ownership(members, nodes, instance_hosts, SMALL)
    joined = members + [Member(newcomer, weight)]
    after = compute_ownership(joined, nodes, instance_hosts, SMALL)
    claims = {node: {owner} for node, owner in before.owners().items()}  # converged
    moved = set()
    for member in members:
        plan = plan_of(joined, nodes, instance_hosts, claims, member.name)
        assert plan.take == frozenset()
        assert all(after.owner(node) == newcomer for node in plan.release)
        moved |= plan.release
    newcomer_plan = plan_of(joined, nodes, instance_hosts, claims, newcomer)
    assert newcomer_plan.take == after.managed[newcomer]
    assert moved <= newcomer_plan.take
    assert newcomer_plan.take - moved <= before.unassigned  # the rest was nobody's


@SETTINGS
@given(fleets(), st.data())
def test_a_leave_moves_only_the_leavers_nodes(fleet, data):
    members, nodes, instance_hosts, _ = fleet
    leaver = data.draw(st.sampled_from(members))
    stayers = [m for m in members if m != leaver]
    before = compute_ownership(members, nodes, instance_hosts, SMALL)
    claims = {node: {owner} for node, owner in before.owners().items()}
    for member in stayers:
        plan = plan_of(stayers, nodes, instance_hosts, claims, member.name)
        assert plan.release == frozenset()
        assert all(before.owner(node) in (leaver.name, None) for node in plan.take)


@SETTINGS
@given(fleets())
def test_each_orphan_has_one_adopter_among_the_non_draining_members(fleet):
    members, nodes, instance_hosts, claims = fleet
    plans = [plan_of(members, nodes, instance_hosts, claims, m.name) for m in members]
    orphans = set(plans[0].orphans)
    adopted = [plan.adopt for plan in plans]
    assert sum(len(a) for a in adopted) == len(set().union(*adopted))  # nobody adopts twice
    if any(not m.draining for m in members):
        assert set().union(*adopted) == orphans
    else:
        assert set().union(*adopted) == set()
    for member, plan in zip(members, plans):
        assert not (member.draining and plan.adopt)


def test_the_ownership_is_computed_once_per_members_nodes_and_instance_hosts():
    computed = []

    def compute(members, nodes, instance_hosts, ring):
        computed.append(nodes)
        return compute_ownership(members, nodes, instance_hosts, ring=ring)

    cache = OwnershipCache(compute)
    members = (Member("a"), Member("b"))
    ring = member_ring(members, SMALL)
    nodes = frozenset(NODES[:20])
    first = cache.ownership_for(members, nodes, {}, ring)
    assert cache.ownership_for(members, nodes, {}, ring) is first
    assert cache.ownership_for(members, frozenset(NODES[:20]), {}, ring) is first  # equal set
    assert len(computed) == 1
    other_ring = member_ring((Member("a"),), SMALL)
    for changed in ((members, frozenset(NODES[:19]), {}, ring),
                    (members, frozenset(NODES[:19]), {NODES[0]: "a"}, ring),
                    ((Member("a"),), frozenset(NODES[:19]), {NODES[0]: "a"}, other_ring)):
        assert cache.ownership_for(*changed) is not first
    assert len(computed) == 4
    again = cache.ownership_for((Member("a"),), frozenset(NODES[:19]), {NODES[0]: "a"},
                                other_ring)
    assert len(computed) == 4 and again.owner(NODES[0]) == "a"


def test_a_plan_from_a_given_ownership_equals_the_computed_one():
    members = (Member("a"), Member("b"))
    ring = member_ring(members, SMALL)
    ownership = compute_ownership(members, NODES, {}, ring=ring)
    held = set(NODES[:10])
    given = compute_plan(members, held, NODES, {}, "a", ring=ring, ownership=ownership)
    assert given == compute_plan(members, held, NODES, {}, "a", ring=ring)
    assert given.ownership is ownership
