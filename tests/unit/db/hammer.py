"""Several processes applying interleaved reports of one provider at once.

:func:`run` starts ``processes`` workers (spawned: each a fresh interpreter with its own engine)
that send, in lockstep rounds, overlapping, locally shuffled runs of (epoch, seq) reports for one
provider uuid, while
the caller's process polls the stored pair. Every ``apply`` takes a ticket from a counter shared
by all processes and records (ticket, stored pair it was given, pair it applies); since applies
of one provider are serialised by the database lock, sorting by ticket gives the order in which
they happened. :func:`verify` checks what the database layer promises.
"""

from __future__ import annotations

import json
import multiprocessing
import random
import threading
import time
from pathlib import Path

from computed.db import engine as db_engine
from tests import database


def reports(processes: int, epochs: int, per_epoch: int, seed: int) -> list[list[tuple[int, int]]]:
    """Each process's reports, one per round: all pairs in increasing order dealt round-robin,
    a fifth of them replaced by a pair another process sends in the same round (duplicates),
    then shuffled within windows of 3 rounds (reordering)."""
    rng = random.Random(seed)
    pairs = [(epoch, seq) for epoch in range(1, epochs + 1) for seq in range(per_epoch)]
    rounds = len(pairs) // processes
    hands = [[pairs[r * processes + i] for r in range(rounds)] for i in range(processes)]
    for hand in hands:
        for r in range(rounds):
            if rng.random() < 0.2:
                hand[r] = pairs[r * processes + rng.randrange(processes)]
        for start in range(0, rounds, 3):
            window = hand[start:start + 3]
            rng.shuffle(window)
            hand[start:start + 3] = window
    return hands


def worker(url: str, uuid: str, index: int, hand: list[tuple[int, int]], counter, out: str,
           start, rounds) -> None:
    engine = db_engine.engine_from_url(url)
    rng = random.Random(index)
    log: list[dict] = []

    def apply(row, epoch, seq):
        with counter.get_lock():
            counter.value += 1
            ticket = counter.value
        time.sleep(rng.random() / 1000)  # widen the window a racer would slip into
        previous = None if row is None else [row.claim_epoch, row.seq]
        log.append({"ticket": ticket, "previous": previous, "applied": [epoch, seq],
                    "process": index})
        return json.dumps({"epoch": epoch, "seq": seq})

    start.wait()
    returned = 0
    for epoch, seq in hand:
        # Rounds in lockstep: every process sends its next report at the same moment, so each
        # round is a race for the row (one running ahead would leave the others only stale ones).
        rounds.wait(timeout=120)
        if database.apply_report_if_newer(engine, uuid, epoch, seq, f"p{index}",
                                          lambda row, e=epoch, s=seq: apply(row, e, s)):
            returned += 1
    engine.dispose()
    Path(out).write_text(json.dumps({"log": log, "returned": returned}))


def run(url: str, uuid: str, workdir: Path, processes: int = 4, epochs: int = 3,
        per_epoch: int = 40, seed: int = 1) -> dict:
    ctx = multiprocessing.get_context("spawn")
    counter = ctx.Value("q", 0)
    start = ctx.Barrier(processes + 1)  # every worker ready (imports done), then all go
    rounds = ctx.Barrier(processes)
    hands = reports(processes, epochs, per_epoch, seed)
    outs = [workdir / f"hammer-{i}.json" for i in range(processes)]
    procs = [ctx.Process(target=worker, args=(url, uuid, i, hands[i], counter, str(outs[i]), start,
                                                   rounds))
             for i in range(processes)]
    for proc in procs:
        proc.start()
    observed: list[tuple[int, int]] = []
    stop = threading.Event()
    engine = db_engine.engine_from_url(url)

    def poll():
        while not stop.is_set():
            row = database.get_provider(engine, uuid)
            if row is not None:
                observed.append((row.claim_epoch, row.seq))
            time.sleep(0.002)

    poller = threading.Thread(target=poll)
    start.wait(timeout=120)
    poller.start()
    try:
        for proc in procs:
            proc.join(timeout=300)
            assert proc.exitcode == 0, f"hammer worker exited with {proc.exitcode}"
    finally:
        stop.set()
        poller.join()
    final = database.get_provider(engine, uuid)
    engine.dispose()
    results = [json.loads(out.read_text()) for out in outs]
    log = sorted((entry for result in results for entry in result["log"]),
                 key=lambda entry: entry["ticket"])
    return {"log": log, "returned": sum(r["returned"] for r in results), "observed": observed,
            "final": final, "sent": [pair for hand in hands for pair in hand]}


def verify(outcome: dict) -> None:
    log = outcome["log"]
    assert log, "nothing applied"
    previous = None
    for entry in log:
        applied = tuple(entry["applied"])
        # apply got exactly what the last apply stored: no one slipped in between.
        assert (None if entry["previous"] is None else tuple(entry["previous"])) == previous, entry
        # and it only ever moves forward.
        assert previous is None or applied > previous, entry
        previous = applied
    assert outcome["returned"] == len(log)
    final = outcome["final"]
    assert (final.claim_epoch, final.seq) == previous == max(outcome["sent"])
    assert final.state == json.dumps({"epoch": final.claim_epoch, "seq": final.seq})
    observed = outcome["observed"]
    assert observed == sorted(observed), "stored (epoch, seq) went backwards"
