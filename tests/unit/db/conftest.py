"""A fresh, synced sqlite database file per test (a copy of the session's migrated one,
tests/unit/conftest.py's ``migrated_sqlite``)."""

from pathlib import Path

import pytest

from computed.db import engine as db_engine
from tests.database import copy_sqlite


@pytest.fixture
def url(tmp_path):
    return f"sqlite:///{tmp_path / 'computed.sqlite'}"


@pytest.fixture
def engine(url, migrated_sqlite):
    copy_sqlite(migrated_sqlite, Path(url.removeprefix("sqlite:///")))
    engine = db_engine.engine_from_url(url)
    yield engine
    engine.dispose()
