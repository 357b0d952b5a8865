"""Opt-in measurements of a running daemon, for benchmarks: where its memory goes.

Owns :func:`start_from_env`, which the daemon calls once at start. With the environment variable
:data:`TRACEMALLOC_ENV` naming a file prefix, it starts :mod:`tracemalloc` and writes, every
``COMPUTED_TRACEMALLOC_INTERVAL`` seconds (default 60), the process's RSS, the bytes Python has
allocated, and the top allocation sites by line and by file into ``<prefix>.<pid>`` (replaced
each time; one file per process when several daemons share the environment).
Without the variable it does nothing and costs nothing. Tracing itself slows the process and
takes memory: figures taken with it are for where memory goes, not for CPU.
"""

from __future__ import annotations

import logging
import os
import threading
import time
import tracemalloc

LOG = logging.getLogger(__name__)

TRACEMALLOC_ENV = "COMPUTED_TRACEMALLOC"
FRAMES = 4  # per allocation: enough to tell a listing's parsing from a report's


def report(top: int = 30) -> str:
    """The current heap, as text: totals, then the top sites by line and by file."""
    snapshot = tracemalloc.take_snapshot().filter_traces(
        (tracemalloc.Filter(False, tracemalloc.__file__),))
    traced, peak = tracemalloc.get_traced_memory()
    lines = [f"rss_mb {_rss_mb():.1f} traced_mb {traced / 2**20:.1f} "
             f"peak_mb {peak / 2**20:.1f}"]
    for key in ("lineno", "filename"):
        lines.append(f"-- top by {key}")
        for stat in snapshot.statistics(key)[:top]:
            frame = stat.traceback[0]
            lines.append(f"{stat.size / 2**20:8.2f} MB {stat.count:9d} blocks  "
                         f"{frame.filename}:{frame.lineno}")
    return "\n".join(lines) + "\n"


def _rss_mb() -> float:
    with open("/proc/self/statm") as statm:
        return int(statm.read().split()[1]) * os.sysconf("SC_PAGE_SIZE") / 2**20


def start_from_env() -> bool:
    """Start tracing if :data:`TRACEMALLOC_ENV` is set; True when it did."""
    prefix = os.environ.get(TRACEMALLOC_ENV)
    if not prefix:
        return False
    path = f"{prefix}.{os.getpid()}"
    interval = float(os.environ.get(f"{TRACEMALLOC_ENV}_INTERVAL", "60"))
    tracemalloc.start(FRAMES)

    def loop() -> None:
        while True:
            time.sleep(interval)
            try:
                text = report()
                with open(f"{path}.tmp", "w") as out:
                    out.write(text)
                os.replace(f"{path}.tmp", path)
            except Exception:  # a measurement must never stop the daemon
                LOG.exception("cannot write the tracemalloc report to %s", path)

    threading.Thread(target=loop, name="tracemalloc", daemon=True).start()
    LOG.info("tracemalloc on: a report every %.0f s in %s", interval, path)
    return True
