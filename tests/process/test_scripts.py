"""The installed console scripts as a user runs them: fresh interpreters, from the test
virtualenv's bin directory (computed installed with ``pip install -e .``). Their command lines
are tested in-process in tests/unit/cmd/test_scripts.py."""

import os
import pathlib
import subprocess
import sys
import textwrap

import pytest

from tests.unit.cmd.test_scripts import GOOD, SCRIPTS, write_conf

BIN = pathlib.Path(sys.executable).parent


def script(name):
    path = BIN / name
    if not path.exists():
        pytest.fail(f'{path} missing: install computed with pip install -e .')
    return str(path)


def env(tmp_path):
    # A private HOME keeps ~/.computed/computed.conf out of the tests.
    return {**os.environ, 'HOME': str(tmp_path)}


def run(tmp_path, name, *args):
    return subprocess.run([script(name), *args], capture_output=True,
                          text=True, timeout=60, env=env(tmp_path),
                          cwd=tmp_path)


@pytest.mark.parametrize('name', SCRIPTS)
def test_help_of_the_installed_script(tmp_path, name):
    result = run(tmp_path, name, '--help')
    assert result.returncode == 0, result.stderr
    assert '--config-file' in result.stdout
    # Nothing on stderr: no warning printed while a fresh interpreter imports the script (such
    # as eventlet's deprecation), which an in-process run cannot see.
    assert result.stderr == ''


def test_a_command_that_loads_every_option_prints_no_warning(tmp_path):
    # config check loads what --help does not (oslo.messaging's drivers, keystoneauth's
    # plugins), each import a chance for a library's warning.
    result = run(tmp_path, 'computed-manage', '--config-file', write_conf(tmp_path, GOOD),
                 'config', 'check')
    assert result.returncode == 0, result.stderr
    assert 'Eventlet' not in result.stderr and result.stderr == ''


def test_no_console_script_imports_eventlet(tmp_path):
    # A fresh interpreter: pytest's own process may have imported anything. Every script's
    # module and everything a serving process builds on (the API's server, the daemon's and
    # the reporter's parts) is imported, and eventlet must not be among what they pulled in.
    code = textwrap.dedent('''
        import sys
        import computed.cmd.api, computed.cmd.daemon, computed.cmd.manage, computed.cmd.reporter
        import computed.api.httpd, computed.api.app
        print(sorted(name for name in sys.modules if name.split('.')[0] == 'eventlet'))
        ''')
    result = subprocess.run([sys.executable, '-c', code], capture_output=True,
                            text=True, timeout=120, env=env(tmp_path))
    assert result.stdout.splitlines() == ['[]'], result.stderr
