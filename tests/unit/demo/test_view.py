"""The local run's screen says what a newcomer needs, decided without services."""

from computed.fleet.membership import MemberInfo
from tools.demo import view


def member(name="computed-1", draining=False):
    return MemberInfo(name, 1, draining, 4242)


def snapshot(**kw):
    base = dict(node_count=10, manage="/x/.venv/bin/computed-manage --config-file /x/.demo/c.conf",
                workdir="/x/.demo", services=["zookeeper zookeeper://127.0.0.1:2181"],
                processes=[view.ProcessRow("computed-1", "member", 4242, 10,
                                           "http://127.0.0.1:9001/metrics")],
                outsiders=[], claimed=10, unclaimed=0, waiting=[], rehome_grace=30.0,
                applied=10, providers=10, free=10, instances={}, watched=None)
    base.update(kw)
    return view.Snapshot(**base)


def test_a_gracefully_stopped_daemon_is_stopped_not_dead():
    assert view.daemon_state(True, None, "SIGTERM", member(draining=True)) == "draining"
    assert view.daemon_state(True, None, "SIGTERM", None) == "stopping"
    assert view.daemon_state(False, 0, "SIGTERM", None) == "stopped"
    assert view.daemon_state(False, -15, "SIGTERM", None) == "stopped"


def test_a_killed_daemon_is_killed_and_its_open_session_is_said():
    assert view.daemon_state(False, -9, "SIGKILL", member()) == "killed, session open"
    assert view.daemon_state(False, -9, "SIGKILL", None) == "killed"


def test_other_states():
    assert view.daemon_state(True, None, None, member()) == "member"
    assert view.daemon_state(True, None, None, None) == "joining"
    assert view.daemon_state(False, 1, None, None) == "exited 1"
    assert view.daemon_state(False, 3, "SIGTERM", None) == "exited 3"


def test_unclaimed_nodes_of_a_gone_host_wait_for_rehoming_with_the_seconds_left():
    waiting = view.waiting_for_rehome(
        unclaimed=["n1", "n2", "n3"], instance_hosts={"n1": "computed-2", "n2": "computed-2",
                                                      "n9": "computed-2", "n4": "computed-1"},
        members=["computed-1"], gone_since={"computed-2": 100.0}, now=110.0, grace=30.0)
    assert waiting == [view.Waiting("computed-2", 2, 20.0)]
    line = view.unclaimed_line(snapshot(claimed=7, unclaimed=3, waiting=waiting))
    assert ("2 hosting instances of computed-2 (gone), waiting for re-homing: a peer adopts them "
            "in 20 s") in line
    assert "1 not yet claimed" in line and "rehome_grace 30 s" in line


def test_no_waiting_while_the_host_is_a_member_and_never_negative():
    assert view.waiting_for_rehome(["n1"], {"n1": "computed-1"}, ["computed-1"], {}, 5.0,
                                   30.0) == []
    late = view.waiting_for_rehome(["n1"], {"n1": "c2"}, [], {"c2": 0.0}, 99.0, 30.0)
    assert late == [view.Waiting("c2", 1, 0.0)]
    line = view.unclaimed_line(snapshot(unclaimed=1, waiting=late))
    assert "waiting for re-homing: any moment now" in line


def test_with_no_member_left_the_view_says_nothing_will_claim():
    waiting = [view.Waiting("c2", 1, 0.0)]
    line = view.unclaimed_line(snapshot(
        processes=[view.ProcessRow("computed-1", "stopped")], claimed=0, unclaimed=3,
        waiting=waiting))
    assert "waiting for re-homing: no member left to adopt them" in line
    assert "2 not yet claimed (no daemon is a member: a adds one)" in line


def test_the_screen_keeps_the_prefix_metrics_and_explains_epoch():
    text = view.render(snapshot())
    assert "computed-manage: /x/.venv/bin/computed-manage --config-file /x/.demo/c.conf" in text
    assert "http://127.0.0.1:9001/metrics" in text
    assert "MEMBER EPOCH: the ZooKeeper transaction id" in text
    assert "zookeeper://127.0.0.1:2181" in text


def test_members_from_outside_the_run_are_listed_and_marked():
    text = view.render(snapshot(outsiders=[view.ProcessRow("elsewhere", "member", 7, 3)]))
    assert "elsewhere*" in text and "joined from outside this run" in text
    assert "outside this run" not in view.render(snapshot())


def test_reserved_and_free_counts_and_the_maintenance_flip():
    text = view.render(snapshot(free=9, watched=view.Watched("abcdef0123", True, 1)))
    assert "free 9, reserved or in use 1" in text
    assert "node abcdef01 maintenance on in Ironic; its provider in Placement: reserved 1" in text
    assert "Placement does not answer" in view.render(snapshot(providers=None, free=None))


