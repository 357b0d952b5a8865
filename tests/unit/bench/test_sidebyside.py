"""bench.sidebyside: the pure part of the Nova side-by-side benchmark (percentiles, the access
logs' request counts, what "reserved" means for both systems, runs combined, the table)."""

import datetime

import pytest

from bench import sidebyside


def stamp(epoch: float) -> str:
    return datetime.datetime.fromtimestamp(epoch).strftime("%Y-%m-%d %H:%M:%S.%f")[:23]


def test_percentile_is_the_nearest_rank():
    values = [5.0, 1.0, 4.0, 2.0, 3.0]
    assert sidebyside.percentile(values, 50) == 3.0
    assert sidebyside.percentile(values, 95) == 5.0
    assert sidebyside.percentile(values, 20) == 1.0
    assert sidebyside.percentile(range(1, 101), 95) == 95
    assert sidebyside.percentile([], 50) is None
    with pytest.raises(ValueError, match="percentile must be in"):
        sidebyside.percentile(values, 0)


def test_requests_are_counted_in_the_window_by_method_and_path_kind():
    t = 1_800_000_000.0
    uuid = "f41e6405-15c8-4cb8-b94d-9272282766d9"
    lines = [
        f"{stamp(t - 5)} 1 INFO placement.requestlog [-] 127.0.0.1 \"GET /\" status: 200",
        f"{stamp(t + 1)} 1 INFO placement.requestlog [req admin admin] 127.0.0.1 "
        f"\"GET /resource_providers/{uuid}/inventories\" status: 200 len: 3",
        f"{stamp(t + 2)} 1 INFO placement.requestlog [req] 127.0.0.1 "
        f"\"GET /resource_providers?in_tree={uuid}\" status: 200",
        f"{stamp(t + 3)} 1 INFO placement.requestlog [req] 127.0.0.1 "
        f"\"PUT /resource_providers/{uuid.upper()}/inventories\" status: 200",
        f"{stamp(t + 3)} 1 INFO placement.other [req] GET /not/a/request/log",
        "Traceback (most recent call last): GET /nothing",
        f"{stamp(t + 11)} 1 INFO placement.requestlog [req] 127.0.0.1 \"GET /\" status: 200",
    ]
    counts = sidebyside.count_requests(lines, "placement.requestlog", t, t + 10)
    assert counts == {"GET /resource_providers/{uuid}/inventories": 1,
                      "GET /resource_providers": 1,
                      "PUT /resource_providers/{uuid}/inventories": 1}


def test_ironic_access_lines_are_counted_too():
    t = 1_800_000_000.0
    line = (f"{stamp(t)} 7251 INFO ironic.api [None req-c9 - - - - - -] 127.0.0.1 - "
            f"GET /v1/nodes?limit=1000&fields=uuid%2Cname - 200 (21.62ms)")
    assert sidebyside.count_requests([line, line], "ironic.api", t - 1, t + 1) == {
        "GET /v1/nodes": 2}


def test_a_window_must_last():
    assert sidebyside.per_minute(30, 120.0) == 15.0
    with pytest.raises(ValueError, match="a window must last"):
        sidebyside.per_minute(1, 0)


def test_reserved_means_the_whole_node_reserved_or_its_inventory_gone():
    rc = "CUSTOM_BENCH"
    assert not sidebyside.reserved_changed({rc: {"total": 1, "reserved": 0}}, rc)
    assert sidebyside.reserved_changed({rc: {"total": 1, "reserved": 1}}, rc)
    assert sidebyside.reserved_changed({}, rc)
    assert sidebyside.reserved_changed({"CUSTOM_OTHER": {"total": 1, "reserved": 0}}, rc)


def test_runs_combine_into_medians_pooled_events_and_load_ranges():
    runs = [{"cold": 10.0, "cpu": 0.1, "failover": None, "events": [1.0, 2.0],
             "events_missed": 1, "loads": {"cold": (1.0, 3.0)}},
            {"cold": 30.0, "cpu": 0.3, "failover": 5.0, "events": [3.0],
             "loads": {"cold": (2.0, 6.0), "steady": (4.0, 4.5)}},
            {"cold": 20.0, "failed": "cold start: only 3 of 300 providers"}]
    out = sidebyside.combine(runs)
    assert out["cold"] == 20.0 and out["cpu"] == pytest.approx(0.2)
    assert out["failover"] == 5.0 and out["first"] is None
    assert out["events"] == [1.0, 2.0, 3.0] and out["events_missed"] == 1
    assert out["loads"] == {"cold": (1.0, 6.0), "steady": (4.0, 4.5)}
    assert out["runs"] == 3


