"""Reports of one provider from several processes at once, on sqlite (functional tests run the
same on PostgreSQL and MySQL)."""

from tests.unit.db import hammer


def test_processes_apply_in_order(engine, url, tmp_path):
    hammer.verify(hammer.run(url, "p-hammer", tmp_path, processes=3, per_epoch=20))
