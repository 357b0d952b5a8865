"""A release whose delete ZooKeeper did not answer is carried out later, on real ZooKeeper.

Seen in the ensemble chaos run: a daemon released a node while its connection to a ZooKeeper
server dropped ("could not delete the claim ... ConnectionLoss"), its session lived on (it
reconnected to another server within the session timeout), and the claim znode stayed: the node
was blocked for the 60 s the run waited, its new owner watching a claim nobody acted under.
Here the first delete of a release is answered ConnectionLoss (the one injected fault; the rest
is a real ZooKeeper), then the daemon's next pass must delete the claim, and only its own.
"""

from __future__ import annotations

import threading
import uuid

import pytest
from kazoo import exceptions as zk_exc
from kazoo.client import KazooClient

from computed.fleet.audit import AuditLog
from computed.fleet.claims import ClaimTable


class DeleteAnsweredConnectionLoss:
    """A KazooClient whose next ``delete_async`` is answered ConnectionLoss, as a dropped
    connection answers it; everything else goes to the real client."""

    def __init__(self, client: KazooClient):
        self.client = client
        self.fail_next_delete = False

    @property
    def client_id(self):
        return self.client.client_id

    def ensure_path_async(self, path):
        return self.client.ensure_path_async(path)

    def create_async(self, *args, **kwargs):
        return self.client.create_async(*args, **kwargs)

    def exists_async(self, *args, **kwargs):
        return self.client.exists_async(*args, **kwargs)

    def delete_async(self, path):
        if self.fail_next_delete:
            self.fail_next_delete = False
            answer = self.client.handler.async_result()
            answer.set_exception(zk_exc.ConnectionLoss())
            return answer
        return self.client.delete_async(path)


@pytest.fixture
def clients(stack):
    made = []
    for _ in range(2):
        client = KazooClient(hosts=stack["zookeeper"].hosts)
        client.start(timeout=15)
        made.append(client)
    yield made
    for client in made:
        client.stop()
        client.close()


def released_without_answer(client: KazooClient, tmp_path) -> tuple[ClaimTable, str, str]:
    """(c2's claim table, node, claim path) after c2 claimed the node and released it, its
    delete answered ConnectionLoss."""
    root = f"/computed-test/{uuid.uuid4().hex[:8]}"
    flaky = DeleteAnsweredConnectionLoss(client)
    table = ClaimTable(flaky, root, "c2", AuditLog(str(tmp_path / "audit"), "c2"),
                       wake=threading.Event())
    table.ensure_root()
    node = str(uuid.uuid4())
    table.acquire([node], member_epoch=1, term=1)
    flaky.fail_next_delete = True
    table.release([node])
    return table, node, f"{root}/claims/{node}"


def test_a_release_zookeeper_did_not_answer_is_deleted_at_the_next_pass(clients, tmp_path):
    mine, peer = clients
    table, node, path = released_without_answer(mine, tmp_path)
    assert table.get(node) is None  # not acted on any more
    assert mine.exists(path) is not None  # but the node is still blocked for everyone else

    assert table.delete_released() == 0  # the next pass
    assert mine.exists(path) is None
    peer.create(path, b"{}", ephemeral=True)  # the peer can claim it now
    assert table.delete_released() == 0  # and nothing of it is deleted again
    assert peer.exists(path) is not None


def test_a_release_taken_back_before_its_delete_is_not_deleted(clients, tmp_path):
    mine, _ = clients
    table, node, path = released_without_answer(mine, tmp_path)
    [again] = table.acquire([node], member_epoch=1, term=1).acquired  # ours: adopted
    assert table.delete_released() == 0
    assert table.get(node) == again
    assert mine.exists(path).czxid == again.epoch
