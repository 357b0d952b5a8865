"""The unknown-option check: other programs' option lists loaded only when needed, with the
verdict every list loaded at once gives."""

import textwrap

import pytest
from oslo_config import cfg

from computed.conf import loader, unknown
from computed.conf.errors import ConfigError
from tests.unit.conf.test_loader import GOOD, KEYSTONE_AUTHTOKEN, with_section


def registered(tmp_path, text):
    path = tmp_path / 'computed.conf'
    path.write_text(textwrap.dedent(text))
    conf = cfg.ConfigOpts()
    loader.register_all(conf)
    loader.parse(conf, ['--config-file', str(path)], 'computed')
    # As the loader's validate: the chosen auth plugins' options, registered and passed on.
    return conf, loader._plugin_opts(conf)


def lists_read(monkeypatch):
    """The namespaces of every option list the check reads, recorded."""
    read: list[tuple[str, ...]] = []
    listed = unknown._listed_opts

    def recording(namespaces=unknown.NAMESPACES):
        read.append(tuple(namespaces))
        return listed(namespaces)

    monkeypatch.setattr(unknown, '_listed_opts', recording)
    return read


def every_list_at_once(conf, extra):
    """The check's verdict with every namespace's list loaded from the start."""
    files = []
    for path in unknown.config_files(conf):
        sections = {}
        cfg.ConfigParser(path, sections).parse()
        files.append((path, sections))
    try:
        return unknown._first_fault(files, unknown.known_options(conf, extra), conf)
    except ConfigError as exc:
        return exc


def verdict(conf, extra):
    try:
        unknown.check(conf, extra)
    except ConfigError as exc:
        return exc
    return None


def test_a_file_of_the_program_own_options_reads_no_other_program_list(tmp_path, monkeypatch):
    read = lists_read(monkeypatch)
    unknown.check(*registered(tmp_path, GOOD))
    assert read == [unknown.OWN]


def test_another_program_section_reads_the_other_lists_until_it_is_known(tmp_path,
                                                                         monkeypatch):
    read = lists_read(monkeypatch)
    unknown.check(*registered(tmp_path, with_section('oslo_middleware',
                                                    'enable_proxy_headers_parsing = true')))
    assert read == [unknown.OWN, (*unknown.OWN, 'oslo.policy'),
                    (*unknown.OWN, 'oslo.policy', 'oslo.middleware')]
    read.clear()
    unknown.check(*registered(tmp_path, with_section('keystone_authtoken', KEYSTONE_AUTHTOKEN)))
    assert read[-1] == (*unknown.OWN, *unknown.OTHER_PROGRAMS)


@pytest.mark.parametrize('text', [
    GOOD,
    with_section('DEFAULT', 'debg = true'),
    with_section('placment', 'auth_type = none'),
    with_section('oslo_middleware', 'enable_proxy_headers_parsing = true'),
    with_section('oslo_middleware', 'enable_proxy_header = true'),
    with_section('keystone_authtoken', KEYSTONE_AUTHTOKEN),
    with_section('keystone_authtoken', KEYSTONE_AUTHTOKEN.replace('auth_url', 'auth_ur')),
    with_section('keystone_authtoken', KEYSTONE_AUTHTOKEN.replace('= password', '= pasword')),
    # An unknown section before another program's: the first fault in the file's order.
    with_section('keystone_authtoken', KEYSTONE_AUTHTOKEN,
                 base=with_section('oslo_midleware', 'x = 1')),
    with_section('oslo_policy', 'policy_file = policy.yaml',
                 base=with_section('fleet', 'wieght = 2')),
    with_section('oslo_policy', 'policy_fle = policy.yaml'),
])
def test_the_verdict_is_that_of_every_list_loaded_at_once(tmp_path, text):
    conf, extra = registered(tmp_path, text)
    lazy, full = verdict(conf, extra), every_list_at_once(conf, extra)
    assert (type(lazy), str(lazy)) == (type(full), str(full))
    if full is not None:
        assert (lazy.group, lazy.option) == (full.group, full.option)
