"""The loader: parse, force every value, and report faults by option."""

import pathlib
import textwrap

import pytest
from oslo_config import cfg

from computed.conf import loader
from computed.conf.errors import ConfigError

GOOD = """
[DEFAULT]
host = Ctl-1.Example.org
transport_url = rabbit://computed:secret@10.0.0.5:5672,10.0.0.6:5672/

[coordination]
backend_url = zookeeper://10.0.0.1:2181,10.0.0.2:2181?timeout=10

[ironic]
auth_type = password
auth_url = http://keystone.example:5000/v3
username = computed
password = secret
project_name = service
user_domain_name = Default
project_domain_name = Default
conductor_group = rack-2

[placement]
auth_type = none
endpoint_override = http://127.0.0.1:8778

[database]
connection = sqlite:////var/lib/computed/computed.sqlite
"""


def parse(tmp_path, text, *extra_args):
    path = tmp_path / 'computed.conf'
    path.write_text(textwrap.dedent(text))
    conf = cfg.ConfigOpts()
    loader.register_all(conf)
    loader.parse(conf, ['--config-file', str(path), *extra_args], 'computed')
    loader.validate(conf)
    return conf


def fault(tmp_path, text):
    with pytest.raises(ConfigError) as info:
        parse(tmp_path, text)
    return info.value


def with_section(section, lines, base=GOOD):
    """GOOD plus a repeated section at the end, whose values win."""
    return f'{base}\n[{section}]\n{lines}\n'


def test_good_configuration_loads(tmp_path):
    conf = parse(tmp_path, GOOD)
    assert conf.coordination.group == 'computed'
    assert conf.ironic.service_type == 'baremetal'
    assert conf.placement.service_type == 'placement'
    assert conf.ironic.conductor_group == 'rack-2'
    assert conf.ironic.shard is None
    assert conf.ironic.api_max_retries == 5
    # The plugin's own options were registered and parsed.
    assert conf.ironic.username == 'computed'


def test_minimal_configuration_needs_only_backend_url_and_transport_url(tmp_path):
    conf = parse(tmp_path, '[DEFAULT]\ntransport_url = fake://\n'
                           '[coordination]\nbackend_url = file:///tmp/x\n')
    assert conf.ironic.auth_type is None
    assert conf.database.connection is None


def test_cli_overrides_file(tmp_path):
    conf = parse(tmp_path, GOOD, '--debug')
    assert conf.debug is True


@pytest.mark.parametrize('text, group, option, words', [
    ('[DEFAULT]\n', 'coordination', 'backend_url', 'required'),
    (with_section('ironic', 'api_max_retries = abc'),
     'ironic', 'api_max_retries', 'invalid value'),
    (with_section('ironic', 'api_retry_interval = 0'),
     'ironic', 'api_retry_interval', 'invalid value'),
    (with_section('DEFAULT', 'debug = maybe'),
     'DEFAULT', 'debug', 'invalid value'),
    (with_section('placement', 'timeout = soon'),
     'placement', 'timeout', 'invalid value'),
    (with_section('DEFAULT', 'host = " "'), 'DEFAULT', 'host', 'empty'),
    (with_section('coordination', 'backend_url = redis://127.0.0.1:6379'),
     'coordination', 'backend_url', "unsupported scheme 'redis'"),
    (with_section('coordination', 'backend_url = zookeeper://'),
     'coordination', 'backend_url', 'no ZooKeeper server'),
    (with_section('coordination', 'backend_url = zookeeper://h:99999'),
     'coordination', 'backend_url', 'invalid port'),
    (with_section('coordination', 'backend_url = zookeeper://h?timeout=x'),
     'coordination', 'backend_url', 'timeout'),
    (with_section('coordination', 'backend_url = zookeeper://h?handler=gevent'),
     'coordination', 'backend_url', "handler='gevent'"),
    (with_section('coordination', 'backend_url = file://relative/dir'),
     'coordination', 'backend_url', 'absolute'),
    (with_section('DEFAULT', 'transport_url = kafka://127.0.0.1:9092'),
     'DEFAULT', 'transport_url', "unsupported scheme 'kafka'"),
    (with_section('DEFAULT', 'transport_url = rabbit://u:p@h:port/'),
     'DEFAULT', 'transport_url', 'invalid port'),
    (with_section('oslo_messaging_notifications',
                  'transport_url = redis://h'),
     'oslo_messaging_notifications', 'transport_url', 'unsupported'),
    (with_section('database', 'connection = not a url'),
     'database', 'connection', 'not an SQLAlchemy URL'),
    (with_section('database', 'connection = nosuchdb://h/computed'),
     'database', 'connection', 'unknown SQLAlchemy dialect'),
    (with_section('placement', 'auth_type = kerberos-ish'),
     'placement', 'auth_type', 'unknown auth plugin'),
    (GOOD.replace('auth_url = http://keystone.example:5000/v3\n', ''),
     'ironic', 'auth_url', 'required by auth_type = password'),
    (GOOD.replace('endpoint_override = http://127.0.0.1:8778\n', ''),
     'placement', 'endpoint_override', 'required by auth_type = none'),
    (with_section('placement', 'auth_type = admin_token\nendpoint = http://x'),
     'placement', 'token', 'required by auth_type = admin_token'),
    (with_section('placement', 'valid_interfaces = internal,private'),
     'placement', 'valid_interfaces', "unknown interface 'private'"),
])
def test_fault_names_the_option(tmp_path, text, group, option, words):
    error = fault(tmp_path, text)
    assert (error.group, error.option) == (group, option)
    assert words in str(error)
    assert str(error).startswith(f'[{group}] {option}: ')
    assert '\n' not in str(error)


