"""A fresh, synced sqlite database file per test."""

import pytest

from computed import db
from computed.db import api


@pytest.fixture
def url(tmp_path):
    return f"sqlite:///{tmp_path / 'computed.sqlite'}"


@pytest.fixture
def engine(url):
    db.sync(url)
    engine = api.engine_from_url(url)
    yield engine
    engine.dispose()
