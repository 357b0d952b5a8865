"""The compute API's ZooKeeper-using paths when ZooKeeper does not answer (issue 22): a 503
naming ZooKeeper, and for the placement done after a create's 202 one log line, never a 500 or a
traceback. computed's own bound on a wait (NoAnswer, a ConnectionLoss raised by
computed.fleet.zookeeper) fell through the API's test of kazoo's module name: a 500, its
traceback logged."""

from __future__ import annotations

import logging

import pytest
from kazoo.exceptions import ConnectionLoss
from kazoo.handlers.threading import KazooTimeoutError

from computed.api import errors, pending, servers, services
from computed.fleet.zookeeper import NoAnswer

NO_ANSWER = NoAnswer('a read of /computed/g/claims/n1', 2.0)


@pytest.mark.parametrize('failure, message', [
    (NO_ANSWER, 'ZooKeeper: ZooKeeper did not answer a read of /computed/g/claims/n1 within '
                '2 s (NoAnswer)'),
    (ConnectionLoss(), 'ZooKeeper: ConnectionLoss'),
    (KazooTimeoutError('Connection time-out'),
     'ZooKeeper: Connection time-out (KazooTimeoutError)'),
])
def test_a_zookeeper_failure_in_a_request_is_a_503_naming_zookeeper(failure, message):
    for context in (servers.backend_errors, services._zookeeper):
        with pytest.raises(errors.ServiceUnavailable) as caught:
            with context():
                raise failure
        assert caught.value.status == 503 and caught.value.message == message


class Rows:
    uuid = 'b1c2d3e4-0000-0000-0000-000000000001'


def test_placing_after_the_202_logs_one_line_when_zookeeper_does_not_answer(monkeypatch, caplog):
    monkeypatch.setattr(pending, 'take', lambda engine, rows: list(rows))

    def place(*_args):
        raise NO_ANSWER  # who holds the candidate nodes: asked of ZooKeeper

    monkeypatch.setattr(pending, 'place', place)
    queue = pending.BuildQueue(None, None, None, None, 120)
    with caplog.at_level(logging.WARNING, logger='computed.api.pending'):
        queue._run((Rows(),))
    record, = caplog.records
    assert record.exc_info is None and record.levelno == logging.WARNING
    assert record.getMessage() == (
        f'placing the request of instance {Rows.uuid} failed, a sweep retries it: ZooKeeper: '
        f'ZooKeeper did not answer a read of /computed/g/claims/n1 within 2 s (NoAnswer)')
