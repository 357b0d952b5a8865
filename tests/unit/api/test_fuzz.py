"""The compute API fuzzed (issue 23): requests derived from the API's own routes
(:data:`computed.api.app.ROUTES`), JSON schemas (:mod:`computed.api.schemas`) and query
parameters, valid ones and ones bent in every way a client can bend them, run by the thousand
against the application in-process over a real (sqlite) database (conftest.py).

Asserted for every request: no 5xx; every error in the Compute error body (one fault key, its
code the status, a one-line message, no traceback); and a refused request (4xx) changes
nothing: the database's rows, Placement's allocations and the casts to daemons are as before.

``/os-services`` is left out: it reads ZooKeeper, which the in-process application does not
have (tests/functional/test_api.py covers it against a real one); the routes that only read the
daemons' list (``/os-hypervisors``, ``/os-availability-zone``) get a fixed one.
"""

from __future__ import annotations

import json
import re
import string
import time
import urllib.parse
from typing import Any

import pytest
import sqlalchemy as sa
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from computed.api import app, errors, hypervisors, schemas, services
from computed.db import models
from tests.unit.api.conftest import NODES
from tests.unit.api.test_app import ADMIN, GOLD, create, flavor
from tests.unit.api.test_hypervisors import report
from tests.unit.api.test_quota_race import postgres_engine  # noqa: F401 (a fixture)

#: The body schema of each route that takes one (a route missing here gets arbitrary JSON).
BODIES = {
    ('POST', '/flavors'): schemas.FLAVOR_CREATE,
    ('PUT', '/flavors/{flavor_id}'): schemas.FLAVOR_UPDATE,
    ('POST', '/flavors/{flavor_id}/os-extra_specs'): schemas.EXTRA_SPECS_CREATE,
    ('PUT', '/flavors/{flavor_id}/os-extra_specs/{key}'): schemas.EXTRA_SPEC_UPDATE,
    ('POST', '/servers'): schemas.SERVER_CREATE,
    ('PUT', '/os-quota-sets/{project_id}'): schemas.QUOTA_UPDATE,
    ('PUT', '/servers/{server_id}'): schemas.SERVER_UPDATE,
    ('POST', '/servers/{server_id}/metadata'): schemas.SERVER_METADATA,
    ('PUT', '/servers/{server_id}/metadata'): schemas.SERVER_METADATA,
    ('PUT', '/servers/{server_id}/metadata/{key}'): schemas.SERVER_METADATA_ITEM,
    ('PUT', '/servers/{server_id}/tags'): schemas.SERVER_TAGS,
    ('PUT', '/servers/{server_id}/tags/{tag}'): schemas.SERVER_TAG,
}
ACTIONS = [schemas.REBOOT, schemas.OS_STOP, schemas.OS_START, schemas.RESET_STATE]
#: A valid body of each, bent like the generated ones, so that requests reach past validation.
VALID = {
    ('POST', '/flavors'): {'flavor': {'name': 'f', 'ram': 1, 'vcpus': 1, 'disk': 1}},
    ('PUT', '/flavors/{flavor_id}'): {'flavor': {'description': 'd'}},
    ('POST', '/flavors/{flavor_id}/os-extra_specs'): {'extra_specs': {'hw:y': '1'}},
    ('PUT', '/flavors/{flavor_id}/os-extra_specs/{key}'): {'hw:x': '2'},
    ('POST', '/servers'): {'server': {'name': 'web', 'flavorRef': 'gold', 'networks': 'none',
                                      'imageRef': 'http://images.example/a.qcow2'}},
    ('POST', '/servers/{server_id}/action'): {'reboot': {'type': 'HARD'}},
    ('PUT', '/os-quota-sets/{project_id}'): {'quota_set': {'instances': 4, 'cores': 2}},
    ('PUT', '/servers/{server_id}'): {'server': {'name': 'renamed'}},
    ('POST', '/servers/{server_id}/metadata'): {'metadata': {'a': '1'}},
    ('PUT', '/servers/{server_id}/metadata'): {'metadata': {'b': '2'}},
    ('PUT', '/servers/{server_id}/metadata/{key}'): {'meta': {'hw:x': '2'}},
    ('PUT', '/servers/{server_id}/tags'): {'tags': ['a', 'b']},
}
LEFT_OUT = ('/os-services',)
ROUTES = [(method, path) for method, path, _controller in app.ROUTES
          if not path.startswith(LEFT_OUT)]

