"""The compute API's tables through computed.db.flavors, quotas and instances: flavors with
extra specs, quota limits, and instances listed per project with paging and filters."""

import datetime

import pytest
import sqlalchemy as sa

from computed.db import flavors as db_flavors
from computed.db import instances as db_instances
from computed.db import models
from computed.db import quotas as db_quotas


def test_flavor_lifecycle(engine):
    made = db_flavors.create_flavor(engine, "f-1", "bm.gold", vcpus=0, ram=0, disk=0,
                                    extra_specs={"resources:CUSTOM_GOLD": "1"})
    assert made.extra_specs == {"resources:CUSTOM_GOLD": "1"} and made.is_public
    with pytest.raises(db_flavors.FlavorExists):
        db_flavors.create_flavor(engine, "f-2", "bm.gold", vcpus=0, ram=0, disk=0)
    with pytest.raises(db_flavors.FlavorExists):
        db_flavors.create_flavor(engine, "f-1", "other", vcpus=0, ram=0, disk=0)
    assert db_flavors.set_extra_specs(engine, "f-1", {"trait:CUSTOM_X": "required",
                                                      "resources:CUSTOM_GOLD": "2"}) == \
        {"resources:CUSTOM_GOLD": "2", "trait:CUSTOM_X": "required"}
    assert db_flavors.delete_extra_spec(engine, "f-1", "trait:CUSTOM_X")
    assert not db_flavors.delete_extra_spec(engine, "f-1", "trait:CUSTOM_X")
    db_flavors.create_flavor(engine, "f-2", "bm.silver", vcpus=1, ram=2, disk=3)
    assert [f.id for f in db_flavors.list_flavors(engine)] == ["f-1", "f-2"]
    assert [f.id for f in db_flavors.list_flavors(engine, marker="f-1")] == ["f-2"]
    with pytest.raises(db_flavors.FlavorNotFound):
        db_flavors.list_flavors(engine, marker="nope")
    db_flavors.delete_flavor(engine, "f-1")
    with pytest.raises(db_flavors.FlavorNotFound):
        db_flavors.get_flavor(engine, "f-1")
    with pytest.raises(db_flavors.FlavorNotFound):
        db_flavors.delete_flavor(engine, "f-1")
    with engine.connect() as conn:  # its extra specs went with it
        assert conn.execute(sa.text("SELECT count(*) FROM flavor_extra_specs")).scalar() == 0


def test_quota_limits(engine):
    assert db_quotas.quota_limits(engine, "p1") == {}
    assert db_quotas.set_quota_limits(engine, "p1", {"instances": 3}) == {"instances": 3}
    assert db_quotas.set_quota_limits(engine, "p1", {"instances": 4, "CUSTOM_GOLD": 1}) == \
        {"instances": 4, "CUSTOM_GOLD": 1}
    assert db_quotas.quota_limits(engine, "p2") == {}
    db_quotas.delete_quota_limits(engine, "p1")
    assert db_quotas.quota_limits(engine, "p1") == {}


def test_instances_per_project_newest_first_with_paging(engine):
    for i in range(5):
        db_instances.create_instance(engine, f"i-{i}", "CUSTOM_GOLD", project_id="p1", user_id="u",
                                     name=f"web-{i}", metadata={"k": "v"}, flavor={"id": "f-1"})
        with engine.begin() as conn:  # distinct creation times, oldest first
            table = models.Instance.__table__
            conn.execute(sa.update(table).where(table.c.uuid == f"i-{i}").values(
                created_at=datetime.datetime(2026, 1, 1, 0, i)))
    db_instances.create_instance(engine, "other", "CUSTOM_GOLD", project_id="p2", user_id="u")
    db_instances.set_instance_state(engine, "i-4", models.DELETED)
    assert [r.uuid for r in db_instances.list_instances(engine, project_id="p1")] == \
        ["i-3", "i-2", "i-1", "i-0"]
    page = db_instances.list_instances(engine, project_id="p1", limit=2)
    assert [r.uuid for r in page] == ["i-3", "i-2"]
    assert [r.uuid for r in db_instances.list_instances(engine, project_id="p1", marker="i-2")] == \
        ["i-1", "i-0"]
    with pytest.raises(db_instances.InstanceNotFound):  # another project's instance is no marker
        db_instances.list_instances(engine, project_id="p1", marker="other")
    assert len(db_instances.list_instances(engine)) == 5
    assert [r.uuid for r in db_instances.list_instances(engine, project_id="p1",
                                                        name="b-1")] == ["i-1"]
    assert db_instances.list_instances(engine, project_id="p1", name="%") == []
    assert [r.uuid for r in db_instances.list_instances(engine, project_id="p1",
                                                        include_deleted=True, limit=1)] == ["i-4"]
    assert db_instances.count_live_instances(engine, "p1") == 4
    row = db_instances.get_instance(engine, "i-0")
    assert (row.name, row.metadata, row.flavor, row.user_id) == \
        ("web-0", {"k": "v"}, {"id": "f-1"}, "u")
