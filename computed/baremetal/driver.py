"""The bare metal driver interface the daemon codes against.

Owns the product's picture of one Ironic node (:class:`Node`), the abstract
:class:`BaremetalDriver` every backend implements, and the errors a driver
may raise. Concrete drivers live outside this package (``drivers/ironic/``,
installed as ``computed_ironic``) and are loaded by name from the entry point
group :data:`DRIVER_NAMESPACE` (:func:`load_driver`), the way OpenStack
services load theirs with stevedore: computed imports only this module.

Guarantees a driver gives its caller:

* ``list_nodes`` returns every node it is configured to see, each exactly
  once, or raises; it never returns a partial list. A node whose data is
  malformed is left out (and logged with its uuid) rather than failing the
  whole list.
* ``list_nodes_reusing(known)`` is ``list_nodes`` where a listed node equal to
  ``known``'s node of that uuid is ``known``'s object (:func:`reuse_known`).
* Only :class:`DriverError` (and subclasses) escape a driver; backend
  exceptions (openstacksdk, keystoneauth) are translated.
* Nothing here imports eventlet; drivers block in plain calls, so they work
  under real threads and under the daemon's monkey-patching alike.

Operations on one node (``deploy``, ``rebuild``, ``undeploy``, ``set_power``,
``clear_instance``) block until the node reached the requested state or the
``timeout`` passed, and raise a :class:`DriverError` naming the node
otherwise. They are written so that calling one again after a crash or a
timeout is safe: each starts from the node's real state (a node already
``active`` with the same instance is not deployed twice, a node already
``available`` is not undeployed). ``close`` and the context manager protocol
let callers release backend resources.

**Guarded writes.** Each operation takes an optional ``guard`` (a :class:`WriteGuard`): the
driver calls ``guard.check()`` before every write request it sends (each retry included) and
before every poll of a wait, and lets what ``check`` raises propagate unchanged, so a caller
that lost the right to act on the node (its claim, see :mod:`computed.fleet.claims`) stops the
operation before its next write instead of minutes later. That exception is the one that is not
a :class:`DriverError`.

The operations are not abstract: a read-only driver (a test double listing
nodes) need not implement them; the default raises :class:`NotSupported`.
"""

from __future__ import annotations

import abc
import dataclasses
import sys
from collections.abc import Mapping
from types import MappingProxyType
from typing import Any, Protocol

from stevedore import driver as stevedore_driver
from stevedore import exception as stevedore_exc

# The entry point group concrete drivers register under (setup.cfg), by name.
DRIVER_NAMESPACE = 'computed.baremetal.drivers'


def shared_uuid(uuid: str) -> str:
    """The one string object of node uuid ``uuid`` (canonical form) in this process.

    A daemon holds every node's uuid in several places: the catalog's nodes, the providers
    read from the database, the set the fleet shares out, the ownership plan, the claims.
    Each listing, each database read and each event parses new copies of the same text; going
    through here makes them one object (50,000 copies of a uuid string are 4.2 MB). The table
    is the interpreter's own (:func:`sys.intern`), which drops a string nobody else holds, so a
    deleted node's uuid does not stay behind.
    """
    return sys.intern(uuid)


def reuse_known(node: Node, known: Mapping[str, Node]) -> Node:
    """``known``'s node of ``node``'s uuid if it is equal to ``node``, else ``node``."""
    kept = known.get(node.uuid)
    return kept if kept is not None and kept == node else node


#: The ``properties`` of a node without capabilities: one shared, read-only mapping.
NO_PROPERTIES: Mapping[str, str] = MappingProxyType({})


@dataclasses.dataclass(frozen=True, slots=True)
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

    A daemon keeps one per node of the fleet (50,000 of them must fit in its
    memory budget): slots, no per-instance dict, and a driver shares the
    values thousands of nodes repeat (states, resource class, traits,
    :data:`NO_PROPERTIES`).
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
        default_factory=lambda: NO_PROPERTIES, hash=False)

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


class DeployFailed(DriverError):
    """The backend refused or failed to deploy the node.

    ``reason`` is the backend's own explanation (Ironic's ``last_error`` or
    the refusal's message): it becomes the instance's fault.
    """

    def __init__(self, node_uuid: str, reason: str):
        super().__init__(f'node {node_uuid}', reason)
        self.node_uuid = node_uuid


class OperationTimedOut(DriverError):
    """The node did not reach the requested state within the timeout.

    ``state`` is the last state seen; the operation may still complete
    later on the backend's side.
    """

    def __init__(self, node_uuid: str, operation: str, timeout: float,
                 state: str | None):
        super().__init__(f'node {node_uuid}',
                         f'{operation} not done after {timeout:g} s '
                         f'(last state {state})')
        self.node_uuid = node_uuid
        self.operation = operation
        self.state = state


class NotSupported(DriverError):
    """This driver does not implement the operation."""


#: The power targets :meth:`BaremetalDriver.set_power` accepts (Ironic's).
POWER_ON = 'power on'
POWER_OFF = 'power off'
REBOOT = 'rebooting'
POWER_TARGETS = frozenset({POWER_ON, POWER_OFF, REBOOT})


class WriteGuard(Protocol):
    """Whether the caller may still write to the node an operation acts on."""

    def check(self) -> None:
        """Return when it may; raise (the caller's own exception) when it may not."""