#: Query parameters the controllers read, and others.
PARAMETERS = ['limit', 'marker', 'sort_dir', 'sort_key', 'minRam', 'minDisk', 'name', 'status',
              'all_tenants', 'project_id', 'tenant_id', 'host', 'flavor', 'image',
              'changes-since', 'deleted', 'is_public', 'with_servers',
              'hypervisor_hostname_pattern', 'start', 'end', 'detailed', 'tags',
              'tags-any', 'not-tags', 'not-tags-any', 'bogus']
TOKENS = [ADMIN, 'alice:p1', 'bob:p2', 'admin:p1', 'x' * 300, 'alice:' + 'p' * 600, '']
VERSIONS = [None, '2.1', '2.26', '2.36', '2.37', '2.47', '2.55', '2.57', '2.61', 'latest', '2.99',
            '3.0', 'x.y', '2.61, compute 2.1']

# Hostile text: NUL and controls, Unicode digits and spaces, long, path tricks, quotes.
HOSTILE = st.sampled_from([
    '\x00', 'a\x00b', '\n', '²', '٣', '\u00a0', '\ufeff', '\ud7ff', '..', '.', 'detail',
    '%', '%00', '%ff', '/', '\\', '"', "'", '{', '[]', '-1', '0', '2147483648', '1e999',
    '9' * 5000, 'x' * 256, 'x' * 70000, 'NaN', 'Infinity', 'null', 'true', ' ', '',
    'CUSTOM_' + 'X' * 300, 'http://169.254.169.254/', 'file:///etc/shadow',
])
TEXT = st.one_of(HOSTILE, st.text(max_size=20),
                 st.text(alphabet=string.ascii_letters + string.digits + '-_:.', max_size=12))
HOSTILE_JSON = st.one_of(
    HOSTILE, st.integers(min_value=-2**70, max_value=2**70), st.floats(allow_nan=False),
    st.booleans(), st.none(), st.just([]), st.just({}))


def from_schema(schema: dict[str, Any], depth: int = 0) -> st.SearchStrategy[Any]:
    """Documents that mostly match ``schema`` (the keywords the API's schemas use)."""
    if 'enum' in schema:
        return st.sampled_from(schema['enum'])
    if 'oneOf' in schema:
        return st.one_of(*(from_schema(option, depth + 1) for option in schema['oneOf']))
    types = schema.get('type', ['object'] if 'properties' in schema else
                       ['string', 'integer', 'object', 'null'])
    types = [types] if isinstance(types, str) else types
    return st.one_of(*(_of_type(kind, schema, depth) for kind in types))


def _text(schema: dict[str, Any]) -> st.SearchStrategy[str]:
    pattern = schema.get('pattern')
    low, high = schema.get('minLength', 0), min(schema.get('maxLength', 40), 40)
    plain = st.text(min_size=low, max_size=high)
    if pattern and not re.search(r'\(\?<[!=]', pattern):
        try:
            return st.one_of(st.from_regex(pattern, fullmatch=True).filter(
                lambda text: low <= len(text) <= schema.get('maxLength', 10**9)), plain)
        except Exception:  # a pattern hypothesis cannot generate from
            return plain
    return plain


def _of_type(kind: str, schema: dict[str, Any], depth: int) -> st.SearchStrategy[Any]:
    if kind == 'string':
        return _text(schema)
    if kind == 'integer':
        return st.integers(schema.get('minimum', -5), schema.get('maximum', 2**31 + 5))
    if kind == 'number':
        return st.floats(allow_nan=False, allow_infinity=False, width=32)
    if kind == 'boolean':
        return st.booleans()
    if kind == 'null':
        return st.none()
    if kind == 'array':
        return st.lists(from_schema(schema.get('items', {'type': 'string'}), depth + 1),
                        max_size=min(schema.get('maxItems', 3), 3))
    if depth > 4:
        return st.just({})
    properties = schema.get('properties', {})
    required = [key for key in schema.get('required', []) if key in properties]
    optional = [key for key in properties if key not in required]
    fixed = st.fixed_dictionaries(
        {key: from_schema(properties[key], depth + 1) for key in required},
        optional={key: from_schema(properties[key], depth + 1) for key in optional})
    patterned = [st.dictionaries(_text({'pattern': pattern, 'maxLength': 40}),
                                 from_schema(value, depth + 1), max_size=3)
                 for pattern, value in schema.get('patternProperties', {}).items()]
    if not patterned:
        return fixed
    return st.builds(lambda a, *more: {**a, **{k: v for m in more for k, v in m.items()}},
                     fixed, *patterned)


