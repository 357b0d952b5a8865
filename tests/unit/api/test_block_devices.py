"""``block_device_mapping_v2`` on ``POST /servers``: the image mapping the stock CLI sends with
``--image`` is taken (the server is built from ``imageRef``), anything bare metal cannot honour
is a 400 naming the field, and nothing is made."""

from __future__ import annotations

import pytest

from computed.api import block_devices
from computed.db import instances as db_instances
from tests.unit.api.test_app import create, error_of
from tests.unit.api.test_server_images import ACTIVE, FakeGlance, gold, image, servers  # noqa: F401

#: What python-openstackclient 10.5's ``server create --image`` sends beside imageRef.
CLI_MAPPING = {'uuid': ACTIVE, 'boot_index': 0, 'source_type': 'image',
               'destination_type': 'local', 'delete_on_termination': True}


@pytest.mark.parametrize('mappings', [
    [], [CLI_MAPPING], [dict(CLI_MAPPING, boot_index='0')],
    [{'uuid': ACTIVE.replace('-', ''), 'boot_index': 0, 'source_type': 'image'}],
    [{'image_id': ACTIVE, 'boot_index': 0, 'source_type': 'image', 'device_name': 'vda'}]])
def test_the_image_mapping_of_image_ref_is_taken(mappings):
    block_devices.check(mappings, ACTIVE)


@pytest.mark.parametrize('mappings, words', [
    ([CLI_MAPPING, dict(CLI_MAPPING, boot_index=1)], '2 mappings'),
    ([dict(CLI_MAPPING, destination_type='volume', volume_size=10)],
     "source_type 'image', destination_type 'volume' is not supported"),
    ([{'source_type': 'blank', 'destination_type': 'local', 'boot_index': -1}],
     "source_type 'blank'"),
    ([{'source_type': 'volume', 'uuid': ACTIVE, 'boot_index': 0}], "source_type 'volume'"),
    ([dict(CLI_MAPPING, boot_index=1)], 'boot_index 0, not 1'),
    ([dict(CLI_MAPPING, boot_index=None)], 'boot_index 0, not None'),
    ([dict(CLI_MAPPING, uuid='0b7f7f4e-d6a4-4a11-a0ad-1a8e1c7e3c0f')],
     'they must be the same Glance image'),
    ([{'boot_index': 0, 'source_type': 'image'}], "names image None"),
])
def test_anything_else_is_refused_with_its_reason(mappings, words):
    with pytest.raises(block_devices.BadMapping, match='^block_device_mapping_v2: ') as refused:
        block_devices.check(mappings, ACTIVE)
    assert words in str(refused.value)
    assert '\n' not in str(refused.value)


def test_an_image_url_takes_no_image_mapping():
    with pytest.raises(block_devices.BadMapping, match='same Glance image'):
        block_devices.check([CLI_MAPPING], 'http://127.0.0.1/images/demo.qcow2')


def test_the_clis_create_builds_from_image_ref(api, gold):  # noqa: F811
    api.backends.glance = FakeGlance({ACTIVE: image()})
    response = create(api, gold, imageRef=ACTIVE, block_device_mapping_v2=[CLI_MAPPING])
    assert response.status_int == 202, response.text
    server_id = response.document['server']['id']
    assert db_instances.get_instance(api.engine, server_id).image == ACTIVE


@pytest.mark.parametrize('mappings, words', [
    ([dict(CLI_MAPPING, destination_type='volume')], 'no Block Storage service'),
    ([dict(CLI_MAPPING, source_type='disk')], "'disk' is not one of"),
    ([dict(CLI_MAPPING, boot_index='first')], 'boot_index'),
    ([dict(CLI_MAPPING, colour='blue')], "'colour' was unexpected"),
    ('not a list', 'block_device_mapping_v2'),
])
def test_a_bad_mapping_is_a_400_and_nothing_is_made(api, gold, mappings, words):  # noqa: F811
    api.backends.glance = FakeGlance({ACTIVE: image()})
    kind, message = error_of(create(api, gold, imageRef=ACTIVE,
                                    block_device_mapping_v2=mappings), 400)
    assert kind == 'badRequest' and words in message, message
    assert servers(api) == []
    assert api.backends.glance.asked == []  # refused before Glance was asked
