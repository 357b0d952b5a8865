"""What an operator meets at the command line (issue 14 item 6, issue 16 item 14), run in-process
(tests/cli.py) against services that are down on purpose (a port nothing listens on), so no
service is needed. The reporter stopped by SIGTERM and the tools' own parsers run as processes,
in tests/process/test_cli_habits.py.
"""

import pathlib
import re
import time
import uuid

import pytest
from kazoo import exceptions as zk_exc

from computed import db
from computed.db import engine as db_engine
from computed.db import instances as db_instances
from computed.db import models
from computed.testing.process import free_port
from tests import cli
from tests.unit.cmd.test_scripts import GOOD, run, write_conf

ROOT = pathlib.Path(__file__).resolve().parents[3]


def closed_port():
    """A loopback port nothing listens on, claimed so no other test's service takes it."""
    return free_port()


def one_line(result, status, *words):
    assert result.returncode == status, result
    # A command that gave up on ZooKeeper must have stopped kazoo's threads.
    assert result.threads_left == (), result
    assert 'Traceback' not in result.stderr
    lines = result.stderr.splitlines()
    assert len(lines) == 1, result.stderr
    for word in words:
        assert word in lines[0], lines[0]
    return lines[0]


def zookeeper_down_conf(tmp_path, extra=''):
    """A configuration whose ZooKeeper is a port nothing listens on; a command and a reporter's
    attempt give up on it after 1 s (``[coordination] *_connect_timeout``; 10 s and 5 s by
    default)."""
    return write_conf(tmp_path, GOOD.replace(
        'backend_url = file://{tmp}/coordination',
        f'backend_url = zookeeper://127.0.0.1:{closed_port()}?timeout=2\n'
        f'command_connect_timeout = 1\n'
        f'reporter_connect_timeout = 1') + extra)


def test_help_shows_the_commands_before_the_logging_options(tmp_path):
    result = run(tmp_path, 'computed-manage', '--help')
    assert result.returncode == 0, result.stderr
    out = result.stdout
    for command in ('config check', 'fleet status', 'server stop UUID [--wait]', 'db sync'):
        assert out.index(command) < out.index('--log-date-format'), command


@pytest.mark.parametrize('args', [
    ('--help',), ('config', 'check'), ('server', 'show', '--help')])
def test_no_eventlet_deprecation_warning(tmp_path, args):
    result = run(tmp_path, 'computed-manage', '--config-file', write_conf(tmp_path, GOOD), *args)
    assert result.returncode == 0, result.stderr
    assert 'Eventlet' not in result.stderr and result.stderr == ''


@pytest.mark.parametrize('args, word', [
    (('--deb', 'config', 'check'), '--deb'),
    (('--config-fil', '{conf}', 'config', 'check'), '--config-fil'),
    (('fleet', 'status', '--js'), '--js'),
    (('server', 'create', '--resource-class', 'GOLD', '--wai'), '--wai'),
    (('server', 'stop', str(uuid.uuid4()), '--time', '4'), '--time'),
])
def test_manage_options_are_never_abbreviated(tmp_path, args, word):
    conf = write_conf(tmp_path, GOOD)
    args = [arg.format(conf=conf) for arg in args]
    if '--config-fil' not in args:
        args = ['--config-file', conf, *args]
    line = one_line(run(tmp_path, 'computed-manage', *args), 2, word)
    assert line.startswith('computed-manage')


def test_the_daemon_refuses_abbreviated_options_too(tmp_path):
    result = run(tmp_path, 'computed', '--config-file', write_conf(tmp_path, GOOD), '--deb')
    one_line(result, 2, '--deb', 'not abbreviated')


