"""The console scripts' command lines: --help, and one line (exit 2) for every bad
configuration, run in-process (tests/cli.py) with HOME and the working directory in the test's
scratch directory. What only a fresh process shows (the installed scripts as a user runs them,
what they import) is in tests/process/test_scripts.py.
"""

import textwrap

import pytest

from tests import cli

SCRIPTS = ('computed', 'computed-reporter', 'computed-manage', 'computed-api',
           'computed-status')

GOOD = """
[DEFAULT]
host = Test-Host.Example
transport_url = fake://

[coordination]
backend_url = file://{tmp}/coordination
join_timeout = 0

[placement]
auth_type = none
endpoint_override = http://127.0.0.1:8778
"""


def run(tmp_path, name, *args):
    # HOME in the test's directory keeps ~/.computed/computed.conf out of the tests.
    return cli.run(name, *args, home=tmp_path)


def write_conf(tmp_path, text):
    path = tmp_path / 'computed.conf'
    path.write_text(textwrap.dedent(text).format(tmp=tmp_path))
    return str(path)


def assert_one_line_error(result, *words):
    assert result.returncode == 2, result
    assert 'Traceback' not in result.stderr
    lines = result.stderr.splitlines()
    assert len(lines) == 1, result.stderr
    assert lines[0].startswith('computed')
    assert ': error: ' in lines[0]
    for word in words:
        assert word in lines[0]


@pytest.mark.parametrize('name', SCRIPTS)
def test_help_needs_no_config(tmp_path, name):
    result = run(tmp_path, name, '--help')
    assert result.returncode == 0, result.stderr
    assert '--config-file' in result.stdout
    assert result.stderr == ''


def test_manage_category_help(tmp_path):
    result = run(tmp_path, 'computed-manage', 'config', '--help')
    assert result.returncode == 0, result.stderr
    assert 'check' in result.stdout


BAD = {
    'missing required option': (
        '[DEFAULT]\nhost = h\n', ['[coordination] backend_url', 'required']),
    'unparsable value': (
        GOOD + '[ironic]\napi_max_retries = many\n',
        ['[ironic] api_max_retries', 'many']),
    'unparsable command-line option value in a file': (
        GOOD + '[DEFAULT]\ndebug = maybe\n', ['[DEFAULT] debug', 'maybe']),
    'unsupported backend scheme': (
        GOOD + '[coordination]\nbackend_url = redis://127.0.0.1:6379\n',
        ['[coordination] backend_url', "unsupported scheme 'redis'",
         'zookeeper://']),
    'ZooKeeper connect limit out of range': (
        GOOD + '[coordination]\napi_connect_timeout = 0\n',
        ['[coordination] api_connect_timeout', 'greater than or equal to 1']),
    'unparsable ZooKeeper connect limit': (
        GOOD + '[coordination]\nreporter_connect_timeout = soon\n',
        ['[coordination] reporter_connect_timeout', 'soon']),
    'unsupported transport scheme': (
        GOOD + '[DEFAULT]\ntransport_url = kafka://127.0.0.1\n',
        ['[DEFAULT] transport_url', "'kafka'"]),
    'bad database URL': (
        GOOD + '[database]\nconnection = postgres ql://x\n',
        ['[database] connection']),
    'unknown auth plugin': (
        GOOD + '[placement]\nauth_type = magic\n',
        ['[placement] auth_type', "'magic'"]),
    'missing auth plugin option': (
        GOOD + '[ironic]\nauth_type = password\n',
        ['[ironic] auth_url', 'password']),
    'unparsable file': ('no section here\n', ['computed.conf', 'parse']),
}


@pytest.mark.parametrize('case', sorted(BAD))
def test_daemon_bad_configuration(tmp_path, case):
    text, words = BAD[case]
    result = run(tmp_path, 'computed', '--config-file',
                 write_conf(tmp_path, text))
    assert_one_line_error(result, *words)


def test_missing_config_file(tmp_path):
    result = run(tmp_path, 'computed', '--config-file',
                 str(tmp_path / 'absent.conf'))
    assert_one_line_error(result, 'absent.conf', 'not found')


