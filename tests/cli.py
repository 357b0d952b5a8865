"""computed's console scripts run inside the test process, as a user would run them from a shell.

:func:`run` calls the ``main`` of a console script (``console_scripts`` in setup.cfg:
``computed``, ``computed-reporter``, ``computed-manage``, ``computed-api``; and the stock
``openstack`` client as installed) with an argument list, and returns what a subprocess would
have given: the exit status and what was written to stdout and stderr. It costs a function call
where a subprocess costs 1-3 s of imports.

Guarantees, for every run:

* **Exit status as the interpreter gives it**: ``sys.exit(None)`` or returning is 0, an integer
  is itself, any other value is printed on stderr and is 1; an exception the script lets out is
  printed as the interpreter would (a ``Traceback`` on stderr) and is 1, so "no traceback"
  assertions keep their meaning. KeyboardInterrupt (Ctrl-C of pytest itself) is not swallowed.
* **Output captured**: ``sys.stdout`` and ``sys.stderr`` are text buffers for the run (log lines
  of oslo.log's stream handler included: it is created during the run, on them); stdin is
  /dev/null; ``COLUMNS=80`` (unless ``env`` says) so argparse lays out ``--help`` as for a
  pipe. Not captured: what C code or a child process writes to file descriptors 1 and 2
  directly.
* **Warnings as in a fresh interpreter**: the interpreter's default filters, shown on the
  captured stderr, each time (not once per pytest process). Warnings raised while a module is
  first imported are not seen: modules are imported once per pytest process (a test of what a
  fresh interpreter prints or imports is a subprocess, in ``tests/process/``).
* **Restored afterwards**, whatever the script changed: the environment (``HOME`` is
  ``home`` for the run: oslo.config reads ``~/.computed/computed.conf``), the working
  directory, ``sys.argv``, the standard streams, every signal handler (the daemon, the
  reporter and the API install SIGTERM/SIGINT handlers) and the signal mask, every logger's
  level, handlers, filters, propagation and ``disabled`` flag and every such handler's level,
  filters and formatter (oslo.log's setup replaces the root logger's handlers and sets the
  levels of its ``default_log_levels``; loggers first made during the run are reset to a new
  logger's state, and handlers made during the run are closed), ``logging.disable``,
  ``sys.excepthook`` (oslo.log sets it), ``threading.excepthook``, ``sys.unraisablehook``, the
  default socket timeout and the umask.
* **Reported, not hidden**: threads the run started that are still alive after it
  (:attr:`Result.threads_left`; a script that returns must have stopped what it started);
  threads started meanwhile by a daemon or reporter running in this process
  (``tests/functional/inprocess.py``) are theirs, not the run's.

Not isolated: module-level state (imported modules, caches), files, and the process itself (an
``os._exit`` ends pytest's worker; a service's own once stopped, ``end_process``, is a
``SystemExit`` here). One run at a time: a script that installs signal handlers must run in the
main thread (:func:`run` does); :func:`start` runs one in a thread while the test acts (the
streams, environment and working directory are then the run's for the whole process until
:meth:`Running.wait`).
"""

from __future__ import annotations

import configparser
import contextlib
import dataclasses
import importlib
import importlib.metadata
import io
import logging
import os
import pathlib
import signal
import socket
import sys
import threading
import time
import traceback
import warnings
from collections.abc import Callable, Iterator, Mapping, Sequence
from typing import Any, NoReturn

from computed.cmd import common

ROOT = pathlib.Path(__file__).resolve().parents[1]
#: Seconds a run's leftover threads get to finish before they count as left running (threads a
#: script stopped may still be returning from their last call).
THREAD_GRACE = 2.0


def console_scripts() -> dict[str, str]:
    """``{name: 'module:function'}`` of setup.cfg's console scripts."""
    parser = configparser.ConfigParser()
    parser.read(ROOT / 'setup.cfg')
    lines = parser['options.entry_points']['console_scripts'].strip().splitlines()
    return dict((part.strip() for part in line.split('=', 1)) for line in lines)