def test_every_argument_parser_in_tools_and_bench_refuses_abbreviations():
    # Not run: tools/run-local's "--daemon 4" taken as "--daemons 4" would start a whole demo.
    sources = [ROOT / 'tools' / 'services', *(ROOT / 'tools').rglob('*.py'),
               *(ROOT / 'bench').rglob('*.py')]
    parsers = 0
    for path in sources:
        for call in re.findall(r'ArgumentParser\((.*?)\)\n', path.read_text(), re.S):
            parsers += 1
            assert 'allow_abbrev=False' in call, path
    assert parsers >= 6


def test_fleet_status_with_zookeeper_down_names_it_in_one_line(tmp_path):
    conf = zookeeper_down_conf(tmp_path)
    result = run(tmp_path, 'computed-manage', 'fleet', 'status', '--config-file', conf)
    one_line(result, 1, 'ZooKeeper at 127.0.0.1:', 'unreachable')


def test_fleet_status_with_ironic_down_fails_at_once_naming_it(tmp_path):
    port = closed_port()
    conf = zookeeper_down_conf(tmp_path, f'[ironic]\nauth_type = none\n'
                                         f'endpoint_override = http://127.0.0.1:{port}\n')
    result = run(tmp_path, 'computed-manage', 'fleet', 'status', '--config-file', conf)
    line = one_line(result, 1, f'Ironic at http://127.0.0.1:{port} unreachable')
    # Asked once: the daemon's retries ([ironic] api_max_retries) are not the CLI's.
    assert '(after 1 attempt(s))' in line


def test_server_create_with_zookeeper_down_names_it(tmp_path):
    conf = zookeeper_down_conf(
        tmp_path, f"[database]\nconnection = sqlite:///{tmp_path / 'c.sqlite'}\n")
    result = run(tmp_path, 'computed-manage', 'server', 'create', '--resource-class', 'GOLD',
                 '--config-file', conf)
    one_line(result, 1, 'ZooKeeper at 127.0.0.1:', 'unreachable')
    assert 'TimeoutError' not in result.stderr


@pytest.fixture
def instance_db(tmp_path):
    url = f"sqlite:///{tmp_path / 'c.sqlite'}"
    db.sync(url)
    engine = db_engine.engine_from_url(url)
    row = db_instances.create_instance(engine, str(uuid.uuid4()), 'CUSTOM_GOLD',
                                       node_uuid=str(uuid.uuid4()), host='c1', member_epoch=1,
                                       state=models.ACTIVE)
    conf = write_conf(tmp_path, GOOD + f'[database]\nconnection = {url}\n')
    yield engine, row, conf
    engine.dispose()


def test_an_action_the_state_does_not_allow_is_refused_in_one_line(tmp_path, instance_db):
    engine, row, conf = instance_db
    row = db_instances.set_instance_state(engine, row.uuid, models.DELETED)
    result = run(tmp_path, 'computed-manage', 'server', 'start', row.uuid, '--config-file', conf)
    one_line(result, 1, f'instance {row.uuid} is DELETED: start needs STOPPED')
    assert db_instances.get_instance(engine, row.uuid) == row


def test_an_action_already_done_is_a_no_op_as_in_the_lifecycle(tmp_path, instance_db):
    engine, row, conf = instance_db
    result = run(tmp_path, 'computed-manage', 'server', 'start', row.uuid, '--wait',
                 '--config-file', conf)
    assert result.returncode == 0, result.stderr
    assert result.stdout == f'instance {row.uuid}: already active\n'
    assert db_instances.get_instance(engine, row.uuid) == row


