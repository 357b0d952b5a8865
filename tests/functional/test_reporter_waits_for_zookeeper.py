"""computed-reporter started before ZooKeeper waits for it, then serves (issue 16 item 14).

Starts its own ZooKeeper (not the session stack's), on a port chosen first, only after the
reporter has logged that it could not reach it (an attempt gives up after 2 s, ``[coordination]
reporter_connect_timeout``: 5 s by default); RPC runs on the fake transport and Placement is
never called (resync off), so ZooKeeper is the only service involved.
"""

from __future__ import annotations

import signal
import subprocess
import time

from computed.testing import process
from computed.testing.zookeeper import ZooKeeper
from tests.process.test_scripts import env, script


def wait_for(log, text, proc, timeout=120):
    deadline = time.monotonic() + timeout
    while text not in log.read_text():
        assert proc.poll() is None, log.read_text()
        assert time.monotonic() < deadline, log.read_text()
        time.sleep(0.2)


def test_reporter_started_before_zookeeper_serves_once_it_answers(tmp_path):
    port = process.free_port()
    conf = tmp_path / 'computed.conf'
    conf.write_text(f"""[DEFAULT]
host = reporter-1
transport_url = fake://
[coordination]
backend_url = zookeeper://127.0.0.1:{port}?timeout=4
reporter_connect_timeout = 2
[database]
connection = sqlite:///{tmp_path / 'computed.sqlite'}
[placement]
auth_type = none
endpoint_override = http://127.0.0.1:{process.free_port()}
resync_interval = 0
""")
    log = tmp_path / 'reporter.log'
    zookeeper = ZooKeeper(tmp_path / 'zk', {'port': port})
    with open(log, 'w') as out:
        proc = subprocess.Popen([script('computed-reporter'), '--config-file', str(conf)],
                                stdout=out, stderr=subprocess.STDOUT, env=env(tmp_path),
                                cwd=tmp_path)
    try:
        wait_for(log, '(attempt 1)', proc)
        (tmp_path / 'zk').mkdir()
        zookeeper.start()
        wait_for(log, 'serving topic', proc)
        proc.send_signal(signal.SIGTERM)
        assert proc.wait(60) == 0
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
        zookeeper.stop()
    text = log.read_text()
    assert 'Traceback' not in text
    assert f'ZooKeeper at 127.0.0.1:{port} unreachable' in text
