"""A one-shot command's ZooKeeper session: at least ``[coordination] command_session_timeout``,
whatever the URL asks."""

from types import SimpleNamespace
from urllib import parse

import pytest
from tooz import coordination

from computed.cmd import common
from computed.conf.coordination import (
    COMMAND_SESSION_TIMEOUT,
    session_timeout,
    with_session_of_at_least,
)


@pytest.mark.parametrize('url, expected', [
    ('zookeeper://127.0.0.1:2181?timeout=2', 10.0),
    ('zookeeper://127.0.0.1:2181?timeout=30', 30.0),
    ('zookeeper://127.0.0.1:2181', 10.0),
])
def test_the_session_is_at_least_the_floor(url, expected):
    assert session_timeout(with_session_of_at_least(url, 10.0)) == expected


def test_a_longer_session_or_none_leaves_the_url_as_it_is():
    for url in ('zookeeper://h:2181?timeout=30', 'zookeeper://h:2181'):
        assert with_session_of_at_least(url, 10.0) == url


def test_other_parameters_and_the_hosts_are_kept():
    url = 'zookeeper://a:2181,b:2181/chroot?timeout=2&namespace=x'
    parts = parse.urlsplit(with_session_of_at_least(url, 10.0))
    assert (parts.netloc, parts.path) == ('a:2181,b:2181', '/chroot')
    assert parse.parse_qs(parts.query) == {'timeout': ['10'], 'namespace': ['x']}


@pytest.mark.parametrize('floor', [COMMAND_SESSION_TIMEOUT, 7])
def test_a_command_asks_zookeeper_for_the_cli_session_not_the_daemons(monkeypatch, floor):
    """The daemons' URL asks for 2 s; computed-manage's coordinator is made with
    ``command_session_timeout`` (10 s by default; a port nobody listens on: the command fails to
    connect, after asking)."""
    asked = []
    real = coordination.get_coordinator

    def get_coordinator(url, member):
        asked.append(url)
        return real(url, member)
    monkeypatch.setattr(coordination, 'get_coordinator', get_coordinator)
    conf = SimpleNamespace(coordination=SimpleNamespace(
        backend_url='zookeeper://127.0.0.1:9?timeout=2', command_session_timeout=floor))
    with pytest.raises(common.ServiceUnreachable):
        with common.zookeeper_coordinator(conf, timeout=0.3):
            pass
    assert [session_timeout(url) for url in asked] == [floor]


def test_a_service_keeps_the_session_its_url_asks_for():
    url = 'zookeeper://127.0.0.1:2181?timeout=2'
    assert with_session_of_at_least(url, 0.0) == url
