"""The fencing check over audit records (pure), and the log shared by the daemon's threads."""

import json as real_json
import threading
import types

from computed.fleet import audit as audit_module
from computed.fleet.audit import AuditEvent, AuditLog, fencing_violations, read


def rec(t, host, event, node="n1", claim_epoch=10):
    return {"t": t, "host": host, "event": event, "node": node, "claim_epoch": claim_epoch}


def old_rec(t, host, event, node="n1", claim_epoch=10):
    """A record as daemons wrote it before the claim epoch had its own name."""
    return {"t": t, "host": host, "event": event, "node": node, "epoch": claim_epoch}


def test_clean_handover_has_no_violation():
    records = [rec(1, "a", "claim"), rec(2, "a", "act"), rec(3, "a", "release"),
               rec(4, "b", "claim", claim_epoch=20), rec(5, "b", "act", claim_epoch=20)]
    assert fencing_violations(records) == []


def test_action_after_a_newer_claim_is_a_violation():
    # a was frozen, its session expired, b claimed; a woke up and acted on its old claim.
    records = [rec(1, "a", "claim"), rec(4, "b", "claim", claim_epoch=20), rec(5, "a", "act")]
    (violation,) = fencing_violations(records)
    assert "a acted on node n1" in violation
    assert "after b claimed it with claim epoch 20" in violation


def test_audit_files_of_older_daemons_are_read_too():
    # Operators keep audit logs: a file written before the rename says "epoch".
    clean = [old_rec(1, "a", "claim"), old_rec(2, "a", "act"), old_rec(3, "a", "release"),
             rec(4, "b", "claim", claim_epoch=20), rec(5, "b", "act", claim_epoch=20)]
    assert fencing_violations(clean) == []
    late = [old_rec(1, "a", "claim"), rec(4, "b", "claim", claim_epoch=20), old_rec(5, "a", "act")]
    (violation,) = fencing_violations(late)
    assert "after b claimed it with claim epoch 20" in violation


def test_action_outside_own_claim_is_a_violation():
    records = [rec(1, "a", "claim"), rec(2, "a", "release"), rec(3, "a", "act")]
    assert len(fencing_violations(records)) == 1
    assert len(fencing_violations([rec(1, "a", "act")])) == 1


def test_other_nodes_do_not_interfere():
    records = [rec(1, "a", "claim", node="n1"), rec(2, "b", "claim", node="n2", claim_epoch=30),
               rec(3, "a", "act", node="n1")]
    assert fencing_violations(records) == []


def test_audit_log_round_trip_skips_a_torn_line(tmp_path):
    path = tmp_path / "audit.jsonl"
    log = AuditLog(str(path), "a")
    log.record(AuditEvent.CLAIM, node="n1", claim_epoch=1)
    log.close()
    with open(path, "a") as torn:
        torn.write('{"t": 1, "host"')
    (record,) = read(path)
    assert record["host"] == "a" and record["event"] == "claim" and record["claim_epoch"] == 1


def test_no_path_writes_nothing(tmp_path):
    log = AuditLog(None, "a")
    log.record(AuditEvent.CLAIM, node="n1", claim_epoch=1)
    log.close()
    assert list(tmp_path.iterdir()) == []


def test_an_audit_file_is_created_for_user_and_group_only_whatever_the_umask(tmp_path):
    import os
    import stat
    path = tmp_path / "logs" / "c1.audit"
    old = os.umask(0)
    try:
        log = AuditLog(str(path), "c1")
        log.record(AuditEvent.JOIN)
        log.close()
    finally:
        os.umask(old)
    assert stat.S_IMODE(path.stat().st_mode) == 0o640
    os.chmod(path, 0o600)  # the operator's choice is kept on reopening
    AuditLog(str(path), "c1").close()
    assert stat.S_IMODE(path.stat().st_mode) == 0o600


def test_a_record_racing_the_close_is_dropped_not_an_error(tmp_path, monkeypatch):
    """A thread still running while the daemon stops (kazoo's, an instance worker's) records
    just as the main thread closes the log: the record is dropped, not an AttributeError on
    that thread. The recording thread is held between its check and its write by Events."""
    log = AuditLog(str(tmp_path / "a.audit"), "c1")
    formatted, closed = threading.Event(), threading.Event()

    def dumps(*args, **kwargs):
        formatted.set()
        assert closed.wait(10)
        return real_json.dumps(*args, **kwargs)

    monkeypatch.setattr(audit_module, "json", types.SimpleNamespace(dumps=dumps))
    errors = []

    def record():
        try:
            log.record(AuditEvent.LOST, term=1)
        except Exception as exc:  # what the thread would have died of
            errors.append(exc)

    thread = threading.Thread(target=record, name="kazoo")
    thread.start()
    assert formatted.wait(10)
    log.close()
    closed.set()
    thread.join(10)
    assert errors == []
    assert read(tmp_path / "a.audit") == []
