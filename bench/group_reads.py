"""ZooKeeper requests a daemon's reconcile passes make to know the group, at steady state: reading
the group on every pass (before: :func:`computed.fleet.membership.read_group`, 2 ``get_children``
+ 1 ``get`` per member) against :meth:`computed.fleet.membership.Membership.members` (read only
when a watch fired, the session changed or ``REREAD_AFTER`` passed), in one run, on one session
of the harness's ZooKeeper.

A real tooz coordinator joins ``--daemons``' group as ``computed-00`` through a real
:class:`Membership` (its watches set, as the daemon's fleet thread sets them); the other members
are ephemeral znodes with the capabilities a daemon publishes. Each mode calls once a ``--tick``
for ``--seconds``; counted: the group's reads the client sent (``get_children`` and ``get``,
counted on the client), the packets the server received over the window (ZooKeeper's ``mntr``:
every request of the session, pings included; the bench's own session is the server's only
client) and the client's CPU. At the half of the "on change" window one more member joins, so
its count includes the read a join causes (with ``--leave``, it leaves at three quarters).

    .venv/bin/python -m bench.group_reads [--daemons 40] [--seconds 60] [--tick 1] [--leave]
"""

from __future__ import annotations

import json
import sys
import threading
import time

from bench.common import arguments, machine, say, stack_for, workdir_or_tmp


def _packets(client) -> int:
    from computed.fleet.zookeeper import ask_server
    for line in ask_server(client, b"mntr").splitlines():
        if line.startswith("zk_packets_received"):
            return int(line.split()[1])
    raise RuntimeError("mntr has no zk_packets_received")


def _window(name, client, counted, seconds, tick, call, changes=()) -> dict:
    """``changes``: (share of the window, what to do then), e.g. a join at the half."""
    passes = int(seconds / tick)
    due = {int(passes * share): change for share, change in changes}
    reads0, packets0, cpu0 = counted[0], _packets(client), time.process_time()
    t0 = time.monotonic()
    for i in range(passes):
        if i in due:
            due[i]()
        call()
        time.sleep(max(0.0, t0 + (i + 1) * tick - time.monotonic()))
    elapsed = time.monotonic() - t0
    reads = counted[0] - reads0
    packets = _packets(client) - packets0 - 1  # the second mntr's own connection is not one
    result = {"passes": passes, "seconds": round(elapsed, 1), "group_reads": reads,
              "group_reads_per_s": round(reads / elapsed, 3),
              "server_packets_per_s": round(packets / elapsed, 2),
              "client_cpu_ms_per_pass": round((time.process_time() - cpu0) / passes * 1000, 3)}
    say(f"{name}: {result}")
    return result


def measured(stack, daemons: int, seconds: float, tick: float, leave: bool = False) -> dict:
    from tooz import coordination
    from tooz import utils as tooz_utils

    from computed.fleet import zookeeper
    from computed.fleet.membership import Membership, capabilities, read_group
    coordinator = coordination.get_coordinator(
        f"zookeeper://{stack['zookeeper'].hosts}?timeout=10", b"computed-00")
    coordinator.start(start_heart=False)
    client = zookeeper.kazoo_client(coordinator)
    counted = [0]
    for name in ("get_children_async", "get_async"):
        real = getattr(client, name)

        def counting(*args, _real=real, **kwargs):
            counted[0] += 1
            return _real(*args, **kwargs)
        setattr(client, name, counting)
    group = f"sim-{time.monotonic_ns() % 10**6}"
    membership = Membership(coordinator, group, "computed-00", 1, wake=threading.Event())
    try:
        membership.join(10, stopping=lambda: False)
        membership.watch()
        for i in range(1, daemons):
            host = f"computed-{i:02d}"
            client.create(f"{membership.members_path}/{host}",
                          tooz_utils.dumps(capabilities(host, 1)), ephemeral=True)
        assert len(membership.members()) == daemons
        result = {"daemons": daemons, "tick_s": tick}
        result["every_pass"] = _window(
            "every pass (before)", client, counted, seconds / 3, tick,
            lambda: read_group(client, membership.members_path, membership.draining_path))
        joiner = f"{membership.members_path}/computed-{daemons:02d}"
        result["on_change"] = _window(
            "on change (after)", client, counted, seconds, tick, membership.members,
            changes=[(0.5, lambda: client.create(
                joiner, tooz_utils.dumps(capabilities(f"computed-{daemons:02d}", 1)),
                ephemeral=True))] + ([(0.75, lambda: client.delete(joiner))] if leave else []))
        assert len(membership.members()) == daemons + (0 if leave else 1)
        result["idle"] = _window("idle session (no reads)", client, counted, seconds / 3, tick,
                                 lambda: None)
    finally:
        membership.leave()
        zookeeper.stop_session(coordinator, 10)
    return result


def main(argv: list[str] | None = None) -> int:
    parser = arguments(__doc__)
    parser.add_argument("--daemons", type=int, default=40)
    parser.add_argument("--seconds", type=float, default=60.0,
                        help="the 'on change' window; the other two last a third of it")
    parser.add_argument("--tick", type=float, default=1.0, help="seconds between two passes")
    parser.add_argument("--leave", action="store_true",
                        help="the member that joins at the half leaves at three quarters")
    args = parser.parse_args(argv)
    result = {"machine": machine()}
    workdir = workdir_or_tmp(args.workdir, "group-reads-")
    with stack_for(args, workdir, ["zookeeper"], "groupreads") as stack:
        result.update(measured(stack, args.daemons, args.seconds, args.tick, args.leave))
    print(json.dumps(result, indent=1))
    return 0


if __name__ == "__main__":
    sys.exit(main())