def _fresh_openstack_client(prog: str) -> None:
    """What a new ``openstack`` process starts without: cliff names its program once, from
    sys.argv[0] when first imported (App.NAME, in its messages, and App.LOG's logger); and
    openstackclient's ClientManager keeps each service's client in a class attribute (osc_lib's
    ClientCache), so that a second run would reuse the first one's endpoint and token."""
    from cliff import app
    from openstackclient.common import clientmanager
    from osc_lib.clientmanager import ClientCache
    app.App.NAME, app.App.LOG = prog, logging.getLogger(prog)
    for cls in clientmanager.ClientManager.__mro__:  # osc_lib's base class holds them
        for cache in vars(cls).values():
            if isinstance(cache, ClientCache):
                cache._handle = None


#: Console scripts of other distributions that tests run as a user would (their installed
#: ``main``), and what makes that main start as in a process of its own: the stock OpenStack
#: client.
OTHER_SCRIPTS: dict[str, Callable[[str], None]] = {'openstack': _fresh_openstack_client}


def entry_point(prog: str) -> Callable[[Sequence[str]], Any]:
    """The ``main`` of console script ``prog``, imported: one of setup.cfg's, or one of
    :data:`OTHER_SCRIPTS` as installed."""
    scripts = console_scripts()
    if prog in OTHER_SCRIPTS:
        found = importlib.metadata.entry_points(group='console_scripts', name=prog)
        if not found:
            raise ValueError(f'{prog}: not installed')
        main = next(iter(found)).load()
        OTHER_SCRIPTS[prog](prog)
        return main
    if prog not in scripts:
        raise ValueError(f'{prog}: not a console script of setup.cfg ({", ".join(scripts)})')
    module, _, function = scripts[prog].partition(':')
    return getattr(importlib.import_module(module), function)


@dataclasses.dataclass(frozen=True)
class Result:
    """What a run gave, as :class:`subprocess.CompletedProcess` would, plus the threads left."""
    args: tuple[str, ...]
    returncode: int
    stdout: str
    stderr: str
    threads_left: tuple[str, ...] = ()


def _exit_status(code: object) -> int:
    # What the interpreter does with SystemExit's code when it exits.
    if code is None:
        return 0
    if isinstance(code, int):
        return code
    print(code, file=sys.stderr)
    return 1


@contextlib.contextmanager
def _no_process_end() -> Iterator[None]:
    """A service's ``os._exit`` once stopped (:func:`computed.cmd.common.end_process`) is
    ``SystemExit`` with its status here: the exit status a subprocess would have had."""
    ended = common.end_process

    def end(status: int) -> NoReturn:
        sys.exit(status)

    common.end_process = end
    try:
        yield
    finally:
        common.end_process = ended


def _call(main: Callable[[Sequence[str]], Any], argv: list[str]) -> int:
    # A console script is ``sys.exit(main())``: what main returns is the exit status too
    # (openstackclient's main returns it; computed's exit).
    try:
        returned = main(argv)
    except SystemExit as exc:
        return _exit_status(exc.code)
    except KeyboardInterrupt:
        raise
    except BaseException:  # what the interpreter prints for an uncaught exception, and exit 1
        traceback.print_exc()
        return 1
    return _exit_status(returned)


# -- what a run may change, saved and put back -----------------------------------------------

def _all_loggers() -> list[logging.Logger]:
    found = [logging.getLogger()]
    found += [logger for logger in logging.Logger.manager.loggerDict.values()
              if isinstance(logger, logging.Logger)]
    return found


