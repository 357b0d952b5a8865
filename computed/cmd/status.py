"""``computed-status upgrade check``: is this deployment ready for (or done with) an upgrade?

Shaped as ``nova-status upgrade check``: run with the new release's code and the deployment's
configuration, before and after each step of a rolling upgrade (docs/upgrades.md). Each check
prints one line as it ends (``<check>: <Success|Warning|Failure>: <details>``), then a summary
table of all. The judgments are :mod:`computed.upgrade.checks`'s; this module gathers the facts:
the database's revision and how its schema compares with this release's models (``[database]
connection``), this release's revisions as :mod:`computed.upgrade.migrations` reads them, the
rows the online data migrations have left, the live services' published versions and the session
timeout ZooKeeper grants (one ZooKeeper session for all, opened once), the ``[upgrade_levels]``
pins and the deprecated options the configuration sets.

Exit status (nova-status's): 0 every check succeeded, 1 at least one warns, 2 at least one
failed; 255 when a check could not be run at all (one line naming it, no traceback). A
service that cannot be reached is that check's failure, not an error. A configuration that does
not load is the usual one line and 2, as for every computed program (what this release refuses,
e.g. ``handler=eventlet`` in ``[coordination] backend_url``, is refused there).
"""

from __future__ import annotations

import argparse
import contextlib
import shutil
import sys
import textwrap
from collections.abc import Callable, Iterator, Sequence
from typing import Any, NoReturn

from oslo_config import cfg

from computed.cmd import common
from computed.conf import loader
from computed.conf.errors import ConfigError
from computed.upgrade import checks, migrations
from computed.upgrade.checks import Code, Result
from computed.version import PREVIOUS_RELEASE

PROG = 'computed-status'
EXIT_ERROR = 255
MEMBER = 'computed-status'


class Session:
    """The one ZooKeeper session the checks share, opened on first use; what failed instead;
    and the database's facts (:class:`Database`)."""

    def __init__(self, conf: cfg.ConfigOpts):
        self._conf = conf
        self._coordinator: Any = None
        self._failure: str | None = None
        self.database = Database(conf)

    def coordinator(self) -> Any:
        """The started coordinator; ``Unreachable`` (the reason, once) when there is none."""
        if self._coordinator is None and self._failure is None:
            try:
                self._coordinator = common.connect_zookeeper(
                    self._conf, MEMBER,
                    min_session=self._conf.coordination.command_session_timeout)
            except common.ServiceUnreachable as exc:
                self._failure = f'cannot reach {exc}'
            except ConfigError as exc:  # not a ZooKeeper URL
                self._failure = str(exc)
        if self._coordinator is None:
            raise Unreachable(self._failure or 'no ZooKeeper')
        return self._coordinator

    @contextlib.contextmanager
    def zookeeper_failures(self) -> Iterator[None]:
        """What kazoo or tooz raises once the session is up (the connection lost, the session
        expired, no answer in time, a refusal) as :class:`Unreachable`, with
        ``computed-manage``'s one line naming the servers: the check's failure, not an error
        of the command (exit 255)."""
        try:
            yield
        except common.ZOOKEEPER_ERRORS as exc:
            raise Unreachable(self.failure(exc)) from None

    def failure(self, exc: BaseException) -> str:
        """The one line for ``exc``, raised by kazoo or tooz on the session's ZooKeeper."""
        return str(common.zookeeper_failure(self._conf.coordination.backend_url, exc))

    def close(self) -> None:
        if self._coordinator is not None:
            from computed.fleet.zookeeper import kazoo_client
            client = kazoo_client(self._coordinator)
            client.stop()
            client.close()


class Unreachable(Exception):
    """A service a check needs cannot be used; the message says why (one line)."""


