"""A fresh, synced sqlite database file per test."""

import pytest

from computed import db
from computed.db import engine as db_engine


@pytest.fixture
def url(tmp_path):
    return f"sqlite:///{tmp_path / 'computed.sqlite'}"


@pytest.fixture
def engine(url):
    db.sync(url)
    engine = db_engine.engine_from_url(url)
    yield engine
    engine.dispose()
