"""computed's daemon, reporter and compute API run in the test's process, each in a thread of its
own.

A :class:`Service` runs a console script's own composition root, ``loader.load(argv)`` then
``serve(conf, stop)`` of :mod:`computed.cmd.daemon`, :mod:`computed.cmd.reporter` or
:mod:`computed.cmd.api`, in a thread: the same configuration checks, the same parts, the same
stop as the process ``computed --config-file X`` (minus ``main``'s signal handlers and
oslo.log's setup, which are a process's). ``computed-api`` runs so with ``[api] workers = 1``
only (more would fork the test's process: :class:`NotAProcess`). What a process would give a
test, a service gives too:

* **Its log file**: every thread a service starts, and every thread those start, belongs to
  it (``threading.Thread.start`` is wrapped while any service runs: a new thread belongs to
  the service of the thread that starts it). One handler on the root logger hands each record
  to the service its thread belongs to, which writes it to its own file with oslo.log's
  formatter and its configuration's levels (``debug``, ``default_log_levels``), through the
  :class:`~computed.runtime.secrets.SecretFilter` of its configuration, as
  ``common.setup_logging`` does in a process. A record of a thread no service owns (the test's
  own) is not written to any service's file. An exception a service's thread lets out is
  written to its log, as the interpreter writes it to a process's stderr. The exit status, and
  the one line of an expected failure (``common.outcome``), are the run's.
* **Its stop**: :meth:`Service.stop` is SIGTERM's: a :class:`StopRequest` with the drain;
  :meth:`Service.ensure_stopped` (a tear-down) waives the drain, as SIGKILL would not wait for
  it. A service cannot be killed, frozen or signalled: a test that needs that runs the script
  as a process (``process=True`` in :mod:`tests.functional.daemons`).

Guarantees, checked by :meth:`Service.ensure_stopped` (the fixtures call it): once a service's
``serve`` returned, every thread it started ends within :data:`THREAD_GRACE` seconds, and the
SIGTERM/SIGINT handlers are the ones it found; otherwise the tear-down fails naming what was
left. The logger levels the services need are set while the first one starts and put back when
the last one ends.

Not isolated (one process): module-level state of computed and its libraries, e.g. the RPC
refusal counters of :mod:`computed.runtime.rpc`; a test that reads such a figure per service
runs its services as processes.
"""

from __future__ import annotations

import contextlib
import importlib
import logging
import signal
import sys
import threading
import time
import traceback
import weakref
from collections.abc import Sequence
from pathlib import Path
from typing import Any, TextIO

from oslo_log import formatters

from computed.cmd import common
from computed.conf import loader
from computed.runtime import secrets
from computed.runtime.stopping import STOP_SIGNALS, StopRequest

#: Console script -> the module of its composition root (``PROG``, ``serve``).
SCRIPTS = {"computed": "computed.cmd.daemon", "computed-reporter": "computed.cmd.reporter",
           "computed-api": "computed.cmd.api"}
#: Seconds a stopped service's threads get to end before the tear-down fails.
THREAD_GRACE = 15.0
#: Seconds a tear-down waits for a service stopped without its drain.
STOP_TIMEOUT = 60.0


class NotAProcess(RuntimeError):
    """What a test asked of an in-process service only a process can do."""


