"""Backend-neutral checks of the migrations on a database that holds rows, run on sqlite by the
unit tests and on PostgreSQL and MySQL/MariaDB by tests/functional/test_db.py.

Each check takes the URL of an empty database of its own. Rows are written the way the code of
their revision wrote them (raw SQL in that revision's column names), then the database is
migrated and read back through computed's database modules (:mod:`computed.db`), the way the
new code reads it.
"""

from __future__ import annotations

import contextlib
import datetime
from collections.abc import Iterator

import pytest
import sqlalchemy as sa
from alembic import command
from alembic.autogenerate import compare_metadata
from alembic.runtime.migration import MigrationContext

from computed import db
from computed.db import engine as db_engine
from computed.db import flavors as db_flavors
from computed.db import instances as db_instances
from computed.db import key_pairs as db_key_pairs
from computed.db import models
from computed.db import providers as db_providers
from tests import database

NODE, OTHER_NODE = "n-1", "n-2"
T0 = datetime.datetime(2026, 5, 1, 12, 0, 0)

# Rows as revision 0001 held them: (uuid, epoch, seq, host, state, deleted); the last one is
# the "never applied" row a reporter inserts only to lock it.
PROVIDERS_0001 = [("p-applied", 70, 3, "c1", '{"reserved": 0}', False),
                  ("p-deleted", 71, 9, "c2", None, True),
                  ("p-locked", -1, -1, "c1", None, True)]
# (uuid, node_uuid, host, epoch, state)
INSTANCES_0001 = [("i-live", NODE, "c1", 5, models.ACTIVE),
                  ("i-deleted", NODE, "c2", 4, models.DELETED),
                  ("i-nodeless", None, "c1", 5, models.ERROR),
                  ("i-unscheduled", None, None, None, models.BUILDING)]


def migrate(url: str, revision: str, *, down: bool = False) -> None:
    """Upgrade (or downgrade) the database at ``url`` to ``revision``, as db.sync runs it."""
    engine = db_engine.engine_from_url(url)
    try:
        with engine.connect() as conn:
            config = db.alembic_config(url)
            config.attributes["connection"] = conn
            (command.downgrade if down else command.upgrade)(config, revision)
            conn.commit()
    finally:
        engine.dispose()


def _fill_0001(engine: sa.Engine) -> None:
    with engine.begin() as conn:
        for uuid, epoch, seq, host, state, deleted in PROVIDERS_0001:
            conn.execute(sa.text(
                "INSERT INTO providers (uuid, epoch, seq, host, state, deleted, updated_at) "
                "VALUES (:uuid, :epoch, :seq, :host, :state, :deleted, :t)"),
                dict(uuid=uuid, epoch=epoch, seq=seq, host=host, state=state, deleted=deleted,
                     t=T0))
        for uuid, node, host, epoch, state in INSTANCES_0001:
            conn.execute(sa.text(
                "INSERT INTO instances (uuid, node_uuid, host, epoch, state, resource_class, "
                "traits, created_at, updated_at, deleted_at) VALUES (:uuid, :node, :host, "
                ":epoch, :state, 'CUSTOM_GOLD', '[]', :t, :t, :deleted_at)"),
                dict(uuid=uuid, node=node, host=host, epoch=epoch, state=str(state), t=T0,
                     deleted_at=T0 if state == models.DELETED else None))


@contextlib.contextmanager
def _database_at_0001(url: str) -> Iterator[sa.Engine]:
    """An engine on the database at ``url``, migrated to 0001 and holding 0001's rows."""
    migrate(url, "0001")
    engine = db_engine.engine_from_url(url)
    try:
        _fill_0001(engine)
        yield engine
    finally:
        engine.dispose()


def _epochs_0001(engine: sa.Engine) -> tuple[dict, dict]:
    """``({provider: (epoch, seq)}, {instance: epoch})`` read with 0001's column names."""
    with engine.connect() as conn:
        providers = {row.uuid: (row.epoch, row.seq) for row in conn.execute(
            sa.text("SELECT uuid, epoch, seq FROM providers"))}
        instances = {row.uuid: row.epoch for row in conn.execute(
            sa.text("SELECT uuid, epoch FROM instances"))}
    return providers, instances


