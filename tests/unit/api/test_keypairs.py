"""``/os-keypairs`` in-process (issue 24 item 11): user-scoped as Nova's, its microversions
(2.2 type and 201/204, 2.10 an admin's ``user_id``, 2.35 paging), Nova's validation of names
and public keys, the ``key_pairs`` quota; bad input a 400 in the Compute body that changes
nothing."""

from __future__ import annotations

import base64
import hashlib

import pytest
from cryptography.hazmat.primitives import serialization
from cryptography.hazmat.primitives.asymmetric import ed25519

from tests.unit.api.test_app import ADMIN, error_of


def public_key(comment='alice@laptop'):
    key = ed25519.Ed25519PrivateKey.generate().public_key()
    text = key.public_bytes(serialization.Encoding.OpenSSH,
                            serialization.PublicFormat.OpenSSH).decode()
    return f'{text} {comment}'


def md5_fingerprint(key):
    raw = hashlib.md5(base64.b64decode(key.split()[1])).hexdigest()
    return ':'.join(raw[i:i + 2] for i in range(0, len(raw), 2))


@pytest.fixture
def v22(api):
    return api.as_(version='2.2')


def names(client, query=''):
    listed = client('GET', f'/v2.1/os-keypairs{query}')
    assert listed.status_int == 200, listed.text
    return [item['keypair']['name'] for item in listed.document['keypairs']]


def test_import_list_show_delete_as_nova(v22):
    key = public_key()
    made = v22('POST', '/v2.1/os-keypairs', {'keypair': {'name': 'k1', 'public_key': key}})
    assert made.status_int == 201, made.text
    assert made.document['keypair'] == {'name': 'k1', 'public_key': key, 'type': 'ssh',
                                        'fingerprint': md5_fingerprint(key),
                                        'user_id': 'alice'}
    assert names(v22) == ['k1']
    shown = v22('GET', '/v2.1/os-keypairs/k1')
    assert shown.status_int == 200
    doc = shown.document['keypair']
    assert (doc['name'], doc['public_key'], doc['type'], doc['user_id'], doc['deleted']) == \
        ('k1', key, 'ssh', 'alice', False)
    assert {'created_at', 'deleted_at', 'updated_at', 'id', 'fingerprint'} <= set(doc)
    assert v22('DELETE', '/v2.1/os-keypairs/k1').status_int == 204
    assert names(v22) == []
    kind, message = error_of(v22('GET', '/v2.1/os-keypairs/k1'), 404)
    assert 'k1' in message


def test_before_2_2_no_type_200_and_202(api):
    made = api('POST', '/v2.1/os-keypairs', {'keypair': {'name': 'k', 'public_key': public_key()}})
    assert made.status_int == 200 and 'type' not in made.document['keypair']
    assert 'type' not in api('GET', '/v2.1/os-keypairs').document['keypairs'][0]['keypair']
    assert api('DELETE', '/v2.1/os-keypairs/k').status_int == 202


def test_a_generated_key_returns_its_private_key_once(v22):
    made = v22('POST', '/v2.1/os-keypairs', {'keypair': {'name': 'gen'}})
    assert made.status_int == 201, made.text
    doc = made.document['keypair']
    private = serialization.load_pem_private_key(doc['private_key'].encode(), None)
    mine = private.public_key().public_bytes(serialization.Encoding.OpenSSH,
                                             serialization.PublicFormat.OpenSSH).decode()
    assert doc['public_key'].split()[:2] == mine.split()[:2]
    assert doc['fingerprint'] == md5_fingerprint(doc['public_key'])
    assert 'private_key' not in v22('GET', '/v2.1/os-keypairs/gen').document['keypair']


def test_key_pairs_are_the_users_own(v22):
    assert v22('POST', '/v2.1/os-keypairs',
               {'keypair': {'name': 'k', 'public_key': public_key()}}).status_int == 201
    bob = v22.as_('bob:p1')
    assert names(bob) == []
    error_of(bob('GET', '/v2.1/os-keypairs/k'), 404)
    error_of(bob('DELETE', '/v2.1/os-keypairs/k'), 404)
    # Same name, another user: no conflict.
    assert bob('POST', '/v2.1/os-keypairs',
               {'keypair': {'name': 'k', 'public_key': public_key()}}).status_int == 201
    kind, message = error_of(v22('POST', '/v2.1/os-keypairs',
                                 {'keypair': {'name': 'k', 'public_key': public_key()}}), 409)
    assert kind == 'conflict' and "'k'" in message