class _Registry:
    """Which service each thread belongs to, and the process-wide logging while any runs.

    Threads: services register and deregister from the test's thread; the Thread.start wrapper
    and the root handler read from any thread (under the lock, or a dict lookup)."""

    def __init__(self) -> None:
        self.lock = threading.Lock()
        self.owners: weakref.WeakKeyDictionary[threading.Thread, Service] = \
            weakref.WeakKeyDictionary()
        self.running: list[Service] = []
        self.saved: dict[logging.Logger, int] = {}
        self.original_start = threading.Thread.start
        self.original_excepthook = threading.excepthook
        self.handler = _RootHandler(self)

    def owner(self, thread: threading.Thread) -> Service | None:
        return self.owners.get(thread)

    def adopt(self, thread: threading.Thread, service: Service) -> None:
        with self.lock:
            self.owners[thread] = service

    def threads_of(self, service: Service) -> list[threading.Thread]:
        with self.lock:
            return [thread for thread, owner in list(self.owners.items())
                    if owner is service and thread.is_alive()]

    def enter(self, service: Service) -> None:
        """``service`` starts: the wrappers are in place, the levels allow its lines."""
        with self.lock:
            if not self.running:
                self._install()
            self.running.append(service)
            self._set_levels()

    def leave(self, service: Service) -> None:
        with self.lock:
            if service in self.running:
                self.running.remove(service)
            if not self.running:
                self._uninstall()
            else:
                self._set_levels()

    def _install(self) -> None:
        registry = self
        original = self.original_start

        def start(thread: threading.Thread) -> None:
            owner = registry.owner(threading.current_thread())
            if owner is not None:
                registry.adopt(thread, owner)
            original(thread)

        threading.Thread.start = start  # type: ignore[method-assign]
        threading.excepthook = self._excepthook
        logging.getLogger().addHandler(self.handler)

    def _uninstall(self) -> None:
        threading.Thread.start = self.original_start  # type: ignore[method-assign]
        threading.excepthook = self.original_excepthook
        logging.getLogger().removeHandler(self.handler)
        for logger, level in self.saved.items():
            logger.setLevel(level)
        self.saved.clear()

    def _set_levels(self) -> None:
        # What oslo.log's setup does to the loggers, for the most verbose service running:
        # the root at DEBUG or INFO, default_log_levels for the libraries' loggers.
        wanted: dict[str, int] = {}
        for service in self.running:
            for name, level in service.levels.items():
                wanted[name] = min(level, wanted.get(name, level))
        for name, level in wanted.items():
            logger = logging.getLogger(name or None)
            self.saved.setdefault(logger, logger.level)
            logger.setLevel(level)

    def _excepthook(self, args: Any) -> None:
        owner = self.owner(args.thread) if args.thread is not None else None
        if owner is None:
            self.original_excepthook(args)
            return
        owner.write(f"Exception in thread {args.thread.name}:\n" + "".join(
            traceback.format_exception(args.exc_type, args.exc_value, args.exc_traceback)))


class _RootHandler(logging.Handler):
    """Hands a record to the service its thread belongs to (none: dropped here)."""

    def __init__(self, registry: _Registry) -> None:
        super().__init__()
        self.registry = registry

    def handle(self, record: logging.LogRecord) -> bool:
        # No lock of its own: each service's handler takes its own.
        self.emit(record)
        return True

    def emit(self, record: logging.LogRecord) -> None:
        owner = self.registry.owner(threading.current_thread())
        if owner is not None and owner.handler is not None:
            owner.handler.handle(record)


class _Levels(logging.Filter):
    """A service's levels as oslo.log would set its loggers: a record passes when its level
    reaches the level of its logger's nearest configured ancestor (or the root's)."""

    def __init__(self, levels: dict[str, int]) -> None:
        super().__init__()
        self.levels = levels

    def filter(self, record: logging.LogRecord) -> bool:
        name = record.name
        while True:
            if name in self.levels:
                return record.levelno >= self.levels[name]
            if "." not in name:
                return record.levelno >= self.levels[""]
            name = name.rpartition(".")[0]


def _levels(conf: Any) -> dict[str, int]:
    levels = {"": logging.DEBUG if conf.debug else logging.INFO}
    for pair in conf.default_log_levels:
        name, _, level = pair.partition("=")
        levels[name] = int(level) if level.isdigit() else logging.getLevelName(level)
    return levels


_REGISTRY = _Registry()


