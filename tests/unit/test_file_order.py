"""The order test files run in under xdist (tests/conftest.py): longest first, each file whole."""

from tests.conftest import guessed_seconds, order_files

IDS = ["tests/unit/a.py::t1", "tests/unit/a.py::t2", "tests/functional/f.py::t1",
       "tests/chaos/c.py::t1", "tests/unit/b.py::t1", "tests/functional/f.py::t2"]


def test_without_times_the_tier_guess_puts_chaos_then_functional_first():
    order = [IDS[i] for i in order_files(IDS, {})]
    assert order == ["tests/chaos/c.py::t1", "tests/functional/f.py::t1",
                     "tests/functional/f.py::t2", "tests/unit/a.py::t1", "tests/unit/a.py::t2",
                     "tests/unit/b.py::t1"]


def test_measured_seconds_win_over_the_guess_and_every_test_is_kept_once():
    measured = {"tests/unit/b.py": 500.0, "tests/chaos/c.py": 0.0}
    order = order_files(IDS, measured)
    assert sorted(order) == list(range(len(IDS)))
    assert [IDS[i] for i in order][:3] == ["tests/unit/b.py::t1", "tests/functional/f.py::t1",
                                           "tests/functional/f.py::t2"]
    assert [IDS[i] for i in order][-1] == "tests/chaos/c.py::t1"


def test_ties_keep_the_collected_order_and_bad_cache_values_fall_back_to_the_guess():
    ids = ["tests/unit/z.py::t", "tests/unit/y.py::t", "tests/unit/x.py::t"]
    assert order_files(ids, {"tests/unit/y.py": "soon", "tests/unit/x.py": -3}) == [0, 1, 2]
    assert guessed_seconds("tests/process/p.py", 3) == 6.0


def test_a_files_hint_wins_over_the_guess_but_not_over_its_measured_seconds():
    ids = ["tests/functional/one_long.py::t", "tests/functional/f.py::t1",
           "tests/functional/f.py::t2", "tests/functional/timed.py::t"]
    hinted = {"tests/functional/one_long.py": 60.0, "tests/functional/timed.py": 900.0}
    assert [ids[i] for i in order_files(ids, {"tests/functional/timed.py": 1.0}, hinted)] == [
        "tests/functional/one_long.py::t", "tests/functional/f.py::t1",
        "tests/functional/f.py::t2", "tests/functional/timed.py::t"]
