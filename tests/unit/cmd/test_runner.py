"""The in-process runner of the console scripts (tests/cli.py) keeps its guarantees: the exit
status and output a subprocess would give, and nothing a run changes left in the process."""

import contextlib
import importlib.metadata
import io
import logging
import os
import signal
import sys
import threading
import warnings

import pytest

from tests import cli
from tests.unit.cmd.test_scripts import GOOD, write_conf


def test_the_scripts_are_setup_cfgs_and_the_installed_ones():
    scripts = cli.console_scripts()
    assert set(scripts) == {'computed', 'computed-reporter', 'computed-manage', 'computed-api',
                            'computed-status'}
    installed = {ep.name: ep.value for ep in importlib.metadata.entry_points(
        group='console_scripts') if ep.dist is not None and ep.dist.name == 'computed'}
    # A stale install (pip install -e . not run again) would test other mains than a user runs.
    assert installed == scripts
    with pytest.raises(ValueError, match='not a console script'):
        cli.run('computed-nosuch', home='/nonexistent')


def status_of(body):
    err = io.StringIO()
    with contextlib.redirect_stderr(err):
        return cli._call(lambda argv: body(), []), err.getvalue()


def test_the_exit_status_is_the_interpreters():
    assert status_of(lambda: None) == (0, '')
    assert status_of(lambda: sys.exit(None)) == (0, '')
    assert status_of(lambda: sys.exit(3)) == (3, '')
    assert status_of(lambda: sys.exit('bad thing')) == (1, 'bad thing\n')
    status, err = status_of(lambda: 1 / 0)
    assert status == 1 and err.startswith('Traceback') and 'ZeroDivisionError' in err
    with pytest.raises(KeyboardInterrupt):
        status_of(lambda: (_ for _ in ()).throw(KeyboardInterrupt()))


def test_warnings_are_shown_each_run_as_in_a_fresh_interpreter():
    shown = []
    for _ in range(2):
        err = io.StringIO()
        with contextlib.redirect_stderr(err), cli._fresh_warnings():
            warnings.warn('shown every time', UserWarning, stacklevel=1)
            warnings.warn('ignored outside __main__', DeprecationWarning, stacklevel=1)
        shown.append(err.getvalue())
    assert all('UserWarning: shown every time' in text for text in shown)
    assert not any('ignored' in text for text in shown)


def test_home_and_cwd_are_the_runs_and_put_back(tmp_path):
    # The loader reads ~/.computed/computed.conf when no --config-file is given.
    (tmp_path / '.computed').mkdir()
    (tmp_path / '.computed' / 'computed.conf').write_text('no section here\n')
    home, cwd = os.environ.get('HOME'), os.getcwd()
    result = cli.run('computed-manage', 'config', 'check', home=tmp_path)
    assert result.returncode == 2
    assert f'{tmp_path}/.computed/computed.conf' in result.stderr
    assert (os.environ.get('HOME'), os.getcwd()) == (home, cwd)
    # cwd: where a relative --config-file is found.
    (tmp_path / 'sub').mkdir()
    write_conf(tmp_path / 'sub', GOOD)
    result = cli.run('computed-manage', '--config-file', 'computed.conf', 'config', 'check',
                     home=tmp_path, cwd=tmp_path / 'sub')
    assert result.returncode == 0, result
    assert os.getcwd() == cwd


def test_a_service_that_installed_its_stop_handlers_and_logging_leaves_neither(tmp_path):
    # computed-api installs SIGTERM/SIGINT handlers and sets oslo.log up before it finds that
    # it has no database.
    terminate, interrupt = signal.getsignal(signal.SIGTERM), signal.getsignal(signal.SIGINT)
    root = logging.getLogger()
    handlers, level = list(root.handlers), root.level
    amqp = logging.getLogger('amqp').level  # one of oslo.log's default_log_levels
    hook = sys.excepthook
    conf = write_conf(tmp_path, GOOD + '\n[api]\nbind_host = 127.0.0.1\nbind_port = 0\n')
    result = cli.run('computed-api', '--config-file', conf, home=tmp_path)
    assert result.returncode == 2 and '[database] connection' in result.stderr
    assert signal.getsignal(signal.SIGTERM) is terminate
    assert signal.getsignal(signal.SIGINT) is interrupt
    assert (root.handlers, root.level) == (handlers, level)
    assert logging.getLogger('amqp').level == amqp
    assert sys.excepthook is hook


def test_no_run_leaves_a_thread_running(tmp_path):
    # (kazoo's threads, started and stopped by a command that finds ZooKeeper down: every run of
    # test_cli_habits checks its threads_left.)
    conf = write_conf(tmp_path, GOOD + f"[database]\nconnection = sqlite:///{tmp_path}/c.db\n")
    before = set(threading.enumerate())
    for argv in (('computed-manage', '--help'),
                 ('computed-manage', '--config-file', conf, 'db', 'sync'),
                 ('computed-manage', '--config-file', conf, 'server', 'list'),
                 ('computed', '--config-file', conf),
                 ('computed-reporter', '--config-file', conf),
                 ('computed-api', '--config-file', conf)):
        result = cli.run(*argv, home=tmp_path)
        assert result.threads_left == (), argv
    assert set(threading.enumerate()) == before
