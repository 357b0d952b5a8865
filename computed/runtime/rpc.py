"""The RPC bus: oslo.messaging transports, clients and servers for computed's services.

Owns how computed talks oslo.messaging, so that every service builds its transport the same way
from the configuration it was given (never from a global ``cfg.CONF``), and what a message must
be before any endpoint sees it:

* Every client :func:`get_client` makes signs what it sends: its casts and calls carry the
  envelope of :mod:`computed.runtime.signing` in their request context (the only context a
  computed sender writes), signed with the first of the transport configuration's
  ``[messaging] signing_keys`` when there are keys. Callers pass an empty context.
* Every server :func:`get_server` makes dispatches through a :class:`GuardedDispatcher`, which
  first checks the envelope (:class:`computed.runtime.signing.Verifier`: with keys, unsigned,
  forged, expired, replayed and misdirected messages are refused; without, only the shape is
  checked; with keys and ``[messaging] accept_unsigned``, a message without a signature
  is accepted and counted, :func:`unsigned_accepted_count`, the metric
  ``computed_rpc_messages_unsigned_accepted``, so that signing can be turned on or off
  across a running fleet without refusing anything), then that the method is one the
  endpoint serves (its ``rpc_methods`` when it declares them: an endpoint's other public
  methods are not on the bus). A refused message, an unknown method or an unsupported
  version is one log line (method, claimed sender, reason; never a traceback, a key nor a
  signature) and a count by reason (:func:`refused_counts`, the metric
  ``computed_rpc_messages_refused``); a call gets the refusal as its error, a cast is
  dropped. Thread-safety: oslo.messaging dispatches from a pool; the counts and each verifier's
  memory are behind locks.

oslo.messaging registers most of its options on the conf it is handed, but its metrics and tracing
options only on the global ``cfg.CONF``; :func:`get_transport` registers them on computed's own
conf so that a client call does not fail with ``NoSuchOptError: oslo_messaging_metrics``.

:func:`get_transport` also readies oslo.messaging's queue manager, which computed turns on
(:mod:`computed.conf.messaging`: a stopping server then loses no cast in flight): the process's
``[oslo_messaging_rabbit] processname`` defaults to one no other computed process of the host
has (:func:`computed.conf.messaging.process_name`), and the queue manager's inter-process lock
lives in ``[messaging] lock_path`` (created when missing; a ConfigError when unusable), given to
oslo.concurrency, which the queue manager asks for it.

:class:`Serving` starts a server (an RPC server or a notification listener) without blocking its
caller while the broker is unreachable, so that a process started before its broker stays
killable and serves as soon as the broker is up.
"""

from __future__ import annotations

import collections
import importlib
import logging
import os
import socket
import threading
from collections.abc import Mapping, Sequence
from typing import Any

import oslo_messaging
import tenacity
from oslo_concurrency import lockutils
from oslo_config import cfg
from oslo_messaging.rpc import dispatcher as rpc_dispatcher
from oslo_messaging.rpc import server as rpc_server

from computed.conf import messaging as messaging_opts
from computed.conf.default import normalise_host
from computed.conf.errors import ConfigError
from computed.runtime import signing
from computed.runtime.retry import Backoff

LOG = logging.getLogger(__name__)

# Seconds between two starts of a server whose start failed (most failures to reach the broker
# are retried inside oslo.messaging's start and never get here), doubling up to the cap.
_RESTART_DELAY = 1.0
_RESTART_DELAY_MAX = 30.0

# (private module, option list = group name) that oslo.messaging only puts on the global CONF.
_GLOBAL_ONLY_OPTS = (("oslo_messaging._metrics.client", "oslo_messaging_metrics"),
                     ("oslo_messaging._tracing.client", "oslo_messaging_tracing"))


def register_opts(conf: cfg.ConfigOpts) -> None:
    """Put oslo.messaging's global-only option groups on ``conf`` too, and ``[messaging]``."""
    for module_name, group in _GLOBAL_ONLY_OPTS:
        try:
            opts = getattr(importlib.import_module(module_name), group)
        except (ImportError, AttributeError):  # other releases lay these out differently
            continue
        conf.register_opts(opts, group=group)
    messaging_opts.register_opts(conf)  # a no-op where computed's loader registered it


