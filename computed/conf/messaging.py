"""Options of the ``[messaging]`` group: how computed's processes trust each other's RPC messages.

The bus itself (``[DEFAULT] transport_url``, ``[oslo_messaging_*]``) is oslo.messaging's; this
group holds what computed adds on top of it: signed messages (:mod:`computed.runtime.signing`).
"""

from __future__ import annotations

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
]


def register_opts(conf: cfg.ConfigOpts) -> None:
    conf.register_group(group())
    conf.register_opts(ALL_OPTS, group=NAME)


def list_opts() -> dict[cfg.OptGroup, list[cfg.Opt]]:
    return {group(): ALL_OPTS}
