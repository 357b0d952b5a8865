"""The chaos run's forged reports (:func:`tests.chaos.chaos.forged_report_calls`) against the
reporter's endpoint, Placement and ZooKeeper faked: each is refused (fenced, invalid or, past
the batch limit, failed), nothing reaches Placement, and the claim holder's own report still
applies afterwards. Keeps the forgeries honest: a forgery the reporter *should* apply (one the
claim holder could have sent) would make the chaos invariant meaningless."""

from computed.fleet.claims import ClaimRecord
from computed.providers.report import Limits, Report
from computed.reporter.applier import ReportApplier
from computed.reporter.endpoint import ReporterEndpoint
from tests.chaos.chaos import REFUSED, forged_report_calls
from tests.unit.report.test_applier import U1, U2, FakeClaims, FakePlacement, state


def test_every_forged_report_is_refused_and_the_holders_report_still_applies(engine):
    placement, claims = FakePlacement(), FakeClaims({U1: 7, U2: 9})
    applier = ReportApplier(placement, claims, engine, workers=2, clock=lambda: 1_700_000_000)
    endpoint = ReporterEndpoint(applier, Limits(max_reports=50, max_traits=128, max_chars=255))
    records = {U1: ClaimRecord(U1, "c1", 7, 3), U2: ClaimRecord(U2, "c1", 9, 3)}
    calls = forged_report_calls(records, {U1: state(U1), U2: state(U2)}, ["c1", "c2"],
                                now_ms=1_700_000_000_000, max_reports=50)
    try:
        assert len(calls) > 20
        for what, arguments in calls:
            answers = endpoint.apply_reports({}, **arguments)
            assert all(answer[2] in REFUSED for answer in answers), (what, answers)
        assert placement.providers == {}
        honest = Report(U1, 7, 1_700_000_000_001, "c1", state(U1)).to_dict()
        assert endpoint.apply_reports({}, reports=[honest]) == [[U1, honest["seq"], "applied"]]
    finally:
        applier.close()
