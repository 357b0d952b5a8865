"""``imageRef`` as a Glance image id (issue 24 item 12), in-process: a fake Glance behind the
API's :class:`computed.api.glance.Glance` interface for the decisions, and the real client
against a stub HTTP server on loopback for what Glance's answers become."""

from __future__ import annotations

import http.server
import json
import threading
import uuid

import pytest
from oslo_config import cfg

from computed import conf as computed_conf
from computed.api import glance, images
from computed.db import instances as db_instances
from tests.unit.api.test_app import ADMIN, GOLD, IMAGE, create, error_of, flavor

# Fixed, not drawn: the id is part of parametrized test ids, which every xdist worker must
# collect alike.
ACTIVE = "f7e5a13b-2bcf-4487-a7c7-5723793b8880"


def image(status='active', visibility='public', owner='p0', **extra):
    return {'id': ACTIVE, 'status': status, 'visibility': visibility, 'owner': owner, **extra}


class FakeGlance:
    """Glance as the API sees it: images by id, members of shared ones, or down."""

    def __init__(self, images_=None, members=(), down=False):
        self.images = dict(images_ or {})
        self.members = set(members)
        self.down = down
        self.asked = []

    def image(self, environ, image_id):
        self.asked.append(image_id)
        if self.down:
            raise glance.GlanceUnavailable('ConnectFailure: Unable to establish connection')
        return self.images.get(image_id)

    def is_member(self, environ, image_id, project_id):
        return (image_id, project_id) in self.members


@pytest.fixture
def gold(api):
    return flavor(api, flavor_id='gold')


def servers(api):
    return api.as_(ADMIN)('GET', '/v2.1/servers?all_tenants=1').document['servers']


def made(api, gold, ref=ACTIVE, token=None):
    response = create(api.as_(token) if token else api, gold, imageRef=ref)
    assert response.status_int == 202, response.text
    return response.document['server']['id']


def test_an_active_public_glance_image_is_recorded_and_shown_as_nova_shows_it(api, gold):
    api.backends.glance = FakeGlance({ACTIVE: image()})
    server_id = made(api, gold, ACTIVE)
    assert db_instances.get_instance(api.engine, server_id).image == ACTIVE  # Ironic's image_source
    shown = api('GET', f'/v2.1/servers/{server_id}').document['server']['image']
    assert shown == {'id': ACTIVE, 'links': [{'rel': 'bookmark',
                                              'href': f'http://localhost/images/{ACTIVE}'}]}
    # Hyphenless, as Nova's is_uuid_like takes it: recorded in the canonical form.
    assert db_instances.get_instance(api.engine, made(api, gold, ACTIVE.replace('-', ''))).image \
        == ACTIVE


@pytest.mark.parametrize('found, message', [
    (None, f'Image {ACTIVE} could not be found.'),
    (image(status='queued'), f'Image {ACTIVE} is not active.'),
    (image(status='deactivated'), f'Image {ACTIVE} is not active.'),
    (image(visibility='private', owner='p2'), f'Image {ACTIVE} could not be found.'),
    (image(visibility='shared', owner='p2'), f'Image {ACTIVE} could not be found.'),
    (image(visibility='private', owner=None), f'Image {ACTIVE} could not be found.')])
def test_a_missing_inactive_or_invisible_image_is_a_400_and_nothing_changes(api, gold, found,
                                                                             message):
    api.backends.glance = FakeGlance({ACTIVE: found} if found else {})
    assert error_of(create(api, gold, imageRef=ACTIVE), 400)[1] == message
    assert servers(api) == []


GIB = 1024 ** 3


@pytest.mark.parametrize('extra, message', [
    ({'min_ram': 1025}, "Flavor's memory is too small for requested image."),
    ({'min_disk': 11}, "Flavor's disk is smaller than the minimum size specified in image "
                       f"metadata. Flavor disk is {10 * GIB} bytes, minimum size is "
                       f"{11 * GIB} bytes."),
    ({'size': 10 * GIB + 1}, "Flavor's disk is too small for requested image. Flavor disk is "
                             f"{10 * GIB} bytes, image is {10 * GIB + 1} bytes.")])
def test_an_image_needing_more_than_the_flavor_is_a_400_and_nothing_changes(api, gold, extra,
                                                                            message):
    # Nova's _validate_flavor_image_nostatus: the gold flavor has 1024 MB and 10 GB.
    api.backends.glance = FakeGlance({ACTIVE: image(**extra)})
    assert error_of(create(api, gold, imageRef=ACTIVE), 400) == ('badRequest', message)
    assert servers(api) == []


def test_an_image_within_the_flavor_or_a_flavor_without_disk_is_taken(api, gold):
    api.backends.glance = FakeGlance({ACTIVE: image(min_ram=1024, min_disk=10, size=10 * GIB)})
    made(api, gold)
    # Glance's null fields (an image still without data) are no requirement.
    api.backends.glance.images[ACTIVE] = image(min_ram=None, min_disk=None, size=None)
    made(api, gold)
    # A flavor of disk 0 is not checked against the image's disk (Nova's "0 means do not
    # check"); its memory still is.
    diskless = api.as_(ADMIN)('POST', '/v2.1/flavors', {'flavor': {
        'name': 'diskless', 'ram': 512, 'vcpus': 1, 'disk': 0}}).document['flavor']['id']
    api.as_(ADMIN)('POST', f'/v2.1/flavors/{diskless}/os-extra_specs', {'extra_specs': GOLD})
    api.backends.glance.images[ACTIVE] = image(min_disk=100, size=100 * GIB)
    made(api, diskless)
    api.backends.glance.images[ACTIVE] = image(min_ram=1024)
    assert error_of(create(api, diskless, imageRef=ACTIVE), 400)[1] == \
        "Flavor's memory is too small for requested image."


