"""The checks of ``computed-status upgrade check``, judged without I/O.

Owns what each check concludes from the facts :mod:`computed.cmd.status` gathers, and the exit
status of the whole (nova-status's: 0 every check succeeded, 1 one at least warns, 2 one at
least failed; 255 is the command's when a check could not run at all). Each judgment is a
:class:`Result`: a code and one line of details that says what to do when it is not a success.

* Database schema: at the head revision this release ships (else a failure: ``db sync``).
* Data migrations: none exist yet (``computed-manage db online_data_migrations`` is not built);
  always a success saying so.
* Service versions: the live daemons (fleet group members) and reporters (service records) and
  the release each publishes; a warning when they differ (an upgrade under way, or a host left
  behind) or when none is live; a peer that publishes none is of release 0.1.0.
* Configuration: ``[upgrade_levels]`` pinned to a number is a warning (the pins are for the
  upgrade's duration: ``auto`` follows the peers). What this release refuses (``handler=eventlet``
  in ``[coordination] backend_url``) never gets here: the configuration would not load.
* ZooKeeper: the session timeout the servers grant the daemons (they clamp the one asked for to
  their min/max bounds): a failure when no server says (the daemon refuses to start), a warning
  when it differs from the one asked for (the fence's lease and a dead daemon's failover follow
  the granted one).
"""

from __future__ import annotations

import enum
from collections import Counter
from collections.abc import Iterable, Mapping
from dataclasses import dataclass

from computed.upgrade import levels
from computed.upgrade.records import ServiceRecord

UNPUBLISHED = '0.1.0 (publishes no version)'


class Code(enum.IntEnum):
    SUCCESS = 0
    WARNING = 1
    FAILURE = 2


@dataclass(frozen=True)
class Result:
    code: Code
    details: str


def exit_status(results: Iterable[Result]) -> int:
    """nova-status's exit status: the worst code (0 with no results)."""
    return max((int(result.code) for result in results), default=0)


def schema(current: str | None, head: str | None) -> Result:
    if current is None:
        return Result(Code.FAILURE, f"the database has no schema (head: {head}): run "
                                    f"'computed-manage db sync'")
    if current != head:
        return Result(Code.FAILURE, f"the database is at revision {current}, this release "
                                    f"needs {head}: run 'computed-manage db sync'")
    return Result(Code.SUCCESS, f'at head ({head})')


def data_migrations(pending: Mapping[str, int]) -> Result:
    """``pending``: rows each online data migration still has to rewrite."""
    left = {name: count for name, count in pending.items() if count}
    if not pending:
        return Result(Code.SUCCESS, 'none (this release has no online data migrations)')
    if left:
        listed = ', '.join(f'{name}: {count}' for name, count in sorted(left.items()))
        return Result(Code.WARNING, f"rows left to migrate ({listed}): run 'computed-manage "
                                    f"db online_data_migrations'")
    return Result(Code.SUCCESS, 'none pending')


def service_versions(services: Iterable[ServiceRecord], group: str) -> Result:
    services = list(services)
    if not services:
        return Result(Code.WARNING, f'no live daemon or reporter in group {group}')
    by_version = Counter((record.version or UNPUBLISHED) for record in services)
    hosts = ', '.join(f'{record.binary} on {record.host}: {record.version or UNPUBLISHED}'
                      for record in services)
    if len(by_version) > 1:
        return Result(Code.WARNING, f'the live services run {len(by_version)} releases '
                                    f'(finish the upgrade, or downgrade the odd ones): {hosts}')
    (version,) = by_version
    return Result(Code.SUCCESS, f'{len(services)} live service(s), all {version}')


def configuration(pins: Mapping[str, str]) -> Result:
    """``pins``: ``[upgrade_levels]`` option -> value."""
    pinned = [f'{option} = {value}' for option, value in sorted(pins.items())
              if value != levels.AUTO]
    if pinned:
        return Result(Code.WARNING, f"[upgrade_levels] {', '.join(pinned)} pinned: set "
                                    f"'auto' (or remove) once every peer runs this release")
    return Result(Code.SUCCESS, 'nothing deprecated is set; [upgrade_levels] follow the peers')


def session_timeout(requested: float, granted: float | None, problem: str = '') -> Result:
    """``granted``: what the servers grant a session asking for ``requested`` (None: unknown,
    ``problem`` says why)."""
    if granted is None:
        return Result(Code.FAILURE, f'the session timeout ZooKeeper grants is unknown, the '
                                    f'daemons would refuse to start: {problem}')
    if granted != requested:
        return Result(Code.WARNING, f'ZooKeeper grants {granted:g} s of session timeout for '
                                    f'the {requested:g} s asked (?timeout= in [coordination] '
                                    f'backend_url): its min/maxSessionTimeout bounds clamp it; '
                                    f'failover and the fence follow {granted:g} s')
    return Result(Code.SUCCESS, f'grants the {requested:g} s session timeout asked for')
