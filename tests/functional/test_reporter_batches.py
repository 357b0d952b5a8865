"""A batch of reports against the real Placement (issue 13 item 9): new providers are created
first and their inventories set by one ``POST /reshaper``; a refused reshaper (a generation
conflict) falls back to one provider at a time; each report's outcome stays its own; two
replicas applying the same batch at once apply each report exactly once.

computed's database is the stack's PostgreSQL when there is one (row locks, ``SKIP LOCKED``),
else sqlite.
"""

from __future__ import annotations

import threading
import uuid

import pytest

from computed import db
from computed.db import engine as db_engine
from computed.placement.client import PlacementClient
from computed.providers.report import Outcome, Report
from computed.providers.state import ProviderState
from computed.reporter.applier import ReportApplier
from computed.runtime import keystone
from tests import database
from tests.functional.daemons import fleet_database, seen


class Claimed:
    """The live claims as ZooKeeper would answer: every provider held by c1 with epoch 5."""

    def claim_holders(self, nodes):
        return {node: (5, "c1") for node in nodes}


@pytest.fixture
def engine(stack, tmp_path):
    if "postgres" in stack:
        url = stack["postgres"].create_database(f"batch_{uuid.uuid4().hex[:8]}")
        db.sync(url)
        stack.save()
    else:
        url = fleet_database(tmp_path)
    engine = db_engine.engine_from_url(url)
    yield engine
    engine.dispose()


def client(conf):
    return PlacementClient(keystone.load_adapter(conf, "placement"))


def rc():
    return f"CUSTOM_BATCH_{uuid.uuid4().hex[:8].upper()}"


def state(node, resource_class, reserved=0, traits=()):
    return {"uuid": node, "name": node, "resource_class": resource_class, "reserved": reserved,
            "traits": list(traits)}


def test_new_providers_cost_one_request_each_and_one_reshape(computed_config, engine):
    """Before: ~2 requests per new provider (create, inventory); now create + 1/batch."""
    nodes = [str(uuid.uuid4()) for _ in range(40)]
    klass = rc()
    placement = client(computed_config)
    applier = ReportApplier(placement, Claimed(), engine, workers=4)
    try:
        reports = [Report(node, 5, 1, "c1",
                          state(node, klass, reserved=i % 2,
                                traits=("CUSTOM_BATCHED",) if i < 2 else ())).to_dict()
                   for i, node in enumerate(nodes)]
        before = placement.request_count
        answers = applier.apply(reports)
        spent = placement.request_count - before
    finally:
        applier.close()
    assert sorted(answers) == sorted([node, 1, Outcome.APPLIED.value] for node in nodes)
    # 40 creations, the resource class, 1 reshaper, 1 GET (its generation step), the custom
    # trait (created once, or twice when two threads race to it) and the 2 providers' traits.
    assert spent <= len(nodes) + 7, spent
    reader = client(computed_config)
    listing = reader.generations()
    for i, node in enumerate(nodes):
        got = seen(reader, node)
        assert got == ProviderState(uuid=node, name=node, resource_class=klass,
                                    reserved=i % 2,
                                    traits=("CUSTOM_BATCHED",) if i < 2 else ()), node
        row = database.get_provider(engine, node)
        assert (row.claim_epoch, row.seq) == (5, 1)
        # What the resync compares: the recorded generation is Placement's.
        assert row.placement_generation == listing[node], node


def test_a_refused_reshaper_falls_back_to_one_provider_at_a_time(computed_config):
    """Someone writes to one of the new providers between its creation and the reshaper:
    Placement refuses the whole request (409), and each provider is then written alone."""
    klass = rc()
    a, b = (ProviderState(uuid=n, name=n, resource_class=klass, reserved=0)
            for n in (str(uuid.uuid4()), str(uuid.uuid4())))
    placement, other = client(computed_config), client(computed_config)
    assert placement.create(a) and placement.create(b)
    other.apply(ProviderState(uuid=b.uuid, name=b.name, resource_class=klass, reserved=1))
    left = placement.set_new_inventories([a, b])
    assert left == [a, b]  # one request, refused whole: nothing was set
    assert seen(other, a.uuid) is None
    assert placement.apply(a, last_applied=None) and placement.apply(b, last_applied=None)
    assert seen(other, a.uuid) == a and seen(other, b.uuid) == b


def test_a_provider_that_exists_already_is_applied_alone_in_the_batch(computed_config, engine):
    """A provider left in Placement (a restored database, an earlier attempt whose commit failed)
    answers the creation 409: it is applied as any report, the batch's others as new ones."""
    klass = rc()
    old, new = str(uuid.uuid4()), str(uuid.uuid4())
    client(computed_config).apply(ProviderState(uuid=old, name=old, resource_class=rc(),
                                                reserved=1, traits=("CUSTOM_LEFT",)))
    applier = ReportApplier(client(computed_config), Claimed(), engine, workers=2)
    try:
        answers = applier.apply([Report(n, 5, 3, "c1", state(n, klass)).to_dict()
                                 for n in (old, new)])
    finally:
        applier.close()
    assert sorted(answers) == sorted([[old, 3, "applied"], [new, 3, "applied"]])
    reader = client(computed_config)
    for node in (old, new):
        assert seen(reader, node) == ProviderState(uuid=node, name=node, resource_class=klass,
                                                   reserved=0)


def test_two_replicas_apply_one_batch_at_once_each_report_once(computed_config, engine):
    """Both replicas get the same batch at the same moment (a daemon's resend after a timeout
    lands on the other): every report is applied by exactly one, and later reports through
    either replica still reach Placement (no replica trusts its own memory)."""
    nodes = [str(uuid.uuid4()) for _ in range(30)]
    klass = rc()
    replicas = [ReportApplier(client(computed_config), Claimed(), engine, workers=4)
                for _ in range(2)]
    answers: list = [None, None]
    start = threading.Barrier(2)

    def run(index, reports):
        start.wait()
        answers[index] = replicas[index].apply(reports)

    try:
        batch = [Report(n, 5, 1, "c1", state(n, klass)).to_dict() for n in nodes]
        threads = [threading.Thread(target=run, args=(i, batch)) for i in range(2)]
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join(120)
        for node in nodes:
            outcomes = sorted(o for answer in answers for n, _, o in answer if n == node)
            # One replica applied it; the other found it stale (after) or its row busy (during):
            # a busy one is resent by its daemon and then found stale.
            assert outcomes.count("applied") == 1, (node, outcomes)
            assert set(outcomes) <= {"applied", "stale", "failed"}, (node, outcomes)
        # Later reports alternate replicas: each must write, whatever its own cache says.
        for seq, (replica, reserved) in enumerate([(0, 1), (1, 0), (0, 1)], start=2):
            answer = replicas[replica].apply(
                [Report(n, 5, seq, "c1", state(n, klass, reserved=reserved)).to_dict()
                 for n in nodes])
            assert {o for _, _, o in answer} == {"applied"}, answer
    finally:
        for replica in replicas:
            replica.close()
    reader = client(computed_config)
    for node in nodes:
        assert seen(reader, node).reserved == 1, node
        assert database.get_provider(engine, node).seq == 4