def get_transport(conf: cfg.ConfigOpts, service: str, member: str | None = None,
                  url: str | None = None) -> oslo_messaging.Transport:
    """The RPC transport for ``[DEFAULT] transport_url`` (or ``url``) of a process of
    ``service`` ("daemon", "reporter", "api", "manage"), the fleet member ``member`` (its
    ``[DEFAULT] host``) or none (see :func:`computed.conf.messaging.process_name`)."""
    register_opts(conf)
    # Here, once per transport, not in register_opts, which every client and server built
    # calls (a cast of the API's builds one): oslo.messaging's options listed and registered
    # again cost about 1 ms a call. A no-op where computed's loader applied them.
    messaging_opts.set_library_defaults(conf)
    if member is not None:
        member = normalise_host(member)
    conf.set_default('processname', messaging_opts.process_name(service, member),
                     group='oslo_messaging_rabbit')
    if (conf.oslo_messaging_rabbit.use_queue_manager
            and oslo_messaging.TransportURL.parse(conf, url).transport == 'rabbit'):
        leader = _missing_group_leader()
        if leader is None:
            use_lock_path(conf.messaging.lock_path)
        else:
            # The queue manager tells one generation of a service from the next by its process
            # group's leader (its start time in /proc/<pgid>/stat) and fails every queue name
            # (so every server start and first call) once that process has exited, as it has
            # for a process a script started in the background and left.
            LOG.warning("[oslo_messaging_rabbit] use_queue_manager is off in this process: the "
                        "leader of its process group (pid %s) has exited, which oslo.messaging's "
                        "queue manager cannot name queues without; a server that stops may lose "
                        "the casts in flight. Start computed's processes in a process group of "
                        "their own (systemd does; setsid) (docs/operations.md)", leader)
            conf.set_override('use_queue_manager', False, group='oslo_messaging_rabbit')
    return oslo_messaging.get_rpc_transport(conf, url=url)


def _missing_group_leader() -> int | None:
    """The id of this process's group when its leader has exited, else None. (A group's id is
    its leader's pid, which no other process takes while the group has members.)"""
    group = os.getpgrp()
    try:
        os.kill(group, 0)
    except ProcessLookupError:
        return group
    except PermissionError:  # it exists, as another user
        return None
    return None


def use_lock_path(path: str) -> None:
    """Make ``path`` (created when missing) oslo.concurrency's lock directory in this process;
    a ConfigError for ``[messaging] lock_path`` when it cannot be created or written."""
    try:
        os.makedirs(path, mode=0o750, exist_ok=True)
    except OSError as exc:
        raise ConfigError('messaging', 'lock_path',
                          f'cannot create {path}: {exc.strerror or exc}') from None
    if not os.access(path, os.W_OK | os.X_OK):
        raise ConfigError('messaging', 'lock_path', f'{path} is not writable by this user')
    # Process-wide (oslo.concurrency reads the global cfg.CONF): the queue manager takes its
    # lock through lockutils without a lock_path of its own.
    lockutils.set_defaults(lock_path=path)


def _keys(conf: cfg.ConfigOpts) -> list[bytes]:
    register_opts(conf)
    return signing.encode_keys(conf.messaging.signing_keys)


def _sender(conf: cfg.ConfigOpts) -> str:
    try:
        host = conf.host
    except cfg.NoSuchOptError:  # a bare configuration (tests, tools)
        host = None
    return (host or socket.gethostname()).strip().rstrip(".").lower() or "unknown"