@pytest.mark.parametrize('name, args', [
    ('computed-reporter', []), ('computed-manage', ['config', 'check'])])
def test_other_scripts_validate_too(tmp_path, name, args):
    path = write_conf(tmp_path, BAD['unsupported backend scheme'][0])
    result = run(tmp_path, name, '--config-file', path, *args)
    assert_one_line_error(result, '[coordination] backend_url')
    assert result.stderr.startswith(f'{name}: error: ')


def test_manage_config_check_ok(tmp_path):
    result = run(tmp_path, 'computed-manage', '--config-file',
                 write_conf(tmp_path, GOOD), 'config', 'check')
    assert result.returncode == 0, result.stderr
    assert result.stdout == 'configuration OK\n'


def test_manage_takes_the_config_options_after_the_command_too(tmp_path):
    """``computed-manage config check --config-file X``, as the README and docs write it."""
    good = write_conf(tmp_path, GOOD)
    for args in (('config', 'check', '--config-file', good),
                 ('config', 'check', f'--config-file={good}')):
        result = run(tmp_path, 'computed-manage', *args)
        assert result.returncode == 0, result.stderr
        assert result.stdout == 'configuration OK\n'
    bad = write_conf(tmp_path, BAD['unsupported backend scheme'][0])
    result = run(tmp_path, 'computed-manage', 'config', 'check', '--config-file', bad)
    assert_one_line_error(result, '[coordination] backend_url')


def test_reporter_needs_a_database(tmp_path):
    # The reporter orders reports per provider in computed's database: without one it must
    # say so in one line rather than start and fail later.
    result = run(tmp_path, 'computed-reporter', '--config-file', write_conf(tmp_path, GOOD))
    assert result.returncode == 2
    assert result.stderr.splitlines() == [
        'computed-reporter: error: [database] connection: required by the reporter '
        '(it orders reports per provider)']


def test_daemon_refuses_a_file_backend(tmp_path):
    # file:// gives membership but no exclusive claims: the daemon must not run on it.
    result = run(tmp_path, 'computed', '--config-file', write_conf(tmp_path, GOOD))
    assert result.returncode == 2
    assert result.stderr.splitlines() == [
        'computed: error: [coordination] backend_url: file:// keeps group membership only; '
        'the daemon needs zookeeper://HOST:PORT to claim nodes exclusively']


def test_a_zookeeper_handler_other_than_threads_is_refused(tmp_path):
    conf = write_conf(tmp_path, GOOD.replace(
        'backend_url = file://{tmp}/coordination',
        'backend_url = zookeeper://127.0.0.1:2181?handler=eventlet'))
    assert_one_line_error(run(tmp_path, 'computed', '--config-file', conf),
                          "handler='eventlet'", 'native threads')


def test_api_refuses_an_unknown_auth_strategy(tmp_path):
    conf = write_conf(tmp_path, GOOD + '\n[api]\nauth_strategy = trust-me\n')
    assert_one_line_error(run(tmp_path, 'computed-api', '--config-file', conf),
                          'auth_strategy', 'trust-me')


def test_api_port_in_use_is_a_configuration_error(tmp_path):
    import socket
    with socket.socket() as taken:
        taken.bind(('127.0.0.1', 0))
        taken.listen()
        port = taken.getsockname()[1]
        conf = write_conf(tmp_path, GOOD + f'\n[api]\nbind_host = 127.0.0.1\n'
                                           f'bind_port = {port}\n[database]\n'
                                           f'connection = sqlite:///{tmp_path}/computed.db\n')
        assert_one_line_error(run(tmp_path, 'computed-api', '--config-file', conf),
                              '[api] bind_port', str(port))


def test_api_needs_a_database(tmp_path):
    conf = write_conf(tmp_path, GOOD + '\n[api]\nbind_host = 127.0.0.1\nbind_port = 0\n')
    assert_one_line_error(run(tmp_path, 'computed-api', '--config-file', conf),
                          '[database] connection')
