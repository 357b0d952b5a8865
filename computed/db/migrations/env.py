"""Alembic environment for computed's database, configured by :mod:`computed.db`.

Runs online only, on the connection :func:`computed.db.sync` passes in
``config.attributes["connection"]`` (so the engine's sqlite set-up applies and
no alembic.ini is needed), or else on an engine built from the
``sqlalchemy.url`` option (for the ``alembic`` command line during development).
"""

from alembic import context

from computed.db import engine as db_engine
from computed.db import models

config = context.config


def _run(connection) -> None:
    context.configure(connection=connection, target_metadata=models.Base.metadata,
                      compare_type=True)
    with context.begin_transaction():
        context.run_migrations()


def run_migrations_online() -> None:
    connection = config.attributes.get("connection")
    if connection is not None:
        _run(connection)
        return
    engine = db_engine.engine_from_url(config.get_main_option("sqlalchemy.url"))
    try:
        with engine.connect() as connection:
            _run(connection)
    finally:
        engine.dispose()


if context.is_offline_mode():
    raise SystemExit("computed's migrations run online only")
run_migrations_online()