class Service:
    """Console script ``script`` with ``argv``, run in a thread of this process; its log
    lines (and, for an expected failure, its one error line) appended to ``log``."""

    def __init__(self, script: str, argv: Sequence[str], log: Path, name: str) -> None:
        if script not in SCRIPTS:
            raise ValueError(f"{script}: not runnable in-process ({', '.join(SCRIPTS)})")
        self.script, self.argv, self.log, self.name = script, list(argv), Path(log), name
        self.module = importlib.import_module(SCRIPTS[script])
        self.stop_request = StopRequest()
        self.handler: logging.Handler | None = None
        self.levels: dict[str, int] = {"": logging.INFO}
        self.returncode: int | None = None
        self._stream: TextIO | None = None
        self._write_lock = threading.Lock()
        self._thread: threading.Thread | None = None
        self._signals = {signum: signal.getsignal(signum) for signum in STOP_SIGNALS}
        self._ready = threading.Event()

    # -- running -------------------------------------------------------------------------

    def start(self) -> Service:
        self._stream = open(self.log, "a", buffering=1, encoding="utf-8")  # noqa: SIM115
        self._thread = threading.Thread(target=self._run, name=f"{self.script} {self.name}",
                                        daemon=True)
        _REGISTRY.adopt(self._thread, self)
        self._thread.start()
        self._ready.wait(30)  # the configuration read and the levels set (or failed)
        return self

    def _run(self) -> None:
        entered = False
        try:
            def body() -> int:
                nonlocal entered
                conf = loader.load(self.argv, self.module.PROG)
                if self.script == "computed-api" and conf.api.workers != 1:
                    raise NotAProcess(f"{self.script} {self.name}: [api] workers = "
                                      f"{conf.api.workers} forks: run it with process=True")
                self._attach(conf)
                _REGISTRY.enter(self)
                entered = True
                self._ready.set()
                return self.module.serve(conf, self.stop_request)

            self.returncode = common.outcome(self.module.PROG, body, stderr=self._stream)
        except SystemExit as exc:  # loader.load's exit 2 for a bad configuration
            self.returncode = exc.code if isinstance(exc.code, int) else 1
        except BaseException:  # what the interpreter prints for an uncaught exception
            self.write(traceback.format_exc())
            self.returncode = 1
        finally:
            self._ready.set()
            if entered:
                _REGISTRY.leave(self)

    def _attach(self, conf: Any) -> None:
        """What ``common.setup_logging`` gives a process: oslo.log's format, the levels of
        ``conf``, the secrets of ``conf`` masked."""
        self.levels = _levels(conf)
        handler = logging.StreamHandler(self._stream)
        handler.setFormatter(formatters.ContextFormatter(
            project="computed", version=None, datefmt=conf.log_date_format, config=conf))
        handler.addFilter(_Levels(self.levels))
        handler.addFilter(secrets.SecretFilter(common.log_secrets(conf)))
        handler.createLock()
        self.handler = handler

    def write(self, text: str) -> None:
        with self._write_lock:
            if self._stream is not None and not self._stream.closed:
                self._stream.write(text)

    # -- what a test does with it -------------------------------------------------------

    @property
    def alive(self) -> bool:
        return self._thread is not None and self._thread.is_alive()

    def stop(self, timeout: float = 60, drain: bool = True) -> int:
        """SIGTERM's stop (``drain=False``: without the drain) and its exit status."""
        self.stop_request.request("SIGTERM", drain=drain)
        assert self._thread is not None
        self._thread.join(timeout)
        if self._thread.is_alive():
            raise TimeoutError(f"{self.script} {self.name}: still running {timeout:g} s "
                               f"after its stop, at:\n{self._where()}")
        return self.returncode if self.returncode is not None else 1

    def _where(self) -> str:
        """The stacks of this service's threads now (what a hung stop waits for)."""
        frames = sys._current_frames()
        return "\n".join(
            f"thread {thread.name}:\n" + "".join(traceback.format_stack(frames[thread.ident]))
            for thread in _REGISTRY.threads_of(self) if thread.ident in frames)

    def kill(self) -> None:
        raise NotAProcess(f"{self.script} {self.name} runs in the test's process: it cannot "
                          "be killed (run it with process=True)")

    def signal(self, signum: int) -> None:
        raise NotAProcess(f"{self.script} {self.name} runs in the test's process: it cannot "
                          f"be sent signal {signum} (run it with process=True)")

    def ensure_stopped(self) -> None:
        """Stop it without the drain if it runs; then fail (AssertionError) if it did not end,
        left threads running after :data:`THREAD_GRACE` seconds, or changed the stop
        signals' handlers."""
        problems = []
        if self.alive:
            try:
                self.stop(STOP_TIMEOUT, drain=False)
            except TimeoutError as exc:
                problems.append(str(exc))
        deadline = time.monotonic() + THREAD_GRACE
        left = _REGISTRY.threads_of(self)
        for thread in left:
            thread.join(max(0.0, deadline - time.monotonic()))
        left = [t.name for t in _REGISTRY.threads_of(self) if t is not self._thread]
        if left:
            problems.append(f"threads left running {THREAD_GRACE:g} s after the stop: "
                            f"{', '.join(sorted(left))}")
        changed = [signal.Signals(signum).name for signum, handler in self._signals.items()
                   if signal.getsignal(signum) is not handler]
        if changed:
            problems.append(f"signal handlers changed: {', '.join(changed)}")
        if problems:
            # Abandoned: its threads cannot be ended from outside; they keep writing to its
            # log, and the tests after this one do not answer for it.
            _REGISTRY.leave(self)
            raise AssertionError(f"{self.script} {self.name}: " + "; ".join(problems))
        with contextlib.suppress(Exception):
            if self.handler is not None:
                self.handler.flush()
        with self._write_lock:
            if self._stream is not None:
                self._stream.close()


def owner(thread: threading.Thread) -> Service | None:
    """The in-process service ``thread`` belongs to, if any."""
    return _REGISTRY.owner(thread)


def running() -> list[Service]:
    """The services of this process that have not ended yet."""
    with _REGISTRY.lock:
        return list(_REGISTRY.running)