def test_secrets_stay_out_of_messages(tmp_path):
    error = fault(tmp_path, with_section(
        'database', 'connection = postgresql://u:hunter2@h:bad/db'))
    assert error.option == 'connection'
    assert 'hunter2' not in str(error)
    error = fault(tmp_path, with_section(
        'DEFAULT', 'transport_url = rabbit://u:hunter2@h:bad/'))
    assert 'hunter2' not in str(error)


def test_missing_config_file_names_the_file(tmp_path):
    conf = cfg.ConfigOpts()
    loader.register_all(conf)
    missing = tmp_path / 'nope.conf'
    with pytest.raises(ConfigError, match='nope.conf: not found'):
        loader.parse(conf, ['--config-file', str(missing)], 'computed')


def test_unparsable_config_file_names_the_file(tmp_path):
    path = tmp_path / 'broken.conf'
    path.write_text('this is not ini\n')
    conf = cfg.ConfigOpts()
    loader.register_all(conf)
    with pytest.raises(ConfigError, match='broken.conf: cannot parse'):
        loader.parse(conf, ['--config-file', str(path)], 'computed')


def test_oslo_messaging_accepts_the_registered_options(tmp_path):
    import oslo_messaging

    conf = parse(tmp_path, with_section('DEFAULT', 'transport_url = fake://'))
    transport = oslo_messaging.get_rpc_transport(conf)
    transport.cleanup()


def test_config_options_move_before_the_command_and_nothing_else_does():
    assert loader.config_options_first(
        ['fleet', 'drain', 'c2', '--config-file', 'a.conf', '--config-dir=d', '--json']) == \
        ['--config-file', 'a.conf', '--config-dir=d', 'fleet', 'drain', 'c2', '--json']
    assert loader.config_options_first(['--config-file', 'a.conf', 'db', 'sync']) == \
        ['--config-file', 'a.conf', 'db', 'sync']


# -- issue 16 item 15: what config check used to accept and a start then tripped on -----------

@pytest.mark.parametrize('text, group, option, words', [
    (with_section('coordination', 'backend_url = zookeeper://h:2181?timeout=2.5'),
     'coordination', 'backend_url', 'whole number of seconds'),
    (with_section('coordination', 'backend_url = zookeeper://h:2181?timeout=inf'),
     'coordination', 'backend_url', 'whole number of seconds'),
    (with_section('coordination', 'backend_url = zookeeper://h:2181?timeout=0'),
     'coordination', 'backend_url', 'whole number of seconds'),
    (with_section('coordination', 'group ='), 'coordination', 'group', 'empty'),
    (with_section('coordination', 'group = a/b'), 'coordination', 'group', "'/'"),
    (with_section('DEFAULT', 'host = ctl/1'), 'DEFAULT', 'host', "'/'"),
    (with_section('DEFAULT', 'host = ctl 1'), 'DEFAULT', 'host', 'blank'),
    (with_section('ironic', 'cafile = /nonexistent/ca.pem'),
     'ironic', 'cafile', '/nonexistent/ca.pem'),
    (with_section('placement', 'certfile = /nonexistent/cert.pem'),
     'placement', 'certfile', 'not found'),
    (with_section('oslo_messaging_rabbit', 'ssl_ca_file = /nonexistent/ca.pem'),
     'oslo_messaging_rabbit', 'ssl_ca_file', 'not found'),
    (with_section('database', 'connection = mysql+mysqldb://u:p@h/computed'),
     'database', 'connection', "'MySQLdb'"),
    (with_section('ironic', 'usernme = computed'), 'ironic', 'usernme',
     "unknown option (did you mean 'username'?)"),
    (with_section('coordination', 'backend = zookeeper://h:2181'), 'coordination', 'backend',
     'unknown option'),
    (with_section('DEFAULT', 'debg = true'), 'DEFAULT', 'debg', 'unknown option'),
    (with_section('reporter', 'topic ='), 'reporter', 'topic', 'empty'),
    (with_section('ironic', 'endpoint_override = ironic.example:6385'),
     'ironic', 'endpoint_override', 'http:// or https://'),
    (with_section('DEFAULT', 'baremetal_driver = nosuch'),
     'DEFAULT', 'baremetal_driver', "'nosuch'"),
    (with_section('fleet', 'audit_log = /nonexistent/dir/audit.log'),
     'fleet', 'audit_log', '/nonexistent/dir'),
    (with_section('DEFAULT', 'log_file = /nonexistent/dir/computed.log'),
     'DEFAULT', 'log_file', '/nonexistent/dir'),
])
def test_fault_found_at_check_time(tmp_path, text, group, option, words):
    error = fault(tmp_path, text)
    assert (error.group, error.option) == (group, option), str(error)
    assert words in str(error)
    assert '\n' not in str(error)