@st.composite
def bent(draw, document: Any) -> Any:
    """``document`` bent: a key dropped or added, a value swapped for a hostile one, or left
    as it is."""
    how = draw(st.sampled_from(['keep', 'keep', 'drop', 'add', 'swap', 'swap', 'deep']))
    if not isinstance(document, dict) or not document or how == 'keep':
        return document
    document = dict(document)
    key = draw(st.sampled_from(sorted(document)))
    if how == 'drop':
        del document[key]
    elif how == 'add':
        document[draw(TEXT)] = draw(HOSTILE_JSON)
    elif how == 'deep':
        document[key] = draw(bent(document[key]))
    else:
        document[key] = draw(HOSTILE_JSON)
    return document


def body_for(method: str, path: str) -> st.SearchStrategy[bytes | None]:
    if method in ('GET', 'DELETE'):
        return st.one_of(st.none(), st.none(), st.just(b'{"x": 1}'))
    if path.endswith('/action'):
        documents = st.one_of(*(from_schema(schema) for schema in ACTIONS))
    elif (method, path) in BODIES:
        documents = from_schema(BODIES[(method, path)])
    else:
        documents = st.dictionaries(st.text(max_size=8), HOSTILE_JSON, max_size=3)
    if (method, path) in VALID:
        documents = st.one_of(documents, st.just(VALID[(method, path)]))
    encoded = documents.flatmap(bent).map(lambda doc: json.dumps(doc).encode())
    raw = st.sampled_from([
        b'', b'{', b'null', b'[]', b'"x"', b'{"a": NaN}', b'{"a": -Infinity}', b'\xff\xfe',
        b'[' * 40 + b']' * 40, b'{"flavor": {"name": "x\\u0000"}}', b'\x00'])
    return st.one_of(encoded, encoded, encoded, raw)


QUERY = st.lists(st.tuples(st.sampled_from(PARAMETERS),
                          st.one_of(TEXT, st.sampled_from(['1', '2', 'asc', 'desc', 'name',
                                                           'memory_mb', 'flavorid', 'gold']))),
                 max_size=3)


def requests(known: dict[str, list[str]]) -> st.SearchStrategy[dict[str, Any]]:
    # Strategies are built once: building them per draw took most of the run's time.
    bodies = {route: body_for(*route) for route in ROUTES}
    segments = {name: st.one_of(st.sampled_from(values), TEXT).flatmap(
        lambda value: st.sampled_from([urllib.parse.quote(value, safe=''), '%ff']))
        for name, values in known.items()}

    quoted = TEXT.map(lambda value: urllib.parse.quote(value, safe=''))

    @st.composite
    def one(draw) -> dict[str, Any]:
        method, path = draw(st.sampled_from(ROUTES))
        url = '/v2.1' + re.sub(r'\{(\w+)\}',
                               lambda match: draw(segments.get(match.group(1), quoted)), path)
        where = draw(st.sampled_from(['route'] * 6 + ['project', 'extra']))
        if where == 'project':  # /v2.1/{project_id}/..., as catalogs carry it
            url = url.replace('/v2.1', '/v2.1/' + draw(segments['project_id']), 1)
        elif where == 'extra':  # a path no route has
            url += '/' + draw(quoted)
        if draw(st.booleans()):
            url += '?' + urllib.parse.urlencode(draw(QUERY))
        return {'method': draw(st.sampled_from([method, method, method, 'PATCH'])),
                'url': url, 'body': draw(bodies[(method, path)]),
                'token': draw(st.sampled_from(TOKENS)),
                'version': draw(st.sampled_from(VERSIONS))}
    return one()


