"""The objects filters and weighers are called with, shaped as Nova passes them for Ironic.

Owns :class:`HostState` (one candidate node) and :class:`RequestSpec` (the build being
scheduled), with the attributes and methods Nova's own filters and weighers, and the downstream
ones written against Nova's interface, read: a filter's ``host_passes(host_state, spec_obj)`` and
a weigher's ``_weigh_object(host_state, weight_properties)`` run unchanged on them. Pure: no I/O,
no logging, no dependency on Nova.

What a :class:`HostState` holds for a node is what Nova's Ironic driver and IronicHostManager
give the scheduler: ``nodename`` and ``uuid`` are the node uuid; ``hypervisor_type`` is
``ironic``; ``stats`` holds ``cpu_arch`` (when known) and every capability as its own key (what
Nova's driver reports, and what ComputeCapabilitiesFilter falls back to); RAM, disk and CPUs come
from the node's properties when known, all free while the node is free and none once it is used
(a node is taken whole). computed adds what it knows of a node beyond Nova: ``resource_class``,
``traits``, ``properties``, ``capabilities``, ``conductor_group``, ``availability_zone``, and
``total``/``free`` units of its class. What is not known to the scheduler (the daemon managing
the node, before a candidate is chosen) is empty, never guessed.

A :class:`RequestSpec` holds the flavor (with its extra specs), the image (computed has no Image
service: no properties), the scheduler hints as Nova stores them (each a list of strings), the
project, user, instance uuid, availability zone and instance count. Both answer Nova's object
protocol where filters use it (``'extra_specs' in flavor``, ``spec_obj.obj_attr_is_set(...)``,
``spec_obj.get_scheduler_hint(...)``, ``'scheduler_hints' in spec_obj``).

Guarantees: building either never raises for a well-formed :class:`NodeFacts` or flavor; the
objects are fresh per scheduling pass (a filter that writes to one, as Nova's candidate filters
do, cannot leak into another pass).
"""

from __future__ import annotations

import dataclasses
import functools
from collections.abc import Iterable, Mapping
from typing import Any

#: Nova's default availability zone (``[DEFAULT] default_availability_zone``), the zone of every
#: node that states none.
DEFAULT_AVAILABILITY_ZONE = 'nova'
HYPERVISOR_TYPE = 'ironic'
#: Nova's Ironic driver reports version 1.
HYPERVISOR_VERSION = 1


class _Fields:
    """Nova's object protocol as filters use it: ``name in obj``, ``obj[name]``,
    ``obj.get(name)``, ``obj.obj_attr_is_set(name)``."""

    def obj_attr_is_set(self, name: str) -> bool:
        return getattr(self, name, None) is not None

    def __contains__(self, name: str) -> bool:
        return self.obj_attr_is_set(name)

    def __getitem__(self, name: str) -> Any:
        try:
            return getattr(self, name)
        except AttributeError:
            raise KeyError(name) from None

    def get(self, name: str, default: Any = None) -> Any:
        value = getattr(self, name, None)
        return default if value is None else value


@dataclasses.dataclass(frozen=True)
class NodeFacts:
    """What the scheduler knows of one candidate node.

    ``properties`` are the node's Ironic properties as far as known (computed keeps only
    ``capabilities`` from Ironic; other keys such as ``cpu_arch``, ``memory_mb``,
    ``local_gb``, ``cpus`` are used when a source provides them); ``capabilities`` the parsed
    capabilities; ``total``/``used`` the units of ``resource_class`` (1 and 0 for a free node).
    """

    uuid: str
    resource_class: str
    traits: frozenset[str] = frozenset()
    capabilities: Mapping[str, str] = dataclasses.field(default_factory=dict)
    properties: Mapping[str, Any] = dataclasses.field(default_factory=dict)
    conductor_group: str = ''
    availability_zone: str = DEFAULT_AVAILABILITY_ZONE
    host: str = ''
    total: int = 1
    used: int = 0


