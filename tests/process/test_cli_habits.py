"""What an operator meets at the command line that only a real process shows: a reporter
waiting for ZooKeeper stopped by SIGTERM, and the repository's tools refusing abbreviated
options (tools/services is a script of its own, not a console script). The in-process part is
tests/unit/cmd/test_cli_habits.py."""

import signal
import subprocess
import sys
import time

from tests.process.test_scripts import env, script
from tests.unit.cmd.test_cli_habits import ROOT, zookeeper_down_conf


def test_tools_refuse_abbreviated_options(tmp_path):
    # "status" only reads a state file: harmless should the abbreviation ever be taken again.
    command = [sys.executable, str(ROOT / 'tools' / 'services'), 'status', '--work', '/tmp']
    result = subprocess.run(command, capture_output=True, text=True, timeout=60,
                            env=env(tmp_path), cwd=ROOT)
    assert result.returncode == 2, result
    assert 'unrecognized arguments: --work' in result.stderr


def test_reporter_waits_for_zookeeper_one_line_per_attempt_and_stays_killable(tmp_path):
    conf = zookeeper_down_conf(
        tmp_path, f"[database]\nconnection = sqlite:///{tmp_path / 'c.sqlite'}\n")
    log = tmp_path / 'reporter.log'
    with open(log, 'w') as out:
        proc = subprocess.Popen([script('computed-reporter'), '--config-file', conf],
                                stdout=out, stderr=subprocess.STDOUT, env=env(tmp_path),
                                cwd=tmp_path)
    try:
        deadline = time.monotonic() + 90
        while log.read_text().count('unreachable') < 2:
            assert proc.poll() is None, log.read_text()
            assert time.monotonic() < deadline, log.read_text()
            time.sleep(0.2)
        proc.send_signal(signal.SIGTERM)
        assert proc.wait(60) == 0
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
    text = log.read_text()
    assert 'Traceback' not in text
    attempts = [line for line in text.splitlines() if 'unreachable' in line]
    assert 'ZooKeeper at 127.0.0.1:' in attempts[0] and '(attempt 1)' in attempts[0]
    assert '(attempt 2)' in attempts[1]
    # One line per attempt: kazoo's own per-connection lines are held back while waiting.
    assert 'Connection dropped' not in text
    assert 'stopped before ZooKeeper answered' in text
