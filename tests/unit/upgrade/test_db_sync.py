"""``computed-manage db sync`` and this release's contractions (computed.upgrade.migrations), on
sqlite: expansions first, contractions only with --contract, everything for an empty database."""

from __future__ import annotations

import dataclasses

from computed import db
from computed.upgrade import migrations
from tests.unit.upgrade.online import manage


def test_db_sync_stops_before_a_contraction_until_told(tmp_path, monkeypatch):
    # As if the head were a contraction of this release: sync applies up to the revision
    # before it on a database of the previous release, and the head only with --contract.
    real = migrations.read_revisions()
    head, before = real[-1].revision, real[-2].revision
    marked = [dataclasses.replace(r, contraction=r.revision == head) for r in real]
    monkeypatch.setattr(migrations, 'read_revisions', lambda directory=None: marked)
    url = f'sqlite:///{tmp_path / "computed.sqlite"}'
    db.sync(url, '0004')  # the previous release's database
    expanded = manage(tmp_path, url, 'sync')
    assert expanded.returncode == 0, expanded
    assert f'at revision {before}, every expansion applied; contraction(s) {head} wait until ' \
           "no service of 0.1.0 is live: then run 'computed-manage db sync --contract'" in \
        expanded.stdout
    assert db.current_revision(url) == before
    assert manage(tmp_path, url, 'sync').returncode == 0  # again: still waits
    assert db.current_revision(url) == before
    contracted = manage(tmp_path, url, 'sync', '--contract')
    assert contracted.returncode == 0 and f'at revision {head} (head)' in contracted.stdout
    # An empty database gets everything at once (no old process can be using it).
    fresh = f'sqlite:///{tmp_path / "fresh.sqlite"}'
    assert manage(tmp_path, fresh, 'sync').returncode == 0
    assert db.current_revision(fresh) == db.head_revision()
