"""The local run's demo flavor, decided without services: one node of the demo class, which
the API's own extra-spec rules take as a schedulable bare-metal flavor."""

from computed.instances import flavor_specs
from tools.demo import catalog


def test_the_demo_flavor_asks_for_one_node_of_the_demo_class():
    flavor, specs = catalog.flavor_request("baremetal-demo")
    assert flavor["name"] == catalog.FLAVOR_NAME == "bm.demo"
    assert flavor["os-flavor-access:is_public"] is True
    assert specs["resources:CUSTOM_BAREMETAL_DEMO"] == "1"
    for key, value in specs.items():
        flavor_specs.check_spec(key, value)  # what POST os-extra_specs checks
    request = flavor_specs.placement_request(specs)
    assert request.resource_class == "CUSTOM_BAREMETAL_DEMO"


def test_the_demo_image_is_small():
    assert catalog.IMAGE_NAME == "demo"
    assert 0 < len(catalog.IMAGE_DATA) <= 1024 * 1024
