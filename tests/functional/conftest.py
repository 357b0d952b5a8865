"""Fixtures that give functional tests the real services.

``stack`` starts ZooKeeper, RabbitMQ, PostgreSQL (where a server is available), Placement and
Ironic once per test session and stops them at the end. To iterate quickly, start a stack by hand
with ``tools/services up`` and export ``COMPUTED_STACK_DIR=.services``: the tests then use it and
leave it running.
"""

from __future__ import annotations

import os
from pathlib import Path

import pytest
from oslo_config import cfg

from computed import conf as computed_conf
from tests.harness.stack import Stack


def pytest_collection_modifyitems(items):
    here = Path(__file__).parent
    for item in items:
        if here in Path(item.fspath).parents:
            item.add_marker(pytest.mark.functional)


@pytest.fixture(scope="session")
def stack(tmp_path_factory):
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


@pytest.fixture
def computed_config(stack, tmp_path):
    """A parsed computed configuration pointing at the stack."""
    path = tmp_path / "computed.conf"
    path.write_text(stack.computed_conf(host="test-host"))
    conf = cfg.ConfigOpts()
    computed_conf.register_opts(conf)
    conf(["--config-file", str(path)], project="computed")
    return conf