class Database:
    """What the database checks share, read once: its revision, and this release's revisions
    (``Unreachable`` when the database cannot be read, the reason once)."""

    def __init__(self, conf: cfg.ConfigOpts):
        self._url = conf.database.connection
        self._current: str | None = None
        self._read = False
        self._failure: str | None = None
        self.revisions = migrations.read_revisions()
        self.base = PREVIOUS_RELEASE.schema_head

    @property
    def url(self) -> str:
        if not self._url:
            raise Unreachable('[database] connection is not set')
        return self._url

    def current(self) -> str | None:
        from computed import db
        from computed.cmd.db import _one_line, _safe
        if not self._read and self._failure is None:
            try:
                self._current = db.current_revision(self.url)
                self._read = True
            except Unreachable:
                raise
            except Exception as exc:  # SQLAlchemy's, the driver's: one line, password hidden
                self._failure = f'cannot read database {_safe(self.url)}: ' \
                                f'{_one_line(self.url, exc)}'
        if self._failure is not None:
            raise Unreachable(self._failure)
        return self._current

    def known(self) -> list[str]:
        root = next(r.revision for r in self.revisions if r.down_revision is None)
        return [root] + [r.revision for r in migrations.after(self.revisions, root)]

    def engine(self) -> Any:
        from computed.db import engine as db_engine
        return db_engine.engine_from_url(self.url)


def schema_vs_code(engine: Any) -> tuple[list[str], list[str]]:
    """What the database lacks of this release's models, and how else it differs (alembic's
    comparison, the one tests/functional/test_db.py holds at none on every backend)."""
    from alembic.autogenerate import compare_metadata
    from alembic.runtime.migration import MigrationContext

    from computed.db import models
    with engine.connect() as conn:
        context = MigrationContext.configure(conn, opts={'compare_type': True})
        diffs = compare_metadata(context, models.Base.metadata)
    missing, other = [], []
    for diff in diffs:
        for step in (diff if isinstance(diff, list) else [diff]):
            kind = step[0]
            said = _describe(step)
            (missing if kind.startswith('add_') else other).append(said)
    return missing, other


def _describe(step: tuple) -> str:
    kind = step[0]
    if kind in ('add_table', 'remove_table'):
        return f'{kind} {step[1].name}'
    if kind in ('add_column', 'remove_column'):
        return f'{kind} {step[2]}.{step[3].name}'
    if kind in ('add_index', 'remove_index', 'add_constraint', 'remove_constraint'):
        return f'{kind} {step[1].name} on {step[1].table.name}'
    if kind.startswith('modify_'):
        return f'{kind} {step[2]}.{step[3]}: {step[5]} -> {step[6]}'
    return ' '.join(str(part) for part in step[:2])


def _object(said: str) -> str:
    """The object a :func:`_describe` line names (``table``, ``table.column``, an index)."""
    return said.split(' ')[1].rstrip(':')


def check_schema(conf: cfg.ConfigOpts, session: Session) -> Result:
    from computed import db
    database = session.database
    try:
        current = database.current()
    except Unreachable as exc:
        return Result(Code.FAILURE, str(exc))
    head = db.head_revision()
    expanded = migrations.expand_head(database.revisions, database.base)
    known = database.known()
    missing: list[str] = []
    differences: list[str] = []
    if current in known and migrations.at_least(database.revisions, current, expanded):
        engine = database.engine()
        try:
            missing, differences = schema_vs_code(engine)
        finally:
            engine.dispose()
        if current != head:
            # What the waiting contractions remove is still there, and what they add (a
            # constraint, an index) not yet: the rest must match the code.
            waiting = migrations.after(database.revisions, current)
            excused = migrations.touched(waiting)
            missing = [d for d in missing if _object(d) not in excused]
            differences = [d for d in differences
                           if not d.startswith('remove_') and _object(d) not in excused]
    return checks.schema(current, head, expanded=expanded, known=known, missing=missing,
                         differences=differences)


