"""What the benchmark scripts share: their command line, the stack they run against (and a client
of its Placement, a watch on its ZooKeeper group, stopping computed's processes on it), the machine
they ran on, how they print figures, and their sections of BENCHMARKS.md. What only one benchmark
measures stays in that benchmark.

Each script owns one ``## `` section of BENCHMARKS.md; :func:`write_section` replaces that section
(up to the next ``## `` heading) or appends it, leaving every other section as it was, and
:func:`publish` does so when the benchmark ran with ``--write-md``. A script may name a ``keep``
marker: hand-written notes below that marker survive the rewrite.

:func:`stack_for` gives a benchmark either the stack of ``--stack-dir`` (left running, the
benchmark's seeded nodes removed from it) or one of its own, stopped when the benchmark ends.
"""

from __future__ import annotations

import argparse
import contextlib
import os
import platform
import shutil
import statistics
import sys
import tempfile
import threading
import time
import urllib.request
from collections.abc import Callable, Iterable, Iterator
from pathlib import Path

from oslo_config import cfg

from bench.seed import unseed_nodes
from computed import conf as computed_conf
from computed.runtime import keystone
from computed.testing.stack import Stack
from tests.functional.daemons import zk_client

BENCHMARKS = Path(__file__).resolve().parent.parent / "BENCHMARKS.md"


def say(text: str) -> None:
    print(text, flush=True)


# --- the command line -------------------------------------------------------------------------

def arguments(doc: str) -> argparse.ArgumentParser:
    """A parser with the flags every stack benchmark takes; its description is ``doc``'s first
    paragraph."""
    parser = argparse.ArgumentParser(description=doc.split("\n\n")[0], allow_abbrev=False)
    parser.add_argument("--stack-dir", type=Path, help="reuse a stack (tools/services up)")
    parser.add_argument("--workdir", type=Path, help="where logs go (default: a tmp dir)")
    parser.add_argument("--write-md", action="store_true",
                        help="write the figures into BENCHMARKS.md (this benchmark's section only)")
    parser.add_argument("--placement-workers", type=positive, default=None, metavar="N",
                        help="worker processes serving the stack's Placement (default 1: one "
                             "process, held to one core by its GIL; a production Placement runs "
                             "several under uwsgi). With --stack-dir, only a check: that stack's "
                             "Placement runs as many as it started with")
    return parser


def positive(text: str) -> int:
    """An argparse type: an integer >= 1."""
    value = int(text)
    if value < 1:
        raise argparse.ArgumentTypeError(f"{value}: at least 1")
    return value


def command(module: str, argv: list[str] | None) -> str:
    """The command that runs the benchmark again, for BENCHMARKS.md (without --write-md)."""
    args = argv if argv is not None else sys.argv[1:]
    return " ".join([".venv/bin/python", "-m", module, *(a for a in args if a != "--write-md")])


# --- the stack --------------------------------------------------------------------------------

def workdir_or_tmp(path: Path | None, prefix: str) -> Path:
    """``--workdir``, or a new temporary directory."""
    path = Path(path or tempfile.mkdtemp(prefix=prefix))
    path.mkdir(parents=True, exist_ok=True)
    return path


@contextlib.contextmanager
def stack_for(args, work: Path, services: list[str], prefix: str, keep_nodes: bool = False,
              log=say, zookeeper_servers: int = 1) -> Iterator[Stack]:
    """The stack the benchmark runs against, for the ``with`` block.

    With ``--stack-dir``: the stack running there, left running; the nodes seeded under ``prefix``
    are deleted at the end unless ``keep_nodes``. Otherwise ``services`` started in WORK/stack and
    stopped at the end; their files are removed too unless ``--workdir`` was given (the logs in
    WORK stay either way)."""
    asked = getattr(args, "placement_workers", None)
    if args.stack_dir is not None:
        borrowed = Stack.load(args.stack_dir)
        if asked and "placement" in borrowed and asked != borrowed["placement"].workers:
            raise SystemExit(f"--placement-workers {asked}: the Placement of {args.stack_dir} "
                             f"runs {borrowed['placement'].workers} (set when it started)")
        try:
            yield borrowed
        finally:
            if not keep_nodes:
                log(f"deleted {unseed_nodes(borrowed, prefix)} seeded nodes")
        return
    placement_workers = asked or 1
    log(f"starting {', '.join(services)} in {work / 'stack'}"
        + (f" (ZooKeeper: {zookeeper_servers} servers)" if zookeeper_servers > 1 else "")
        + (f" (Placement: {placement_workers} worker processes)" if placement_workers > 1
           else ""))
    own = Stack.up(work / "stack", services, zookeeper_servers=zookeeper_servers,
                   ironic_power_sync=getattr(args, "ironic_power_sync", None),
                   placement_workers=placement_workers)
    try:
        yield own
    finally:
        own.down()
        if args.workdir is None:
            shutil.rmtree(work / "stack", ignore_errors=True)