def _int(value: Any) -> int:
    try:
        return int(value)
    except (TypeError, ValueError):
        return 0


class HostState(_Fields):
    """One candidate node, with the attributes of Nova's (Ironic) HostState."""

    # The same for every node: class attributes, so that a pass over thousands of candidates
    # does not set them thousands of times (an assignment on an instance still shadows them).
    hypervisor_type = HYPERVISOR_TYPE
    hypervisor_version = HYPERVISOR_VERSION
    cpu_info = None  # Nova's Ironic driver reports none
    host_ip = None
    ram_allocation_ratio = 1.0
    cpu_allocation_ratio = 1.0
    disk_allocation_ratio = 1.0
    numa_topology = None
    pci_stats = None
    metrics = None
    num_io_ops = 0
    failed_builds = 0
    updated = None
    cell_uuid = None

    def __init__(self, facts: NodeFacts):
        self._facts = facts
        properties = facts.properties
        free = facts.used < facts.total
        memory_mb, local_gb, cpus = (_int(properties[key]) if key in properties else 0
                                     for key in ('memory_mb', 'local_gb', 'cpus'))
        cpu_arch = properties.get('cpu_arch')
        # Nova's Ironic driver: the node's capabilities are stats of their own, beside cpu_arch.
        stats: dict[str, Any] = dict(facts.capabilities)
        if cpu_arch:
            stats['cpu_arch'] = cpu_arch
        self.host = facts.host
        self.nodename = facts.uuid
        self.uuid = facts.uuid
        self.hypervisor_hostname = facts.uuid
        # A bare-metal node is taken whole: all free while it is free, none once used.
        self.total_usable_ram_mb = memory_mb
        self.free_ram_mb = memory_mb if free else 0
        self.total_usable_disk_gb = local_gb
        self.free_disk_mb = local_gb * 1024 if free else 0
        self.disk_mb_used = 0 if free else local_gb * 1024
        self.vcpus_total = cpus
        self.vcpus_used = 0 if free else cpus
        self.stats = stats
        self.num_instances = facts.used
        # computed's own, beyond Nova's HostState.
        self.resource_class = facts.resource_class
        self.traits = facts.traits
        self.capabilities = facts.capabilities
        self.conductor_group = facts.conductor_group
        self.availability_zone = facts.availability_zone
        self.total = facts.total
        self.free = facts.total - facts.used

    # Containers most filters never read are made when first read (each is then the node's
    # own, as on Nova's HostState): a pass makes thousands of host states, and every container
    # made is work for the garbage collector, which showed in the decision's p95.

    @functools.cached_property
    def limits(self) -> dict[str, Any]:
        return {}

    @functools.cached_property
    def aggregates(self) -> list[Any]:
        return []

    @functools.cached_property
    def instances(self) -> dict[str, Any]:
        return {}

    @functools.cached_property
    def service(self) -> dict[str, Any]:
        return {'disabled': False}

    @functools.cached_property
    def allocation_candidates(self) -> list[dict[str, Any]]:
        return []

    @functools.cached_property
    def supported_instances(self) -> list[tuple[str, str, str]]:
        cpu_arch = self._facts.properties.get('cpu_arch')
        return [(cpu_arch, 'baremetal', 'hvm')] if cpu_arch else []

    @functools.cached_property
    def properties(self) -> dict[str, Any]:
        """The node's properties, ``capabilities`` as Ironic's ``"k1:v1,k2:v2"`` string
        (made when first read: most filters never read it, and a pass makes thousands)."""
        properties = dict(self._facts.properties)
        if self.capabilities and 'capabilities' not in properties:
            properties['capabilities'] = ','.join(f'{k}:{v}'
                                                  for k, v in self.capabilities.items())
        return properties

    def __repr__(self) -> str:
        return f'({self.host or "-"}, {self.nodename}) {self.resource_class} free {self.free}'


