"""A stack: the set of real services one test session, benchmark or demo runs against.

``Stack.up`` starts the services in two waves, each wave's services at once (threads): ZooKeeper,
RabbitMQ and PostgreSQL, then Placement (its database is PostgreSQL's), Ironic (it sends its
notifications to the broker) and Glance when asked for (Ironic, which reads it, is given its URL
on a port chosen beforehand, so that the two start together). Glance
(:mod:`computed.testing.glance`, without Keystone) is started only when named (:data:`DEFAULT`
leaves it out: the test session and the benchmarks do not pay for it); with it,
``computed_conf`` points computed-api's ``[glance]`` at it. Their infos are saved in
``WORKDIR/state.json`` after each wave, so that even a process killed half-way leaves a state
that ``down`` can clean. It returns a whole stack or none: when a service fails to start (or the
caller is interrupted), the ones already started are stopped before the error goes on.
``Stack.load`` finds a saved stack again from another process. ZooKeeper is one server, or with
``zookeeper_servers`` > 1 an :class:`~computed.testing.zookeeper.Ensemble` (``stack["zookeeper"]``
either way: its ``url`` and ``hosts`` list every server); the length cap on Ironic's unread
notification queue is set on the broker during Ironic's wave. Placement is served by
``placement_workers`` processes (default 1; :mod:`computed.testing.placement`).

``computed_conf`` renders a computed.conf pointing at the stack, the one place where the harness
knows computed's option names.
"""

from __future__ import annotations

import json
import threading
from collections.abc import Callable, Iterable
from pathlib import Path

from computed.testing import postgres
from computed.testing.glance import Glance
from computed.testing.ironic import NOTIFICATION_TOPIC, Ironic
from computed.testing.placement import Placement
from computed.testing.postgres import PostgreSQL
from computed.testing.process import free_port
from computed.testing.rabbitmq import RabbitMQ
from computed.testing.service import Service
from computed.testing.zookeeper import Ensemble, ZooKeeper

#: Every service a stack may have, in the order status lists them.
ORDER = ("zookeeper", "rabbitmq", "postgres", "glance", "placement", "ironic")
#: What ``Stack.up`` starts unless told: all but Glance.
DEFAULT = tuple(name for name in ORDER if name != "glance")
#: Services started together: a wave needs only what the waves before it started. Placement,
#: Ironic and Glance take most of a stack's start (seconds each, mostly importing their code);
#: Glance needs nothing, and Ironic only its URL (Glance is made first in its wave, on a port
#: chosen then).
WAVES = (("zookeeper", "rabbitmq", "postgres"), ("glance", "placement", "ironic"))
CLASSES = {"zookeeper": ZooKeeper, "rabbitmq": RabbitMQ, "postgres": PostgreSQL,
           "glance": Glance, "placement": Placement, "ironic": Ironic}


