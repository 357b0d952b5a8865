"""Fixtures shared by the unit tests."""

import pytest

from computed import db
from computed.db import api


@pytest.fixture
def engine(tmp_path):
    """A migrated sqlite database of computed's own, in the test's scratch directory."""
    url = f"sqlite:///{tmp_path / 'computed.sqlite'}"
    db.sync(url)
    engine = api.engine_from_url(url)
    yield engine
    engine.dispose()