def get_client(transport: oslo_messaging.Transport, topic: str, server: str | None = None,
               version: str = "1.0", timeout: float | None = None) -> SignedClient:
    """A client for ``topic``; ``server`` aims it at one member's queue. What it sends is signed
    with the transport configuration's first ``[messaging] signing_keys`` (when set)."""
    target = oslo_messaging.Target(topic=topic, server=server, version=version)
    client = oslo_messaging.get_rpc_client(transport, target, timeout=timeout)
    signer = signing.Signer(_keys(transport.conf), _sender(transport.conf))
    return SignedClient(client, signer, topic, server)


class SignedClient:
    """An oslo.messaging RPC client whose casts and calls carry a signed envelope."""

    def __init__(self, client: Any, signer: signing.Signer, topic: str, server: str | None):
        self._client = client
        self._signer = signer
        self._topic = topic
        self._server = server

    def prepare(self, **kwargs: Any) -> SignedClient:
        server = kwargs.get("server", self._server)
        return SignedClient(self._client.prepare(**kwargs), self._signer,
                            kwargs.get("topic", self._topic), server)

    def _context(self, ctxt: Mapping[str, Any] | None, method: str,
                 kwargs: Mapping[str, Any]) -> dict[str, Any]:
        if ctxt:
            # Receivers refuse any other context key: say so here, not on their side.
            raise ValueError("computed's RPC messages carry no request context of their own")
        return self._signer.context(method, kwargs, self._topic, self._server)

    def cast(self, ctxt: Mapping[str, Any] | None, method: str, **kwargs: Any) -> None:
        self._client.cast(self._context(ctxt, method, kwargs), method, **kwargs)

    def call(self, ctxt: Mapping[str, Any] | None, method: str, **kwargs: Any) -> Any:
        return self._client.call(self._context(ctxt, method, kwargs), method, **kwargs)

    def can_send_version(self, version: str) -> bool:
        return self._client.can_send_version(version)


def get_server(transport: oslo_messaging.Transport, topic: str, server: str,
               endpoints: Sequence[object]) -> oslo_messaging.MessageHandlingServer:
    """A server consuming ``topic`` (shared) and ``topic.server`` (its own), dispatching only
    messages its :class:`GuardedDispatcher` accepts."""
    conf = transport.conf
    keys = _keys(conf)  # registers [messaging] on a bare configuration
    verifier = signing.Verifier(keys, conf.messaging.signature_max_age,
                                accept_unsigned=conf.messaging.accept_unsigned)
    if keys and conf.messaging.accept_unsigned:
        LOG.warning("%s.%s accepts unsigned RPC messages ([messaging] accept_unsigned): remove "
                    "it once every process of the fleet signs (docs/operations.md, \"Signing "
                    "keys\")", topic, server)
    target = oslo_messaging.Target(topic=topic, server=server)
    return oslo_messaging.get_rpc_server(
        transport, target, list(endpoints), executor="threading",
        access_policy=oslo_messaging.DefaultRPCAccessPolicy,
        server_cls=_server_class(GuardedDispatcher.bound(topic, server, verifier)))


def _server_class(make_dispatcher: Any) -> type:
    """oslo.messaging's RPCServer, built around a dispatcher of ours instead of its own."""

    class Server(rpc_server.RPCServer):
        def __init__(self, transport: Any, target: Any, dispatcher: Any,
                     executor: Any = None) -> None:
            super().__init__(transport, target, make_dispatcher(dispatcher), executor)

    return Server


_refused: collections.Counter[str] = collections.Counter()
_refused_lock = threading.Lock()


def refused_counts() -> dict[str, int]:
    """Messages this process's servers refused, by reason (:data:`signing.REASONS`)."""
    with _refused_lock:
        return dict(_refused)


def _count(reason: str) -> None:
    with _refused_lock:
        _refused[reason] += 1


_unsigned_accepted = 0


def unsigned_accepted_count() -> int:
    """Messages without a signature this process's servers accepted because of
    ``[messaging] accept_unsigned`` (none while it is off, or without keys)."""
    with _refused_lock:
        return _unsigned_accepted


def _count_unsigned() -> None:
    global _unsigned_accepted
    with _refused_lock:
        _unsigned_accepted += 1


