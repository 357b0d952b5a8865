"""What reaches an endpoint over the bus (computed.runtime.rpc over oslo.messaging's fake
driver, computed.runtime.signing): with keys, only messages signed by one of them, recent, new
and addressed here; without, only messages of a computed sender's shape; and never a method the
endpoint does not serve. Each refusal is one log line without a traceback, and counted."""

from __future__ import annotations

import logging
import threading
import time
import uuid

import oslo_messaging
import pytest
from oslo_config import cfg

from computed.runtime import rpc, signing

KEY_A = "a" * 64
KEY_B = "b" * 64
UUID = str(uuid.uuid4())


class Worker:
    """Records the casts it is given, like the daemon's instance endpoint."""

    target = oslo_messaging.Target(version="1.1")
    rpc_methods = frozenset({"delete_instance", "apply_reports"})

    def __init__(self):
        self.calls = []
        self.arrived = threading.Event()

    def delete_instance(self, ctxt, instance_uuid=None, member_epoch=None):
        self.calls.append(("delete_instance", instance_uuid))
        self.arrived.set()

    def apply_reports(self, ctxt, reports=None):
        self.calls.append(("apply_reports", reports))
        return [[r["uuid"], r["seq"], "applied"] for r in reports]

    def stop(self, ctxt=None):  # public, but not on the bus
        self.calls.append(("stop", None))
        self.arrived.set()


def transport(keys=(), host="c1", accept_unsigned=False):
    conf = cfg.ConfigOpts()
    conf.register_opts([cfg.StrOpt("host", default=host)])
    conf([])
    rpc.register_opts(conf)
    conf.set_override("signing_keys", list(keys), group="messaging")
    conf.set_override("accept_unsigned", accept_unsigned, group="messaging")
    return rpc.get_transport(conf, "test", url="fake://")


@pytest.fixture
def bus():
    """A server for ``c1`` on a fake bus and what it received; ``send(keys)`` gives clients."""
    made = []

    def serve(keys=(), accept_unsigned=False):
        worker = Worker()
        server_transport = transport(keys, accept_unsigned=accept_unsigned)
        server = rpc.get_server(server_transport, "computed", "c1", [worker])
        server.start()
        made.append((server, server_transport))
        return worker, server_transport

    yield serve
    for server, server_transport in made:
        server.stop()
        server.wait()
        server_transport.cleanup()


def refused_since(before, reason):
    return rpc.refused_counts().get(reason, 0) - before.get(reason, 0)


def settle(worker, timeout=0.5):
    """Wait for a cast to be dispatched, or long enough to know it was not."""
    worker.arrived.wait(timeout)


def assert_one_clean_line(caplog, *words):
    lines = [r for r in caplog.records if r.name == "computed.runtime.rpc"]
    assert len(lines) == 1, [r.getMessage() for r in lines]
    assert lines[0].exc_info is None
    assert all(word in lines[0].getMessage() for word in words), lines[0].getMessage()
    assert all(r.exc_info is None for r in caplog.records), [r.getMessage()
                                                              for r in caplog.records]


def test_a_cast_with_a_foreign_context_deletes_nothing_even_without_keys(bus, caplog):
    worker, server_transport = bus()
    raw = oslo_messaging.get_rpc_client(server_transport, oslo_messaging.Target(
        topic="computed", server="c1", version="1.1"))
    before = rpc.refused_counts()
    with caplog.at_level(logging.INFO):
        raw.cast({"user": "nobody"}, "delete_instance", instance_uuid=UUID)
        settle(worker)
    assert worker.calls == []
    assert refused_since(before, "malformed") == 1
    assert_one_clean_line(caplog, "delete_instance", "'user'")


def test_without_keys_a_computed_sender_is_served(bus):
    worker, server_transport = bus()
    rpc.get_client(server_transport, "computed", server="c1", version="1.1").cast(
        {}, "delete_instance", instance_uuid=UUID)
    settle(worker, 5)
    assert worker.calls == [("delete_instance", UUID)]


def test_an_unknown_method_is_one_line_without_a_traceback(bus, caplog):
    worker, server_transport = bus()
    client = rpc.get_client(server_transport, "computed", server="c1", version="1.1")
    before = rpc.refused_counts()
    with caplog.at_level(logging.DEBUG):
        client.cast({}, "format_disks", instance_uuid=UUID)
        client.cast({}, "stop")  # public on the endpoint, not one of its rpc_methods
        # The server's executor threads take the two casts at once, in either order; each
        # is counted, then logged.
        deadline = time.monotonic() + 30
        while time.monotonic() < deadline and len(
                [r for r in caplog.records if r.name == "computed.runtime.rpc"]) < 2:
            time.sleep(0.05)
    assert worker.calls == []
    assert refused_since(before, "unknown_method") == 2
    lines = sorted(r.getMessage() for r in caplog.records if r.name == "computed.runtime.rpc")
    assert len(lines) == 2
    assert "'format_disks'" in lines[0] and "'stop'" in lines[1]
    assert all(r.exc_info is None for r in caplog.records)