@pytest.mark.parametrize('action, steps, final, status', [
    ('stop', (models.STOPPING, models.STOPPED), 'STOPPED', 0),
    ('reboot', (models.REBOOTING, models.ACTIVE), 'ACTIVE', 0),
    ('delete', (models.DELETING, models.DELETED), 'DELETED', 0),
    ('stop', (models.STOPPING, models.ACTIVE), 'ACTIVE', 1),
])
def test_actions_wait_until_the_instance_settles(tmp_path, instance_db, action, steps, final,
                                                 status):
    engine, row, conf = instance_db
    running = cli.start('computed-manage', 'server', action, row.uuid, '--wait',
                        '--timeout', '120', '--config-file', conf, home=tmp_path)
    try:
        deadline = time.monotonic() + 60
        while '\n' not in running.stdout and not running.done:
            assert time.monotonic() < deadline, running.stderr
            time.sleep(0.05)
        sent = running.stdout.partition('\n')[0]
        assert f'{action} sent to c1' in sent, (sent, running.stderr)
        for state in steps:  # what the daemon would write
            time.sleep(0.5)
            assert not running.done, running.stderr
            fault = 'power failed' if status and state == steps[-1] else None
            db_instances.set_instance_state(engine, row.uuid, state, fault)
        result = running.wait(60)
    except BaseException:
        if not running.done:  # a settled state ends the command's wait, and the run's hold on
            db_instances.set_instance_state(engine, row.uuid, models.ERROR, 'test failed')
        running.wait(60)  # the process's streams
        raise
    assert result.returncode == status, result.stderr
    assert result.stdout.splitlines()[-1].startswith(f'instance {row.uuid}: {final}')
    assert result.stderr == ''


def _zookeeper_fails(monkeypatch, error):
    """ZooKeeper answers the connect (a real tooz coordinator whose kazoo client never starts:
    nothing is reached), then ``error`` on the command's first request."""
    from tooz import coordination

    from computed.cmd import common
    from computed.cmd import fleet as fleet_cmd
    monkeypatch.setattr(common, 'connect_zookeeper',
                        lambda conf, member, *_args, **_kwargs: coordination.get_coordinator(
                            conf.coordination.backend_url, member.encode()))

    def fail(*_args, **_kwargs):
        raise error
    for name in ('read_group', 'read_members', 'clear_draining'):
        monkeypatch.setattr(fleet_cmd, name, fail)


def _tooz_timeout():
    from tooz import coordination
    return coordination.OperationTimedOut('timed out')


def _no_answer():
    from computed.fleet.zookeeper import NoAnswer
    return NoAnswer('the list of /tooz/computed', 10)


def _kazoo_timeout():
    from kazoo.handlers.threading import KazooTimeoutError
    return KazooTimeoutError('Value not received within 10 seconds')


@pytest.mark.parametrize('command', [('fleet', 'status'), ('fleet', 'drain', 'c1'),
                                     ('fleet', 'undrain', 'c1')])
@pytest.mark.parametrize('error, words', [
    (lambda: zk_exc.ConnectionLoss(), ('unreachable', 'the connection was lost')),
    (lambda: zk_exc.SessionExpiredError(), ('unreachable', 'its session expired')),
    (_no_answer, ('unreachable', 'did not answer the list of /tooz/computed within 10 s')),
    (_kazoo_timeout, ('unreachable', 'KazooTimeoutError')),
    (_tooz_timeout, ('unreachable', 'OperationTimedOut')),
    (lambda: zk_exc.NoNodeError(), ('NoNodeError',)),
    (lambda: zk_exc.NoAuthError(), ('not allowed', 'backend_url')),
])
def test_a_zookeeper_failure_after_connecting_is_one_line_naming_hosts_and_command(
        tmp_path, monkeypatch, command, error, words):
    """kazoo's errors once the session is up (the connection lost, the session expired, no
    answer, a znode missing) printed a traceback: now one line, naming the command and the
    ZooKeeper servers, and exit 1."""
    port = closed_port()
    conf = write_conf(tmp_path, GOOD.replace(
        'backend_url = file://{tmp}/coordination',
        f'backend_url = zookeeper://127.0.0.1:{port},127.0.0.2:{port}?timeout=2'))
    _zookeeper_fails(monkeypatch, error())
    result = run(tmp_path, 'computed-manage', *command, '--config-file', conf)
    one_line(result, 1, f'computed-manage: error: {" ".join(command[:2])}: ',
             f'ZooKeeper at 127.0.0.1:{port},127.0.0.2:{port}', *words)
