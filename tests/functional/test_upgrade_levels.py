"""[upgrade_levels] against the real services: what the daemons and reporters publish in
ZooKeeper, ``auto`` read from it, and a daemon pinned to reports 1.0 still reporting every node
through a reporter of this release (which reads 1.0's "epoch")."""

from __future__ import annotations

from computed.fleet.membership import drain_markers_path, fleet_root
from computed.upgrade import records
from computed.version import VERSION
from tests.functional.daemons import seen, wait_for, zk_client

WORLD_NODES = 6


def test_services_publish_what_they_serve_and_auto_follows(stack, world, placement):
    world.reporter("r1")
    world.daemon("c1", extra="[upgrade_levels]\nreports = 1.0\ninstances = 1.0\n")
    client = zk_client(stack)
    try:
        members_path = f"/tooz/{world.group}"  # tooz's default namespace
        wait_for(lambda: records.read_reporters(client, world.group)
                 and records.read_daemons(client, members_path,
                                          drain_markers_path(world.group)),
                 60, "the reporter's record and the daemon's membership", world.processes)
        reporter, = records.read_reporters(client, world.group)
        assert (reporter.host, reporter.version, reporter.serves("reports")) == \
            ("r1", VERSION, "1.1")
        daemon, = records.read_daemons(client, members_path, drain_markers_path(world.group))
        assert (daemon.host, daemon.version, daemon.serves("instances")) == \
            ("c1", VERSION, "1.2")
        assert records.report_levels("auto", client, world.group)() == "1.1"
        assert records.instance_levels("auto", client, members_path,
                                       drain_markers_path(world.group))() == "1.2"

        # Pinned to reports 1.0, the daemon's reports name the claim epoch "epoch", which the
        # reporter of this release reads: every node reaches Placement.
        wait_for(lambda: all(seen(placement, node) for node in world.nodes), 90,
                 "every node reported at 1.0", world.processes)

        # A reporter that stops takes its record with it.
        world.processes[0].stop()
        wait_for(lambda: not records.read_reporters(client, world.group), 30,
                 "the record gone", world.processes)
        assert client.exists(f"{fleet_root(world.group)}/services")
    finally:
        client.stop()
        client.close()