def test_an_admin_names_the_user_from_2_10(api):
    admin = api.as_(ADMIN, '2.10')
    made = admin('POST', '/v2.1/os-keypairs', {'keypair': {
        'name': 'for-bob', 'public_key': public_key(), 'user_id': 'bob'}})
    assert made.status_int == 201 and made.document['keypair']['user_id'] == 'bob'
    assert names(admin, '?user_id=bob') == ['for-bob']
    assert names(api.as_('bob:p2', '2.10')) == ['for-bob']
    alice = api.as_(version='2.10')
    error_of(alice('GET', '/v2.1/os-keypairs?user_id=bob'), 403)
    error_of(alice('POST', '/v2.1/os-keypairs', {'keypair': {
        'name': 'x', 'public_key': public_key(), 'user_id': 'bob'}}), 403)
    # Before 2.10 the body's user_id is unknown, the query's ignored.
    error_of(api.as_(ADMIN, '2.9')('POST', '/v2.1/os-keypairs', {'keypair': {
        'name': 'x', 'public_key': public_key(), 'user_id': 'bob'}}), 400)
    assert names(api.as_(ADMIN, '2.9'), '?user_id=bob') == []
    assert admin('DELETE', '/v2.1/os-keypairs/for-bob?user_id=bob').status_int == 204


def test_paging_from_2_35(api):
    client = api.as_(version='2.35')
    for name in ('a', 'b', 'c'):
        assert client('POST', '/v2.1/os-keypairs',
                      {'keypair': {'name': name, 'public_key': public_key()}}).status_int == 201
    page = client('GET', '/v2.1/os-keypairs?limit=2')
    assert [k['keypair']['name'] for k in page.document['keypairs']] == ['a', 'b']
    (link,) = page.document['keypairs_links']
    assert link['rel'] == 'next' and 'marker=b' in link['href']
    assert names(client, '?marker=b') == ['c']
    kind, message = error_of(client('GET', '/v2.1/os-keypairs?marker=zz'), 400)
    assert 'zz' in message
    # Before 2.35, no paging.
    assert names(api.as_(version='2.34'), '?limit=1') == ['a', 'b', 'c']


@pytest.mark.parametrize('keypair, field', [
    ({'name': ''}, 'name'), ({'name': ' k'}, 'name'), ({'name': 'k/1'}, 'name'),
    ({'name': 'k' * 256}, 'name'), ({'name': 'k\x00'}, 'name'), ({'name': 'k.1'}, 'name'),
    ({'name': 'k', 'public_key': 'ssh-rsa notbase64!'}, 'public_key'),
    ({'name': 'k', 'public_key': ''}, 'public_key'),
    ({'name': 'k', 'public_key': 'hello'}, 'public_key'),
    ({'name': 'k', 'type': 'rsa'}, 'type'),
    ({'name': 'k', 'type': 'x509', 'public_key': 'not a certificate'}, 'public_key'),
    ({'name': 'k', 'extra': 1}, 'extra'),
])
def test_bad_key_pairs_are_a_400_naming_the_field(v22, keypair, field):
    kind, message = error_of(v22('POST', '/v2.1/os-keypairs', {'keypair': keypair}), 400)
    assert kind == 'badRequest' and field in message and '\n' not in message
    assert names(v22) == []


def test_the_key_pairs_quota(api):
    admin = api.as_(ADMIN)
    assert admin('PUT', '/v2.1/os-quota-sets/p1',
                 {'quota_set': {'key_pairs': 2}}).status_int == 200
    client = api.as_(version='2.2')
    for name in ('a', 'b'):
        assert client('POST', '/v2.1/os-keypairs',
                      {'keypair': {'name': name, 'public_key': public_key()}}).status_int == 201
    kind, message = error_of(client('POST', '/v2.1/os-keypairs',
                                    {'keypair': {'name': 'c', 'public_key': public_key()}}),
                             403)
    assert 'key pairs' in message
    assert names(client) == ['a', 'b']
    # Another user of the project has a count of their own (Nova counts per user).
    assert api.as_('bob:p1', '2.2')('POST', '/v2.1/os-keypairs', {
        'keypair': {'name': 'a', 'public_key': public_key()}}).status_int == 201


def test_x509_key_pairs_generated_and_imported(v22):
    made = v22('POST', '/v2.1/os-keypairs', {'keypair': {'name': 'win', 'type': 'x509'}})
    assert made.status_int == 201, made.text
    doc = made.document['keypair']
    assert doc['type'] == 'x509' and doc['public_key'].startswith('-----BEGIN CERTIFICATE-----')
    assert base64.b64decode(doc['private_key'])  # PKCS#12, as Nova's WinRM certificate
    assert len(doc['fingerprint'].split(':')) == 20  # SHA-1
    again = v22('POST', '/v2.1/os-keypairs', {'keypair': {
        'name': 'win2', 'type': 'x509', 'public_key': doc['public_key']}})
    assert again.status_int == 201 and again.document['keypair']['fingerprint'] == \
        doc['fingerprint']
