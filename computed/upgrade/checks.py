"""The checks of ``computed-status upgrade check``, judged without I/O.

Owns what each check concludes from the facts :mod:`computed.cmd.status` gathers, and the exit
status of the whole (nova-status's: 0 every check succeeded, 1 one at least warns, 2 one at
least failed; 255 is the command's when a check could not run at all). Each judgment is a
:class:`Result`: a code and one line of details that says what to do when it is not a success.

* Database schema: at the head revision this release ships, or at its expansions with its
  contractions waiting (else a failure: ``db sync``); a revision this release does not know
  (a newer release's ``db sync`` ran) is a failure; and schema vs code: a table, column or
  index this release's models have and the database lacks is a failure, any other
  difference a warning.
* Schema changes: this release's revisions after the previous release's schema head only
  expand or are marked contractions (:mod:`computed.upgrade.migrations`; a failure names the
  revision); a contraction applied while a service of the previous release is live is a
  failure (that service may use what it removed); contractions pending once no such service
  is live are a warning (``db sync --contract``).
* Data migrations: rows each online data migration
  (:mod:`computed.upgrade.data_migrations`) still has to rewrite: a warning while any is
  left (``computed-manage db online_data_migrations``).
* Service versions: the live daemons (fleet group members) and reporters (service records) and
  the release each publishes; a warning when they differ (an upgrade under way, or a host left
  behind) or when none is live; a peer that publishes none is of release 0.1.0.
* Configuration: ``[upgrade_levels]`` pinned to a number is a warning (the pins are for the
  upgrade's duration: ``auto`` follows the peers), and so is an option this release
  deprecates that the configuration sets (named, with what replaces it). What this release
  refuses (``handler=eventlet`` in ``[coordination] backend_url``) never gets here: the
  configuration would not load.
* ZooKeeper: the session timeout the servers grant the daemons (they clamp the one asked for to
  their min/max bounds): a failure when no server says (the daemon refuses to start), a warning
  when it differs from the one asked for (the fence's lease and a dead daemon's failover follow
  the granted one).
"""

from __future__ import annotations

import enum
from collections import Counter
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass

from packaging.version import InvalidVersion, Version

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


def schema(current: str | None, head: str | None, *, expanded: str | None = None,
           known: Sequence[str] = (), missing: Sequence[str] = (),
           differences: Sequence[str] = ()) -> Result:
    """``current``: the database's revision; ``head``: this release's newest; ``expanded``: the
    newest before its contractions (``head`` when none); ``known``: this release's revisions,
    oldest first (empty: not told, only ``head`` is judged); ``missing``/``differences``: what
    the database lacks of this release's models, and how else it differs (schema vs code)."""
    expanded = expanded or head
    if current is None:
        return Result(Code.FAILURE, f"the database has no schema (head: {head}): run "
                                    f"'computed-manage db sync'")
    if known and current not in known:
        return Result(Code.FAILURE, f'the database is at revision {current}, which this '
                                    f'release does not know (its head: {head}): a newer '
                                    f"release's db sync ran; run that release's code")
    order = {revision: index for index, revision in enumerate(known)}
    behind = (order[current] < order[expanded]) if known else current not in (head, expanded)
    if behind:
        return Result(Code.FAILURE, f"the database is at revision {current}, this release "
                                    f"needs {expanded}: run 'computed-manage db sync'")
    if missing:
        return Result(Code.FAILURE, f"the database lacks what this release's code uses "
                                    f"(altered by hand?): {'; '.join(missing)}")
    at = f'at head ({head})' if current == head else \
        f"at {current}, this release's expansions (contractions to {head} wait)"
    if differences:
        return Result(Code.WARNING, f'{at}, but the schema differs from the code\'s: '
                                    f"{'; '.join(differences)}")
    return Result(Code.SUCCESS, at)


def schema_changes(problems: Sequence[str], applied: Sequence[str], waiting: Sequence[str],
                   old_services: Sequence[str], previous: str) -> Result:
    """``problems``: why this release's revisions are not expand/contract
    (:func:`computed.upgrade.migrations.problems`); ``applied``/``waiting``: its contractions
    the database has / has not; ``old_services``: live services of release ``previous`` or
    older (``binary on host: version``)."""
    if problems:
        return Result(Code.FAILURE, f'revisions that are neither expansions nor marked '
                                    f"contractions: {'; '.join(problems)}")
    if applied and old_services:
        return Result(Code.FAILURE, f"contraction(s) {', '.join(applied)} applied while "
                                    f'services of {previous} are live, which may use what '
                                    f"they removed: upgrade them now ({', '.join(old_services)})")
    if waiting and not old_services:
        return Result(Code.WARNING, f"contraction(s) {', '.join(waiting)} wait and no "
                                    f'service of {previous} is live: run \'computed-manage db '
                                    f"sync --contract'")
    if waiting:
        return Result(Code.SUCCESS, f"expansions only; contraction(s) {', '.join(waiting)} "
                                    f'wait until no service of {previous} is live')
    return Result(Code.SUCCESS, f'the revisions since {previous} only expand')


def older_services(services: Iterable[ServiceRecord], previous: str) -> list[str]:
    """The live services of release ``previous`` or older (one that publishes no version is
    0.1.0's), as ``binary on host: version``."""
    limit = Version(previous)
    return [f'{record.binary} on {record.host}: {record.version or UNPUBLISHED}'
            for record in services
            if record.version is None or _version(record.version) <= limit]


def _version(text: str) -> Version:
    try:
        return Version(text)
    except InvalidVersion:
        return Version('0')  # unreadable: taken as the oldest, as levels.py takes its rpc


def data_migrations(pending: Mapping[str, int]) -> Result:
    """``pending``: rows each online data migration still has to rewrite."""
    left = {name: count for name, count in pending.items() if count}
    if not pending:
        return Result(Code.SUCCESS, 'none (this release has no online data migrations)')
    if left:
        listed = ', '.join(f'{name}: {count}' for name, count in sorted(left.items()))
        return Result(Code.WARNING, f"rows left to migrate ({listed}): once every service "
                                    f"runs this release, run 'computed-manage db "
                                    f"online_data_migrations'")
    return Result(Code.SUCCESS, f"none pending ({', '.join(sorted(pending))} done)")


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


def configuration(pins: Mapping[str, str], deprecated: Sequence[str] = ()) -> Result:
    """``pins``: ``[upgrade_levels]`` option -> value; ``deprecated``: the options set that this
    release deprecates, each with what to do instead."""
    said = []
    pinned = [f'{option} = {value}' for option, value in sorted(pins.items())
              if value != levels.AUTO]
    if pinned:
        said.append(f"[upgrade_levels] {', '.join(pinned)} pinned: set 'auto' (or remove) "
                    f"once every peer runs this release")
    if deprecated:
        said.append(f"deprecated options set: {'; '.join(deprecated)}")
    if said:
        return Result(Code.WARNING, '; '.join(said))
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
