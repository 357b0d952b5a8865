"""Reports of one provider from several processes at once, on sqlite (functional tests run the
same on PostgreSQL and MySQL): tests/unit/db/hammer.py spawns the processes."""

from computed import db
from tests.unit.db import hammer


def test_processes_apply_in_order(tmp_path):
    url = f"sqlite:///{tmp_path / 'computed.sqlite'}"
    db.sync(url)
    hammer.verify(hammer.run(url, "p-hammer", tmp_path, processes=3, per_epoch=20))
