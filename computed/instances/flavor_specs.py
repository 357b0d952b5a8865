"""A flavor's extra specs as a Placement request, the way Nova reads them for Ironic.

Owns the translation from a flavor's extra specs to what scheduling asks Placement for: the one
custom resource class a bare-metal node is (one unit of it), the required and the forbidden
traits. Pure: no I/O, no logging; errors name the flavor spec at fault.

The rules (docs/api.md repeats them for operators):

* ``resources:CUSTOM_<CLASS>=1``: the node's class (Nova's normalisation of the node's Ironic
  ``resource_class``: ``gold`` is ``CUSTOM_GOLD``); exactly one non-zero resource class, and
  its amount is 1 (a node is one unit of its class).
* ``resources:VCPU=0``, ``resources:MEMORY_MB=0``, ``resources:DISK_GB=0`` (any class at 0):
  ignored, as Nova's Ironic flavors zero the standard classes. A standard class at non-zero is
  refused: bare-metal nodes have no such inventory, so nothing could ever match. The flavor's
  own ``vcpus``, ``ram`` and ``disk`` are shown to clients and not scheduled on, for the same
  reason.
* ``trait:<TRAIT>=required`` or ``=forbidden``; any other value is refused. A trait both
  required and forbidden is refused.
* ``capabilities:<key>=<value>`` with an exact value (no operator): the node's
  ``properties['capabilities']`` must hold ``key:value``; it becomes the required trait
  :func:`computed.providers.capabilities.capability_trait` names (the daemons report each
  capability as that trait), so Placement decides it, not a post-filter.
* ``capabilities:<key>=<operator> <argument>...`` (Nova's operators: ``<in>``, ``s==``,
  ``>=``, ``<or>``..., :mod:`computed.scheduling.extra_specs_ops`) and nested keys
  (``capabilities:<a>:<b>``): left to the ComputeCapabilitiesFilter on Placement's candidates
  (:attr:`PlacementRequest.post_filtered` lists them); a requirement that can never pass (an
  operator without argument, a numeric one with a non-number) is refused.
* Granular groups (``resources1:``, ``trait1:``, ``group_policy``) are refused; any other key
  (``hw:...``, ``quota:...``) is ignored, as it says nothing to bare-metal scheduling.

:func:`check_spec` applies the per-key rules to one spec (what setting an extra spec checks);
:func:`placement_request` the whole flavor (what a build checks).
"""

from __future__ import annotations

import dataclasses
import re
from collections.abc import Mapping

from computed.providers.capabilities import InvalidCapability, capability_trait
from computed.providers.state import is_custom_name, is_trait_name
from computed.scheduling import extra_specs_ops

RESOURCES = 'resources'
TRAIT = 'trait'
CAPABILITIES = 'capabilities'
REQUIRED = 'required'
FORBIDDEN = 'forbidden'
_GRANULAR = re.compile(r'(resources|trait|required|member_of)[A-Za-z0-9_-]+:.*|group_policy')


class InvalidExtraSpec(ValueError):
    """A flavor's extra spec that scheduling cannot honour; the message names it."""

    def __init__(self, key: str, value: str, reason: str):
        self.key = key
        self.value = value
        super().__init__(f'extra spec {key}={value}: {reason}')


@dataclasses.dataclass(frozen=True)
class PlacementRequest:
    """What to ask Placement for: one unit of ``resource_class``, with every ``required``
    trait and none of the ``forbidden``; ``post_filtered`` the capability specs that
    Placement cannot decide, evaluated on its candidates (``(key, requirement)``, sorted)."""

    resource_class: str
    required: frozenset[str] = frozenset()
    forbidden: frozenset[str] = frozenset()
    post_filtered: tuple[tuple[str, str], ...] = ()


def is_placement_capability(key: str, value: str) -> bool:
    """Whether a ``capabilities:`` spec is decided by Placement (one level, exact value)."""
    namespace, _sep, name = key.partition(':')
    return (namespace == CAPABILITIES and ':' not in name
            and extra_specs_ops.is_exact(value))


def _amount(key: str, value: str) -> int:
    try:
        amount = int(value)
    except ValueError:
        raise InvalidExtraSpec(key, value, 'the amount must be an integer') from None
    if amount < 0:
        raise InvalidExtraSpec(key, value, 'the amount must not be negative')
    return amount


def check_spec(key: str, value: str) -> None:
    """Raise :class:`InvalidExtraSpec` when this one spec can never be honoured."""
    namespace, sep, name = key.partition(':')
    if _GRANULAR.fullmatch(key):
        raise InvalidExtraSpec(key, value, 'granular request groups are not supported')
    if not sep:
        return
    if namespace == RESOURCES:
        amount = _amount(key, value)
        if amount == 0:
            return
        if not is_custom_name(name):
            raise InvalidExtraSpec(key, value, 'a bare-metal node is one unit of a custom '
                                   'class (resources:CUSTOM_<CLASS>=1); standard classes '
                                   'must be 0 or left out')
        if amount != 1:
            raise InvalidExtraSpec(key, value, 'a bare-metal node is one unit of its class: '
                                   'the amount must be 1')
    elif namespace == TRAIT:
        if not is_trait_name(name):
            raise InvalidExtraSpec(key, value, f'not a trait name: {name!r}')
        if value not in (REQUIRED, FORBIDDEN):
            raise InvalidExtraSpec(key, value, f'the value must be {REQUIRED} or {FORBIDDEN}')
    elif namespace == CAPABILITIES:
        if not is_placement_capability(key, value):
            try:
                extra_specs_ops.check_requirement(value)
            except extra_specs_ops.InvalidRequirement as exc:
                raise InvalidExtraSpec(key, value, str(exc)) from None
            if not all(part.strip() for part in name.split(':')):
                raise InvalidExtraSpec(key, value, 'empty capability name')
            return
        try:
            capability_trait(name.strip(), value.strip())
        except InvalidCapability as exc:
            raise InvalidExtraSpec(key, value, str(exc)) from None


def placement_request(extra_specs: Mapping[str, str]) -> PlacementRequest:
    """The Placement request a flavor with ``extra_specs`` makes (rules in the module
    docstring); :class:`InvalidExtraSpec` naming the first spec at fault."""
    classes: list[str] = []
    required: set[str] = set()
    forbidden: set[str] = set()
    post_filtered: list[tuple[str, str]] = []
    for key in sorted(extra_specs):
        value = extra_specs[key]
        check_spec(key, value)
        namespace, _sep, name = key.partition(':')
        if namespace == RESOURCES and _amount(key, value) > 0:
            classes.append(name)
        elif namespace == TRAIT:
            (required if value == REQUIRED else forbidden).add(name)
        elif namespace == CAPABILITIES and is_placement_capability(key, value):
            required.add(capability_trait(name.strip(), value.strip()))
        elif namespace == CAPABILITIES:
            post_filtered.append((key, value))
    if len(set(classes)) != 1:
        found = ', '.join(sorted(set(classes))) or 'none'
        raise InvalidExtraSpec(RESOURCES, '*', 'a bare-metal flavor needs exactly one '
                               f'resources:CUSTOM_<CLASS>=1 (found: {found})')
    both = required & forbidden
    if both:
        trait = sorted(both)[0]
        raise InvalidExtraSpec(f'{TRAIT}:{trait}', FORBIDDEN, 'the trait is also required')
    return PlacementRequest(classes[0], frozenset(required), frozenset(forbidden),
                            tuple(post_filtered))
