"""``computed-manage db sync`` and this release's contractions (computed.upgrade.migrations), on
sqlite: expansions first, contractions only with --contract, everything for an empty database."""

from __future__ import annotations

import dataclasses

from computed import db
from computed.upgrade import migrations
from tests.unit.upgrade.online import manage


def test_db_sync_stops_before_a_contraction_until_told(tmp_path, monkeypatch):
    # As if 0008 were a contraction of this release: sync applies up to 0007 on a database of
    # the previous release, and 0008 only with --contract.
    real = migrations.read_revisions()
    marked = [dataclasses.replace(r, contraction=r.revision == '0008') for r in real]
    monkeypatch.setattr(migrations, 'read_revisions', lambda directory=None: marked)
    url = f'sqlite:///{tmp_path / "computed.sqlite"}'
    db.sync(url, '0004')  # the previous release's database
    expanded = manage(tmp_path, url, 'sync')
    assert expanded.returncode == 0, expanded
    assert 'at revision 0007, every expansion applied; contraction(s) 0008 wait until no ' \
           "service of 0.1.0 is live: then run 'computed-manage db sync --contract'" in \
        expanded.stdout
    assert db.current_revision(url) == '0007'
    assert manage(tmp_path, url, 'sync').returncode == 0  # again: still waits
    assert db.current_revision(url) == '0007'
    contracted = manage(tmp_path, url, 'sync', '--contract')
    assert contracted.returncode == 0 and 'at revision 0008 (head)' in contracted.stdout
    # An empty database gets everything at once (no old process can be using it).
    fresh = f'sqlite:///{tmp_path / "fresh.sqlite"}'
    assert manage(tmp_path, fresh, 'sync').returncode == 0
    assert db.current_revision(fresh) == db.head_revision()
