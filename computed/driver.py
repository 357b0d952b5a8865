"""The bare metal driver interface the daemon codes against.

Owns the product's picture of one Ironic node (:class:`Node`), the abstract
:class:`BaremetalDriver` every backend implements, and the errors a driver
may raise. Concrete drivers live outside this package (``drivers.ironic``),
the way tooz keeps ``tooz.coordination`` apart from ``tooz.drivers``: the
daemon imports only this module and receives a driver object.

Guarantees a driver gives its caller:

* ``list_nodes`` returns every node it is configured to see, each exactly
  once, or raises; it never returns a partial list. A node whose data is
  malformed is left out (and logged with its uuid) rather than failing the
  whole list.
* Only :class:`DriverError` (and subclasses) escape a driver; backend
  exceptions (openstacksdk, keystoneauth) are translated.
* Nothing here imports eventlet; drivers block in plain calls, so they work
  under real threads and under the daemon's monkey-patching alike.

Later operations (deploy, undeploy, power) are added to
:class:`BaremetalDriver` as further methods; ``close`` and the context
manager protocol already exist so callers can release backend resources.
"""

from __future__ import annotations

import abc
import dataclasses
from typing import Mapping


@dataclasses.dataclass(frozen=True)
class Node:
    """What computed needs to know about one Ironic node, as one snapshot.

    ``traits`` is sorted so two snapshots of the same node compare equal
    whatever order Ironic returned them in. ``properties`` keeps only
    ``capabilities``: it is the one key scheduling still reads (boot mode
    and similar flags become traits/provider data); CPU, memory and disk
    sizes are not reported since resource classes replaced them, and the
    rest of ``properties`` can be large and operator-defined. It is excluded
    from the hash (a dict is not hashable) but still compared.

    ``updated_at`` is Ironic's ISO 8601 timestamp, or None when the node was
    never updated or the driver could not ask for it (see the driver).
    """

    uuid: str
    name: str | None = None
    resource_class: str | None = None
    provision_state: str | None = None
    target_provision_state: str | None = None
    power_state: str | None = None
    maintenance: bool = False
    instance_uuid: str | None = None
    traits: tuple[str, ...] = ()
    conductor_group: str = ''
    shard: str | None = None
    last_error: str | None = None
    updated_at: str | None = None
    properties: Mapping[str, str] = dataclasses.field(
        default_factory=dict, hash=False)

    @property
    def capabilities(self) -> str | None:
        return self.properties.get('capabilities')


class DriverError(Exception):
    """A driver could not do what it was asked.

    ``what`` names the request or object the failure is about (a node
    uuid, ``list nodes``), so a log line is useful on its own.
    """

    def __init__(self, what: str, reason: str):
        super().__init__(f'{what}: {reason}')
        self.what = what
        self.reason = reason


class DriverUnavailable(DriverError):
    """The backend could not be reached (or kept failing) after retries.

    ``attempts`` is how many times the request was tried; ``cause`` the
    last underlying error, for logs.
    """

    def __init__(self, what: str, reason: str, attempts: int = 1,
                 cause: BaseException | None = None):
        super().__init__(what, f'{reason} (after {attempts} attempt(s))')
        self.attempts = attempts
        self.cause = cause


class MalformedNode(DriverError):
    """The backend returned a node computed cannot interpret.

    ``uuid`` is the node's uuid when it could be read, else None;
    ``field`` the first offending field.
    """

    def __init__(self, uuid: str | None, field: str, reason: str):
        super().__init__(f'node {uuid or "<no uuid>"}',
                         f'field {field!r}: {reason}')
        self.uuid = uuid
        self.field = field


class BaremetalDriver(abc.ABC):
    """The operations the daemon performs on bare metal nodes."""

    @abc.abstractmethod
    def list_nodes(self) -> list[Node]:
        """Every node this driver is configured to see, each once.

        :raises DriverUnavailable: the backend could not be reached after
            the driver's retries.
        :raises DriverError: the backend refused the request (a
            configuration problem such as an unsupported API version).
        """

    @abc.abstractmethod
    def get_node(self, uuid: str) -> Node | None:
        """One node by uuid, or None if the backend does not know it.

        A node outside this driver's filters (another conductor group or
        shard) is returned too: filters decide what is listed, not what
        exists.

        :raises DriverUnavailable: as for :meth:`list_nodes`.
        :raises MalformedNode: the node exists but cannot be interpreted.
        """

    def close(self) -> None:
        """Release backend resources (connections). Idempotent."""

    def __enter__(self) -> 'BaremetalDriver':
        return self

    def __exit__(self, *exc_info: object) -> None:
        self.close()
