"""The pure version choice of [upgrade_levels] (computed.upgrade.levels)."""

from __future__ import annotations

import pytest

from computed.instances import rpcapi
from computed.providers import report
from computed.upgrade import levels


def test_the_histories_end_at_what_the_code_serves():
    assert levels.newest('reports') == report.API_VERSION
    assert levels.newest('instances') == rpcapi.VERSION


@pytest.mark.parametrize('pin, served, expected', [
    ('1.0', ['1.1', '1.1'], '1.0'),       # a number is obeyed whatever the peers say
    ('1.1', ['1.0'], '1.1'),
    ('auto', ['1.1', '1.0', '1.1'], '1.0'),  # the lowest any live peer serves
    ('auto', ['1.1'], '1.1'),
    ('auto', [], '1.2'),                  # nobody to be compatible with: the newest
    ('auto', ['1.7'], '1.2'),             # a newer peer serves ours too
    ('auto', ['1.2', '1.1'], '1.1'),      # a daemon of the release before: no rebuild cast
    ('auto', [None], '1.1'),              # published nothing: release 0.1.0, which serves 1.1
    ('auto', ['banana', '1.1'], '1.0'),   # unreadable: the oldest, never more than it can take
    ('auto', ['2.0'], '1.0'),             # another major serves none of ours: the oldest
])
def test_cap(pin, served, expected):
    assert levels.cap('instances', pin, served) == expected


def test_parse_refuses_what_is_not_a_version_of_the_interface():
    assert levels.check_pin('reports', 'auto') == 'auto'
    assert levels.check_pin('reports', ' 1.0 ') == '1.0'
    for bad in ('banana', '1.2', '2', '', '1.1.0'):
        with pytest.raises(ValueError) as exc:
            levels.check_pin('reports', bad)
        assert str(exc.value) == f"{bad.strip()!r} is not one of auto, 1.0, 1.1"


def test_an_instance_cast_below_1_1_carries_no_member_epoch():
    assert levels.instance_arguments('1.0', 'u', 7) == {'instance_uuid': 'u'}
    assert levels.instance_arguments('1.1', 'u', 7) == {'instance_uuid': 'u', 'member_epoch': 7}
    assert levels.instance_arguments('1.1', 'u', None) == {'instance_uuid': 'u'}


def test_rebuild_is_sent_from_1_2_on_and_the_other_casts_at_every_version():
    assert [levels.sends(v, 'rebuild_instance') for v in ('1.0', '1.1', '1.2')] == \
        [False, False, True]
    assert all(levels.sends(v, 'reboot_instance') for v in ('1.0', '1.1', '1.2'))
    assert levels.sends('1.3', 'rebuild_instance')  # a newer version keeps it
    assert levels.instance_arguments('1.2', 'u', 7, preserve_ephemeral=True) == \
        {'instance_uuid': 'u', 'member_epoch': 7, 'preserve_ephemeral': True}


def test_a_report_below_1_1_names_the_claim_epoch_epoch():
    wire = {'uuid': 'u', 'claim_epoch': 3, 'seq': 1, 'host': 'h', 'state': None}
    assert levels.report_fields('1.1', wire) == wire
    old = levels.report_fields('1.0', wire)
    assert old == {'uuid': 'u', 'epoch': 3, 'seq': 1, 'host': 'h', 'state': None}
    assert wire['claim_epoch'] == 3  # not changed in place

