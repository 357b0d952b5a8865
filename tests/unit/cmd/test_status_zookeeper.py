"""computed-status upgrade check when ZooKeeper fails after the session was had (issue 22): the
check that needed it fails with computed-manage's one line naming the servers (nova-status: a
service that cannot be reached is the check's failure), not an error of the whole command
(exit 255, kazoo's exception's name and no address). The session here is one kazoo closed, as
after it was lost; what a frozen ZooKeeper does to the whole command is
tests/functional/test_status.py's."""

from __future__ import annotations

from oslo_config import cfg
from tooz import coordination

from computed import conf as computed_conf
from computed.cmd import status
from computed.upgrade.checks import Code

URL = 'zookeeper://127.0.0.1:9,127.0.0.1:10?timeout=2'


def session_closed(tmp_path) -> tuple[status.Session, cfg.ConfigOpts]:
    path = tmp_path / 'computed.conf'
    path.write_text(f'[coordination]\nbackend_url = {URL}\n')
    conf = cfg.ConfigOpts()
    computed_conf.register_opts(conf)
    conf(['--config-file', str(path)], project='computed')
    session = status.Session(conf)
    # A coordinator whose kazoo session is closed: every request fails at once.
    session._coordinator = coordination.get_coordinator(URL, b'computed-status')
    return session, conf


def test_service_versions_fails_naming_zookeeper_when_its_session_is_gone(tmp_path):
    session, conf = session_closed(tmp_path)
    result = status.check_service_versions(conf, session)
    assert result.code is Code.FAILURE
    assert result.details == ('ZooKeeper at 127.0.0.1:9,127.0.0.1:10 unreachable: its session '
                              'expired (ConnectionClosedError)')
