"""computed.cmd.status.deprecated_options: the options a configuration sets that this release
deprecates (oslo.config's deprecated_for_removal, or computed.upgrade.deprecations)."""

from __future__ import annotations

from oslo_config import cfg

from computed.cmd import status
from computed.conf import loader
from computed.upgrade import deprecations


def load(tmp_path, text):
    path = tmp_path / 'computed.conf'
    path.write_text('[DEFAULT]\ntransport_url = fake://\n[coordination]\nbackend_url = '
                    f'file://{tmp_path}/c\n' + text)
    return loader.load(['--config-file', str(path)], 'computed-status')


def test_nothing_deprecated_is_set_by_default(tmp_path):
    assert status.deprecated_options(load(tmp_path, '[api]\nthreads = 4\n')) == []


def test_a_listed_option_set_in_a_file_is_named(tmp_path, monkeypatch):
    monkeypatch.setitem(deprecations.DEPRECATED, ('api', 'threads'), 'use [api] workers')
    monkeypatch.setitem(deprecations.DEPRECATED, ('api', 'backlog'), 'never set: not said')
    conf = load(tmp_path, '[api]\nthreads = 4\n')
    assert status.deprecated_options(conf) == ['[api] threads: use [api] workers']


def test_deprecated_for_removal_is_named(tmp_path, monkeypatch):
    from computed.conf import opts
    old = cfg.IntOpt('old_knob', deprecated_for_removal=True,
                     deprecated_reason='it does nothing since 0.2.0')
    real = opts.list_opts
    monkeypatch.setattr(opts, 'list_opts', lambda: real() + [('api', [old])])
    # Only the one option registered: the others are not in this configuration (skipped).
    conf = cfg.ConfigOpts()
    conf.register_opt(old, 'api')
    path = tmp_path / 'x.conf'
    path.write_text('[api]\nold_knob = 3\n')
    conf(['--config-file', str(path)])
    said = status.deprecated_options(conf)
    assert said == ['[api] old_knob: it does nothing since 0.2.0']
