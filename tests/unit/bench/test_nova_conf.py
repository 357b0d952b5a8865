"""computed.testing.nova renders the nova.conf of the side-by-side benchmark: the Ironic driver,
the databases and the broker, Placement and Ironic without Keystone."""

import configparser
from pathlib import Path

from computed.testing import nova


def parsed(**extra) -> configparser.ConfigParser:
    text = nova.render_conf(host="compute1", transport_url="rabbit://guest:guest@127.0.0.1:5672/v",
                            api_database="postgresql+psycopg2://postgres@127.0.0.1:5432/api",
                            database="postgresql+psycopg2://postgres@127.0.0.1:5432/cell1",
                            placement_url="http://127.0.0.1:8778",
                            ironic_url="http://127.0.0.1:6385", state_path=Path("/w/state"),
                            **extra)
    # DEFAULT as a section of its own: its options not copied into every other section
    conf = configparser.ConfigParser(interpolation=None, default_section="-")
    conf.read_string(text)
    return conf


def test_the_ironic_driver_with_its_databases_and_broker():
    conf = parsed()
    assert conf["DEFAULT"]["compute_driver"] == "ironic.IronicDriver"
    assert conf["DEFAULT"]["host"] == "compute1"
    assert conf["DEFAULT"]["transport_url"] == "rabbit://guest:guest@127.0.0.1:5672/v"
    assert conf["api_database"]["connection"].endswith("/api")
    assert conf["database"]["connection"].endswith("/cell1")
    assert conf["oslo_concurrency"]["lock_path"] == "/w/state/lock"


def test_placement_and_ironic_are_reached_without_keystone():
    conf = parsed()
    assert dict(conf["placement"]) == {"auth_type": "admin_token", "token": "admin",
                                       "endpoint": "http://127.0.0.1:8778",
                                       "endpoint_override": "http://127.0.0.1:8778"}
    assert dict(conf["ironic"]) == {"auth_type": "none",
                                    "endpoint_override": "http://127.0.0.1:6385"}


def test_extra_options_add_groups_and_override_defaults():
    conf = parsed(extra={"DEFAULT": {"debug": "true"}, "conductor": {"workers": "1"}})
    assert conf["DEFAULT"]["debug"] == "true"
    assert conf["conductor"]["workers"] == "1"
    assert conf["DEFAULT"]["compute_driver"] == "ironic.IronicDriver"


def test_a_compute_gets_no_database_urls():
    text = nova.render_conf(host="compute1", transport_url="rabbit://", api_database="",
                            database="", placement_url="http://p", ironic_url="http://i",
                            state_path=Path("/w/state"))
    assert "[database]" not in text and "[api_database]" not in text
    assert "compute_driver = ironic.IronicDriver" in text
