"""The RPC version a sender may use: ``[upgrade_levels]`` pins, decided without I/O.

Owns the history of each of computed's RPC interfaces and what a message of each version holds,
so that new code talking to old code never sends what old code refuses (Nova's
``[upgrade_levels]``):

* ``reports`` (daemons -> ``computed-reporter``, :mod:`computed.providers.report`): 1.0 named
  the claim epoch ``epoch``; 1.1 ``claim_epoch``.
* ``instances`` (the API, ``computed-manage`` and the daemons -> a daemon,
  :mod:`computed.instances.rpcapi`): 1.0 casts carry ``instance_uuid``; 1.1 adds
  ``member_epoch``; 1.2 adds the method ``rebuild_instance`` (with ``preserve_ephemeral``),
  which a sender below 1.2 must not send at all (:func:`sends`): the compute API refuses the
  rebuild instead (409) while any daemon serves less.

A pin is ``auto`` or one of the interface's versions (:func:`check_pin`). :func:`cap` turns a pin
and the versions the live peers publish into the version to send at: a number is obeyed; ``auto``
is the lowest version any live peer serves, the newest when no peer is live (a peer that comes
later is seen at the next look), never above what this code knows. A peer that publishes nothing
is of release 0.1.0, the first, which published no versions and serves 1.1 of both; one whose
version cannot be read, or of another major version, is taken as serving the oldest. The sender
then builds the message of that version (:func:`instance_arguments`, :func:`report_fields`) and
gives it to oslo.messaging as the call's version and ``version_cap``, so a message above the cap
is refused on the sending side (``RPCVersionCapError``), never by the receiver.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Any

AUTO = 'auto'
#: Every version of each interface, oldest first; the last is what this code sends and serves.
HISTORY: Mapping[str, tuple[str, ...]] = {
    'reports': ('1.0', '1.1'),
    'instances': ('1.0', '1.1', '1.2'),
}
#: What a live peer that publishes no versions serves: release 0.1.0 published none.
UNPUBLISHED: Mapping[str, str] = {'reports': '1.1', 'instances': '1.1'}
#: The instance casts that appeared after 1.0, and the version that brought each.
INSTANCE_METHODS_SINCE: Mapping[str, str] = {'rebuild_instance': '1.2'}


def newest(interface: str) -> str:
    """The version this code sends and serves of ``interface``."""
    return HISTORY[interface][-1]


def choices(interface: str) -> tuple[str, ...]:
    """What ``[upgrade_levels] <interface>`` may be set to."""
    return (AUTO, *HISTORY[interface])


def check_pin(interface: str, value: str) -> str:
    """``value`` as a pin of ``interface`` (stripped); ValueError naming the choices."""
    value = value.strip()
    if value not in choices(interface):
        raise ValueError(f'{value!r} is not one of {", ".join(choices(interface))}')
    return value


def _key(version: str) -> tuple[int, int] | None:
    major, dot, minor = version.partition('.')
    if not (dot and major.isdigit() and minor.isdigit()):
        return None
    return int(major), int(minor)


def _served(interface: str, published: str | None) -> tuple[int, int]:
    """What a peer that published ``published`` serves, as a comparable key."""
    oldest = _key(HISTORY[interface][0])
    if published is None:
        published = UNPUBLISHED[interface]
    key = _key(published) if isinstance(published, str) else None
    if key is None or key[0] != oldest[0]:
        return oldest  # unreadable, or another major: only the oldest is safe
    return key


def cap(interface: str, pin: str, served: Iterable[str | None]) -> str:
    """The version to send ``interface`` at: ``pin`` when a number, else the lowest version any
    of ``served`` (the live peers' published versions; None: published none) serves, and at
    most :func:`newest`."""
    history = HISTORY[interface]
    if pin != AUTO:
        return pin
    keys = [_served(interface, version) for version in served]
    if not keys:
        return history[-1]
    lowest = min(keys)
    # The highest version we know that the lowest peer still serves.
    return max((v for v in history if _key(v) <= lowest), key=_key, default=history[0])


def sends(version: str, method: str) -> bool:
    """Whether an instance cast of ``method`` exists at ``version`` (a daemon serving less
    refuses it: ``UnsupportedVersion`` in its log, the instance left transitional)."""
    since = _key(INSTANCE_METHODS_SINCE.get(method, HISTORY['instances'][0]))
    key = _key(version)
    return key is not None and since is not None and key >= since


def instance_arguments(version: str, instance_uuid: str, member_epoch: int | None,
                       **extra: Any) -> dict[str, Any]:
    """The arguments of an instance cast at ``version``: ``member_epoch`` from 1.1 on; ``extra``
    (a method's own arguments, e.g. 1.2's ``preserve_ephemeral``) as given: the caller checked
    that the method exists at ``version`` (:func:`sends`)."""
    arguments: dict[str, Any] = {'instance_uuid': instance_uuid}
    if member_epoch is not None and _key(version) >= (1, 1):
        arguments['member_epoch'] = member_epoch
    arguments.update(extra)
    return arguments


def report_fields(version: str, wire: Mapping[str, Any]) -> dict[str, Any]:
    """A report's fields (:meth:`computed.providers.report.Report.to_dict`) as ``version``
    names them: before 1.1 the claim epoch is ``epoch``."""
    fields = dict(wire)
    if _key(version) < (1, 1) and 'claim_epoch' in fields:
        fields = {('epoch' if key == 'claim_epoch' else key): value
                  for key, value in fields.items()}
    return fields
