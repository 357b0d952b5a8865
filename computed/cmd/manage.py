"""``computed-manage``: operator commands, ``computed-manage CATEGORY ACTION``.

Commands: ``config check`` (load and validate the configuration and print
``configuration OK``); ``fleet status [--json]``, ``fleet drain HOST``,
``fleet undrain HOST`` (see :mod:`computed.cmd.fleet`); ``db sync [--contract]``,
``db version``, ``db online_data_migrations [--max-count N]``
(:mod:`computed.cmd.db`); ``server create|list|show|delete|reboot|stop|start``
(:mod:`computed.cmd.server`). A category is one entry of ``CATEGORIES``: parsing, ``--help``
and dispatch need no other change.

Commands run after the configuration has been loaded and validated, so a bad
configuration fails the same way as in every computed program (one line,
exit 2). ``--config-file`` and ``--config-dir`` may also follow the command
(``computed-manage config check --config-file X``): oslo.config parses them
only before it, so they are moved there first.
"""

from __future__ import annotations

import argparse
import dataclasses
import math
import sys
from collections.abc import Callable, Sequence
from typing import Any, NoReturn

from oslo_config import cfg

from computed.cmd import common, db, fleet, server
from computed.conf import loader

PROG = 'computed-manage'


@dataclasses.dataclass(frozen=True)
class Command:
    """One action: ``run(conf)`` returns the exit status.

    ``arguments`` are ``(args, kwargs)`` pairs for ``add_argument``; their
    values are read back as ``conf.category.<dest>``.
    """
    run: Callable[[cfg.ConfigOpts], int]
    help: str
    arguments: tuple[tuple[tuple[str, ...], dict[str, Any]], ...] = ()


@dataclasses.dataclass(frozen=True)
class Category:
    help: str
    commands: dict[str, Command]


def seconds(value: str) -> float:
    """An argparse type: a positive, finite number of seconds."""
    try:
        number = float(value)
    except ValueError:
        number = math.nan
    if not (math.isfinite(number) and number > 0):
        raise argparse.ArgumentTypeError(f'{value!r} is not a positive number of seconds')
    return number


def count(value: str) -> int:
    """An argparse type: a whole number of at least 1."""
    try:
        number = int(value)
    except ValueError:
        number = 0
    if number < 1:
        raise argparse.ArgumentTypeError(f'{value!r} is not a whole number of at least 1')
    return number


def config_check(conf: cfg.ConfigOpts) -> int:
    # Reaching here means loader.load accepted the configuration.
    print('configuration OK')
    return 0


CATEGORIES: dict[str, Category] = {
    'config': Category(
        help='Configuration of this computed.',
        commands={
            'check': Command(
                run=config_check,
                help='Load and validate the configuration (every option, '
                     'URL schemes, auth sections) and report.'),
        }),
    'fleet': Category(
        help='The daemons sharing the hash ring, and their nodes.',
        commands={
            'status': Command(
                run=fleet.fleet_status,
                help='Members (host, weight, draining, member epoch, node count) and '
                     'the owner of every node.',
                arguments=((('--json',), {'action': 'store_true',
                                          'help': 'print the stable JSON document'}),)),
            'drain': Command(
                run=fleet.fleet_drain,
                help="Move a member's free nodes to its peers (persistent "
                     'until undrain).',
                arguments=((('member',), {'metavar': 'HOST'}),)),
            'undrain': Command(
                run=fleet.fleet_undrain,
                help='Let a drained member take its share of nodes again.',
                arguments=((('member',), {'metavar': 'HOST'}),)),
        }),
    'db': Category(
        help="computed's own database ([database] connection).",
        commands={
            'sync': Command(
                run=db.db_sync,
                help="Create or upgrade the schema (safe to repeat): every expansion; this "
                     "release's contractions only with --contract.",
                arguments=((('--contract',), {
                    'action': 'store_true',
                    'help': "also apply this release's contractions (once no service of the "
                            "previous release is live: computed-status upgrade check)"}),)),
            'version': Command(
                run=db.db_version,
                help="Print the database's schema revision and the newest one."),
            'online_data_migrations': Command(
                run=db.db_online_data_migrations,
                help='Rewrite, in batches, the rows the previous release wrote that this '
                     'release fills in (resumable; exit 0 done, 1 more to do, 2 errors).',
                arguments=((('--max-count',), {
                    'type': count, 'metavar': 'N',
                    'help': 'rewrite at most N rows, then exit 1 if more may be left '
                            '(default: until none is left)'}),)),
        }),
    'server': Category(
        help='Instances: build on a free node, list, show, operate (computed.cmd.server).',
        commands={
            'create': Command(
                run=server.server_create,
                help='Schedule an instance through Placement and cast its build to the '
                     "node's daemon.",
                arguments=(
                    (('--resource-class',), {'required': True, 'metavar': 'CLASS',
                                             'help': "Ironic resource class, or Placement's "
                                                     'CUSTOM_* name'}),
                    (('--trait',), {'action': 'append', 'metavar': 'TRAIT',
                                    'help': 'required trait (repeatable)'}),
                    (('--image',), {'metavar': 'URL', 'help': 'image_source to deploy'}),
                    (('--wait',), {'action': 'store_true',
                                   'help': 'wait until ACTIVE or ERROR (exit 1 on ERROR)'}),
                    (('--timeout',), {'type': seconds, 'default': 1800.0,
                                      'help': 'seconds --wait waits (default 1800)'}))),
            'list': Command(
                run=server.server_list, help='The live (not deleted) instances.',
                arguments=((('--json',), {'action': 'store_true'}),)),
            'show': Command(
                run=server.server_show, help='One instance, deleted or not.',
                arguments=((('instance',), {'metavar': 'UUID'}),
                           (('--json',), {'action': 'store_true'}))),
            **{action: Command(
                run=getattr(server, f'server_{action}'),
                help=f'{action.capitalize()} an instance (cast to its current host).',
                arguments=(
                    (('instance',), {'metavar': 'UUID'}),
                    (('--wait',), {'action': 'store_true',
                                   'help': 'wait until the instance has settled after the '
                                           'action (exit 1 unless it is where the action '
                                           'leads)'}),
                    (('--timeout',), {'type': seconds, 'default': 1800.0,
                                      'help': 'seconds --wait waits (default 1800)'})))
               for action in ('delete', 'reboot', 'stop', 'start')},
        }),
}


