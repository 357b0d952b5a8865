"""Options of the ``[messaging]`` group: how computed's processes trust each other's RPC messages,
and computed's own defaults for oslo.messaging's options.

The bus itself (``[DEFAULT] transport_url``, ``[oslo_messaging_*]``) is oslo.messaging's; this
group holds what computed adds on top of it: signed messages (:mod:`computed.runtime.signing`)
and the lock directory of oslo.messaging's queue manager.

computed turns oslo.messaging's queue manager on (``[oslo_messaging_rabbit] use_queue_manager``,
:data:`LIBRARY_DEFAULTS`): without it, a stopping RPC server's connection deletes its fanout
queues at close and, while it waits for the broker's answer, acknowledges casts the broker
still pushes to its consumers, which nobody handles any more (lost casts;
docs/operations.md). With it, the close skips that delete and the broker puts back what the
server had not taken. The queue manager names a process's queues
``<hostname>:<processname>:<counter>`` with the counter shared in /dev/shm under an external
lock (``lock_path``); two processes of one host with the same processname would share reply
queues, so :func:`process_name` gives each computed process its own.
"""

from __future__ import annotations

import os
import re

import oslo_messaging.opts
from oslo_config import cfg

NAME = 'messaging'


def group() -> cfg.OptGroup:
    # A fresh object per ConfigOpts (see computed.conf.database).
    return cfg.OptGroup(
        NAME,
        title='Messaging',
        help='Signed RPC messages between the API, the daemons and the reporters.')


ALL_OPTS = [
    cfg.ListOpt(
        'signing_keys',
        default=[],
        secret=True,
        help='HMAC-SHA256 keys of the fleet (each at least 32 characters, no commas; e.g. the '
             'output of "openssl rand -hex 32"). When set, every cast and call this process '
             'sends is signed with the first key, and every one it receives must be signed by '
             'one of them, recently, and not seen before; the others are refused, logged and '
             'counted (computed_rpc_messages_refused). Give every daemon, reporter, API and '
             'computed-manage the same list. To rotate: add the new key last everywhere, then '
             'move it first everywhere, then remove the old one (docs/operations.md). Empty: '
             'nothing is signed, and a message is only checked for its shape '
             '(docs/security.md).'),
    cfg.BoolOpt(
        'accept_unsigned',
        default=False,
        help='With signing_keys set, also accept messages that carry no signature (from '
             'processes not yet given the keys, or no longer), counted as '
             'computed_rpc_messages_unsigned_accepted; a message signed with a key none of '
             'signing_keys verifies is still refused. Only for turning signing on or off '
             'without refusing anything: set it with the keys everywhere, restart each '
             'process, then once every process signs (the count no longer grows anywhere) '
             'remove it and restart each again (docs/operations.md). While it is set, anyone '
             'who can publish on the bus can send unsigned messages that are accepted. '
             'Without signing_keys it changes nothing.'),
    cfg.IntOpt(
        'signature_max_age',
        default=300,
        min=10,
        max=3600,
        help='Seconds a signed message stays acceptable on either side of the receiver\'s '
             'clock: the clocks\' skew plus how long a message may wait in a queue. A '
             'replay within twice this window is refused by the receiver\'s memory of what it '
             'received; an older one as expired. A cast refused as expired is carried out '
             'anyway from its recorded state ([fleet] resume_interval); a refused report is '
             'sent again.'),
    cfg.StrOpt(
        'lock_path',
        default='/var/lib/computed/lock',
        help='Directory of the inter-process lock oslo.messaging\'s queue manager takes to name '
             'this process\'s RabbitMQ queues (computed turns [oslo_messaging_rabbit] '
             'use_queue_manager on: a stopping server then loses no cast in flight, '
             'docs/operations.md). Created at start when missing; the process must be able to '
             'write in it. Only used with a rabbit:// transport and the queue manager on; it '
             'replaces [oslo_concurrency] lock_path and OSLO_LOCK_PATH for computed\'s '
             'processes.'),
]

#: computed's defaults for options oslo.messaging owns, (group, option, value): an operator's
#: file still sets them. The sample config shows oslo.messaging's own default for these (its
#: generator hook would have to change oslo.messaging's private option objects).
LIBRARY_DEFAULTS = (
    ('oslo_messaging_rabbit', 'use_queue_manager', True),
)

# What a queue manager's processname may hold: it is part of a file name in /dev/shm and of
# queue names.
_UNSAFE = re.compile(r'[^A-Za-z0-9._-]')


def register_opts(conf: cfg.ConfigOpts) -> None:
    conf.register_group(group())
    conf.register_opts(ALL_OPTS, group=NAME)


def set_library_defaults(conf: cfg.ConfigOpts) -> None:
    """Apply :data:`LIBRARY_DEFAULTS` to ``conf``, registering oslo.messaging's options first
    (as its driver would when it loads; registering them again is a no-op)."""
    for group, opts in oslo_messaging.opts.list_opts():
        conf.register_opts(opts, group=group)
    for group, option, value in LIBRARY_DEFAULTS:
        conf.set_default(option, value, group=group)


def process_name(service: str, member: str | None) -> str:
    """The default ``[oslo_messaging_rabbit] processname`` of a computed process:
    ``computed-<service>-<member>`` for one member of a fleet (a daemon's or a reporter's
    ``[DEFAULT] host``, unique per service), ``computed-<service>-<pid>`` for a process that is
    not one (the API's processes, computed-manage: several may run on one host at once)."""
    name = f'computed-{service}-{member if member is not None else os.getpid()}'
    return _UNSAFE.sub('_', name)


def list_opts() -> dict[cfg.OptGroup, list[cfg.Opt]]:
    return {group(): ALL_OPTS}
