"""Nova's view of an instance's state: status, vm_state, task_state, power_state.

Owns the mapping between computed's instance states (:class:`computed.db.models.InstanceState`)
and what Compute API clients read and filter on. A transitional state shows the state the
instance comes from plus a task, as Nova shows it (stopping: ACTIVE, task ``powering-off``).
Pure.

========== ========= ========== ============= ===========
computed   status    vm_state   task_state    power_state
========== ========= ========== ============= ===========
BUILDING   BUILD     building   spawning      0 (none)
ACTIVE     ACTIVE    active     -             1 (running)
STOPPING   ACTIVE    active     powering-off  1
STOPPED    SHUTOFF   stopped    -             4 (shutdown)
STARTING   SHUTOFF   stopped    powering-on   4
REBOOTING  REBOOT    active     rebooting     1
ERROR      ERROR     error      -             0
DELETING   ACTIVE    active     deleting      1
DELETED    DELETED   deleted    -             0
REBUILDING REBUILD   active     rebuilding    1
REBUILD... REBUILD   stopped    rebuilding    4
========== ========= ========== ============= ===========

(``REBUILD...``: REBUILDING_OFF, the rebuild of a stopped server, which ends stopped.)
A BUILDING instance without node nor host (admitted by a create, not placed yet:
:mod:`computed.api.pending`) shows the task ``scheduling``, as Nova's does before its
scheduler chose a host.

HARD_REBOOT is never shown: the daemons reboot a node one way (Ironic's reboot), whichever type
was asked for. Filtering on it finds nothing.
"""

from __future__ import annotations

from typing import NamedTuple

from computed.db import models


class View(NamedTuple):
    status: str
    vm_state: str
    task_state: str | None
    power_state: int


NOSTATE, RUNNING, SHUTDOWN = 0, 1, 4

VIEWS: dict[str, View] = {
    models.BUILDING.value: View('BUILD', 'building', 'spawning', NOSTATE),
    models.ACTIVE.value: View('ACTIVE', 'active', None, RUNNING),
    models.STOPPING.value: View('ACTIVE', 'active', 'powering-off', RUNNING),
    models.STOPPED.value: View('SHUTOFF', 'stopped', None, SHUTDOWN),
    models.STARTING.value: View('SHUTOFF', 'stopped', 'powering-on', SHUTDOWN),
    models.REBOOTING.value: View('REBOOT', 'active', 'rebooting', RUNNING),
    models.ERROR.value: View('ERROR', 'error', None, NOSTATE),
    models.DELETING.value: View('ACTIVE', 'active', 'deleting', RUNNING),
    models.DELETED.value: View('DELETED', 'deleted', None, NOSTATE),
    models.REBUILDING.value: View('REBUILD', 'active', 'rebuilding', RUNNING),
    models.REBUILDING_OFF.value: View('REBUILD', 'stopped', 'rebuilding', SHUTDOWN),
}
#: Every status a client may filter on.
STATUSES = frozenset(view.status for view in VIEWS.values()) | {'HARD_REBOOT'}
_UNKNOWN = View('UNKNOWN', 'error', None, NOSTATE)


SCHEDULING = View('BUILD', 'building', 'scheduling', NOSTATE)


def view(state: str, placed: bool = True) -> View:
    """How a Compute API client sees ``state`` (a state written by newer code: UNKNOWN);
    ``placed``: the instance has a node or a host (a BUILDING one without is being
    scheduled)."""
    if state == models.BUILDING and not placed:
        return SCHEDULING
    return VIEWS.get(state, _UNKNOWN)


def states_of(status: str) -> frozenset[str] | None:
    """computed's states shown as ``status`` (case-insensitive); None for an unknown status."""
    status = status.upper()
    if status not in STATUSES:
        return None
    return frozenset(state for state, shown in VIEWS.items() if shown.status == status)