def _add_parsers(subparsers: argparse._SubParsersAction) -> None:
    # allow_abbrev=False: argparse would take "--time 5" for "--timeout 5" (and once took
    # "--daemon 4" for "--daemons 4"); an option is written in full or refused.
    for name, category in CATEGORIES.items():
        # prog given: argparse would derive it from the top-level usage, the command list.
        parser = subparsers.add_parser(name, help=category.help, allow_abbrev=False,
                                       prog=f'{PROG} {name}')
        actions = parser.add_subparsers(dest='action', metavar='ACTION', prog=f'{PROG} {name}')
        actions.required = True
        for action, command in category.commands.items():
            sub = actions.add_parser(action, help=command.help, allow_abbrev=False)
            for args, kwargs in command.arguments:
                sub.add_argument(*args, **kwargs)
            sub.set_defaults(command=command)


def build_conf() -> cfg.ConfigOpts:
    conf = cfg.ConfigOpts()
    conf.register_cli_opt(cfg.SubCommandOpt(
        'category', title='Categories', handler=_add_parsers,
        help='Command category; "CATEGORY --help" lists its actions.'))
    return conf


def usage() -> str:
    """The top of ``--help``: the commands first, before the ~70 lines of oslo.config's and
    oslo.log's options (argparse prints a given usage as written)."""
    lines = [f'{PROG} [--config-file PATH] [--config-dir DIR] CATEGORY ACTION [ARGS]', '',
             'commands:']
    for name, category in CATEGORIES.items():
        for action, command in category.commands.items():
            arguments = ' '.join(_synopsis(args, kwargs) for args, kwargs in command.arguments)
            lines.append(f'  {f"{name} {action} {arguments}".rstrip()}')
            lines.append(f'      {command.help}')
    lines += ['', f'"{PROG} CATEGORY ACTION --help" explains an action; the options below '
                  '(configuration files, logging) apply to every command.']
    return '\n'.join(lines)


def _synopsis(args: tuple[str, ...], kwargs: dict[str, Any]) -> str:
    name = args[0]
    if not name.startswith('-'):
        return kwargs.get('metavar', name.upper())
    if kwargs.get('action') == 'store_true':
        shown = name
    else:
        shown = f"{name} {kwargs.get('metavar', name.lstrip('-').upper())}"
    return shown if kwargs.get('required') else f'[{shown}]'


def _body(argv: Sequence[str]) -> int:
    conf = loader.load(loader.config_options_first(argv), PROG, build_conf(), usage=usage(),
                       commands=CATEGORIES)
    try:
        return conf.category.command.run(conf)
    except common.ServiceError as exc:
        exc.command = f'{conf.category.name} {conf.category.action}'  # what was tried
        raise


def main(argv: Sequence[str] | None = None) -> NoReturn:
    common.run(PROG, lambda: _body(sys.argv[1:] if argv is None else argv))
