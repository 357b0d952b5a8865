"""Online data migrations (computed.upgrade.data_migrations): the loop's batches, budget and exit
status with migrations of the test's own; the real ones and ``computed-manage db
online_data_migrations`` on sqlite (tests/functional/test_online_migrations.py runs them on
PostgreSQL and MariaDB)."""

from __future__ import annotations

import pytest

from computed.upgrade import data_migrations
from computed.upgrade.data_migrations import EXIT_DONE, EXIT_ERRORS, EXIT_MORE
from tests.unit.upgrade import online


class Rows:
    """A migration of the test's own: ``left`` rows to rewrite, each call at most ``count``."""

    def __init__(self, left: int, stuck: int = 0):
        self.left = left
        self.stuck = stuck  # rows it finds and cannot rewrite
        self.calls: list[int] = []

    def __call__(self, count: int) -> tuple[int, int]:
        self.calls.append(count)
        done = min(count, self.left)
        self.left -= done
        return min(count, done + self.stuck), done


def test_batches_until_a_pass_rewrites_nothing():
    a, b = Rows(120), Rows(7)
    outcome = data_migrations.run({'a': a, 'b': b}, batch=50)
    assert outcome.exit_status == EXIT_DONE and outcome.errors == {}
    assert outcome.totals == {'a': [120, 120], 'b': [7, 7]}
    assert a.calls == [50, 50, 50, 50] and b.calls == [50, 50, 50, 50]
    assert a.left == b.left == 0


def test_max_count_stops_and_says_run_again_and_again_resumes():
    a, b = Rows(30), Rows(30)
    first = data_migrations.run({'a': a, 'b': b}, max_count=40, batch=25)
    assert first.exit_status == EXIT_MORE
    assert first.totals == {'a': [25, 25], 'b': [15, 15]}  # never more than the budget
    second = data_migrations.run({'a': a, 'b': b}, max_count=40, batch=25)
    # What was left fit in the budget: the run saw a pass rewrite nothing, so it is done.
    assert second.totals == {'a': [5, 5], 'b': [15, 15]} and second.exit_status == EXIT_DONE
    third = data_migrations.run({'a': a, 'b': b}, max_count=40, batch=25)
    assert third.totals == {'a': [0, 0], 'b': [0, 0]} and third.exit_status == EXIT_DONE


def test_rows_found_that_cannot_be_rewritten_end_the_run():
    # A pass that rewrites nothing ends it, whatever it found: no loop forever.
    stuck = Rows(0, stuck=3)
    outcome = data_migrations.run({'stuck': stuck})
    assert outcome.exit_status == EXIT_DONE and outcome.totals == {'stuck': [3, 0]}
    assert len(stuck.calls) == 1


def test_a_failing_migration_is_named_and_the_others_go_on():
    def broken(count):
        raise RuntimeError('the table\nis gone')

    good = Rows(60)
    outcome = data_migrations.run({'broken': broken, 'good': good}, batch=50)
    assert outcome.errors == {'broken': 'RuntimeError: the table is gone'}
    assert outcome.totals['good'] == [60, 60] and outcome.exit_status == EXIT_ERRORS
    # With a budget reached, the run says "more" even though one failed (nova-manage's).
    limited = data_migrations.run({'broken': broken, 'good': Rows(60)}, max_count=10)
    assert limited.exit_status == EXIT_MORE


@pytest.mark.parametrize('max_count, batch', [(0, 50), (-1, 50), (None, 0)])
def test_bad_bounds_are_refused(max_count, batch):
    with pytest.raises(ValueError, match='at least 1'):
        data_migrations.run({}, max_count=max_count, batch=batch)


def test_the_real_migrations_on_sqlite(tmp_path):
    online.check_real_migrations(f'sqlite:///{tmp_path / "computed.sqlite"}')


manage = online.manage


def test_the_command_on_sqlite(tmp_path):
    url = f'sqlite:///{tmp_path / "computed.sqlite"}'
    online.check_command(url, lambda *args: manage(tmp_path, url, *args))


@pytest.mark.parametrize('args, said', [
    (('--max-count', '0'), "'0' is not a whole number of at least 1"),
    (('--max-count', 'x'), "'x' is not a whole number of at least 1"),
])
def test_bad_max_count_is_one_line(tmp_path, args, said):
    result = manage(tmp_path, f'sqlite:///{tmp_path / "c.sqlite"}', 'online_data_migrations',
                    *args)
    assert result.returncode == 2 and said in result.stderr
    assert 'Traceback' not in result.stderr


def test_a_database_behind_is_refused_in_one_line(tmp_path):
    result = manage(tmp_path, f'sqlite:///{tmp_path / "empty.sqlite"}',
                    'online_data_migrations')
    assert result.returncode == EXIT_ERRORS
    assert result.stderr.splitlines() == [
        f"computed-manage: error: database sqlite:///{tmp_path}/empty.sqlite is at revision "
        f"none, the migrations need {online.expand_head()}: run 'computed-manage db sync' "
        f"first"]



def test_an_unreachable_database_is_an_error_not_run_again(tmp_path):
    # 1 would tell a loop "more to do"; a database that cannot be read is 2, in one line.
    result = manage(tmp_path, 'postgresql+psycopg2://computed:s3cret@127.0.0.1:1/computed',
                    'online_data_migrations')
    assert result.returncode == EXIT_ERRORS
    [line] = result.stderr.splitlines()
    assert line.startswith('computed-manage: error: cannot read database '
                           'postgresql+psycopg2://computed:***@127.0.0.1:1/computed: ')
    assert 's3cret' not in line
