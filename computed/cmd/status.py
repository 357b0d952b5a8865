"""``computed-status upgrade check``: is this deployment ready for (or done with) an upgrade?

Shaped as ``nova-status upgrade check``: run with the new release's code and the deployment's
configuration, before and after each step of a rolling upgrade (docs/upgrades.md). Each check
prints one line as it ends (``<check>: <Success|Warning|Failure>: <details>``), then a summary
table of all. The judgments are :mod:`computed.upgrade.checks`'s; this module gathers the facts:
the database's revision (``[database] connection``), the live services' published versions and
the session timeout ZooKeeper grants (one ZooKeeper session for both, opened once), the
``[upgrade_levels]`` pins.

Exit status (nova-status's): 0 every check succeeded, 1 at least one warns, 2 at least one
failed; 255 when a check could not be run at all (one line naming it, no traceback). A
service that cannot be reached is that check's failure, not an error. A configuration that does
not load is the usual one line and 2, as for every computed program (what this release refuses,
e.g. ``handler=eventlet`` in ``[coordination] backend_url``, is refused there).
"""

from __future__ import annotations

import argparse
import shutil
import sys
import textwrap
from collections.abc import Callable, Sequence
from typing import Any, NoReturn

from oslo_config import cfg

from computed.cmd import common
from computed.conf import loader
from computed.conf.errors import ConfigError
from computed.upgrade import checks
from computed.upgrade.checks import Code, Result

PROG = 'computed-status'
EXIT_ERROR = 255
MEMBER = 'computed-status'


class Session:
    """The one ZooKeeper session the checks share, opened on first use; what failed instead."""

    def __init__(self, conf: cfg.ConfigOpts):
        self._conf = conf
        self._coordinator: Any = None
        self._failure: str | None = None

    def coordinator(self) -> Any:
        """The started coordinator; ``Unreachable`` (the reason, once) when there is none."""
        if self._coordinator is None and self._failure is None:
            try:
                self._coordinator = common.connect_zookeeper(self._conf, MEMBER)
            except common.ServiceUnreachable as exc:
                self._failure = f'cannot reach {exc}'
            except ConfigError as exc:  # not a ZooKeeper URL
                self._failure = str(exc)
        if self._coordinator is None:
            raise Unreachable(self._failure or 'no ZooKeeper')
        return self._coordinator

    def close(self) -> None:
        if self._coordinator is not None:
            from computed.fleet.zookeeper import kazoo_client
            client = kazoo_client(self._coordinator)
            client.stop()
            client.close()


class Unreachable(Exception):
    """A service a check needs cannot be used; the message says why (one line)."""


def check_schema(conf: cfg.ConfigOpts, session: Session) -> Result:
    from computed import db
    from computed.cmd.db import _one_line, _safe
    url = conf.database.connection
    if not url:
        return Result(Code.FAILURE, '[database] connection is not set')
    try:
        current = db.current_revision(url)
    except Exception as exc:  # SQLAlchemy's, the driver's: one line, the password hidden
        return Result(Code.FAILURE, f'cannot read database {_safe(url)}: {_one_line(url, exc)}')
    return checks.schema(current, db.head_revision())


def check_data_migrations(conf: cfg.ConfigOpts, session: Session) -> Result:
    return checks.data_migrations({})  # this release has none (issue 25 item 3)


def check_service_versions(conf: cfg.ConfigOpts, session: Session) -> Result:
    from computed.fleet.membership import drain_markers_path
    from computed.fleet.zookeeper import group_path, kazoo_client
    from computed.upgrade import records
    group = conf.coordination.group
    try:
        coordinator = session.coordinator()
    except Unreachable as exc:
        return Result(Code.FAILURE, str(exc))
    client = kazoo_client(coordinator)
    services = (records.read_daemons(client, group_path(coordinator, group),
                                     drain_markers_path(group))
                + records.read_reporters(client, group))
    return checks.service_versions(services, group)


def check_configuration(conf: cfg.ConfigOpts, session: Session) -> Result:
    return checks.configuration({'reports': conf.upgrade_levels.reports,
                                 'instances': conf.upgrade_levels.instances})


def check_zookeeper(conf: cfg.ConfigOpts, session: Session) -> Result:
    from computed.cmd.daemon import session_timeout
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
    return checks.session_timeout(requested, granted)


#: The checks, in the order they run and print.
CHECKS: dict[str, Callable[[cfg.ConfigOpts, Session], Result]] = {
    'Database schema': check_schema,
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
