"""What a Placement resource provider for one Ironic node looks like.

Owns the provider semantics, pure (no I/O, no logging): from a
:class:`computed.baremetal.driver.Node` to a :class:`ProviderState`, from a state to
the Placement inventory, and the validation of a state that arrived over the
bus. Compatible with Nova's Ironic driver (``nova/virt/ironic/driver.py``,
``update_provider_tree``), so a Nova scheduler and existing flavors
(``resources:CUSTOM_<RC>=1``) work unchanged:

* provider uuid = node uuid, and name = node uuid too (Nova names the compute
  node, hence the provider, by ``hypervisor_hostname`` = the node uuid);
* one inventory record of ``normalise_resource_class(node.resource_class)``
  with total 1 and reserved 1 when the node cannot take a new instance;
* traits = the node's traits, plus one custom trait per capability in
  ``properties['capabilities']`` (:mod:`computed.providers.capabilities`, so
  flavors' ``capabilities:<key>=<value>`` are decided by Placement), plus any
  the caller adds (such as Nova's ``COMPUTE_NODE``), nothing else.

Guarantees: a :class:`ProviderState` is always valid for Placement (uuid in
canonical form, names matching Placement's patterns and lengths, reserved 0
or 1, traits sorted and unique); anything else raises
:class:`InvalidProvider` naming the field and the uuid when known.

Threads: nothing here is mutable: a :class:`ProviderState` is frozen, and it is built on the node
thread, held in the outbox and read on the report thread (and on the reporter's threads once
parsed again). The one module-level cache (resource class names, ``functools.lru_cache``) is
safe to call from any thread: CPython's lru_cache keeps its own structure consistent, and two
threads computing one name at once both get an equal string.
"""

from __future__ import annotations

import dataclasses
import functools
import re
import uuid as uuidlib
from collections.abc import Iterable, Mapping
from typing import Any

from computed.baremetal.driver import Node
from computed.providers.capabilities import InvalidCapability, capability_traits

CUSTOM_PREFIX = 'CUSTOM_'
# Placement's own limits (placement/schemas): names are at most 255
# characters, provider names at most 200.
_MAX_NAME = 255
_MAX_PROVIDER_NAME = 200
_CUSTOM_RE = re.compile(r'CUSTOM_[A-Z0-9_]+')
_STANDARD_TRAIT_RE = re.compile(r'[A-Z0-9_]+')
_NON_ALNUM_RE = re.compile(r'[^0-9A-Za-z]+')

# Ironic states as Nova's driver reads them (nova/virt/ironic/ironic_states):
# None is Ironic's NOSTATE, kept as "good" by Nova for old nodes.
POWER_ERROR = 'error'
PROVISION_AVAILABLE = 'available'
_BAD_POWER_STATES = frozenset({POWER_ERROR, None})
_GOOD_PROVISION_STATES = frozenset({PROVISION_AVAILABLE, None})

_FIELDS = ('uuid', 'name', 'resource_class', 'reserved', 'traits')


class InvalidProvider(ValueError):
    """A provider state that Placement would refuse or that is malformed.

    ``uuid`` is the provider's uuid when it could be read (else None),
    ``field`` the first offending field.
    """

    def __init__(self, uuid: str | None, field: str, reason: str):
        super().__init__(
            f'provider {uuid or "<no uuid>"}: field {field!r}: {reason}')
        self.uuid = uuid
        self.field = field
        self.reason = reason


@dataclasses.dataclass(frozen=True, slots=True)
class ProviderState:
    """The state computed wants Placement to hold for one provider.

    Build it with :func:`provider_from_node` or :meth:`from_dict`; the
    constructor validates as well, so an instance is always valid.
    """

    uuid: str
    name: str
    resource_class: str
    reserved: int
    traits: tuple[str, ...] = ()

    def __post_init__(self) -> None:
        _validate(self)

    def to_dict(self) -> dict[str, Any]:
        """A JSON-serialisable form, the inverse of :meth:`from_dict`."""
        return {'uuid': self.uuid, 'name': self.name,
                'resource_class': self.resource_class,
                'reserved': self.reserved, 'traits': list(self.traits)}

    @classmethod
    def from_dict(cls, data: Any) -> ProviderState:
        """Validate untrusted input (a bus message) into a state.

        Unknown keys are refused: the report envelope carries the protocol
        version, and a field this code would drop silently could change
        what Placement should hold.

        :raises InvalidProvider: naming the field (and uuid when readable).
        """
        if not isinstance(data, Mapping):
            raise InvalidProvider(None, '<provider>',
                                  f'expected an object, got '
                                  f'{type(data).__name__}')
        raw_uuid = data.get('uuid')
        known_uuid = raw_uuid if isinstance(raw_uuid, str) else None
        unknown = sorted(str(k) for k in data if k not in _FIELDS)
        if unknown:
            raise InvalidProvider(known_uuid, unknown[0], 'unknown field')
        for key in _FIELDS:
            if key not in data:
                raise InvalidProvider(known_uuid, key, 'missing')
        traits = data['traits']
        if not isinstance(traits, (list, tuple)):
            raise InvalidProvider(known_uuid, 'traits',
                                  f'expected a list, got '
                                  f'{type(traits).__name__}')
        for trait in traits:
            if not isinstance(trait, str):
                raise InvalidProvider(known_uuid, 'traits',
                                      f'expected strings, got {trait!r}')
        return cls(uuid=data['uuid'], name=data['name'],
                   resource_class=data['resource_class'],
                   reserved=data['reserved'],
                   traits=tuple(sorted(set(traits))))


