"""Migrations: a fresh sync, a repeated sync, down and up again, no drift from the models, and
upgrades and downgrades of a database holding rows (upgrades.py, also run on PostgreSQL and
MySQL/MariaDB by tests/functional/test_db.py)."""

import pytest
import sqlalchemy as sa
from alembic.autogenerate import compare_metadata
from alembic.runtime.migration import MigrationContext

from computed import db
from computed.db import engine as db_engine
from computed.db import instances as db_instances
from computed.db import models
from tests.unit.db import upgrades


def test_fresh_sync_creates_the_schema(url):
    assert db.current_revision(url) is None
    assert db.sync(url) == db.head_revision()
    assert db.current_revision(url) == db.head_revision()
    engine = db_engine.engine_from_url(url)
    tables = set(sa.inspect(engine).get_table_names())
    engine.dispose()
    assert {"providers", "instances", "alembic_version"} <= tables


def test_resync_is_a_no_op(engine, url):
    db_instances.create_instance(engine, "i-1", "CUSTOM_GOLD", node_uuid="n-1")
    assert db.sync(url) == db.head_revision()
    assert db_instances.get_instance(engine, "i-1").node_uuid == "n-1"


def test_models_match_migrations(engine):
    with engine.connect() as conn:
        context = MigrationContext.configure(conn, opts={"compare_type": True})
        assert compare_metadata(context, models.Base.metadata) == []


def test_downgrade_and_upgrade_again(url):
    db.sync(url)
    upgrades.migrate(url, "base", down=True)
    engine = db_engine.engine_from_url(url)
    assert set(sa.inspect(engine).get_table_names()) == {"alembic_version"}
    engine.dispose()
    assert db.sync(url) == db.head_revision()


def test_migrations_ship_a_single_head():
    from alembic.script import ScriptDirectory
    assert len(ScriptDirectory.from_config(db.alembic_config()).get_heads()) == 1


@pytest.mark.parametrize("check", upgrades.ALL, ids=lambda check: check.__name__[len("check_"):])
def test_migrations_keep_rows(url, check):
    check(url)
