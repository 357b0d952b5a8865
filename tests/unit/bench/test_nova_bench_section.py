"""The section bench/nova_bench.py writes into BENCHMARKS.md says the load the run saw."""

from bench import nova_bench


def _result(loads: dict) -> dict:
    return {"system": "computed", "nodes": 300, "run": 1, "loads": loads,
            "settings": {"nova_computes": 2, "daemons": 3, "reporters": 2, "session": 10,
                         "window": 300.0, "settle": 30.0, "events": 10}}


def test_the_load_range_spans_every_phase_of_every_run():
    results = [_result({"cold": (0.4, 1.9), "steady": (1.1, 1.3)}),
               _result({"events": (2.6, 3.0)})]
    assert nova_bench.load_range(results) == "0.4-3.0"
    assert nova_bench.load_range([_result({})]) == "(not kept)"


def test_the_section_states_the_load_it_was_measured_at():
    text = nova_bench.markdown([_result({"cold": (0.5, 1.5)})],
                               {"command": "python -m bench.nova_bench", "commit": "abc1234"})
    assert "load average went 0.5-1.5" in text
    assert "Shared and loaded" not in text