def test_the_projects_own_shared_to_it_and_admins_see_private_images(api, gold):
    fake = FakeGlance({ACTIVE: image(visibility='private', owner='p1')})
    api.backends.glance = fake
    made(api, gold, ACTIVE)  # alice:p1 owns it
    assert error_of(create(api.as_('bob:p2'), gold, imageRef=ACTIVE), 400)[0] == 'badRequest'
    made(api, gold, ACTIVE, token=ADMIN)
    fake.images[ACTIVE] = image(visibility='shared', owner='p1')
    fake.members.add((ACTIVE, 'p2'))
    made(api, gold, ACTIVE, token='bob:p2')


def test_glance_down_is_a_503_naming_glance_and_nothing_changes(api, gold):
    api.backends.glance = FakeGlance(down=True)
    kind, message = error_of(create(api, gold, imageRef=ACTIVE), 503)
    assert message.startswith('Glance: ')
    assert servers(api) == []


def test_image_urls_keep_working_and_never_ask_glance(api, gold):
    fake = FakeGlance()
    api.backends.glance = fake
    server_id = made(api, gold, IMAGE)
    assert fake.asked == []
    assert api('GET', f'/v2.1/servers/{server_id}').document['server']['image'] == {
        'id': IMAGE, 'links': [{'rel': 'bookmark', 'href': IMAGE}]}


def test_without_an_image_service_a_uuid_is_refused_as_before(api, gold):
    api.backends.glance = None
    message = error_of(create(api, gold, imageRef=ACTIVE), 400)[1]
    assert 'no Image service' in message
    assert servers(api) == []


@pytest.mark.parametrize('ref, expected', [
    (ACTIVE, ACTIVE), (ACTIVE.upper(), ACTIVE), (ACTIVE.replace('-', ''), ACTIVE),
    ('{' + ACTIVE + '}', None), ('urn:uuid:' + ACTIVE, None), ('demo', None), (IMAGE, None),
    ('', None)])
def test_what_names_a_glance_image(ref, expected):
    assert images.glance_id(ref) == expected


# -- the real client, against a stub Glance ---------------------------------------------------

class StubGlance(http.server.BaseHTTPRequestHandler):
    answers: dict = {}

    def do_GET(self):  # noqa: N802 - the stdlib's name
        status, body = self.answers.get(self.path, (404, {}))
        data = json.dumps(body).encode() if not isinstance(body, bytes) else body
        self.send_response(status)
        self.send_header('Content-Type', 'application/json')
        self.send_header('Content-Length', str(len(data)))
        self.end_headers()
        self.wfile.write(data)

    def log_message(self, *args):
        pass


@pytest.fixture
def stub():
    server = http.server.ThreadingHTTPServer(('127.0.0.1', 0), StubGlance)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    StubGlance.answers = {}
    yield server
    server.shutdown()
    server.server_close()


def glance_conf(tmp_path, text):
    path = tmp_path / 'computed.conf'
    path.write_text('[coordination]\nbackend_url = zookeeper://127.0.0.1:2181\n' + text)
    conf = cfg.ConfigOpts()
    computed_conf.register_opts(conf)
    conf(['--config-file', str(path)])
    return conf


def test_the_client_reads_glance_with_the_services_access_under_noauth2(stub, tmp_path):
    url = f'http://127.0.0.1:{stub.server_address[1]}'
    StubGlance.answers = {f'/v2/images/{ACTIVE}': (200, image()),
                          f'/v2/images/{ACTIVE}/members/p2': (200, {'status': 'accepted'}),
                          '/v2/images/broken': (500, b'oops'), '/v2/images/text': (200, b'<')}
    client = glance.Glance(glance_conf(tmp_path, '[api]\nauth_strategy = noauth2\n[glance]\n'
                                       f'auth_type = none\nendpoint_override = {url}\n'))
    assert client.image({}, ACTIVE) == image()
    assert client.image({}, str(uuid.uuid4())) is None
    assert client.is_member({}, ACTIVE, 'p2') and not client.is_member({}, ACTIVE, 'p3')
    for path in ('broken', 'text'):
        with pytest.raises(glance.GlanceUnavailable):
            client.image({}, path)
    stub.shutdown()
    stub.server_close()
    with pytest.raises(glance.GlanceUnavailable):
        client.image({}, ACTIVE)


def test_noauth2_without_glance_configured_has_no_image_service(tmp_path):
    client = glance.Glance(glance_conf(tmp_path, '[api]\nauth_strategy = noauth2\n'))
    with pytest.raises(glance.NoImageService):
        client.image({}, ACTIVE)


def test_a_ref_that_is_neither_says_so_where_there_is_an_image_service(api, gold):
    api.backends.glance = FakeGlance()
    message = error_of(create(api, gold, imageRef='demo'), 400)[1]
    assert 'neither a Glance image id nor an image URL' in message
    assert 'no Image service' not in message
    assert servers(api) == []
