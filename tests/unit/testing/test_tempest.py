"""computed.testing.tempest without Tempest: the tempest.conf it writes, the two regexes that
split tempest.api.compute, the summary and JUnit file it makes of per-test results."""

import configparser
import re
import xml.etree.ElementTree as ET

from computed.testing import tempest

TARGET = tempest.Target(
    auth_url="http://127.0.0.1:5000/v3", admin_user="admin", admin_password="secret",
    admin_project="admin", flavor_ref="bm", flavor_ref_alt="bm-alt",
    image_ref="http://images.example/a.qcow2", image_ref_alt="http://images.example/b.qcow2",
    min_compute_nodes=2)


def test_conf_points_at_keystone_with_only_compute_available(tmp_path):
    conf = configparser.ConfigParser(interpolation=None)
    conf.read_string(tempest.render_conf(TARGET, tmp_path))
    assert conf["auth"]["use_dynamic_credentials"] == "true"
    assert conf["auth"]["admin_password"] == "secret"
    assert conf["identity"]["uri_v3"] == "http://127.0.0.1:5000/v3"
    assert conf["compute"]["image_ref"] == "http://images.example/a.qcow2"
    assert conf["compute"]["max_microversion"] == "2.61"
    available = conf["service_available"]
    assert available["nova"] == "true"
    assert {available[name] for name in ("glance", "neutron", "cinder")} == {"false"}
    assert "image" not in conf
    features = conf["compute-feature-enabled"]
    assert all(features[name] == "false" for name in tempest.FEATURES_OFF)
    assert features["enable_instance_password"] == "false"


def test_conf_with_glance_makes_it_available_and_its_images_the_refs(tmp_path):
    target = tempest.Target(**{**TARGET.__dict__, "glance": True,
                               "image_ref": "8a1e3b0c-0000-4000-8000-000000000001",
                               "image_ref_alt": "8a1e3b0c-0000-4000-8000-000000000002"})
    conf = configparser.ConfigParser(interpolation=None)
    conf.read_string(tempest.render_conf(target, tmp_path))
    assert conf["service_available"]["glance"] == "true"
    assert conf["service_available"]["neutron"] == "false"
    assert conf["image"]["catalog_type"] == "image"
    assert (conf["compute"]["image_ref"], conf["compute"]["image_ref_alt"]) == (
        target.image_ref, target.image_ref_alt)


def test_claimed_and_unclaimed_split_the_compute_tests():
    ids = ["tempest.api.compute.servers.test_servers.ServersTestJSON.test_x",
           "tempest.api.compute.servers.test_server_rescue.ServerRescueTestJSON.test_x",
           "tempest.api.compute.admin.test_flavors.FlavorsAdminTestJSON.test_x",
           "tempest.api.compute.admin.test_flavors_access.FlavorsAccessTestJSON.test_x",
           "tempest.api.compute.admin.test_flavors_access_negative.FlavorsAccessNegativeTestJSON"
           ".test_x",
           "tempest.api.compute.admin.test_flavors_extra_specs.FlavorsExtraSpecsTestJSON.test_x",
           "tempest.api.compute.flavors.test_flavors.FlavorsV2TestJSON.test_x",
           "tempest.api.compute.test_versions.TestVersions.test_x",
           "tempest.api.compute.keypairs.test_keypairs.KeyPairsV2TestJSON.test_x"]
    claimed = {i for i in ids if re.search(tempest.CLAIMED_REGEX, i)}
    unclaimed = {i for i in ids if re.search(tempest.UNCLAIMED_REGEX, i)}
    assert claimed == {ids[0], ids[2], ids[3], ids[4], ids[5], ids[6], ids[7]}
    assert unclaimed == set(ids) - claimed
    assert all(re.search(tempest.ALL_REGEX, i) for i in ids)


def test_summary_and_junit(tmp_path):
    tests = [{"id": "a.B.test_ok[id-1]", "status": "success", "reason": "", "seconds": 1.0},
             {"id": "a.B.test_bad", "status": "fail", "reason": "BadRequest", "seconds": 0.5},
             {"id": "a.C.test_skip", "status": "skip", "reason": "Neutron is not available",
              "seconds": None},
             {"id": "a.D.test_late", "status": "exists", "reason": "", "seconds": None}]
    assert tempest.summary(tests) == "1 passed, 1 failed, 1 skipped, 1 not run"
    tempest.write_junit(tests, tmp_path / "results.xml")
    suite = ET.parse(tmp_path / "results.xml").getroot()
    assert (suite.get("tests"), suite.get("failures"), suite.get("skipped")) == ("4", "1", "2")
    cases = {case.get("name"): case for case in suite}
    assert cases["test_ok"].get("classname") == "a.B"
    assert cases["test_bad"].find("failure").text == "BadRequest"
    assert cases["test_skip"].find("skipped").get("message") == "Neutron is not available"
    assert cases["test_late"].find("skipped").get("message").startswith("not run")