def check_schema_changes(conf: cfg.ConfigOpts, session: Session) -> Result:
    database = session.database
    problems = [str(problem) for problem in
                migrations.problems(database.revisions, database.base)]
    contractions = migrations.contractions(database.revisions, database.base)
    applied: list[str] = []
    old: list[str] = []
    if contractions and not problems:
        try:
            current = database.current()
        except Unreachable as exc:
            return Result(Code.FAILURE, str(exc))
        applied = [c for c in contractions
                   if migrations.at_least(database.revisions, current, c)]
        try:
            old = checks.older_services(_services(conf, session), PREVIOUS_RELEASE.version)
        except Unreachable as exc:
            return Result(Code.FAILURE, f'cannot tell whether services of '
                                        f'{PREVIOUS_RELEASE.version} are live: {exc}')
    waiting = [c for c in contractions if c not in applied]
    return checks.schema_changes(problems, applied, waiting, old, PREVIOUS_RELEASE.version)


def check_data_migrations(conf: cfg.ConfigOpts, session: Session) -> Result:
    from computed.upgrade import data_migrations
    database = session.database
    try:
        current = database.current()
    except Unreachable as exc:
        return Result(Code.FAILURE, str(exc))
    needed = migrations.expand_head(database.revisions, database.base)
    if not migrations.at_least(database.revisions, current, needed):
        return Result(Code.WARNING, f'not counted: the database is at revision '
                                    f"{current or 'none'}, the migrations need {needed} "
                                    f"(run 'computed-manage db sync')")
    engine = database.engine()
    try:
        return checks.data_migrations(data_migrations.pending(engine))
    finally:
        engine.dispose()


def _services(conf: cfg.ConfigOpts, session: Session) -> list[Any]:
    """The live daemons and reporters (``Unreachable`` without ZooKeeper)."""
    from computed.fleet.membership import drain_markers_path
    from computed.fleet.zookeeper import group_path, kazoo_client
    from computed.upgrade import records
    group = conf.coordination.group
    coordinator = session.coordinator()
    client = kazoo_client(coordinator)
    with session.zookeeper_failures():
        return (records.read_daemons(client, group_path(coordinator, group),
                                     drain_markers_path(group))
                + records.read_reporters(client, group))


def check_service_versions(conf: cfg.ConfigOpts, session: Session) -> Result:
    try:
        services = _services(conf, session)
    except Unreachable as exc:
        return Result(Code.FAILURE, str(exc))
    return checks.service_versions(services, conf.coordination.group)


def deprecated_options(conf: cfg.ConfigOpts) -> list[str]:
    """The options the configuration sets (a file, the command line, the environment) that
    this release deprecates: registered with ``deprecated_for_removal``, or listed in
    :data:`computed.upgrade.deprecations.DEPRECATED`; each with what to do instead."""
    from computed.conf import opts
    from computed.upgrade import deprecations
    said = []
    set_by = (cfg.Locations.user, cfg.Locations.command_line, cfg.Locations.environment)
    for group, group_opts in opts.list_opts():
        name = getattr(group, 'name', group)
        for opt in group_opts:
            why = deprecations.DEPRECATED.get((name, opt.dest))
            if why is None and opt.deprecated_for_removal:
                why = opt.deprecated_reason or 'to be removed'
            if why is None:
                continue
            try:
                location = conf.get_location(opt.dest, None if name == 'DEFAULT' else name)
            except (cfg.NoSuchOptError, cfg.NoSuchGroupError):
                continue
            if location is not None and location.location in set_by:
                said.append(f'[{name}] {opt.dest}: {why}')
    return said


def check_configuration(conf: cfg.ConfigOpts, session: Session) -> Result:
    return checks.configuration({'reports': conf.upgrade_levels.reports,
                                 'instances': conf.upgrade_levels.instances},
                                deprecated_options(conf))


def check_zookeeper(conf: cfg.ConfigOpts, session: Session) -> Result:
    from computed.conf.coordination import session_timeout
    from computed.fleet import zookeeper
    requested = session_timeout(conf.coordination.backend_url)
    try:
        client = zookeeper.kazoo_client(session.coordinator())
    except Unreachable as exc:
        return Result(Code.FAILURE, str(exc))
    try:
        granted = zookeeper.granted_session_timeout(client, requested)
    except zookeeper.SessionTimeoutUnknown as exc:
        return checks.session_timeout(requested, None, str(exc))
    except common.ZOOKEEPER_ERRORS as exc:
        return Result(Code.FAILURE, session.failure(exc))
    return checks.session_timeout(requested, granted)