def state(api) -> tuple:
    """Everything a refused request must leave as it was."""
    with api.engine.connect() as conn:
        tables = tuple(tuple(sorted(map(tuple, conn.execute(sa.select(table)))))
                       for table in models.Base.metadata.sorted_tables
                       if table.name != 'quota_projects')  # a lock's row, no state
    return (tables, tuple(sorted(api.placement.allocations.items())),
            tuple(api.casts.sent))


def check(api, request: dict[str, Any], counts: dict[int, int]) -> None:
    client = api.as_(request['token'])
    headers = {'OpenStack-API-Version': f'compute {request["version"]}'} \
        if request['version'] else {}
    # GET is read-only by design: its state is not compared (half the run's time).
    writes = request['method'] != 'GET'
    before = state(api) if writes else None
    response = client(request['method'], request['url'], raw=request['body'],
                      headers=dict(headers, **{'Content-Type': 'application/json'}))
    counts[response.status_int] = counts.get(response.status_int, 0) + 1
    # Nova's Ironic driver has no host uptime: 501 is the answer there (as Nova's), no fault.
    uptime = urllib.parse.urlsplit(request['url']).path.endswith('/uptime')
    assert response.status_int < 500 or (uptime and response.status_int == 501), \
        (request, response.text)
    if response.status_int >= 400:
        document = json.loads(response.body)
        (kind, fault), = document.items()
        assert kind == errors.FAULT_NAMES[response.status_int], (request, document)
        assert fault['code'] == response.status_int and fault['message'], (request, document)
        assert '\n' not in fault['message'] and 'Traceback' not in fault['message'], request
        if writes:
            assert state(api) == before, (request, response.text)


@pytest.fixture(params=['sqlite', 'postgresql'])
def engine(request, tmp_path):
    """The database under the API: sqlite, and PostgreSQL when the machine has one (it refuses
    what sqlite stores silently: NUL characters, strings longer than their column)."""
    if request.param == 'sqlite':
        yield request.getfixturevalue('engine')
    else:
        yield request.getfixturevalue('postgres_engine')


def test_thousands_of_requests_no_5xx_compute_errors_nothing_changed_by_refusals(
        api, monkeypatch):
    admin = api.as_(ADMIN)
    monkeypatch.setattr(services, '_services', lambda backends: [
        {'host': 'c1', 'up': True, 'disabled': False, 'reason': None}])
    flavor(api, flavor_id='gold')
    flavor(api, name='other', flavor_id='other', specs=dict(GOLD, **{'hw:x': '1'}))
    server = create(api, 'gold').document['server']['id']
    report(api.engine, NODES[0], 'c1', reserved=1)
    known = {'flavor_id': ['gold', 'other', 'nope'], 'key': list(GOLD) + ['hw:x', 'nope'],
             'server_id': [server, '00000000-0000-0000-0000-000000000000', 'x'],
             'project_id': ['p1', 'p2', 'admin'], 'network': ['public', 'x'],
             'hypervisor_id': [NODES[0], str(hypervisors.legacy_id(NODES[0])), 'x'],
             'pattern': ['1111', 'x'], 'tenant_id': ['p1', 'p2'], 'tag': ['a', 'x,y']}
    admin('PUT', '/v2.1/os-quota-sets/p1', {'quota_set': {'instances': 5}})
    counts: dict[int, int] = {}
    started = time.monotonic()

    @settings(max_examples=750, deadline=None, database=None,
              suppress_health_check=list(HealthCheck))
    @given(batch=st.lists(requests(known), min_size=2, max_size=2))
    def run(batch):
        for request in batch:
            check(api, request, counts)
    run()
    elapsed = time.monotonic() - started
    total = sum(counts.values())
    print(f'{total} requests in {elapsed:.1f} s: {dict(sorted(counts.items()))}')
    assert total >= 1500
    # The run reached past validation: some requests were served, some refused.
    assert sum(n for status, n in counts.items() if status < 300) > 50
    assert sum(n for status, n in counts.items() if status == 400) > 200
