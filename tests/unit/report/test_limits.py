"""What one apply_reports call may make a reporter do (issue 16 item 9): admit() and the
reporter's endpoint, without a bus."""

import logging
import uuid as uuid_lib

import pytest

from computed.conf import reporter as reporter_opts
from computed.providers.report import Limits, admit, oversize
from computed.reporter.endpoint import ReporterEndpoint
from tests.unit.report.fakes import U1, state

LIMITS = Limits(max_reports=10, max_traits=5, max_chars=255)


def wire(uuid=U1, seq=1, host="c1", **state_fields):
    body = dict(state(uuid).to_dict(), **state_fields)
    body["traits"] = list(body["traits"])
    return {"uuid": uuid, "claim_epoch": 7, "seq": seq, "host": host, "state": body}


def test_an_honest_report_is_within_the_limits():
    assert oversize(wire(traits=["CUSTOM_A"] * 5), LIMITS) is None
    assert oversize(dict(wire(), state=None), LIMITS) is None


@pytest.mark.parametrize("report, reason", [
    (wire(traits=[f"CUSTOM_T{i}" for i in range(3000)]), "'state.traits': 3000 items, at most 5"),
    (wire(name="x" * 10_000_000), "'state.name': 10000000 characters, at most 255"),
    (wire(host="h" * 300), "'host': 300 characters"),
    (dict(wire(), uuid="u" * 300), "'uuid': 300 characters"),
    (dict(wire(), **{"k" * 1000: 1}), "a key that is no field name"),
    (dict(wire(), **{f"k{i}": 1 for i in range(20)}), "25 keys"),
    (dict(wire(), seq=10 ** 100), "'seq': an integer of 333 bits"),
    (dict(wire(), state={"a": {"b": {"c": {"d": 1}}}}), "nested deeper"),
])
def test_a_report_over_a_limit_says_which_field_in_a_short_line(report, reason):
    found = oversize(report, LIMITS)
    assert reason in found
    assert len(found) < 300


def test_admit_answers_oversized_reports_invalid_and_defers_what_is_past_the_call_limit():
    uuids = [str(uuid_lib.uuid4()) for _ in range(14)]
    reports = [wire(u, seq=i) for i, u in enumerate(uuids)]
    reports[2] = wire(uuids[2], seq=2, name="x" * 10_000)
    admission = admit(reports, LIMITS)
    assert [r["uuid"] for r in admission.admitted] == uuids[:2] + uuids[3:10]
    assert admission.answers == ([[uuids[2], 2, "invalid"]] +
                                 [[u, i, "failed"] for i, u in enumerate(uuids) if i >= 10])
    assert admission.deferred == 4
    assert len(admission.refused) == 1 and admission.refused[0].startswith(f"report {uuids[2]}")


def test_a_report_without_a_readable_identity_is_refused_without_an_answer():
    admission = admit([dict(wire(), uuid="u" * 10_000_000), "x" * 1000, 42], LIMITS)
    assert admission.answers == [] and len(admission.refused) == 2
    assert all(len(line) < 300 for line in admission.refused)
    assert admission.admitted == [42]  # small enough: the applier says it is no report


class Applier:
    def __init__(self):
        self.batches = []

    def apply(self, reports):
        self.batches.append(reports)
        return [[r["uuid"], r["seq"], "applied"] for r in reports] \
            if isinstance(reports, list) else []


def test_the_endpoint_applies_only_what_is_admitted_and_logs_one_short_line_each(caplog):
    applier = Applier()
    endpoint = ReporterEndpoint(applier, LIMITS)
    reports = [wire(str(uuid_lib.uuid4()), seq=i) for i in range(20_000)]
    reports[0] = wire(reports[0]["uuid"], seq=0, traits=[f"CUSTOM_T{i}" for i in range(3000)])
    reports[1] = wire(reports[1]["uuid"], seq=1, name="x" * 10_000_000)
    with caplog.at_level(logging.WARNING):
        answers = endpoint.apply_reports({}, reports=reports)
    assert len(applier.batches) == 1 and len(applier.batches[0]) == 8
    outcomes = {}
    for _uuid, _seq, outcome in answers:
        outcomes[outcome] = outcomes.get(outcome, 0) + 1
    assert outcomes == {"invalid": 2, "failed": 19_990, "applied": 8}
    assert len(caplog.records) == 3  # two refused reports, one call over the limit
    assert all(len(record.getMessage()) < 400 for record in caplog.records)
    assert "max_reports_per_call" in caplog.records[-1].getMessage()
    assert endpoint.apply_reports({}, reports="not a list") == []


def test_the_options_define_the_defaults_once():
    opts = {opt.name: opt for opt in reporter_opts.ALL_OPTS}
    assert opts["max_reports_per_call"].default >= opts["batch_size"].default
    assert opts["max_field_length"].default == 255
    assert opts["max_traits"].default >= 50  # Ironic's own limit of traits per node