def _no_drift(engine: sa.Engine) -> None:
    with engine.connect() as conn:
        context = MigrationContext.configure(conn, opts={"compare_type": True})
        assert compare_metadata(context, models.Base.metadata) == []


def check_upgrade_from_0001_keeps_rows(url: str) -> None:
    """0001 -> head: every epoch lands in its renamed column, and the rules still hold."""
    with _database_at_0001(url) as engine:
        assert db.sync(url) == db.head_revision()
        _no_drift(engine)

        applied = database.get_provider(engine, "p-applied")
        assert (applied.claim_epoch, applied.seq, applied.host, applied.deleted) == \
            (70, 3, "c1", False)
        deleted = database.get_provider(engine, "p-deleted")
        assert (deleted.claim_epoch, deleted.seq, deleted.deleted) == (71, 9, True)
        assert database.get_provider(engine, "p-locked") is None  # still "never applied"
        assert db_providers.provider_uuids(engine) == {"p-applied"}
        # The ordering reads the renamed column: older refused, newer applied.
        assert not database.apply_report_if_newer(engine, "p-applied", 70, 3, "c1",
                                                  lambda row: "{}")
        assert database.apply_report_if_newer(engine, "p-applied", 70, 4, "c1",
                                              lambda row: "{}")

        expected = {uuid: (node, host, epoch, state)
                    for uuid, node, host, epoch, state in INSTANCES_0001}
        for uuid, (node, host, epoch, state) in expected.items():
            row = db_instances.get_instance(engine, uuid)
            assert (row.node_uuid, row.host, row.member_epoch, row.state) == \
                (node, host, epoch, state)
        assert db_instances.instance_hosts(engine) == {NODE: "c1"}
        # The generated live_node_uuid column and its unique constraint survived the rename.
        with pytest.raises(db_instances.NodeInUse):
            db_instances.create_instance(engine, "i-second", "CUSTOM_GOLD", node_uuid=NODE,
                                         host="c1",
                                         member_epoch=5)
        db_instances.create_instance(engine, "i-other", "CUSTOM_GOLD", node_uuid=OTHER_NODE,
                                     host="c1",
                                     member_epoch=5)
        # Fencing reads the renamed column: the old member epoch is refused, re-homing moves it.
        with pytest.raises(db_instances.InstanceConflict):
            db_instances.set_instance_state(engine, "i-live", models.STOPPED, expect_host="c1",
                                            expect_member_epoch=4)
        assert db_instances.rehome_instance(engine, "i-live", "c1", 5, "c3", 8)
        assert db_instances.set_instance_state(engine, "i-live", models.STOPPED, expect_host="c3",
                                               expect_member_epoch=8).state == models.STOPPED


def check_downgrade_to_0001_keeps_rows(url: str) -> None:
    """head -> 0001 -> head: the epochs go back to 0001's names and return, unchanged."""
    with _database_at_0001(url) as engine:
        before = _epochs_0001(engine)
        assert db.sync(url) == db.head_revision()
        migrate(url, "0001", down=True)
        assert db.current_revision(url) == "0001"
        assert _epochs_0001(engine) == before
        assert db.sync(url) == db.head_revision()
        _no_drift(engine)
        assert database.get_provider(engine, "p-applied").claim_epoch == 70
        assert db_instances.get_instance(engine, "i-live").member_epoch == 5


def _columns(engine: sa.Engine, table: str) -> list[str]:
    return [column["name"] for column in sa.inspect(engine).get_columns(table)]