def test_with_keys_an_unsigned_cast_is_refused_and_counted(bus, caplog):
    worker, _ = bus([KEY_A])
    before = rpc.refused_counts()
    with caplog.at_level(logging.INFO):
        rpc.get_client(transport(), "computed", server="c1", version="1.1").cast(
            {}, "delete_instance", instance_uuid=UUID)
        settle(worker)
    assert worker.calls == []
    assert refused_since(before, "unsigned") == 1
    assert_one_clean_line(caplog, "delete_instance", "not sign")


def test_with_keys_a_cast_signed_with_another_key_is_refused_as_forged(bus, caplog):
    worker, _ = bus([KEY_A])
    before = rpc.refused_counts()
    with caplog.at_level(logging.INFO):
        rpc.get_client(transport([KEY_B]), "computed", server="c1", version="1.1").cast(
            {}, "delete_instance", instance_uuid=UUID)
        settle(worker)
    assert worker.calls == []
    assert refused_since(before, "forged") == 1
    assert_one_clean_line(caplog, "matches none")
    assert KEY_A not in caplog.text and KEY_B not in caplog.text


def test_with_keys_a_signed_cast_and_call_are_served(bus):
    worker, _ = bus([KEY_A])
    client = rpc.get_client(transport([KEY_A]), "computed", server="c1", version="1.1")
    client.cast({}, "delete_instance", instance_uuid=UUID)
    settle(worker, 5)
    answer = client.prepare(timeout=10).call({}, "apply_reports",
                                             reports=[{"uuid": UUID, "seq": 1}])
    assert worker.calls[0] == ("delete_instance", UUID)
    assert answer == [[UUID, 1, "applied"]]


def test_turning_signing_on_refuses_nothing_while_receivers_accept_unsigned(bus, caplog):
    """The rollout of docs/operations.md: receivers with the key and accept_unsigned serve the
    unsigned senders not yet restarted (counted) and the signed ones; a wrong key is still
    forged."""
    with caplog.at_level(logging.WARNING):
        worker, _ = bus([KEY_A], accept_unsigned=True)
    assert "accepts unsigned RPC messages" in caplog.text
    before, unsigned = rpc.refused_counts(), rpc.unsigned_accepted_count()
    for keys in ([], [KEY_A]):  # a sender not yet restarted, one restarted with the key
        worker.arrived.clear()
        rpc.get_client(transport(keys), "computed", server="c1", version="1.1").cast(
            {}, "delete_instance", instance_uuid=UUID)
        settle(worker, 5)
    raw = oslo_messaging.get_rpc_client(transport(), oslo_messaging.Target(
        topic="computed", server="c1", version="1.1"))
    assert raw.prepare(timeout=10).call({}, "apply_reports", reports=[]) == []  # empty context
    assert worker.calls == [("delete_instance", UUID)] * 2 + [("apply_reports", [])]
    assert rpc.unsigned_accepted_count() - unsigned == 2
    assert rpc.refused_counts() == before
    worker.arrived.clear()
    rpc.get_client(transport([KEY_B]), "computed", server="c1", version="1.1").cast(
        {}, "delete_instance", instance_uuid=UUID)
    settle(worker)
    assert len(worker.calls) == 3 and refused_since(before, "forged") == 1
    # Step 2 (accept_unsigned removed): test_with_keys_an_unsigned_cast_is_refused_and_counted.


def test_accept_unsigned_without_keys_changes_nothing():
    context, _, _ = signed(keys=())
    for accept in (False, True):
        accepted = check(signing.Verifier([], max_age=60, accept_unsigned=accept), context)
        assert accepted == "api" and accepted.signed
        assert check(signing.Verifier([], max_age=60, accept_unsigned=accept), {}).signed


def test_with_accept_unsigned_a_signed_message_is_still_fully_checked():
    verifier = signing.Verifier([KEY_A.encode()], max_age=60, accept_unsigned=True)
    context, _, _ = signed()
    accepted = check(verifier, context)
    assert accepted == "api" and accepted.signed
    assert reason(verifier, context) == "replayed"
    old, _, _ = signed(clock=lambda: time.time() - 61)
    assert reason(verifier, old) == "expired"
    unsigned = check(verifier, signed(keys=())[0])
    assert unsigned == "api" and not unsigned.signed


