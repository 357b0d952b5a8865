"""Fixtures that give functional tests the real services.

``stack`` starts ZooKeeper, RabbitMQ, PostgreSQL (where a server is available), Placement and
Ironic once per test session and stops them at the end. To iterate quickly, start a stack by hand
with ``tools/services up`` and export ``COMPUTED_STACK_DIR=.services``: the tests then use it and
leave it running.
"""

from __future__ import annotations

import os
import signal
import uuid
from pathlib import Path

import pytest
from oslo_config import cfg

from computed import conf as computed_conf
from computed import db
from computed.db import engine as db_engine
from computed.placement.client import PlacementClient
from computed.providers.state import normalise_resource_class
from computed.runtime import keystone
from computed.runtime.stopping import STOP_SIGNALS
from computed.testing.glance import Glance
from computed.testing.keystone import Keystone
from computed.testing.stack import Stack
from tests.functional import inprocess
from tests.functional.daemons import Daemon, Reporter, fleet_database, stop_all, want_processes


def pytest_collection_modifyitems(items):
    here = Path(__file__).parent
    for item in items:
        if here in Path(item.fspath).parents:
            item.add_marker(pytest.mark.functional)


@pytest.fixture(autouse=True)
def no_service_left():
    """Fail a test that leaves an in-process service running (it is stopped) or the stop
    signals' handlers changed (they are put back)."""
    handlers = {signum: signal.getsignal(signum) for signum in STOP_SIGNALS}
    yield
    problems = []
    left = inprocess.running()
    if left:
        problems.append(f"in-process services left running: {[s.name for s in left]}")
        for service in left:
            try:
                service.ensure_stopped()
            except AssertionError as exc:
                problems.append(str(exc))
    for signum, handler in handlers.items():
        if signal.getsignal(signum) is not handler:
            problems.append(f"{signal.Signals(signum).name} handler changed")
            signal.signal(signum, handler)
    assert not problems, "; ".join(problems)


@pytest.fixture(scope="session")
def session_stack(tmp_path_factory):
    """The session's services (COMPUTED_STACK_DIR: a stack already up, reused)."""
    reuse = os.environ.get("COMPUTED_STACK_DIR")
    if reuse:
        yield Stack.load(Path(reuse))
        return
    workdir = tmp_path_factory.mktemp("stack")
    try:
        stack = Stack.up(workdir)
    except BaseException:
        if (workdir / "state.json").exists():
            Stack.load(workdir).down()
        raise
    try:
        yield stack
    finally:
        stack.down()


@pytest.fixture(scope="session")
def stack(session_stack):
    """The services a test runs on: the session's, unless its module overrides this fixture
    (test_zookeeper_ensemble puts an ensemble in place of ZooKeeper). Session-scoped fixtures
    take ``session_stack``: a module's override is module-scoped."""
    return session_stack


@pytest.fixture(scope="session")
def keystone_service(tmp_path_factory):
    """A real Keystone with an admin and a member of each of two projects (started on demand:
    only the tests of keystone mode pay for it)."""
    service = Keystone(tmp_path_factory.mktemp("keystone"))
    try:
        service.start()
        yield service
    finally:
        service.stop()


@pytest.fixture(scope="session")
def glance_service(tmp_path_factory):
    """A real Glance without Keystone, its images in its work dir (started on demand: only the
    tests of Glance images pay for it)."""
    service = Glance(tmp_path_factory.mktemp("glance"))
    try:
        service.start()
        yield service
    finally:
        service.stop()


@pytest.fixture(scope="session")
def glance_keystone(tmp_path_factory, keystone_service):
    """A real Glance behind the harness's Keystone, in its catalog as ``image``."""
    service = Glance(tmp_path_factory.mktemp("glance-keystone"), keystone=keystone_service)
    try:
        service.start()
        yield service
    finally:
        service.stop()


@pytest.fixture
def computed_config(stack, tmp_path):
    """A parsed computed configuration pointing at the stack."""
    path = tmp_path / "computed.conf"
    path.write_text(stack.computed_conf(host="test-host"))
    conf = cfg.ConfigOpts()
    computed_conf.register_opts(conf)
    conf(["--config-file", str(path)], project="computed")
    return conf


@pytest.fixture
def placement(computed_config):
    return PlacementClient(keystone.load_adapter(computed_config, "placement"))


@pytest.fixture(scope="session")
def migrated_template(session_stack):
    """The name of a PostgreSQL database of the session's stack migrated once per session
    (None without PostgreSQL): a test's own database is a copy of it (``CREATE DATABASE ...
    TEMPLATE``), which costs a file copy in the server instead of running every migration
    again. A module whose stack overrides ZooKeeper only shares the session's PostgreSQL."""
    if "postgres" not in session_stack:
        return None
    name = f"template_{uuid.uuid4().hex[:8]}"
    # db.sync disposes its engine: nothing stays connected to the template.
    db.sync(session_stack["postgres"].create_database(name))
    session_stack.save()  # dropped with the stack, also one reused through COMPUTED_STACK_DIR
    return name


@pytest.fixture(scope="session")
def fleet_db_template(tmp_path_factory):
    """A sqlite database migrated once per session, which ``fleet_db`` copies."""
    return Path(fleet_database(tmp_path_factory.mktemp("fleet-db")).removeprefix("sqlite:///"))


@pytest.fixture
def fleet_db(fleet_db_template, tmp_path):
    """The URL of a fresh, migrated sqlite database of the test's own (in ``tmp_path``): a copy
    of the session's template instead of every migration run again."""
    return fleet_database(tmp_path, template=fleet_db_template)


@pytest.fixture
def world(stack, tmp_path, request, migrated_template):
    """A fleet group with its own database, resource class and nodes; daemons and reporters
    started on demand with world.daemon(host) / world.reporter(host), in the test's process
    unless the test is marked ``daemon_processes`` (or the call says ``process=True``)."""
    token = uuid.uuid4().hex[:6]
    if migrated_template:
        database = stack["postgres"].create_database(f"report_{token}",
                                                     template=migrated_template)
    else:
        database = request.getfixturevalue("fleet_db")
    stack.save()

    class World:
        group = f"r{token}"
        resource_class = f"gold-{token}"
        rc = normalise_resource_class(f"gold-{token}")
        processes: list = []
        process = want_processes(request)
        # One created through the API, the others copies of it (Ironic.enroll_nodes); all
        # dropped straight from Ironic's database at the end (Ironic.drop_nodes).
        nodes = stack["ironic"].enroll_nodes(getattr(request.module, "WORLD_NODES", 24),
                                             resource_class=f"gold-{token}",
                                             prefix=f"rep-{token}")

        def daemon(self, host, **kw):
            kw.setdefault("process", self.process)
            daemon = Daemon(stack, tmp_path, host, group=self.group, database=database, **kw)
            self.processes.append(daemon)
            return daemon.start()

        def reporter(self, host, **kw):
            kw.setdefault("process", self.process)
            reporter = Reporter(stack, tmp_path, host, group=self.group, database=database,
                                **kw)
            self.processes.append(reporter)
            return reporter.start()

    world = World()
    world.engine = db_engine.engine_from_url(database)
    yield world
    world.engine.dispose()
    stop_all(world.processes,
             meanwhile=lambda: stack["ironic"].drop_nodes(world.nodes))