class _Logging:
    """Every logger's and handler's configuration, saved; :meth:`restore` puts it back."""

    def __init__(self) -> None:
        self.loggers = {logger: (logger.level, list(logger.handlers), list(logger.filters),
                                 logger.propagate, logger.disabled)
                        for logger in _all_loggers()}
        self.handlers = {handler: (handler.level, list(handler.filters), handler.formatter)
                         for saved in self.loggers.values() for handler in saved[1]}
        self.disable = logging.Logger.manager.disable

    def restore(self) -> None:
        made: list[logging.Handler] = []
        for logger in _all_loggers():
            level, handlers, filters, propagate, disabled = self.loggers.get(
                logger, (logging.NOTSET, [], [], True, False))
            made += [h for h in logger.handlers if h not in self.handlers and h not in made]
            if logger.level != level:
                logger.setLevel(level)  # setLevel, not .level: it clears the levels' cache
            logger.handlers[:] = handlers
            logger.filters[:] = filters
            logger.propagate, logger.disabled = propagate, disabled
        for handler, (level, filters, formatter) in self.handlers.items():
            handler.setLevel(level)
            handler.filters[:] = filters
            handler.setFormatter(formatter)
        logging.disable(self.disable)
        for handler in made:  # oslo.log's: on the run's buffers, or a log file
            handler.close()


@contextlib.contextmanager
def _signals() -> Iterator[None]:
    handlers = {signum: signal.getsignal(signum) for signum in signal.valid_signals()}
    mask = signal.pthread_sigmask(signal.SIG_BLOCK, [])
    try:
        yield
    finally:
        for signum, handler in handlers.items():
            # None: a handler not installed from Python, which cannot be put back (nor changed).
            if handler is not None and signal.getsignal(signum) is not handler:
                signal.signal(signum, handler)  # ValueError outside the main thread: a misuse
        signal.pthread_sigmask(signal.SIG_SETMASK, mask)


@contextlib.contextmanager
def _environment(home: os.PathLike | str, env: Mapping[str, str] | None) -> Iterator[None]:
    saved = dict(os.environ)
    if env is not None:  # as subprocess's env=: the whole environment
        os.environ.clear()
        os.environ.update(env)
    os.environ['HOME'] = str(home)
    if env is None or 'COLUMNS' not in env:
        os.environ['COLUMNS'] = '80'
    try:
        yield
    finally:
        if dict(os.environ) != saved:
            os.environ.clear()
            os.environ.update(saved)


@contextlib.contextmanager
def _process_state(cwd: os.PathLike | str, argv: list[str]) -> Iterator[None]:
    saved_cwd, saved_argv = os.getcwd(), sys.argv
    hooks = sys.excepthook, threading.excepthook, sys.unraisablehook
    timeout = socket.getdefaulttimeout()
    umask = os.umask(0o022)
    os.umask(umask)
    os.chdir(cwd)
    sys.argv = argv
    try:
        yield
    finally:
        os.chdir(saved_cwd)
        sys.argv = saved_argv
        sys.excepthook, threading.excepthook, sys.unraisablehook = hooks
        socket.setdefaulttimeout(timeout)
        os.umask(umask)


def _show_warning(message: Warning | str, category: type[Warning], filename: str, lineno: int,
                  file: Any = None, line: str | None = None) -> None:
    # The interpreter's own way, on the stderr of the moment: pytest's warnings plugin records
    # warnings instead of showing them, and a run inside its record must show them again.
    (file or sys.stderr).write(warnings.formatwarning(message, category, filename, lineno, line))


@contextlib.contextmanager
def _fresh_warnings() -> Iterator[None]:
    with warnings.catch_warnings():
        warnings.showwarning = _show_warning  # put back by catch_warnings
        # The filters of an interpreter started without -W or PYTHONWARNINGS (the last added is
        # the first matched); catch_warnings also forgets which warnings were already shown.
        warnings.resetwarnings()
        for category in (ResourceWarning, ImportWarning, PendingDeprecationWarning,
                         DeprecationWarning):
            warnings.simplefilter('ignore', category)
        warnings.filterwarnings('default', category=DeprecationWarning, module='__main__')
        yield


@contextlib.contextmanager
def _streams(stdout: io.StringIO, stderr: io.StringIO) -> Iterator[None]:
    saved = sys.stdin, sys.stdout, sys.stderr
    with open(os.devnull) as stdin:
        sys.stdin, sys.stdout, sys.stderr = stdin, stdout, stderr
        try:
            yield
        finally:
            sys.stdin, sys.stdout, sys.stderr = saved