def test_an_unknown_section_is_an_error_naming_it(tmp_path):
    error = fault(tmp_path, with_section('placment', 'auth_type = none'))
    assert "unknown section [placment] (did you mean [placement]?)" in str(error)
    assert 'computed.conf' in str(error)


def test_deprecated_names_and_dashes_are_still_known(tmp_path):
    # oslo.log's log_config is a deprecated name of log_config_append: not unknown.
    parse(tmp_path, with_section('DEFAULT', 'log_config = /dev/null'))


def test_unknown_options_in_a_config_dir_are_found_too(tmp_path):
    confdir = tmp_path / 'computed.conf.d'
    confdir.mkdir()
    (confdir / '10-extra.conf').write_text('[fleet]\nwieght = 2\n')
    with pytest.raises(ConfigError, match=r'\[fleet\] wieght: unknown option'):
        parse(tmp_path, GOOD, '--config-dir', str(confdir))


def test_the_documented_database_urls_have_their_drivers_installed(tmp_path):
    # The README and docs/deployment.md show postgresql+psycopg2://: requirements.txt ships it.
    parse(tmp_path, with_section('database', 'connection = postgresql+psycopg2://u:p@db/c'))
    requirements = (pathlib.Path(__file__).parents[3] / 'requirements.txt').read_text()
    assert 'psycopg2' in requirements


def test_sections_of_the_other_programs_sharing_the_file_are_known(tmp_path):
    # One computed.conf serves every program; a section one of them registers only for
    # itself (oslo.middleware's, keystonemiddleware's in an API server) is no typo here.
    parse(tmp_path, with_section('oslo_middleware', 'enable_proxy_headers_parsing = true'))
    error = fault(tmp_path, with_section('oslo_middleware', 'enable_proxy_header = true'))
    assert error.option == 'enable_proxy_header'


KEYSTONE_AUTHTOKEN = '''auth_type = password
auth_url = http://127.0.0.1:5000/v3
username = computed
password = secret
project_name = service
user_domain_name = Default
project_domain_name = Default
www_authenticate_uri = http://127.0.0.1:5000'''


def test_keystone_authtoken_knows_the_options_of_its_auth_plugin(tmp_path):
    # keystonemiddleware registers the plugin's options (auth_url...) only once it runs: the
    # check must take them from the auth_type written in the section, and still catch typos.
    parse(tmp_path, with_section('keystone_authtoken', KEYSTONE_AUTHTOKEN))
    error = fault(tmp_path, with_section('keystone_authtoken',
                                         KEYSTONE_AUTHTOKEN.replace('auth_url', 'auth_ur')))
    assert (error.group, error.option) == ('keystone_authtoken', 'auth_ur')
    error = fault(tmp_path, with_section('keystone_authtoken',
                                         KEYSTONE_AUTHTOKEN.replace('= password', '= pasword')))
    assert (error.group, error.option) == ('keystone_authtoken', 'auth_type')


def test_a_reporter_may_take_fewer_reports_per_call_than_the_default_batch(tmp_path):
    # The reporter's own file: batch_size is a daemon's option it never uses (test_reporter_limits
    # runs a reporter so); only a batch size written in the file is held to the reporter limit.
    conf = parse(tmp_path, with_section('reporter', 'max_reports_per_call = 50'))
    assert (conf.reporter.batch_size, conf.reporter.max_reports_per_call) == (100, 50)
    error = fault(tmp_path, with_section('reporter', 'max_reports_per_call = 50\nbatch_size = 60'))
    assert (error.group, error.option) == ('reporter', 'batch_size')


GLANCE_PASSWORD = """
auth_type = password
auth_url = http://keystone.example:5000/v3
username = computed
password = secret
project_name = service
user_domain_name = Default
project_domain_name = Default
"""


def test_glance_is_a_keystoneauth_section_checked_as_the_others(tmp_path):
    # computed-api reads [glance] (issue 24 item 12): its plugin's options are known, a typo
    # and an endpoint that is not a URL are found at start.
    conf = parse(tmp_path, with_section('glance', GLANCE_PASSWORD))
    assert conf.glance.service_type == 'image'
    parse(tmp_path, with_section('glance', 'auth_type = none\n'
                                           'endpoint_override = http://127.0.0.1:9292'))
    error = fault(tmp_path, with_section('glance', GLANCE_PASSWORD.replace('username',
                                                                           'usernme')))
    assert (error.group, error.option) == ('glance', 'usernme')
    error = fault(tmp_path, with_section('glance', 'auth_type = none\n'
                                                   'endpoint_override = 127.0.0.1:9292'))
    assert (error.group, error.option) == ('glance', 'endpoint_override')
