import pytest

from computed import db
from computed.db import api


@pytest.fixture
def engine(tmp_path):
    url = f"sqlite:///{tmp_path / 'computed.sqlite'}"
    db.sync(url)
    engine = api.engine_from_url(url)
    yield engine
    engine.dispose()