class BaremetalDriver(abc.ABC):
    """The operations the daemon performs on bare metal nodes."""

    @classmethod
    def from_conf(cls, conf: Any) -> BaremetalDriver:
        """A driver configured from computed's configuration (its own section); what
        :func:`load_driver`'s callers construct it with."""
        raise NotSupported(f'driver {cls.__name__}', 'configuration from computed.conf')

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

    def list_nodes_reusing(self, known: Mapping[str, Node]) -> list[Node]:
        """:meth:`list_nodes`, where a listed node equal to ``known``'s node of the same uuid
        (the nodes the caller keeps) is ``known``'s object (its uuid string too).

        In a steady state almost every node is unchanged, so a listing then costs no memory
        beyond the nodes that changed, and readers find an unchanged node by identity. This
        default lists, then swaps: every node's new copy is alive at once (at 50,000 nodes, tens
        of MB the allocator then keeps). A driver that parses page by page does better by
        swapping each node as it parses it (:func:`reuse_known`), as ``computed_ironic`` does.
        """
        return [reuse_known(node, known) for node in self.list_nodes()]

    def lists(self, node: Node) -> bool:
        """Whether :meth:`list_nodes` would list ``node`` (it passes this driver's filters).

        A node :meth:`get_node` finds that the listing would not show belongs to another fleet
        (another conductor group or shard): not this fleet's to report, nor to delete.
        """
        return True

    def deploy(self, node_uuid: str, instance_uuid: str,
               image_source: str | None, *, timeout: float,
               guard: WriteGuard | None = None,
               configdrive: dict[str, Any] | None = None) -> Node:
        """Deploy ``instance_uuid`` on the node; the node once ``active``.

        Associates the instance with the node, sets the image, provisions to
        ``active`` and waits. A node already active with this instance is
        returned as it is; one already deploying it is waited for.
        ``configdrive`` (``meta_data``, ``user_data``: see
        :mod:`computed.instances.configdrive`) is what the backend builds the
        node's config drive from; None: no config drive.

        :raises DeployFailed: the backend refused the deploy or it failed
            (the reason is the backend's own), or the node hosts another
            instance.
        :raises OperationTimedOut: not active after ``timeout`` seconds.
        :raises DriverUnavailable: the backend could not be reached.
        """
        raise NotSupported(f'node {node_uuid}', 'deploy')

    def rebuild(self, node_uuid: str, instance_uuid: str, image_source: str | None, *,
                timeout: float, guard: WriteGuard | None = None,
                configdrive: dict[str, Any] | None = None,
                preserve_ephemeral: bool = False) -> Node:
        """Redeploy the node that hosts ``instance_uuid`` with ``image_source`` (and
        ``configdrive``, as :meth:`deploy`); the node once ``active`` again.

        The node keeps its instance; its disk is written again (its ephemeral partition kept
        with ``preserve_ephemeral``, where the backend has one). A deploy of the node already
        under way with ``image_source`` is waited for (a rebuild resumed after a crash), one
        with another image is waited for and then redone. Repeating a rebuild redeploys again:
        harmless, only slower.

        :raises DeployFailed: the node hosts another instance (or none), the backend refused
            the rebuild, or it failed (the reason is the backend's own).
        :raises OperationTimedOut: not active after ``timeout`` seconds.
        :raises DriverUnavailable: the backend could not be reached.
        """
        raise NotSupported(f'node {node_uuid}', 'rebuild')

    def undeploy(self, node_uuid: str, *, timeout: float,
                 guard: WriteGuard | None = None) -> Node:
        """Tear the node down until it is ``available`` again (cleaning may
        pass), with no instance associated. A node already available is
        only cleared of a left-over instance association.

        :raises DriverError: the backend refused, or cleaning failed.
        :raises OperationTimedOut: not available after ``timeout`` seconds.
        """
        raise NotSupported(f'node {node_uuid}', 'undeploy')

    def set_power(self, node_uuid: str, target: str, *,
                  timeout: float, guard: WriteGuard | None = None) -> Node:
        """Power the node on or off, or reboot it (one of
        :data:`POWER_TARGETS`), and wait until the power state is reached
        (``power on`` after a reboot).

        :raises DriverError: the backend refused or failed.
        :raises OperationTimedOut: not reached after ``timeout`` seconds.
        """
        raise NotSupported(f'node {node_uuid}', 'set power')

    def clear_instance(self, node_uuid: str, instance_uuid: str | None = None,
                       *, timeout: float,
                       guard: WriteGuard | None = None) -> Node | None:
        """Unwind a (failed) build: undeploy the node if it is not available
        and clear its instance association and instance information.

        With ``instance_uuid``, a node associated with another instance is
        left untouched (it is not ours to clear). Returns the node after, or
        None if the backend no longer knows it.

        :raises DriverError: as for :meth:`undeploy`.
        """
        raise NotSupported(f'node {node_uuid}', 'clear instance')

    def close(self) -> None:  # noqa: B027 - optional: a driver without connections keeps it
        """Release backend resources (connections). Idempotent."""

    def __enter__(self) -> BaremetalDriver:
        return self

    def __exit__(self, *exc_info: object) -> None:
        self.close()


class UnknownDriver(ValueError):
    """No driver is registered under the name; the message names it."""


def load_driver(name: str) -> type[BaremetalDriver]:
    """The driver class registered as ``name`` in :data:`DRIVER_NAMESPACE`."""
    try:
        manager = stevedore_driver.DriverManager(DRIVER_NAMESPACE, name, invoke_on_load=False)
    except stevedore_exc.NoMatches:
        raise UnknownDriver(f'no bare metal driver named {name!r} is installed '
                            f'(entry point group {DRIVER_NAMESPACE})') from None
    driver_class = manager.driver
    if not (isinstance(driver_class, type) and issubclass(driver_class, BaremetalDriver)):
        raise UnknownDriver(f'bare metal driver {name!r} ({driver_class!r}) is not a '
                            f'BaremetalDriver')
    return driver_class
