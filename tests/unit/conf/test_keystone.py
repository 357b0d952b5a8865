"""Sessions and adapters from keystoneauth sections, with no network."""

import os
import textwrap

import pytest
from keystoneauth1 import adapter as ks_adapter
from oslo_config import cfg

from computed.conf import loader
from computed.conf.errors import ConfigError
from computed.runtime import keystone

BASE = """
[DEFAULT]
transport_url = fake://

[coordination]
backend_url = file:///tmp/unused
"""


def conf_from(tmp_path, text):
    path = tmp_path / 'computed.conf'
    path.write_text(BASE + textwrap.dedent(text))
    conf = cfg.ConfigOpts()
    loader.register_all(conf)
    loader.parse(conf, ['--config-file', str(path)], 'computed')
    loader.validate(conf)
    return conf


def test_admin_token_adapter(tmp_path):
    conf = conf_from(tmp_path, """
        [placement]
        auth_type = admin_token
        endpoint = http://127.0.0.1:8778
        token = test-token
        """)
    adapter = keystone.load_adapter(conf, 'placement')
    assert isinstance(adapter, ks_adapter.Adapter)
    assert adapter.service_type == 'placement'
    assert adapter.get_endpoint() == 'http://127.0.0.1:8778'
    assert adapter.get_token() == 'test-token'


def test_none_with_endpoint_override_adapter(tmp_path):
    conf = conf_from(tmp_path, """
        [ironic]
        auth_type = none
        endpoint_override = http://127.0.0.1:6385
        timeout = 7.5
        """)
    adapter = keystone.load_adapter(conf, 'ironic')
    assert adapter.service_type == 'baremetal'
    assert adapter.get_endpoint() == 'http://127.0.0.1:6385'
    assert adapter.session.timeout == 7.5


def test_session_is_usable_by_openstacksdk(tmp_path):
    from openstack import connection

    conf = conf_from(tmp_path, """
        [ironic]
        auth_type = none
        endpoint_override = http://127.0.0.1:6385
        """)
    session = keystone.load_session(conf, 'ironic')
    conn = connection.Connection(
        session=session,
        baremetal_endpoint_override=conf.ironic.endpoint_override,
        baremetal_api_version='1.82')
    # The proxy itself would run version discovery (network); the
    # connection's config is what it is built from.
    assert conn.session is session
    assert conn.config.get_endpoint('baremetal') == 'http://127.0.0.1:6385'
    assert conn.config.get_api_version('baremetal') == '1.82'


def test_password_plugin_loads_without_contacting_keystone(tmp_path):
    conf = conf_from(tmp_path, """
        [placement]
        auth_type = password
        auth_url = http://127.0.0.1:1/v3
        username = computed
        password = secret
        project_name = service
        user_domain_name = Default
        project_domain_name = Default
        """)
    adapter = keystone.load_adapter(conf, 'placement')
    assert adapter.session.auth.auth_url == 'http://127.0.0.1:1/v3'


def test_auth_section_is_followed(tmp_path):
    conf = conf_from(tmp_path, """
        [placement]
        auth_section = shared_auth
        endpoint_override = http://127.0.0.1:8778

        [shared_auth]
        auth_type = none
        """)
    adapter = keystone.load_adapter(conf, 'placement')
    assert adapter.get_endpoint() == 'http://127.0.0.1:8778'


def test_unconfigured_section_is_an_error_only_when_used(tmp_path):
    conf = conf_from(tmp_path, '')
    with pytest.raises(ConfigError) as info:
        keystone.load_adapter(conf, 'ironic')
    assert (info.value.group, info.value.option) == ('ironic', 'auth_type')


def test_two_confs_do_not_share_plugin_options(tmp_path):
    # oslo.config keeps options on the OptGroup; the password plugin's
    # required auth_url must not leak into a conf that uses 'none'.
    conf_from(tmp_path, """
        [ironic]
        auth_type = password
        auth_url = http://127.0.0.1:1/v3
        """)
    conf = conf_from(tmp_path, """
        [ironic]
        auth_type = none
        endpoint_override = http://127.0.0.1:6385
        """)
    assert 'auth_url' not in conf.ironic