class Stack:
    def __init__(self, workdir: Path, services: dict[str, Service] | None = None,
                 zookeeper_servers: int = 1, ironic_power_sync: int | None = None,
                 placement_workers: int = 1):
        self.workdir = Path(workdir)
        self.services: dict[str, Service] = services or {}
        self.zookeeper_servers = zookeeper_servers
        self.ironic_power_sync = ironic_power_sync
        self.placement_workers = placement_workers

    @property
    def state_file(self) -> Path:
        return self.workdir / "state.json"

    @classmethod
    def up(cls, workdir: Path, names: Iterable[str] = DEFAULT,
           zookeeper_servers: int = 1, ironic_power_sync: int | None = None,
           placement_workers: int = 1) -> Stack:
        """Start ``names`` (PostgreSQL only where a server is available); ZooKeeper as an
        :class:`Ensemble` of ``zookeeper_servers`` when more than one; Ironic's power-state sync
        every ``ironic_power_sync`` seconds (0: none; None: Ironic's default); Placement in
        ``placement_workers`` processes."""
        wanted = set(names)
        unknown = wanted - set(ORDER)
        if unknown:
            raise ValueError(f"unknown service(s): {', '.join(sorted(unknown))}; "
                             f"known: {', '.join(ORDER)}")
        stack = cls(Path(workdir), zookeeper_servers=zookeeper_servers,
                    ironic_power_sync=ironic_power_sync, placement_workers=placement_workers)
        stack.workdir.mkdir(parents=True, exist_ok=True)
        try:
            for wave in WAVES:
                names_now = [name for name in wave if name in wanted and not (
                    name == "postgres" and not postgres.available())]
                for name in names_now:
                    stack.services[name] = stack._new(name)
                calls = [stack.services[name].start for name in names_now]
                if "ironic" in names_now:
                    # With Ironic's start, not after it: a policy applies to the queues it
                    # matches whenever they are made, and rabbitmqctl takes about a second.
                    calls.append(stack._cap_unconsumed_notifications)
                try:
                    together(calls)
                finally:
                    stack.save()
        except BaseException:
            # BaseException: Ctrl-C during a slow start (a virtualenv being built) must not leave
            # the services already started running either.
            stack.down()
            raise
        return stack

    def _new(self, name: str) -> Service:
        """The launcher of ``name``, given what the earlier waves started."""
        if name == "zookeeper" and self.zookeeper_servers > 1:
            return Ensemble(self.workdir, info={"size": self.zookeeper_servers})
        if name == "glance":
            port = free_port()
            return Glance(self.workdir, info={"port": port, "url": f"http://127.0.0.1:{port}"})
        if name == "ironic":
            return Ironic(self.workdir, transport_url=self.services["rabbitmq"].url
                          if "rabbitmq" in self.services else "",
                          glance_url=self.services["glance"].url
                          if "glance" in self.services else "",
                          power_sync_interval=self.ironic_power_sync)
        if name == "placement":
            info = {"workers": self.placement_workers}
            if "postgres" in self.services:
                info["database"] = self.services["postgres"].create_database(
                    f"placement_{self.services['postgres'].info['database']}")
            return Placement(self.workdir, info=info)
        return CLASSES[name](self.workdir)

    def _cap_unconsumed_notifications(self) -> None:
        # Ironic also publishes every event to TOPIC.info, which no pooled listener reads.
        rabbit = self.services.get("rabbitmq")
        if not rabbit or "ironic" not in self.services:
            return
        vhost = rabbit.info.get("vhost") or "/"
        try:
            from computed.testing.process import ServiceError, run
            run(rabbit.ctl() + ["set_policy", "-p", vhost, "--apply-to", "queues",
                                 "computed-cap-info", rf"^{NOTIFICATION_TOPIC}\.info$",
                                 '{"max-length":1000}'], "rabbitmqctl set_policy")
        except (ServiceError, FileNotFoundError):
            pass

    @classmethod
    def load(cls, workdir: Path) -> Stack:
        stack = cls(Path(workdir))
        state = json.loads(stack.state_file.read_text())
        for name in ORDER:
            if name in state:
                kind = Ensemble if "servers" in state[name] else CLASSES[name]
                stack.services[name] = kind(stack.workdir, info=state[name])
        return stack

    def save(self) -> None:
        state = {name: service.info for name, service in self.services.items()}
        self.state_file.write_text(json.dumps(state, indent=2, sort_keys=True) + "\n")

    def down(self) -> None:
        """Stop every service at once; the state file goes with them. A failure to stop one is
        raised once all were asked to stop.

        At once, not the last wave first: by a stack's stop nothing that needs it runs (its
        users stop computed's processes before), and a service of the last wave losing the
        broker or its database while it stops only stops. Wave by wave, the first wave's stop
        (a reused broker's ``rabbitmqctl delete_vhost``, 1.9-3.1 s; the databases' drops)
        waited for Ironic's (1.6 s) after the local run's computed processes were gone."""
        try:
            together([service.stop for service in self.services.values()])
        finally:
            self.state_file.unlink(missing_ok=True)

    def status(self) -> list[str]:
        return [self.services[name].describe() for name in ORDER if name in self.services]

    def __getitem__(self, name: str) -> Service:
        return self.services[name]

    def __contains__(self, name: str) -> bool:
        return name in self.services

    @property
    def lock_path(self) -> Path:
        """``[messaging] lock_path`` of the stack's computed processes: the queue manager's
        locks (computed.conf.messaging) in the stack, not the host's /var/lib/computed."""
        return self.workdir / "lock"

    def computed_conf(self, host: str = "", database: str = "", extra: str = "") -> str:
        """computed.conf for a daemon of this stack (``database`` overrides the DB URL)."""
        lines = ["[DEFAULT]"]
        if host:
            lines.append(f"host = {host}")
        if "rabbitmq" in self:
            lines.append(f"transport_url = {self['rabbitmq'].url}")
        if "zookeeper" in self:
            lines += ["[coordination]",
                      f"backend_url = {self['zookeeper'].url}?timeout=2"]
        db_url = database or (self["postgres"].url if "postgres" in self else
                              f"sqlite:///{self.workdir / 'computed.sqlite'}")
        lines += ["[database]", f"connection = {db_url}"]
        if "ironic" in self:
            lines += ["[ironic]", "auth_type = none",
                      f"endpoint_override = {self['ironic'].url}"]
        if "placement" in self:
            lines += ["[placement]", "auth_type = admin_token", "token = admin",
                      f"endpoint = {self['placement'].url}"]
        if "glance" in self:
            # computed-api in noauth2 reads this Glance (it has no Keystone) as the service.
            lines += ["[glance]", "auth_type = none",
                      f"endpoint_override = {self['glance'].url}"]
        if "rabbitmq" in self:
            lines += ["[messaging]", f"lock_path = {self.lock_path}"]
        return "\n".join(lines) + "\n" + extra


def together(calls: list[Callable[[], None]]) -> None:
    """Run ``calls`` (services' ``start`` or ``stop``) at once and wait for all; the first
    failure is raised once every call has ended (so that the state saved after a start lists
    every service that started, and a stop that failed does not skip the others)."""
    errors: list[BaseException] = []

    def run(call: Callable[[], None]) -> None:
        try:
            call()
        except BaseException as exc:  # noqa: BLE001 - handed to the caller's thread below
            errors.append(exc)

    threads = [threading.Thread(target=run, args=(call,)) for call in calls]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    if errors:
        raise errors[0]