def placement_adapter(stack: Stack, work: Path):
    """A keystoneauth adapter for the stack's Placement, configured as computed would be."""
    path = work / "bench-client.conf"
    path.write_text(stack.computed_conf(host="bench"))
    conf = cfg.ConfigOpts()
    computed_conf.register_opts(conf)
    conf(["--config-file", str(path)], project="computed")
    return keystone.load_adapter(conf, "placement")


def stop_all(processes: Iterable, timeout: float) -> None:
    """SIGTERM every live computed process and wait up to ``timeout`` (a daemon drains), then make
    sure each is gone."""
    for process in processes:
        try:
            if process.alive:
                process.stop(timeout=timeout)
        except Exception:  # one that does not stop in time is killed just below
            pass
        process.ensure_stopped()


class MemberWatch:
    """Records (wall time, members) on every change of the group, from this script's own
    ZooKeeper session: when a killed daemon's member znode disappears, ZooKeeper has expired its
    session (its claim znodes go in the same transaction)."""

    def __init__(self, stack: Stack, group: str):
        self.events: list[tuple[float, frozenset[str]]] = []
        self._lock = threading.Lock()
        self._client = zk_client(stack)
        path = f"/tooz/{group}"
        self._client.ensure_path(path)
        self._client.ChildrenWatch(path, self._changed)

    def _changed(self, children: list[str]) -> None:
        with self._lock:
            self.events.append((time.time(), frozenset(children)))

    def first(self, after: float, test) -> float | None:
        with self._lock:
            for t, members in self.events:
                if t >= after and test(members):
                    return t
        return None

    def close(self) -> None:
        self._client.stop()
        self._client.close()


# --- the machine and the figures --------------------------------------------------------------

def machine_facts() -> dict:
    """nproc, CPU model (from /proc/cpuinfo) and Python version."""
    model = "unknown"
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                model = line.split(":", 1)[1].strip()
                break
    except OSError:
        pass
    return {"nproc": os.cpu_count(), "cpu": model, "python": platform.python_version()}


def machine() -> str:
    facts = machine_facts()
    return f"nproc = {facts['nproc']}, CPU `{facts['cpu']}`, Python {facts['python']}"


def fmt(value: float | None, digits: int = 2) -> str:
    """A figure, or "-" for one that was not measured."""
    return "-" if value is None else f"{value:.{digits}f}"


def median_range(values: Iterable[float | None], digits: int = 2) -> str:
    """"median (min-max)" of the measured values, "-" when there is none."""
    values = [v for v in values if v is not None]
    if not values:
        return "-"
    return (f"{statistics.median(values):.{digits}f} "
            f"({min(values):.{digits}f}-{max(values):.{digits}f})")


def section_head(heading: str, command_line: str, services: str) -> list[str]:
    """The first lines of a benchmark's section: its heading, then the command that runs it
    again and the services it starts (``services``, in words)."""
    return [heading, "", f"Command (repository root; starts and stops its own {services}):", "",
            f"    {command_line}", ""]


def publish(args, heading: str, markdown, keep: str | None = None, log=say) -> None:
    """With ``--write-md``, put ``markdown()`` in place of the section ``heading`` of
    BENCHMARKS.md (``markdown`` is called only then)."""
    if args.write_md:
        write_section(BENCHMARKS, heading, markdown(), keep)
        log("wrote the section of BENCHMARKS.md")


def write_section(path: Path, heading: str, text: str, keep: str | None = None) -> None:
    """Put ``text`` (which starts with ``heading``) in place of the section ``heading``."""
    current = path.read_text() if path.exists() else "# Benchmarks\n"
    start = current.find(heading)
    if start < 0:
        path.write_text(current.rstrip("\n") + "\n\n" + text.rstrip("\n") + "\n")
        return
    end = current.find("\n## ", start + len(heading))
    old = current[start:end + 1] if end >= 0 else current[start:]
    tail = current[end + 1:] if end >= 0 else ""
    if keep and keep in old:
        text = text.rstrip("\n") + "\n\n" + old[old.index(keep):].strip("\n") + "\n"
    path.write_text(current[:start] + text.rstrip("\n") + "\n" + ("\n" + tail if tail else ""))


def wait_for_api(base: str, alive: Callable[[], bool], log: object, timeout: float = 120) -> None:
    """Wait until computed-api at ``base`` answers its /healthcheck; RuntimeError naming the log
    when it exits or does not answer within ``timeout`` seconds."""
    deadline = time.monotonic() + timeout
    while True:
        try:
            with urllib.request.urlopen(f"{base}/healthcheck", timeout=2):
                return
        except OSError:
            if time.monotonic() > deadline or not alive():
                raise RuntimeError(f"computed-api did not start ({log})") from None
            time.sleep(0.5)