@pytest.mark.parametrize('environ, netrc, expected', [
    ({'PATH': '/bin', 'HOME': '/root'}, [], None),
    ({'REQUESTS_CA_BUNDLE': '/r.pem', 'CURL_CA_BUNDLE': '/c.pem'}, [], '/r.pem'),
    ({'REQUESTS_CA_BUNDLE': '', 'CURL_CA_BUNDLE': '/c.pem'}, [], '/c.pem'),
    ({'https_proxy': 'http://proxy:3128'}, [], keystone.TRUSTED),
    ({'HTTP_PROXY': 'http://proxy:3128'}, [], keystone.TRUSTED),
    ({'no_proxy': 'localhost'}, [], keystone.TRUSTED),  # decided per URL, at each request
    ({'All_Proxy': 'socks5://proxy'}, [], keystone.TRUSTED),
    ({'http_proxy': ''}, [], None),  # requests ignores an empty one
    ({'REQUESTS_CA_BUNDLE': '/r.pem'}, ['~/.netrc'], keystone.TRUSTED),
])
def test_what_a_session_takes_from_the_environment_once(environ, netrc, expected):
    assert keystone.environment_read_once(environ, netrc) == expected


def _placement(tmp_path, extra=''):
    return conf_from(tmp_path, """
        [placement]
        auth_type = admin_token
        endpoint = http://127.0.0.1:8778
        token = test-token
        """ + extra)


def _quiet_environment(monkeypatch, tmp_path):
    for name in list(os.environ):
        if name.lower().endswith('_proxy') or name in ('NETRC', *keystone.CA_BUNDLE_VARIABLES):
            monkeypatch.delenv(name)
    monkeypatch.setenv('HOME', str(tmp_path))  # no netrc file there


def test_a_session_reads_an_environment_without_proxies_once(tmp_path, monkeypatch):
    # requests read every variable (twice), a netrc file and a CA bundle at each request: a
    # sixth of a reporter's CPU for a POST to Placement.
    _quiet_environment(monkeypatch, tmp_path)
    monkeypatch.setenv('REQUESTS_CA_BUNDLE', '/etc/bundle.pem')
    session = keystone.load_session(_placement(tmp_path), 'placement')
    assert session.session.trust_env is False
    assert session.verify == '/etc/bundle.pem'  # as requests took it from the environment


def test_a_session_keeps_its_configured_ca_file(tmp_path, monkeypatch):
    _quiet_environment(monkeypatch, tmp_path)
    monkeypatch.setenv('REQUESTS_CA_BUNDLE', '/etc/bundle.pem')
    mine = tmp_path / 'mine.pem'
    mine.write_text('')
    session = keystone.load_session(_placement(tmp_path, f'cafile = {mine}\n'), 'placement')
    assert session.session.trust_env is False and session.verify == str(mine)


@pytest.mark.parametrize('name, value', [('https_proxy', 'http://proxy:3128'),
                                         ('NO_PROXY', 'placement.example')])
def test_a_session_trusts_an_environment_with_proxies(tmp_path, monkeypatch, name, value):
    _quiet_environment(monkeypatch, tmp_path)
    monkeypatch.setenv(name, value)
    session = keystone.load_session(_placement(tmp_path), 'placement')
    assert session.session.trust_env is True and session.verify is True


def test_a_session_trusts_the_environment_when_a_netrc_file_exists(tmp_path, monkeypatch):
    _quiet_environment(monkeypatch, tmp_path)
    (tmp_path / '.netrc').write_text('machine placement.example login a password b\n')
    session = keystone.load_session(_placement(tmp_path), 'placement')
    assert session.session.trust_env is True