def test_a_small_terminal_loses_events_and_service_urls_never_the_prefix_or_table():
    crowded = snapshot(events=[f"07:00:0{i} event {i}" for i in range(8)],
                       services=[f"svc{i} http://127.0.0.1:{9000 + i}" for i in range(5)])
    tall = view.render(crowded, height=60)
    assert "event 0" in tall and "http://127.0.0.1:9004" in tall
    short = view.render(crowded, height=30, width=80)
    assert sum(-(-len(line) // 80) or 1 for line in short.splitlines()) <= 30
    assert "computed-manage: /x/.venv/bin/computed-manage" in short
    assert "http://127.0.0.1:9001/metrics" in short and "event 7" in short
    assert "event 0" not in short


def test_the_screen_says_how_to_reach_the_compute_api_in_noauth2():
    lines = view.api_lines("http://127.0.0.1:8999")
    text = "\n".join(lines)
    assert "compute API: http://127.0.0.1:8999/v2.1" in text
    assert "USER:PROJECT" in text
    exported = dict(pair.split("=", 1) for line in lines if line.strip().startswith("export ")
                    for pair in line.split()[1:])
    # What docs/api.md says openstackclient needs in noauth2 mode.
    assert exported == {"OS_AUTH_TYPE": "admin_token", "OS_ENDPOINT": "http://127.0.0.1:8999/v2.1",
                        "OS_TOKEN": "admin:admin", "OS_COMPUTE_API_VERSION": "2.61",
                        "OS_IDENTITY_API_VERSION": "3",
                        "OS_IDENTITY_ENDPOINT_OVERRIDE": "http://127.0.0.1:8999/"}
    assert "openstack server list --no-name-lookup" in text


def test_the_shown_openstacksdk_snippet_builds_a_connection_to_the_api():
    snippet = next(line.split("python: ", 1)[1]
                   for line in view.api_lines("http://127.0.0.1:8999") if "python: " in line)
    namespace: dict = {}
    exec(snippet, namespace)  # builds the client only: no request is made
    conn = namespace["conn"]
    assert conn.config.get_auth_args() == {"endpoint": "http://127.0.0.1:8999/v2.1",
                                           "token": "admin:admin"}
    assert conn.config.config["auth_type"] == "admin_token"


def test_the_api_lines_are_on_screen_however_small_the_terminal():
    crowded = snapshot(api="http://127.0.0.1:8999",
                       events=[f"07:00:0{i} event {i}" for i in range(8)],
                       processes=[view.ProcessRow("api-1", "running", None, None,
                                                  "http://127.0.0.1:8999/metrics")])
    short = view.render(crowded, height=30, width=100)
    for line in view.api_lines("http://127.0.0.1:8999"):
        assert line in short
    assert "api-1" in short and "event 7" in short
    assert "compute API" not in view.render(snapshot())


def test_with_glance_the_screen_shows_the_demo_image_and_the_first_server_commands():
    lines = view.api_lines("http://127.0.0.1:8999", "http://127.0.0.1:9292", "1234-abcd",
                           "bm.demo")
    text = "\n".join(lines)
    exported = dict(pair.split("=", 1) for line in lines if line.strip().startswith("export ")
                    for pair in line.split()[1:])
    # The CLI resolves --image NAME in Glance: with no catalog, the image endpoint is given.
    assert exported["OS_IMAGE_ENDPOINT_OVERRIDE"] == "http://127.0.0.1:9292/"
    assert "Glance: http://127.0.0.1:9292 (no Keystone); image demo 1234-abcd (public, active)" \
        in text
    assert "openstack keypair create k > k.pem" in text
    assert ("openstack server create --image demo --key-name k --user-data f --flavor bm.demo "
            "--wait s1") in text
    # Without Glance (or before the flavor exists) none of it is promised.
    for partial in (view.api_lines("http://127.0.0.1:8999"),
                    view.api_lines("http://127.0.0.1:8999", "http://127.0.0.1:9292", "1234-abcd")):
        assert "server create" not in "\n".join(partial)
    assert "OS_IMAGE_ENDPOINT_OVERRIDE" not in "\n".join(view.api_lines("http://127.0.0.1:8999"))


def test_the_first_server_commands_stay_on_a_small_screen():
    crowded = snapshot(api="http://127.0.0.1:8999", glance="http://127.0.0.1:9292",
                       image="1234-abcd", flavor="bm.demo",
                       events=[f"07:00:0{i} event {i}" for i in range(8)])
    short = view.render(crowded, height=30, width=100)
    for line in view.api_lines("http://127.0.0.1:8999", "http://127.0.0.1:9292", "1234-abcd",
                               "bm.demo"):
        assert line in short
    assert "event 7" in short
