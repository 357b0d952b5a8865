"""The committed sample config matches what the options generate.

Relies on computed being installed (``pip install -e .``) so that the
``oslo.config.opts`` entry point ``computed`` is found.
"""

import pathlib

from oslo_config import generator

ROOT = pathlib.Path(__file__).resolve().parents[3]
GENERATOR_CONF = ROOT / 'etc' / 'computed' / 'computed-config-generator.conf'
SAMPLE = ROOT / 'etc' / 'computed' / 'computed.conf.sample'


def test_sample_is_up_to_date(tmp_path):
    fresh = tmp_path / 'computed.conf.sample'
    generator.main(['--config-file', str(GENERATOR_CONF),
                    '--output-file', str(fresh)])
    assert fresh.read_text() == SAMPLE.read_text(), (
        'etc/computed/computed.conf.sample is stale; regenerate it with: '
        'oslo-config-generator --config-file '
        'etc/computed/computed-config-generator.conf')


def test_sample_documents_every_group():
    text = SAMPLE.read_text()
    for group in ('DEFAULT', 'coordination', 'ironic', 'placement',
                  'database', 'oslo_messaging_rabbit'):
        assert f'[{group}]' in text
    # keystoneauth plugin options are listed for the documented plugins.
    assert '#auth_url = <None>' in text
    assert '#service_type = baremetal' in text
    assert '#service_type = placement' in text