class Running:
    """One run of a console script: isolated on entry, in the calling thread or another."""

    def __init__(self, prog: str, argv: Sequence[str], home: os.PathLike | str,
                 cwd: os.PathLike | str | None, env: Mapping[str, str] | None) -> None:
        self.args = (prog, *map(str, argv))
        self._main = entry_point(prog)  # imported before the threads are counted
        self._home, self._cwd, self._env = home, home if cwd is None else cwd, env
        self._out, self._err = io.StringIO(), io.StringIO()
        self._status: int | None = None
        self._thread: threading.Thread | None = None
        self._stack = contextlib.ExitStack()

    @property
    def done(self) -> bool:
        """Whether a :meth:`start`-ed run's ``main`` has returned (its result: :meth:`wait`)."""
        return self._thread is not None and not self._thread.is_alive()

    @property
    def stdout(self) -> str:
        """What the run wrote to stdout so far."""
        return self._out.getvalue()

    @property
    def stderr(self) -> str:
        return self._err.getvalue()

    def _enter(self) -> None:
        self._threads = set(threading.enumerate())
        self._logging = _Logging()
        try:
            self._isolate(self._stack)
        except BaseException:
            self._stack.close()
            raise

    def _isolate(self, stack: contextlib.ExitStack) -> None:
        stack.enter_context(_signals())
        stack.enter_context(_environment(self._home, self._env))
        stack.enter_context(_process_state(self._cwd, list(self.args)))
        stack.enter_context(_fresh_warnings())
        stack.callback(self._logging.restore)  # after the streams: oslo.log's handlers use them
        stack.enter_context(_streams(self._out, self._err))
        stack.enter_context(_no_process_end())

    def _body(self) -> None:
        self._status = _call(self._main, list(self.args[1:]))

    def run(self) -> Result:
        self._enter()
        with self._stack:
            self._body()
        return self._result()

    def start(self) -> Running:
        self._enter()
        self._thread = threading.Thread(target=self._body, name=f'cli {self.args[0]}',
                                        daemon=True)
        self._thread.start()
        return self

    def wait(self, timeout: float) -> Result:
        """The result of a :meth:`start`-ed run, once it ended (TimeoutError after
        ``timeout`` seconds: the run's thread cannot be stopped from outside)."""
        assert self._thread is not None, 'wait() is for a start()-ed run'
        self._thread.join(timeout)
        if self._thread.is_alive():
            raise TimeoutError(f'{" ".join(self.args)}: still running after {timeout:g} s')
        self._stack.close()
        return self._result()

    def _result(self) -> Result:
        assert self._status is not None
        started = [t for t in threading.enumerate()
                   if t not in self._threads and t is not self._thread and not _of_service(t)]
        deadline = time.monotonic() + THREAD_GRACE
        for thread in started:
            thread.join(max(0.0, deadline - time.monotonic()))
        left = tuple(sorted(t.name for t in started if t.is_alive()))
        return Result(self.args, self._status, self._out.getvalue(), self._err.getvalue(), left)


def _of_service(thread: threading.Thread) -> bool:
    # A thread of a daemon or reporter the functional tests run in this process
    # (tests/functional/inprocess.py) is that service's, not the run's.
    services = sys.modules.get('tests.functional.inprocess')
    return services is not None and services.owner(thread) is not None


def run(prog: str, *argv: str | os.PathLike, home: os.PathLike | str,
        cwd: os.PathLike | str | None = None, env: Mapping[str, str] | None = None) -> Result:
    """Run console script ``prog`` with ``argv`` in this process, ``HOME`` set to ``home``, in
    ``cwd`` (default: ``home``), in the environment ``env`` when given (as subprocess's
    ``env=``: the whole environment) or this process's; see the module's guarantees."""
    return Running(prog, argv, home, cwd, env).run()


def start(prog: str, *argv: str | os.PathLike, home: os.PathLike | str,
          cwd: os.PathLike | str | None = None, env: Mapping[str, str] | None = None
          ) -> Running:
    """:func:`run` in a thread, for a test that acts while the script runs (e.g. a ``--wait``
    that polls the database); :meth:`Running.wait` ends the isolation. Scripts that install
    signal handlers cannot run this way."""
    return Running(prog, argv, home, cwd, env).start()