def test_a_refused_call_gets_the_refusal_as_its_error(bus):
    worker, _ = bus([KEY_A])
    client = rpc.get_client(transport([KEY_B]), "computed", version="1.1", timeout=10)
    # A RemoteError over RabbitMQ; the fake driver raises the refusal itself.
    with pytest.raises(Exception, match="matches none"):
        client.call({}, "apply_reports", reports=[])
    assert worker.calls == []


def test_rotation_accepts_either_key_while_both_are_listed(bus):
    # Step 2 of the rotation: receivers verify with [B, A]; a sender still on [A, B] signs with
    # A, one already on [B, A] with B: both are served.
    worker, _ = bus([KEY_B, KEY_A])
    for keys in ([KEY_A, KEY_B], [KEY_B, KEY_A]):
        worker.arrived.clear()
        rpc.get_client(transport(keys), "computed", server="c1", version="1.1").cast(
            {}, "delete_instance", instance_uuid=UUID)
        settle(worker, 5)
    assert len(worker.calls) == 2


def test_a_cast_aimed_at_another_daemon_is_refused_as_misdirected():
    verifier = signing.Verifier([KEY_A.encode()], max_age=60)
    context = signing.Signer([KEY_A.encode()], "api").context(
        "delete_instance", {"instance_uuid": UUID}, "computed", "c2")
    with pytest.raises(signing.Refused) as refused:
        verifier.check(context, "delete_instance", {"instance_uuid": UUID}, "computed", "c1")
    assert refused.value.reason == "misdirected"


# --- the verifier alone -------------------------------------------------------------------

def signed(keys=(KEY_A,), method="delete_instance", args=None, clock=time.time):
    args = {"instance_uuid": UUID} if args is None else args
    return signing.Signer([k.encode() for k in keys], "api", clock=clock).context(
        method, args, "computed", "c1"), method, args


def check(verifier, context, method="delete_instance", args=None):
    args = {"instance_uuid": UUID} if args is None else args
    return verifier.check(context, method, args, "computed", "c1")


def reason(verifier, context, method="delete_instance", args=None):
    with pytest.raises(signing.Refused) as refused:
        check(verifier, context, method, args)
    return refused.value.reason


def test_a_replay_is_refused_and_a_changed_argument_is_forged():
    verifier = signing.Verifier([KEY_A.encode()], max_age=60)
    context, method, args = signed()
    assert check(verifier, context) == "api"
    assert reason(verifier, context) == "replayed"
    context, method, args = signed()
    assert reason(verifier, context, args={"instance_uuid": str(uuid.uuid4())}) == "forged"
    assert reason(verifier, context, method="stop_instance") == "forged"


def test_a_message_older_or_newer_than_max_age_is_expired():
    verifier = signing.Verifier([KEY_A.encode()], max_age=60)
    old, _, _ = signed(clock=lambda: time.time() - 61)
    future, _, _ = signed(clock=lambda: time.time() + 61)
    assert reason(verifier, old) == "expired"
    assert reason(verifier, future) == "expired"


def test_remembered_nonces_are_bounded_and_age_out():
    now = [0.0]
    verifier = signing.Verifier([KEY_A.encode()], max_age=60, monotonic=lambda: now[0],
                                max_nonces=3)
    contexts = [signed()[0] for _ in range(4)]
    for context in contexts:
        check(verifier, context)
    assert len(verifier._nonces) == 3
    now[0] = 121.0
    check(verifier, signed()[0])
    assert len(verifier._nonces) == 1


@pytest.mark.parametrize("context", [
    {"computed_auth": {"v": 1}},
    {"computed_auth": "x"},
    {"computed_auth": None, "roles": ["admin"]},
    {"is_admin": True},
])
def test_malformed_contexts_are_refused_with_or_without_keys(context):
    for keys in ([], [KEY_A.encode()]):
        assert reason(signing.Verifier(keys, max_age=60), context) == "malformed"


def test_an_envelope_with_a_control_character_in_its_sender_is_malformed():
    context, _, _ = signed()
    context["computed_auth"]["sender"] = "api\nINFO forged line"
    assert reason(signing.Verifier([], max_age=60), context) == "malformed"


def test_arguments_that_are_not_plain_json_are_malformed_not_a_traceback():
    context, _, _ = signed()
    verifier = signing.Verifier([KEY_A.encode()], max_age=60)
    assert reason(verifier, context, args={"instance_uuid": float("nan")}) == "malformed"
