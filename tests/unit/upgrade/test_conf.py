"""[upgrade_levels]: auto by default, a version of the interface, anything else one line."""

from __future__ import annotations

import pytest

from computed.conf import loader


def _load(tmp_path, text):
    path = tmp_path / 'computed.conf'
    path.write_text('[coordination]\nbackend_url = zookeeper://127.0.0.1:2181\n'
                    '[DEFAULT]\ntransport_url = rabbit://g:g@127.0.0.1:5672/\n' + text)
    return loader.load(['--config-file', str(path)], 'computed')


def test_auto_by_default(tmp_path):
    conf = _load(tmp_path, '')
    assert (conf.upgrade_levels.reports, conf.upgrade_levels.instances) == ('auto', 'auto')


def test_a_version_is_kept(tmp_path):
    conf = _load(tmp_path, '[upgrade_levels]\nreports = 1.0\ninstances = 1.1\n')
    assert (conf.upgrade_levels.reports, conf.upgrade_levels.instances) == ('1.0', '1.1')


@pytest.mark.parametrize('text, expected', [
    ('[upgrade_levels]\nreports = banana\n', '[upgrade_levels] reports: invalid value:'),
    ('[upgrade_levels]\ninstances = 1.3\n', '[upgrade_levels] instances: invalid value:'),
    ('[upgrade_levels]\ncompute = auto\n', 'compute'),
    ('[upgrade_level]\nreports = auto\n', 'upgrade_level'),
])
def test_anything_else_is_one_line_naming_the_option(tmp_path, capsys, text, expected):
    with pytest.raises(SystemExit) as exc:
        _load(tmp_path, text)
    assert exc.value.code == 2
    err = capsys.readouterr().err
    assert len(err.splitlines()) == 1 and expected in err, err
    assert 'Traceback' not in err
