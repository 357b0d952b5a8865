"""Which image URLs a server may be built from (computed/api/image_urls.py)."""

from __future__ import annotations

import pytest

from computed.api import image_urls


@pytest.mark.parametrize('ref', [
    'http://images.example/ubuntu.qcow2', 'https://images.example:8443/a/b.img?sig=x',
    'http://10.0.0.5/img', 'http://192.168.1.2/img', 'http://[2001:db8::5]/img',
    'http://images.example./img', 'http://a-b.c1.example/img'])
def test_image_servers_urls_are_taken(ref):
    assert image_urls.check(ref) == ref


@pytest.mark.parametrize('ref, why', [
    ('file:///etc/shadow', 'not an image URL (http://, https://)'),
    ('ftp://images.example/x', 'not an image URL'),
    ('http:x', 'no host'), ('http:/x', 'no host'), ('http://', 'no host'),
    ('http://:80/x', 'no host'),
    ('http://169.254.169.254/latest/meta-data/', 'link-local'),
    ('http://[fe80::1]/x', 'link-local'), ('http://[fe80::1%25eth0]/x', 'zone'),
    ('http://[::ffff:169.254.169.254]/x', 'link-local'),
    ('http://127.0.0.1:8774/x', 'loopback'), ('http://[::1]/x', 'loopback'),
    ('http://localhost/x', 'loopback'), ('http://LOCALHOST./x', 'loopback'),
    ('http://a.localhost/x', 'loopback'),
    ('http://0.0.0.0/x', 'unspecified'), ('http://224.0.0.1/x', 'multicast'),
    ('http://2852039166/x', 'form other than the standard'),
    ('http://0xa9fea9fe/x', 'form other than the standard'),
    ('http://0251.0376.0251.0376/x', 'form other than the standard'),
    ('http://169.254.43518/x', 'form other than the standard'),
    ('http://images_example/x', 'not a valid host name'),
    ('http://ex ample/x', 'not a valid host name'),
    ('http://images.example:99999/x', 'not a well-formed URL'),
    ('http://images.example:0/x', 'port is 0'),
    ('http://[::1/x', 'not a well-formed URL'),
    ('http://user:secret@images.example/x', 'credentials'),
    ('http://user@images.example/x', 'credentials'),
    ('http://@images.example/x', 'credentials'),
])
def test_what_a_conductor_must_not_be_sent_is_refused(ref, why):
    with pytest.raises(image_urls.BadImageURL, match=why.replace('(', r'\(')
                       .replace(')', r'\)').replace('.', r'\.')) as raised:
        image_urls.check(ref)
    assert 'secret' not in str(raised.value)


def test_an_operator_may_allow_file_and_some_networks():
    allowed = image_urls.networks(['127.0.0.1', '169.254.0.0/16'])
    assert image_urls.check('file:///var/lib/images/a.img', ('http', 'file')) \
        == 'file:///var/lib/images/a.img'
    with pytest.raises(image_urls.BadImageURL, match='file:///absolute/path'):
        image_urls.check('file://host/a.img', ('file',))
    assert image_urls.check('http://127.0.0.1/a', allowed=allowed)
    assert image_urls.check('http://169.254.1.1/a', allowed=allowed)
    with pytest.raises(image_urls.BadImageURL, match='loopback'):
        image_urls.check('http://127.0.0.2/a', allowed=allowed)
    with pytest.raises(ValueError, match='not a network'):
        image_urls.networks(['10.0.0.0/33'])


def test_credentials_are_never_shown():
    assert image_urls.shown('http://u:p@images.example/x') == 'http://images.example/x'
    assert image_urls.shown('http://images.example/x') == 'http://images.example/x'
    quoted = image_urls.quoted('http://u:secret@images.example/' + 'x' * 300)
    assert 'secret' not in quoted and len(quoted) < 110
