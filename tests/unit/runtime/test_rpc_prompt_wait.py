"""computed.runtime.rpc.PromptExecutor: a stopped server's wait() (its pool's shutdown) ends the
pool's idle workers at once instead of when their wait for work next times out, and still runs
every item submitted before it; computed's RPC servers and notification listeners get it."""

from __future__ import annotations

import threading

import futurist
from futurist import _thread
from oslo_config import cfg

from computed.baremetal import events
from computed.runtime import rpc

#: Generous: a shutdown that waited for futurist's idle timeout (made an hour below) fails it.
SHUTDOWN_BOUND = 60.0


def _shutdown_in_a_thread(pool: futurist.ThreadPoolExecutor) -> threading.Thread:
    thread = threading.Thread(target=pool.shutdown, kwargs={"wait": True}, daemon=True)
    thread.start()
    thread.join(SHUTDOWN_BOUND)
    if thread.is_alive():
        # Failing: end the workers here (they were asked to stop), or futurist's exit hook
        # would join them for their whole idle timeout.
        for _worker in pool._workers:
            pool._work_queue.put(rpc._WakeUp())
    return thread


def test_a_shutdown_ends_idle_workers_without_waiting_out_their_idle_timeout(monkeypatch):
    monkeypatch.setattr(_thread.ThreadWorker, "MAX_IDLE_FOR", 3600)
    pool = rpc.PromptExecutor(max_workers=4)
    done = []
    release = threading.Event()
    futures = [pool.submit(lambda i=i: (release.wait(), done.append(i))) for i in range(3)]
    futures.append(pool.submit(done.append, "quick"))
    futures[-1].result()  # a worker finished its item and waits for more: idle
    release.set()
    thread = _shutdown_in_a_thread(pool)
    assert not thread.is_alive(), "the shutdown waited for an idle worker's timeout"
    assert all(f.done() for f in futures)
    assert sorted(map(str, done)) == ["0", "1", "2", "quick"]
    assert not any(worker.is_alive() for worker in pool._workers)


def test_a_shutdown_of_a_pool_that_never_ran_anything_returns():
    pool = rpc.PromptExecutor(max_workers=2)
    assert not _shutdown_in_a_thread(pool).is_alive()


def _transport():
    conf = cfg.ConfigOpts()
    conf([])
    return rpc.get_transport(conf, url="fake://")


def test_servers_and_notification_listeners_get_the_prompt_pool():
    transport = _transport()
    try:
        server = rpc.get_server(transport, "computed", "c1", [])
        listener = events.listener(transport, "ironic_versioned_notifications", "ironic",
                                   "pool", hints=None)
        assert server._executor_cls is rpc.PromptExecutor
        assert listener._executor_cls is rpc.PromptExecutor
    finally:
        transport.cleanup()