class Flavor(_Fields):
    """The flavor of a build, with Nova's attribute names."""

    def __init__(self, flavor: Mapping[str, Any]):
        self.flavorid = str(flavor.get('id', ''))
        self.name = flavor.get('name', '')
        self.memory_mb = _int(flavor.get('ram'))
        self.vcpus = _int(flavor.get('vcpus'))
        self.root_gb = _int(flavor.get('disk'))
        self.ephemeral_gb = _int(flavor.get('ephemeral'))
        self.swap = _int(flavor.get('swap'))
        self.extra_specs = dict(flavor.get('extra_specs') or {})
        self.is_public = flavor.get('is_public', True)
        self.description = flavor.get('description')

    def __repr__(self) -> str:
        return f'Flavor({self.name!r}, extra_specs={self.extra_specs!r})'


class ImageMetaProps(_Fields):
    """An image's properties (``hw_architecture``...): attributes and ``get``."""

    def __init__(self, properties: Mapping[str, Any]):
        for key, value in properties.items():
            setattr(self, key, value)


class ImageMeta(_Fields):
    """The image of a build: its reference only (a Glance id or an image URL): computed reads
    no image properties."""

    def __init__(self, ref: str | None, properties: Mapping[str, Any] | None = None):
        self.id = ref
        self.name = ref
        self.properties = ImageMetaProps(properties or {})


def scheduler_hints(hints: Mapping[str, Any] | None) -> dict[str, list[str]]:
    """Hints as Nova's RequestSpec stores them: every value a list of strings."""
    stored: dict[str, list[str]] = {}
    for name, value in (hints or {}).items():
        values = value if isinstance(value, list) else [value]
        stored[str(name)] = [v if isinstance(v, str) else _hint_text(v) for v in values]
    return stored


def _hint_text(value: Any) -> str:
    import json
    # Nova's ListOfStringsField coerces with str(); a JSON value sent as an object would then
    # read back as Python's repr, which no filter can parse: JSON keeps it readable.
    return json.dumps(value) if isinstance(value, (dict, list)) else str(value)


class RequestSpec(_Fields):
    """The build being scheduled, with the attributes of Nova's RequestSpec."""

    def __init__(self, flavor: Mapping[str, Any] | None = None, *,
                 hints: Mapping[str, Any] | None = None, project_id: str | None = None,
                 user_id: str | None = None, instance_uuid: str | None = None,
                 availability_zone: str | None = None, image: str | None = None,
                 num_instances: int = 1, resource_class: str | None = None,
                 traits: Iterable[str] = (), forbidden: Iterable[str] = ()):
        self.flavor = Flavor(flavor or {})
        self.image = ImageMeta(image)
        self.scheduler_hints = scheduler_hints(hints)
        self.project_id = project_id
        self.user_id = user_id
        self.instance_uuid = instance_uuid
        self.availability_zone = availability_zone
        self.num_instances = num_instances
        self.instance_group = None
        self.ignore_hosts = None
        self.force_hosts = None
        self.force_nodes = None
        self.requested_destination = None
        self.retry = None
        self.limits = None
        self.is_bfv = False
        self.security_groups = None
        # computed's own: what Placement was asked for.
        self.resource_class = resource_class
        self.traits = frozenset(traits)
        self.forbidden = frozenset(forbidden)

    def get_scheduler_hint(self, name: str, default: Any = None) -> Any:
        """Nova's reading of a hint: a one-element list is its element."""
        if not self.scheduler_hints:
            return default
        value = self.scheduler_hints.get(name, default)
        if isinstance(value, list) and len(value) == 1:
            return value[0]
        return value

    def to_legacy_filter_properties_dict(self) -> dict[str, Any]:
        """The dict older filters read (Nova's filter_properties)."""
        return {'instance_type': self.flavor, 'scheduler_hints': self.scheduler_hints,
                'project_id': self.project_id, 'num_instances': self.num_instances}

    def __repr__(self) -> str:
        return f'RequestSpec(instance {self.instance_uuid}, {self.flavor!r})'