def test_request_rates_are_pooled_over_the_runs_not_their_median():
    # one listing in three equal windows: the median of the rates would say none
    runs = [{"ironic_rpm": 0.0, "placement_rpm": 0.2}, {"ironic_rpm": 0.6, "placement_rpm": 0.0},
            {"ironic_rpm": 0.0, "placement_rpm": 0.0}]
    out = sidebyside.combine(runs)
    assert out["ironic_rpm"] == pytest.approx(0.2)
    assert out["placement_rpm"] == pytest.approx(0.2 / 3)


def test_ratio_is_nova_over_computed():
    assert sidebyside.ratio(40.0, 0.08) == "x 500.0"
    assert sidebyside.ratio(None, 1.0) == "-"
    assert sidebyside.ratio(3300, 0) == "inf"
    assert sidebyside.ratio(0, 0) == "-"


def test_the_table_has_both_systems_and_the_ratio_per_figure():
    nova = sidebyside.combine([{"cold": 70.7, "first": 20.0, "cpu": 0.155,
                                "placement_rpm": 660.0, "ironic_rpm": 12.0, "failover": 86.6,
                                "down": 57.0, "events": [40.3, 68.9],
                                "loads": {"cold": (5.0, 9.0)}}])
    ours = sidebyside.combine([{"cold": 6.7, "first": 1.0, "cpu": 0.041,
                                "placement_rpm": 0.2, "ironic_rpm": 6.0, "failover": 3.3,
                                "down": 3.0, "events": [0.075, 0.22], "events_missed": 0,
                                "loads": {"cold": (4.0, 5.0)}}])
    lines = sidebyside.table({300: {"nova": nova, "computed": ours}})
    assert lines[0].startswith("| figure | nodes | Nova 34")
    text = "\n".join(lines)
    assert "| maintenance on -> Placement reserved, p50 | 300 | 40.3 s | 0.07 s | x 537.3 |" \
        in text
    assert "| changes seen / made | 300 | 2 / 2 | 2 / 2 | |" in text
    assert "| steady CPU of the compute side, no changes | 300 | 15.5 % | 4.1 % | x 3.8 |" \
        in text
    assert "| Placement requests per minute at steady state | 300 | 660.0 | 0.2 | x 3,300.0 |" \
        in text
    assert "cold 5.0-9.0" in text and "cold 4.0-5.0" in text
    assert len(lines) == 2 + 3 + len(sidebyside.FIGURES) + 1


def test_changes_never_seen_rank_above_every_seen_one():
    nova = sidebyside.combine([{"events": [100.0, 200.0, 300.0], "events_missed": 2}])
    ours = sidebyside.combine([{"events": [0.1] * 5}])
    text = "\n".join(sidebyside.table({3000: {"nova": nova, "computed": ours}}))
    assert "| maintenance on -> Placement reserved, p50 | 3,000 | 300.0 s | 0.10 s | x 3,000.0 |" \
        in text
    assert "|   p95 | 3,000 | not seen in the limit | 0.10 s | - |" in text
    assert "| changes seen / made | 3,000 | 3 / 5 | 5 / 5 | |" in text


def test_a_system_without_events_shows_none_made():
    nova = sidebyside.combine([{"events": [30.0]}])
    ours = sidebyside.combine([{"cold": 6.0}])
    text = "\n".join(sidebyside.table({300: {"nova": nova, "computed": ours}}))
    assert "| changes seen / made | 300 | 1 / 1 | - | |" in text
    assert "| maintenance on -> Placement reserved, p50 | 300 | 30.0 s | - | - |" in text


def test_a_single_runs_recovered_summary_stands_for_its_lost_latencies():
    nova = sidebyside.combine([{"events": [30.0, 40.0]}])
    ours = sidebyside.combine([{"events": [], "events_summary": {"p50": 0.137, "p95": 0.262,
                                                                 "seen": 20, "made": 20}}])
    text = "\n".join(sidebyside.table({300: {"nova": nova, "computed": ours}}))
    assert "| maintenance on -> Placement reserved, p50 | 300 | 30.0 s | 0.14 s | x 219.0 |" \
        in text
    assert "| changes seen / made | 300 | 2 / 2 | 20 / 20 | |" in text
    two = sidebyside.combine([{"events": [], "events_summary": {"p50": 1.0}}, {"events": [2.0]}])
    assert "events_summary" not in two and two["events"] == [2.0]


def test_a_cold_start_that_hit_its_limit_shows_how_far_it_got():
    nova = sidebyside.combine([{"failed": "only 2424 of 3000", "cold_over": 1500.0,
                                "cold_count": 2424, "first": 30.0}])
    ours = sidebyside.combine([{"cold": 143.6}])
    text = "\n".join(sidebyside.table({3000: {"nova": nova, "computed": ours}}))
    assert ("| cold start: all providers schedulable in Placement | 3,000 | > 1,500 s (2,424 of "
            "3,000) | 143.6 s | - |") in text
