"""computed's own database: schema (:mod:`.models`), connection (:mod:`.engine`), queries,
migrations.

The queries are one module per aggregate, each owning the statements on its tables:
:mod:`.providers` (the reports applied to Placement), :mod:`.instances`, :mod:`.flavors`,
:mod:`.quotas` (limits and build reservations), :mod:`.key_pairs`; :mod:`.common` holds what they
share (the base error, the deadlock retry).

Owns bringing a database to the current schema. :func:`sync` upgrades a
database to the newest migration (or to a given one: the expansions only, see
:mod:`computed.upgrade.migrations`) (idempotent: a current database is left as
it is); :func:`current_revision` and :func:`head_revision` say where a
database is and where the code is. Alembic is configured here in code, from
the migrations shipped inside this package: no alembic.ini at run time.
Alembic is imported by these functions only: the daemon and the reporter, which use the query
modules alone, do not carry it (about 12 MB of RSS each).
"""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING

from computed.db import engine as db_engine

if TYPE_CHECKING:
    from alembic.config import Config

MIGRATIONS = Path(__file__).parent / "migrations"


def alembic_config(url: str | None = None) -> Config:
    from alembic.config import Config
    config = Config()
    config.set_main_option("script_location", str(MIGRATIONS))
    if url is not None:
        # ConfigParser interpolation would choke on a '%' of a URL-encoded password.
        config.set_main_option("sqlalchemy.url", url.replace("%", "%%"))
    return config


def head_revision() -> str | None:
    """The newest migration this code ships."""
    from alembic.script import ScriptDirectory
    return ScriptDirectory.from_config(alembic_config()).get_current_head()


def sync(url: str, revision: str = "head") -> str | None:
    """Upgrade the database at ``url`` to ``revision`` (the newest migration by default);
    returns the revision it is at."""
    from alembic import command
    from alembic.runtime.migration import MigrationContext
    engine = db_engine.engine_from_url(url)
    try:
        with engine.connect() as connection:
            config = alembic_config(url)
            config.attributes["connection"] = connection
            command.upgrade(config, revision)
            connection.commit()
            return MigrationContext.configure(connection).get_current_revision()
    finally:
        engine.dispose()


def current_revision(url: str) -> str | None:
    """The migration the database at ``url`` is at; None for an empty database."""
    from alembic.runtime.migration import MigrationContext
    engine = db_engine.engine_from_url(url)
    try:
        with engine.connect() as connection:
            return MigrationContext.configure(connection).get_current_revision()
    finally:
        engine.dispose()
