"""Quotas against ``computed-api`` (in the test's process): a project's limit under a burst of
concurrent creates (issue 23 item 1), and a quota set's read-modify-write (issue 24 item 10).
Run in front of the real stack (PostgreSQL when the stack has it, Placement, Ironic, ZooKeeper,
RabbitMQ) and a fleet, as tests/functional/test_api.py sets it up.

Issue 23 saw 50 concurrent creates against a limit of 10 leave 23 and then 30 live servers
(ACTIVE and ERROR "No valid host"). Here: 50 at once, half with a flavor 12 free nodes match and
half with one no node matches (ERROR servers), limit 10.
"""

from __future__ import annotations

import threading
import time
import uuid

from openstack import exceptions as sdk_exc

from tests.functional.daemons import wait_for
from tests.functional.test_api import (  # noqa: F401 (fixtures)
    ADMIN,
    IMAGE,
    compute,
    connection,
    gold_flavor,
    placement_api,
)

WORLD_NODES = 12
LIMIT = 10
BURST = 50


def test_fifty_concurrent_creates_leave_at_most_the_limit(
        stack, world, compute, placement_api):  # noqa: F811 (fixtures of test_api)
    admin = connection(compute, ADMIN)
    project = f"burst-{uuid.uuid4().hex[:6]}"
    found = gold_flavor(admin, world)
    nowhere = gold_flavor(admin, world, **{"capabilities:boot_mode": "uefi-nowhere"})
    admin.compute.update_quota_set(admin.compute.get_quota_set(project), instances=LIMIT)
    barrier = threading.Barrier(BURST)
    answers: list[int] = []

    def build(index: int) -> None:
        member = connection(compute, f"u{index}:{project}")
        flavor = found if index % 2 else nowhere
        barrier.wait()
        try:
            member.compute.create_server(name=f"b-{index}", flavor_id=flavor.id,
                                         image_id=IMAGE, networks="none")
            answers.append(202)
        except sdk_exc.HttpException as exc:
            answers.append(exc.status_code)

    started = time.monotonic()
    threads = [threading.Thread(target=build, args=(i,)) for i in range(BURST)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    elapsed = time.monotonic() - started
    owner = connection(compute, f"owner:{project}")

    def placed() -> tuple[list] | None:
        # The 202 comes once a server is admitted; it is placed after (computed/api/pending).
        found = list(owner.compute.servers())
        return (found,) if all(s.task_state != "scheduling" for s in found) else None

    (servers,) = wait_for(placed, 120, "every admitted server placed or in ERROR")
    usages = placement_api.get(f"/usages?project_id={project}", headers={
        "OpenStack-API-Version": "placement 1.9"}).json()["usages"]
    with_node = [s for s in servers if s.status != "ERROR"]
    print(f"{BURST} concurrent creates, limit {LIMIT}, in {elapsed:.1f} s: "
          f"{answers.count(202)} answered 202, {answers.count(403)} 403, "
          f"{len(servers)} live servers ({len(with_node)} with a node), Placement usages "
          f"{usages}")
    assert sorted(set(answers)) <= [202, 403], answers
    assert len(servers) <= LIMIT
    assert answers.count(202) == len(servers)  # an admitted build stays, none is rolled back
    # No allocation left behind: one unit per server holding a node, none more.
    assert usages.get(world.rc, 0) == len(with_node)


def test_a_quota_set_read_modify_write_through_openstacksdk(world, compute):  # noqa: F811
    """What Terraform and `openstack quota set` do (issue 24 item 10): read the quota set,
    change keys, write them back, read the same values back; the whole set written back as read
    works too, at the latest microversion and at 2.1."""
    admin = connection(compute, ADMIN)
    project = f"rmw-{uuid.uuid4().hex[:6]}"
    admin.compute.update_quota_set(project, instances=4, cores=20, ram=40960,
                                   metadata_items=64, key_pairs=5, server_groups=2,
                                   server_group_members=3)
    shown = admin.compute.get_quota_set(project)
    assert (shown.instances, shown.cores, shown.ram, shown.metadata_items, shown.key_pairs,
            shown.server_groups, shown.server_group_members) == (4, 20, 40960, 64, 5, 2, 3)
    for version in ("2.61", "2.1"):
        body = admin.compute.get(f"/os-quota-sets/{project}", microversion=version).json()
        quota_set = {key: value for key, value in body["quota_set"].items() if key != "id"}
        put = admin.compute.put(f"/os-quota-sets/{project}", json={"quota_set": quota_set},
                                microversion=version)
        assert put.status_code == 200, put.text
        assert put.json()["quota_set"] == quota_set