#: The checks, in the order they run and print.
CHECKS: dict[str, Callable[[cfg.ConfigOpts, Session], Result]] = {
    'Database schema': check_schema,
    'Schema changes': check_schema_changes,
    'Data migrations': check_data_migrations,
    'Service versions': check_service_versions,
    'Configuration': check_configuration,
    'ZooKeeper': check_zookeeper,
}


class CheckError(Exception):
    """A check that could not run (a bug, not a finding)."""


def table(rows: Sequence[tuple[str, Result]], width: int = 100) -> str:
    """The summary table (pure): check, result, details wrapped to fit ``width``."""
    names = max([len('Check')] + [len(name) for name, _ in rows])
    results = len('Warning')
    details = max(20, width - names - results - 10)
    rule = f"+-{'-' * names}-+-{'-' * results}-+-{'-' * details}-+"
    lines = [rule, f"| {'Upgrade Check Results'.ljust(names + results + details + 6)} |", rule,
             f"| {'Check'.ljust(names)} | {'Result'.ljust(results)} | "
             f"{'Details'.ljust(details)} |", rule]
    for name, result in rows:
        wrapped = textwrap.wrap(result.details, details) or ['']
        for index, text in enumerate(wrapped):
            first = index == 0
            lines.append(f"| {(name if first else '').ljust(names)} | "
                         f"{(result.code.name.capitalize() if first else '').ljust(results)} | "
                         f"{text.ljust(details)} |")
        lines.append(rule)
    return '\n'.join(lines)


def upgrade_check(conf: cfg.ConfigOpts) -> int:
    session = Session(conf)
    rows = []
    try:
        for name, check in CHECKS.items():
            try:
                result = check(conf, session)
            except ConfigError:
                raise
            except Exception as exc:
                raise CheckError(f'running check {name}: {type(exc).__name__}: '
                                 f'{" ".join(str(exc).split())}') from None
            print(f'{name}: {result.code.name.capitalize()}: {result.details}', flush=True)
            rows.append((name, result))
    finally:
        session.close()
    print()
    print(table(rows, min(shutil.get_terminal_size().columns, 120)))
    return checks.exit_status(result for _name, result in rows)


def _add_parsers(subparsers: argparse._SubParsersAction) -> None:
    parser = subparsers.add_parser('upgrade', help='Checks for a rolling upgrade.',
                                   allow_abbrev=False, prog=f'{PROG} upgrade')
    actions = parser.add_subparsers(dest='action', metavar='ACTION', prog=f'{PROG} upgrade')
    actions.required = True
    actions.add_parser('check', allow_abbrev=False,
                       help='Database schema, data migrations, the versions of the live '
                            'services, configuration, ZooKeeper: one line each, a table, '
                            'exit 0 ok, 1 warning, 2 failure, 255 error.')


def build_conf() -> cfg.ConfigOpts:
    conf = cfg.ConfigOpts()
    conf.register_cli_opt(cfg.SubCommandOpt(
        'category', title='Categories', handler=_add_parsers,
        help='"upgrade check": is this deployment ready for the next step of an upgrade?'))
    return conf


def _body(argv: Sequence[str]) -> int:
    conf = loader.load(loader.config_options_first(argv), PROG, build_conf(),
                       usage=f'{PROG} [--config-file PATH] [--config-dir DIR] upgrade check',
                       commands=('upgrade',))
    try:
        return upgrade_check(conf)
    except CheckError as exc:
        print(f'{PROG}: error: {exc}', file=sys.stderr)
        return EXIT_ERROR


def main(argv: Sequence[str] | None = None) -> NoReturn:
    common.run(PROG, lambda: _body(sys.argv[1:] if argv is None else argv))