def _validate(state: ProviderState) -> None:
    uid = state.uuid
    if not isinstance(uid, str) or not _is_canonical_uuid(uid):
        raise InvalidProvider(None, 'uuid',
                              f'not a canonical uuid: {uid!r}')
    if (not isinstance(state.name, str) or not state.name
            or len(state.name) > _MAX_PROVIDER_NAME):
        raise InvalidProvider(uid, 'name',
                              f'expected 1-{_MAX_PROVIDER_NAME} characters, '
                              f'got {state.name!r}')
    if not is_custom_name(state.resource_class):
        raise InvalidProvider(uid, 'resource_class',
                              f'not a custom resource class name: '
                              f'{state.resource_class!r}')
    # bool is an int subclass; True is not a Placement reserved amount.
    if type(state.reserved) is not int or state.reserved not in (0, 1):
        raise InvalidProvider(uid, 'reserved',
                              f'expected 0 or 1, got {state.reserved!r}')
    traits = state.traits
    if not isinstance(traits, tuple):
        raise InvalidProvider(uid, 'traits', 'expected a tuple')
    for trait in traits:
        if not is_trait_name(trait):
            raise InvalidProvider(uid, 'traits',
                                  f'not a valid trait name: {trait!r}')
    # Sorted and unique, so equal states compare equal (the client's cache
    # and the daemon's change detection rely on it).
    if list(traits) != sorted(set(traits)):
        raise InvalidProvider(uid, 'traits', 'must be sorted and unique')


def _is_canonical_uuid(value: str) -> bool:
    try:
        return str(uuidlib.UUID(value)) == value
    except ValueError:
        return False


def is_custom_name(name: Any) -> bool:
    """Whether ``name`` is a valid custom resource class or trait name."""
    return (isinstance(name, str) and len(name) <= _MAX_NAME
            and _CUSTOM_RE.fullmatch(name) is not None)


def is_trait_name(name: Any) -> bool:
    """Whether ``name`` has the form of a trait Placement may know.

    Custom traits are created on demand; a standard (non-CUSTOM_) trait must
    be one of os-traits', which only Placement can tell.
    """
    if not (isinstance(name, str) and 0 < len(name) <= _MAX_NAME):
        return False
    if name.startswith(CUSTOM_PREFIX):
        # "CUSTOM_" alone passed as a standard name, which Placement refuses for good.
        return is_custom_name(name)
    return _STANDARD_TRAIT_RE.fullmatch(name) is not None


def normalise_resource_class(name: str) -> str:
    """Nova's custom resource class for an Ironic ``resource_class``.

    Runs of non-alphanumerics become ``_``, then upper case (in that order,
    Nova bug 1762789), then the ``CUSTOM_`` prefix. Like Nova
    (``nova.utils.normalize_rc_name``, ``os_resource_classes.normalize_name``)
    the prefix is added even when the name already has one (``CUSTOM_GOLD``
    becomes ``CUSTOM_CUSTOM_GOLD``): flavors written for Nova name that
    class, and allocations made through Nova are against it.
    """
    return _normalised(name)


@functools.lru_cache(maxsize=1024)
def _normalised(name: str) -> str:
    # One string per class, shared by the states of every node of that class (a daemon keeps
    # the confirmed state of thousands of nodes); a fleet has a handful of classes.
    return CUSTOM_PREFIX + _NON_ALNUM_RE.sub('_', name).upper()


def node_unavailable(node: Node) -> bool:
    """Nova's "resources unavailable": the node cannot be scheduled to."""
    return (node.maintenance
            or node.power_state in _BAD_POWER_STATES
            or node.provision_state not in _GOOD_PROVISION_STATES)


def node_in_use(node: Node) -> bool:
    """Nova's "resources used": an instance is (being) placed on the node."""
    return node.instance_uuid is not None


def node_reserved(node: Node, reserve_in_use: bool = True) -> int:
    """1 when the node cannot take a new instance, else 0 (as Nova).

    A node with an instance stays reserved: when its allocation goes away,
    cleaning usually starts, and the node must not be offered before it is
    ``available`` again. ``reserve_in_use=False`` is Nova's
    ``[workarounds] skip_reserve_in_use_ironic_nodes``.
    """
    if node_unavailable(node):
        return 1
    return int(reserve_in_use and node_in_use(node))


def provider_from_node(node: Node, extra_traits: Iterable[str] = (),
                       reserve_in_use: bool = True) -> ProviderState | None:
    """The provider state for ``node``, or None if it has no resource class.

    ``extra_traits`` are added to the node's own and to its capability traits
    (the daemon may want Nova's ``COMPUTE_NODE``); the caller logs a node
    without resource class.

    :raises InvalidProvider: the node's data cannot make a valid provider
        (a malformed uuid or trait, field ``capabilities`` for a capabilities
        string that cannot be mapped).
    """
    if not node.resource_class or not node.resource_class.strip():
        return None
    try:
        capabilities = capability_traits(node.capabilities)
    except InvalidCapability as exc:
        raise InvalidProvider(node.uuid, 'capabilities', str(exc)) from None
    traits = tuple(sorted(set(node.traits) | set(capabilities) | set(extra_traits)))
    return ProviderState(
        uuid=node.uuid, name=node.uuid,
        resource_class=normalise_resource_class(node.resource_class),
        reserved=node_reserved(node, reserve_in_use), traits=traits)


def inventory(state: ProviderState) -> dict[str, dict[str, Any]]:
    """The provider's Placement inventories (``PUT .../inventories`` body)."""
    return {state.resource_class: {
        'total': 1, 'reserved': state.reserved, 'min_unit': 1,
        'max_unit': 1, 'step_size': 1, 'allocation_ratio': 1.0}}