class GuardedDispatcher(rpc_dispatcher.RPCDispatcher):
    """oslo.messaging's dispatcher, after the checks of the module docstring."""

    def __init__(self, endpoints: list[Any], topic: str, server: str,
                 verifier: signing.Verifier, access_policy: Any = None):
        super().__init__(endpoints, None, access_policy)
        self._topic = topic
        self._server = server
        self._verifier = verifier

    @classmethod
    def bound(cls, topic: str, server: str, verifier: signing.Verifier) -> Any:
        """Makes one from the dispatcher oslo.messaging built (same endpoints and policy)."""
        def make(original: rpc_dispatcher.RPCDispatcher) -> GuardedDispatcher:
            guarded = cls(original.endpoints, topic, server, verifier)
            guarded.access_policy = original.access_policy
            return guarded
        return make

    def _serves(self, method: Any) -> bool:
        if not isinstance(method, str):
            return False
        for endpoint in self.endpoints:
            allowed = getattr(endpoint, "rpc_methods", None)
            if allowed is not None and method not in allowed:
                continue
            if hasattr(endpoint, method) and self.access_policy.is_allowed(endpoint, method):
                return True
        return False

    def dispatch(self, incoming: Any) -> Any:
        message = incoming.message
        method, args = message.get("method"), message.get("args", {})
        sender = None
        try:
            if not self._serves(method):
                raise signing.Refused("unknown_method", "no endpoint here serves it")
            if not isinstance(args, dict):
                raise signing.Refused("malformed", "its arguments are not an object")
            sender = self._verifier.check(incoming.ctxt, method, args, self._topic,
                                          self._server)
            if not sender.signed:
                _count_unsigned()
            return super().dispatch(incoming)
        except signing.Refused as exc:
            self._refuse(method, incoming.ctxt, exc.reason, str(exc))
            raise oslo_messaging.ExpectedException() from None
        except (rpc_dispatcher.NoSuchMethod, rpc_dispatcher.UnsupportedVersion) as exc:
            # oslo.messaging would log these with a traceback; the caller of a call still
            # gets the exception (a daemon's outbox retries an UnsupportedVersion).
            self._refuse(method, incoming.ctxt, "unknown_method", f"{exc} (from {sender or None})")
            raise oslo_messaging.ExpectedException() from None

    def _refuse(self, method: Any, ctxt: Any, reason: str, why: str) -> None:
        _count(reason)
        envelope = ctxt.get(signing.ENVELOPE) if isinstance(ctxt, Mapping) else None
        claimed = envelope.get("sender") if isinstance(envelope, Mapping) else None
        LOG.warning("refusing RPC message %s on %s.%s (sender claims %s): %s",
                    signing.brief(method), self._topic, self._server,
                    signing.brief(claimed), why)


def stop_together(servings: Sequence[Serving]) -> None:
    """Stop ``servings`` at once and return when every stop has returned; a stop that fails is
    logged (naming the server) and does not keep the others from stopping.

    Why at once: an oslo.messaging server's stop returns only when its listener's poll does, and
    the rabbit driver's poll looks at the stop only between two waits for a message, each at
    most its idle poll's (doubling while nothing comes, up to 5 s) and at most
    ``[oslo_messaging_rabbit] heartbeat_timeout_threshold / heartbeat_rate / 2`` seconds (10 s
    with oslo.messaging's defaults); a daemon stopping its RPC server and its notification
    listener one after the other waited out both polls, at once only the longer (2.8 s median,
    0.8-4.8 s, measured). A transport that made calls waits the same at its cleanup (its reply
    queue's poll).

    A ``heartbeat_rate`` of 120 bounds each wait by 0.25 s (a daemon's two stops: 0.16 s median),
    but then every idle connection also wakes four times a second and sends a heartbeat every
    0.5 s: an idle process with a daemon's connections took 0.31 % of a core instead of 0.04 %
    (measured), against a daemon's 1.3 % and a reporter's 0.2 % in a steady fleet
    (BENCHMARKS.md). Stops are rare in production, so computed keeps oslo.messaging's default;
    the functional tests, which start and stop daemons and reporters all the time, set it
    (``tests.functional.daemons.MESSAGING``).
    """
    _each_at_once(servings, "stop", "stopping")


