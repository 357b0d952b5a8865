"""computed.api.server_status: every instance state has a Nova view, and filters invert it."""

from computed.api import server_status
from computed.db import models


def test_every_state_has_a_view_and_filters_find_it():
    for state in models.STATES:
        shown = server_status.view(state.value)
        assert shown.status != 'UNKNOWN'
        assert state.value in server_status.states_of(shown.status)


def test_nova_statuses():
    assert server_status.view('STOPPED').status == 'SHUTOFF'
    assert server_status.view('BUILDING').status == 'BUILD'
    assert server_status.view('REBOOTING') == ('REBOOT', 'active', 'rebooting', 1)
    assert server_status.states_of('active') == {'ACTIVE', 'STOPPING', 'DELETING'}
    assert server_status.states_of('HARD_REBOOT') == frozenset()
    assert server_status.states_of('BOGUS') is None
    assert server_status.view('FROM_THE_FUTURE').status == 'UNKNOWN'