def check_upgrade_to_0003_records_no_generation(url: str) -> None:
    """0002 -> 0003: rows keep their reports and have no Placement generation yet (the resync
    verifies them once); a report applied afterwards records one, and a repair updates it."""
    with _database_at_0001(url) as engine:
        migrate(url, "0002")
        assert "placement_generation" not in _columns(engine, "providers")
        migrate(url, "0003")
        assert db.current_revision(url) == "0003"
        applied = database.get_provider(engine, "p-applied")
        assert (applied.claim_epoch, applied.seq, applied.state, applied.placement_generation) \
            == (70, 3, '{"reserved": 0}', None)
        assert database.get_provider(engine, "p-deleted").placement_generation is None
        assert [row.uuid for row in db_providers.applied_providers(engine)] == ["p-applied",
                                                                                "p-deleted"]
        assert db_providers.record_placement_generation(engine, "p-applied", 70, 3, lambda row: 12)
        assert database.get_provider(engine, "p-applied").placement_generation == 12
        assert database.apply_report_if_newer(engine, "p-applied", 70, 4, "c1",
                                              lambda row: db_providers.Applied("{}", 13))
        row = database.get_provider(engine, "p-applied")
        assert (row.seq, row.state, row.placement_generation) == (4, "{}", 13)


def check_downgrade_from_0003_keeps_rows(url: str) -> None:
    """0003 -> 0002 -> 0003: the column goes and comes back empty; the reports stay."""
    with _database_at_0001(url) as engine:
        assert db.sync(url) == db.head_revision()
        assert db_providers.record_placement_generation(engine, "p-applied", 70, 3, lambda row: 5)
        before = _epochs_0001_as_0002(engine)
        migrate(url, "0002", down=True)
        assert db.current_revision(url) == "0002"
        assert "placement_generation" not in _columns(engine, "providers")
        assert _epochs_0001_as_0002(engine) == before
        # 0002's code still writes its rows.
        with engine.begin() as conn:
            conn.execute(sa.text("UPDATE providers SET seq = 4 WHERE uuid = 'p-applied'"))
        assert db.sync(url) == db.head_revision()
        _no_drift(engine)
        row = database.get_provider(engine, "p-applied")
        assert (row.claim_epoch, row.seq, row.placement_generation) == (70, 4, None)


def _epochs_0001_as_0002(engine: sa.Engine) -> dict:
    with engine.connect() as conn:
        return {row.uuid: (row.claim_epoch, row.seq, row.state, bool(row.deleted))
                for row in conn.execute(sa.text(
                    "SELECT uuid, claim_epoch, seq, state, deleted FROM providers"))}


def check_upgrade_to_0004_gives_old_instances_the_built_in_project(url: str) -> None:
    """0003 -> 0004: instances made before the compute API belong to the built-in project and
    user; they have no name, metadata nor flavor; the new tables are empty and usable."""
    with _database_at_0001(url) as engine:
        migrate(url, "0003")
        assert "project_id" not in _columns(engine, "instances")
        migrate(url, "0004")
        with engine.connect() as conn:
            owners = {row.uuid: (row.project_id, row.user_id, row.name, row.user_metadata,
                                 row.flavor) for row in conn.execute(sa.text(
                                     "SELECT uuid, project_id, user_id, name, user_metadata, "
                                     "flavor FROM instances"))}
        assert owners == {uuid: ("computed", "computed", None, None, None)
                          for uuid, *_ in INSTANCES_0001}
        # The API reads rows as the models of the head revision have them.
        assert db.sync(url) == db.head_revision()
        for uuid, node, host, _epoch, state in INSTANCES_0001:
            row = db_instances.get_instance(engine, uuid)
            assert (row.node_uuid, row.host, row.state) == (node, host, state)
            assert (row.project_id, row.user_id, row.name, row.metadata, row.flavor) == \
                ("computed", "computed", None, {}, None)
        # Newest first; all four rows share T0, so by uuid, descending.
        assert [r.uuid for r in db_instances.list_instances(engine, project_id="computed")] == \
            ["i-unscheduled", "i-nodeless", "i-live"]
        db_flavors.create_flavor(engine, "f-1", "bm.gold", vcpus=0, ram=0, disk=0,
                                 extra_specs={"resources:CUSTOM_GOLD": "1"})
        assert db_flavors.get_flavor(engine, "f-1").extra_specs == {"resources:CUSTOM_GOLD": "1"}