def wait_together(servings: Sequence[Serving]) -> None:
    """:meth:`Serving.wait` for each of ``servings`` at once (after :func:`stop_together`);
    returns when every wait has returned, a wait that fails logged naming its server.

    Why at once: a server's wait ends its pool of workers (futurist's, oslo.messaging's
    ``threading`` executor), whose idle workers look for the end only between two waits for
    work of up to a second each; one server after the other, a daemon's stop waited for two of
    them. futurist offers no way to wake them sooner."""
    _each_at_once(servings, "wait", "waiting for")


def _each_at_once(servings: Sequence[Serving], action: str, doing: str) -> None:
    def act(serving: Serving) -> None:
        try:
            getattr(serving, action)()
        except Exception:
            LOG.exception("%s %s failed", doing, serving.what)

    threads = [threading.Thread(target=act, args=(serving,), name=f"{action} {serving.what}",
                                daemon=True) for serving in servings]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()


class Serving:
    """One oslo.messaging server (RPC server or notification listener) started off the caller's
    thread; ``what`` names it in the log.

    An oslo.messaging server's ``start()`` first connects to the broker and, while the broker is
    unreachable, retries inside that call for ever (the rabbit driver logs each try). Called from
    a console script's main thread, that made the process deaf to SIGTERM until the broker came
    up. :meth:`start` returns at once: a daemon thread starts the server (again after a failure,
    with backoff), :attr:`started` says when it serves. :meth:`stop` and :meth:`wait` act on a
    server that started; one still waiting for the broker is abandoned (its thread ends with the
    process), and one whose start completes after :meth:`stop` is stopped at once. Thread-safe.
    """

    def __init__(self, what: str, server: Any):
        self.what = what
        self._server = server
        self._lock = threading.Lock()
        self._started = False  # the server serves
        self._stopped = False  # stop() stopped a server that served: wait() waits for it
        self._stopping = threading.Event()

    @property
    def started(self) -> bool:
        """True once the server serves (and until :meth:`stop`)."""
        return self._started

    def start(self) -> None:
        """Start the server in a thread of its own; returns at once."""
        threading.Thread(target=self._start, name=f"start {self.what}", daemon=True).start()

    def _start(self) -> None:
        # A failed start is not the broker's absence (retried inside): log it, start again
        # after _RESTART_DELAY, doubling up to _RESTART_DELAY_MAX, until stop().
        retrying = tenacity.Retrying(
            retry=tenacity.retry_if_exception_type(Exception),
            stop=lambda _state: self._stopping.is_set(), sleep=self._stopping.wait,
            wait=Backoff(_RESTART_DELAY, _RESTART_DELAY_MAX), before_sleep=self._log_failure)
        try:
            started = retrying(self._start_once)
        except tenacity.RetryError:
            return  # stop() came while starts failed
        if not started:
            return
        with self._lock:
            if not self._stopping.is_set():
                self._started = True
                LOG.info("%s: connected to the message bus, serving", self.what)
                return
        self._server.stop()  # stop() came while this start was waiting for the broker
        self._server.wait()

    def _start_once(self) -> bool:
        if self._stopping.is_set():
            return False
        self._server.start()
        return True

    def _log_failure(self, retry_state: tenacity.RetryCallState) -> None:
        LOG.warning("cannot start %s, retrying in %.0fs: %s", self.what,
                    retry_state.next_action.sleep, retry_state.outcome.exception())

    def stop(self) -> None:
        """Stop serving (if it started); a start still under way is abandoned."""
        with self._lock:
            self._stopping.set()
            started, self._started = self._started, False
        if started:
            self._server.stop()
            self._stopped = True

    def wait(self) -> None:
        """Wait for the messages in flight of a server that :meth:`stop` stopped."""
        if self._stopped:
            self._server.wait()
