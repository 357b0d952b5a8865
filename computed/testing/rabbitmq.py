"""RabbitMQ: the broker already answering on 127.0.0.1:5672, or a private one from Debian's package.

A reused broker is shared with whatever else uses it, so each stack gets a virtual host of its own
(created with ``rabbitmqctl``, removed on stop) and never sees another run's queues. A private
broker runs ``/usr/lib/rabbitmq/bin/rabbitmq-server`` directly (not the ``/usr/sbin`` wrapper, which
wants to switch user) with every path and both ports of its own, and its own ``epmd``.

Ready when the port answers the AMQP 0-9-1 protocol header with a method frame.
"""

from __future__ import annotations

import contextlib
import os
import shutil
import uuid
from pathlib import Path

from computed.testing import process
from computed.testing.service import Service

AMQP_HEADER = b"AMQP\x00\x00\x09\x01"
SERVER = "/usr/lib/rabbitmq/bin/rabbitmq-server"
SHARED_PORT = 5672


def speaks_amqp(port: int) -> bool:
    # The broker answers the protocol header with connection.start: a frame of type 1 (method).
    return process.exchange(port, AMQP_HEADER, 1) == b"\x01"


class RabbitMQ(Service):
    name = "rabbitmq"

    def start(self) -> None:
        if not self.info.get("private") and speaks_amqp(SHARED_PORT):
            self._reuse()
        else:
            self._start_private()

    def _reuse(self) -> None:
        vhost = self.info.get("vhost") or f"computed-{uuid.uuid4().hex[:8]}"
        try:
            self._add_vhost(vhost)
        except (process.ServiceError, FileNotFoundError):
            vhost = ""  # no control over the broker: share its default virtual host
        self.info.update(port=SHARED_PORT, vhost=vhost, reused=True)
        self._set_url()

    def _add_vhost(self, vhost: str) -> None:
        """The virtual host ``vhost``, guest allowed everything in it: one ``rabbitmqctl eval``
        of the broker's functions that ``add_vhost`` and ``set_permissions`` call (RabbitMQ
        3.8 on), as every rabbitmqctl run boots an Erlang VM (0.3 CPU s, 0.6-0.8 s); the two
        commands where the broker has not these functions."""
        ctl = self.ctl()
        name = vhost.encode().hex()  # no quoting to get wrong: the name as Erlang bytes
        binary = f"<<16#{name}:{len(vhost) * 8}>>" if vhost else '<<"">>'
        everything = '<<".*">>'
        try:
            out = process.run(ctl + ["eval", (
                f'ok = rabbit_vhost:add({binary}, <<"computed">>), '
                f'ok = rabbit_auth_backend_internal:set_permissions(<<"guest">>, {binary}, '
                f'{everything}, {everything}, {everything}, <<"computed">>).')],
                f"rabbitmqctl eval (add virtual host {vhost})")
            if out.strip() == "ok":
                return
        except process.ServiceError:
            pass
        with contextlib.suppress(process.ServiceError):  # half made: start again
            process.run(ctl + ["delete_vhost", vhost], f"rabbitmqctl delete_vhost {vhost}")
        process.run(ctl + ["add_vhost", vhost], f"rabbitmqctl add_vhost {vhost}")
        process.run(ctl + ["set_permissions", "-p", vhost, "guest", ".*", ".*", ".*"],
                    f"rabbitmqctl set_permissions on {vhost}")

    def _start_private(self) -> None:
        if not Path(SERVER).exists():
            process.run(["apt-get", "install", "-y", "-q", "rabbitmq-server"],
                        "apt-get install rabbitmq-server",
                        env={**os.environ, "DEBIAN_FRONTEND": "noninteractive"})
        home = self.workdir / "rabbitmq"
        home.mkdir(parents=True, exist_ok=True)
        port = self.info.get("port") or process.free_port()
        epmd_port = self.info.get("epmd_port") or process.free_port()
        (home / "rabbitmq-env.conf").write_text("")
        (home / "rabbitmq.conf").write_text("loopback_users = none\n")
        (home / "enabled_plugins").write_text("[].\n")
        env = {
            "PATH": os.environ.get("PATH", "/usr/bin:/bin"),
            "HOME": str(home),
            "RABBITMQ_CONF_ENV_FILE": str(home / "rabbitmq-env.conf"),
            "RABBITMQ_CONFIG_FILE": str(home / "rabbitmq.conf"),
            "RABBITMQ_ENABLED_PLUGINS_FILE": str(home / "enabled_plugins"),
            "RABBITMQ_NODENAME": f"computed{port}@localhost",
            "RABBITMQ_NODE_IP_ADDRESS": "127.0.0.1",
            "RABBITMQ_NODE_PORT": str(port),
            "RABBITMQ_DIST_PORT": str(process.free_port()),
            "RABBITMQ_MNESIA_BASE": str(home / "mnesia"),
            "RABBITMQ_LOG_BASE": str(home / "log"),
            "RABBITMQ_PID_FILE": str(home / "rabbitmq.pid"),
            "ERL_EPMD_ADDRESS": "127.0.0.1",
            "ERL_EPMD_PORT": str(epmd_port),
        }
        self.info.update(port=port, epmd_port=epmd_port, vhost="", private=True,
                         env_home=str(home))
        self._set_url()
        self.info["pid"] = process.spawn([SERVER], self.log, env=env)
        process.wait_until(self.ready, 120, "rabbitmq", pid=self.pid, log=self.log)

    def _set_url(self) -> None:
        vhost = self.info.get("vhost", "")
        self.info["url"] = f"rabbit://guest:guest@127.0.0.1:{self.info['port']}/{vhost}"

    def ctl(self) -> list[str]:
        ctl = shutil.which("rabbitmqctl") or "/usr/sbin/rabbitmqctl"
        return [ctl, "-q"]

    def ready(self) -> bool:
        return speaks_amqp(self.info.get("port", 0))

    def stop(self) -> None:
        if self.info.get("reused"):
            if self.info.get("vhost"):
                try:
                    process.run(self.ctl() + ["delete_vhost", self.info["vhost"]],
                                "rabbitmqctl delete_vhost")
                except (process.ServiceError, FileNotFoundError):
                    pass
            return
        super().stop()
        # The broker's epmd daemonises out of our process group; ask it to stop on its own port.
        epmd = shutil.which("epmd") or "/usr/lib/erlang/bin/epmd"
        if self.info.get("epmd_port") and Path(epmd).exists():
            env = {**os.environ, "ERL_EPMD_PORT": str(self.info["epmd_port"])}
            try:
                process.run([epmd, "-kill"], "epmd -kill", env=env, timeout=10)
            except process.ServiceError:
                pass

    def restart(self) -> None:
        if self.info.get("reused"):
            raise process.ServiceError("rabbitmq: a reused broker is not ours to restart; "
                                       "start the stack with a private broker instead")
        super().restart()