def check_downgrade_from_0004_keeps_instances(url: str) -> None:
    """0004 -> 0003 -> head: the API's columns and tables go; the instances stay."""
    with _database_at_0001(url) as engine:
        assert db.sync(url) == db.head_revision()
        db_flavors.create_flavor(engine, "f-1", "bm.gold", vcpus=0, ram=0, disk=0,
                                 extra_specs={"trait:CUSTOM_X": "required"})
        migrate(url, "0003", down=True)
        assert "project_id" not in _columns(engine, "instances")
        assert "flavors" not in sa.inspect(engine).get_table_names()
        with engine.connect() as conn:
            assert {row.uuid for row in conn.execute(sa.text("SELECT uuid FROM instances"))} \
                == {uuid for uuid, *_ in INSTANCES_0001}
        assert db.sync(url) == db.head_revision()
        _no_drift(engine)
        assert db_instances.get_instance(engine, "i-live").project_id == "computed"


def check_upgrade_to_0006_keeps_instances_without_details(url: str) -> None:
    """0005 -> 0006: instances made before have no description, access addresses nor
    reservation id; those of the compute API are written and found; 0006 -> 0005 drops them
    and keeps the instances."""
    with _database_at_0001(url) as engine:
        migrate(url, "0005")
        assert "description" not in _columns(engine, "instances")
        assert db.sync(url) == db.head_revision()
        row = db_instances.get_instance(engine, "i-live")
        assert (row.description, row.access_ip_v4, row.access_ip_v6, row.reservation_id) == \
            (None, None, None, None)
        db_instances.set_instance_details(engine, "i-live", description="d",
                                          access_ip_v4="192.0.2.1",
                                          reservation_id="r-1")
        assert [r.uuid for r in db_instances.list_instances(engine,
                                                            reservation_id="r-1")] == ["i-live"]
        migrate(url, "0005", down=True)
        assert "reservation_id" not in _columns(engine, "instances")
        with engine.connect() as conn:
            assert {row.uuid for row in conn.execute(sa.text("SELECT uuid FROM instances"))} \
                == {uuid for uuid, *_ in INSTANCES_0001}
        assert db.sync(url) == db.head_revision()
        _no_drift(engine)


def check_upgrade_to_0007_leaves_old_instances_without_a_config_drive(url: str) -> None:
    """0006 -> 0007: instances made before have no key pair, user data nor config drive (so
    they deploy without one); key pairs can be recorded; 0007 -> 0006 drops both and keeps the
    instances."""
    from computed.instances import configdrive
    with _database_at_0001(url) as engine:
        migrate(url, "0006")
        assert "key_name" not in _columns(engine, "instances")
        assert db.sync(url) == db.head_revision()
        row = db_instances.get_instance(engine, "i-live")
        assert (row.key_name, row.key_data, row.user_data, row.config_drive) == \
            (None, None, None, None)
        assert configdrive.build(row) is None
        db_key_pairs.create_key_pair(engine, "u1", "k1", "ssh", "ssh-ed25519 AAAA", "aa:bb")
        assert [k.name for k in db_key_pairs.list_key_pairs(engine, "u1")] == ["k1"]
        migrate(url, "0006", down=True)
        assert "key_name" not in _columns(engine, "instances")
        assert "key_pairs" not in sa.inspect(engine).get_table_names()
        with engine.connect() as conn:
            assert {row.uuid for row in conn.execute(sa.text("SELECT uuid FROM instances"))} \
                == {uuid for uuid, *_ in INSTANCES_0001}
        assert db.sync(url) == db.head_revision()
        _no_drift(engine)


ALL = [check_upgrade_from_0001_keeps_rows, check_downgrade_to_0001_keeps_rows,
       check_upgrade_to_0003_records_no_generation, check_downgrade_from_0003_keeps_rows,
       check_upgrade_to_0004_gives_old_instances_the_built_in_project,
       check_downgrade_from_0004_keeps_instances,
       check_upgrade_to_0006_keeps_instances_without_details,
       check_upgrade_to_0007_leaves_old_instances_without_a_config_drive]
