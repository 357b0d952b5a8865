import pytest

from computed.conf.default import normalise_host


@pytest.mark.parametrize('given, expected', [
    ('ctl-1', 'ctl-1'),
    ('CTL-1.Example.ORG', 'ctl-1.example.org'),
    ('  ctl-1.example.org.  ', 'ctl-1.example.org'),
    ('', ''),
])
def test_normalise_host(given, expected):
    assert normalise_host(given) == expected


def test_normalise_host_is_idempotent():
    once = normalise_host(' Node-7.Rack2. ')
    assert normalise_host(once) == once
