"""The owner look-up the API's request threads share (issue 22 item 1): each call's retries are
its own. The interleaving is made deterministic by running the other thread's whole call from
inside the first one's failing read."""

from __future__ import annotations

import json
import threading

import pytest
from kazoo import exceptions as zk_exc
from kazoo import retry as kazoo_retry

from computed.instances import scheduler

HANG = 10.0  # a guard against a deadlock in the code under test; no assertion depends on it


class _NoSleepRetry(kazoo_retry.KazooRetry):
    def __init__(self, *args, **kwargs):
        kwargs['sleep_func'] = lambda seconds: None
        super().__init__(*args, **kwargs)


class _Answered:
    """A kazoo async result answered at once."""

    def __init__(self, value):
        self.value = value

    def get(self, timeout=None):
        return self.value


def test_a_read_retried_on_one_thread_is_not_reset_by_another_threads_read(monkeypatch):
    """Thread A's read of a claim fails (ZooKeeper connection lost) while thread B reads another
    claim successfully: A must give up after its own OWNER_READ_TRIES attempts, not have its
    count reset by B's calls (nor stepped past the limit, which retried it for ever)."""
    monkeypatch.setattr(kazoo_retry, 'KazooRetry', _NoSleepRetry)
    reads_by_a = []
    other_calls = 3

    class Client:
        def get_async(self, path):  # answered at once, or failing as a lost connection
            if threading.current_thread().name != 'a':
                return _Answered((json.dumps({'host': 'c1', 'member_epoch': 7}).encode(), None))
            reads_by_a.append(path)
            if len(reads_by_a) <= other_calls:  # B reads meanwhile, start to end
                b = threading.Thread(target=lambda: answers.append(owner_of('n2')), name='b')
                b.start()
                b.join(HANG)
            raise zk_exc.ConnectionLoss()

    answers = []
    owner_of = scheduler.zookeeper_owner(Client(), '/computed/fleet')
    failures = []

    def a():
        with pytest.raises(kazoo_retry.RetryFailedError):
            owner_of('n1')
        failures.append('gave up')

    thread = threading.Thread(target=a, name='a')
    thread.start()
    thread.join(HANG)
    assert answers == [('c1', 7)] * other_calls
    assert failures == ['gave up']
    assert len(reads_by_a) == scheduler.OWNER_READ_TRIES
