"""The ZooKeeper session behind tooz: the one place computed reaches inside a library.

Owns the link between tooz's ZooKeeper driver and the parts of computed that use kazoo directly.
The fleet's membership is a tooz group (joined and left through tooz's public API), but claims,
watches and member epochs need kazoo: claims and watches must live in the *same* ZooKeeper
session as the membership, so that all of a daemon's presence expires at once, and a member epoch
is the zxid of the member's znode, which tooz does not report. tooz exposes neither its kazoo
client nor where it keeps a group, so this module reads both from tooz's driver:

* :func:`kazoo_client`: the driver's ``KazooClient`` (``KazooDriver._coord``);
* :func:`group_path`: the znode of a group, as tooz itself builds it
  (``KazooDriver._path_group``), so a ``?namespace=...`` in the backend URL is honoured wherever
  computed reads a group (the daemon's membership and ``computed-manage fleet status`` alike).

It also owns what computed asks the ZooKeeper *server*:

* :func:`granted_session_timeout`: the session timeout the server grants, which is what the
  fence's lease must be computed from (:mod:`computed.fleet.fence`). ZooKeeper clamps the
  timeout a client asks for (``?timeout=`` in the backend URL) to its own
  ``[minSessionTimeout, maxSessionTimeout]`` (by default 2 and 20 tickTimes): ``?timeout=90``
  got 40 s from a default server while the lease stayed at 60 s, longer than the session. kazoo
  (2.11, and no release since) reads the negotiated value in its connection thread and keeps it
  nowhere (not even a private attribute), so it is learnt from the server, in this order:

  1. the bounds the server reports to the ``conf`` four-letter command (:func:`ask_server`,
     over TLS when the session uses TLS, to the ensemble's servers in turn, passing over one
     that cannot be reached or is out of the quorum: it answers "not currently serving
     requests"), clamped as the server clamps;
  2. when ``conf`` is not in the server's ``4lw.commands.whitelist`` (a stock ensemble allows
     ``srvr`` only, which does not tell): the value itself, as ZooKeeper's client protocol
     reports it to every new session (:func:`negotiated_session_timeout`): a short-lived probe
     session asking for the same timeout, on every server of the ensemble that answers (the
     smallest wins), closed at once. This is what the server grants the daemon's own session,
     as long as the ensemble's servers share their bounds (which ZooKeeper's docs require).

  Only when neither answers is the lease unknowable: that is an error naming the fix, never a
  guess.

* :func:`protect`: the ACL of the znodes computed keeps its fleet under. With credentials in the
  backend URL (``zookeeper://user:password@host:2181``) tooz's driver authenticates the session
  with the ``digest`` scheme and makes kazoo create every znode with an ACL that gives that user
  all rights and nobody else any (kazoo's ``default_acl``); computed creates everything through
  that session, so nothing else needs to be done for new znodes. Containers created *before*
  credentials were configured keep the open ACL they were created with, and ZooKeeper checks the
  *parent's* ACL to create or delete a child: :func:`protect` gives the fleet's containers the
  session's ACL, so that an anonymous client can neither delete a claim nor plant a member or a
  drain marker. See docs/security.md.

* **Bounded waits** (:func:`answer`, :class:`NoAnswer`, :func:`stop_session`). kazoo queues a
  request made while its connection is down and answers it only once a server answers again,
  which, with every server gone (killed, frozen), is never; its synchronous calls and tooz's
  ``.get()`` wait without a limit, and so does tooz's ``stop()`` (for its heartbeat thread, then
  for a leave of every group). computed waits for ZooKeeper only through :func:`answer`, with a
  limit (the session timeout, or less), and a request not answered within it raises
  :class:`NoAnswer`, a ``ConnectionLoss``: like a dropped connection, its outcome is unknown,
  and every caller already handles that. A daemon's session ends through :func:`stop_session`,
  never tooz's ``stop()``, so that ``systemctl stop`` ends in bounded time when ZooKeeper is
  gone: what the daemon left behind in ZooKeeper is ephemeral and goes when the session expires.
  It starts its session through :func:`start_session`, not tooz's ``start()`` alone (its
  creation of its namespace waits without a limit), so that a daemon asked to stop while it
  starts stops at once.

No other module may touch tooz's private names. ``tests/unit/fleet/test_zookeeper.py`` builds a
real tooz coordinator from a URL (without connecting) and fails as soon as a tooz release moves
either name.
"""

from __future__ import annotations

import logging
import re
import threading
import time
from collections.abc import Iterable
from typing import Any

from kazoo import exceptions as zk_exc
from kazoo.client import KazooClient
from kazoo.handlers.threading import KazooTimeoutError
from kazoo.protocol.serialization import Connect, int_int_struct, int_struct
from tooz import coordination
from tooz.drivers import zookeeper as tooz_zookeeper

LOG = logging.getLogger(__name__)


class NotZooKeeper(ValueError):
    """The coordinator is not tooz's ZooKeeper driver; the message names what it is."""

    def __init__(self, coordinator: coordination.CoordinationDriver):
        super().__init__(f"the coordination backend {type(coordinator).__name__} is not "
                         f"ZooKeeper: node claims need [coordination] backend_url = "
                         f"zookeeper://...")
        self.coordinator = coordinator


def kazoo_client(coordinator: coordination.CoordinationDriver) -> KazooClient:
    """The KazooClient (one ZooKeeper session) inside tooz's ZooKeeper ``coordinator``."""
    return _driver(coordinator)._coord


def group_path(coordinator: coordination.CoordinationDriver, group: str) -> str:
    """The znode under which tooz keeps the members of ``group`` (one child per member)."""
    return _driver(coordinator)._path_group(group.encode())


def _driver(coordinator: coordination.CoordinationDriver) -> tooz_zookeeper.KazooDriver:
    if not isinstance(coordinator, tooz_zookeeper.KazooDriver):
        raise NotZooKeeper(coordinator)
    return coordinator


class NoAnswer(zk_exc.ConnectionLoss):
    """ZooKeeper did not answer ``what`` within ``timeout`` seconds. A ``ConnectionLoss``: the
    request may still be carried out later (kazoo sends it once a server answers again), so its
    outcome is unknown, as after a dropped connection."""

    def __init__(self, what: str, timeout: float):
        super().__init__(f"ZooKeeper did not answer {what} within {timeout:g} s")
        self.what = what
        self.timeout = timeout


class Deadline:
    """One limit shared by the answers to a batch of pipelined requests: the batch waits at
    most ``timeout`` seconds in all, not that much per request."""

    def __init__(self, timeout: float):
        self.timeout = timeout
        self._end = time.monotonic() + timeout

    def remaining(self) -> float:
        return max(0.0, self._end - time.monotonic())


def answer(async_result: Any, limit: float | Deadline, what: str) -> Any:
    """The answer to a kazoo request (``*_async``), waited for at most ``limit`` seconds (or
    until the :class:`Deadline`); :class:`NoAnswer` when none came. kazoo's own errors (NoNode,
    ConnectionLoss, ...) are raised as they are."""
    deadline = limit if isinstance(limit, Deadline) else Deadline(limit)
    try:
        return async_result.get(timeout=deadline.remaining())
    except KazooTimeoutError:
        raise NoAnswer(what, deadline.timeout) from None


#: Seconds between two looks at a stop while a session starts (:func:`start_session`).
START_LOOK = 0.1


def start_limit(timeout: float) -> float:
    """Seconds :func:`start_session` gives tooz's start: its connect (bounded by kazoo at the
    URL's timeout, the session timeout) and one answer to its creation of its namespace."""
    return 2 * timeout


def start_session(coordinator: coordination.CoordinationDriver, timeout: float,
                  stop: threading.Event) -> bool:
    """Start ``coordinator``'s session (tooz's ``start``, no heartbeat) in bounded time, giving
    up as soon as ``stop`` is set; True once started, False when the stop came first.

    tooz's start connects (kazoo bounds that by the URL's timeout) and then creates its
    namespace with kazoo's synchronous ``ensure_path``, which has no limit: a request made while
    the connection is down waits until a server answers again, never with the ensemble frozen.
    And the main thread that starts a daemon is also the one that acts on SIGTERM (its handler
    only sets an Event). So tooz's start runs in a thread of its own (``zookeeper-start``),
    waited for at most :func:`start_limit` and only while ``stop`` is not set; when it has not
    ended by then, the session is ended through :func:`stop_session` (kazoo's close fails the
    waiting request, and the thread ends), and tooz's ``ToozConnectionError`` is raised (after
    the limit, as for a connect that failed) or False answered (the stop). What tooz's start
    raises is raised as it is."""
    done = threading.Event()
    failed: list[BaseException] = []

    def start() -> None:
        try:
            coordinator.start(start_heart=False)
        except BaseException as exc:  # noqa: BLE001 - raised again in the caller's thread
            failed.append(exc)
        finally:
            done.set()

    starting = threading.Thread(target=start, name="zookeeper-start", daemon=True)
    starting.start()
    deadline = Deadline(start_limit(timeout))
    while not done.wait(min(START_LOOK, deadline.remaining())):
        if stop.is_set() or not deadline.remaining():
            break
    if done.is_set():
        if failed:
            raise failed[0]
        return True
    stop_session(coordinator, timeout)
    if stop.is_set():
        return False
    raise coordination.ToozConnectionError(
        f"ZooKeeper did not answer the start of the session (the connect and the creation of "
        f"tooz's namespace) within {deadline.timeout:g} s")


def stop_session(coordinator: coordination.CoordinationDriver, timeout: float) -> None:
    """End ``coordinator``'s ZooKeeper session, in bounded time even with every server gone.

    Not tooz's ``stop()``: it waits without a limit for its heartbeat thread (blocked in a
    request while no server answers) and then for a leave of every group it joined (the
    daemon left, or gave up leaving, already: :meth:`computed.fleet.membership.Membership.leave`).
    This stops the heartbeat, if one runs, waiting at most ``timeout``, then closes kazoo's
    session: a server that answers deletes the session's ephemeral znodes at once; with none,
    kazoo gives its connection thread at most max(10 s, the session timeout) to end (its own
    bound), and the znodes go when the session expires. kazoo's close first joins its callback
    threads without a limit, and one of them may wait on ZooKeeper (a callback of a kazoo
    recipe may make a synchronous request): the close runs in a thread of its own, waited for
    at most :func:`close_limit`, and is left to finish by itself after that (one line says
    so)."""
    if coordinator.heart.is_alive():
        coordinator.heart.stop()
        coordinator.heart.wait(timeout)
    client = kazoo_client(coordinator)
    closing = threading.Thread(target=_close, args=(client,), name="zookeeper-close",
                               daemon=True)
    closing.start()
    closing.join(close_limit(timeout))
    if closing.is_alive():
        LOG.warning("ZooKeeper session not closed within %g s (kazoo waits for a callback that "
                    "waits on ZooKeeper); leaving it: its ephemeral znodes go when it expires",
                    close_limit(timeout))


def close_limit(timeout: float) -> float:
    """Seconds :func:`stop_session` waits for kazoo's close: kazoo's own bound on its connection
    thread (max(10 s, the session timeout)) and one session timeout more."""
    return max(10.0, timeout) + timeout


def _close(client: KazooClient) -> None:
    try:
        client.stop()
    except zk_exc.WriterNotClosedException as exc:
        LOG.warning("ZooKeeper session not closed cleanly: %s; its ephemeral znodes go when it "
                    "expires", exc)
    client.close()


class SessionTimeoutUnknown(coordination.ToozError):
    """The server did not say which session timeout it grants; the message names the server
    and the fix."""


def granted_session_timeout(client: KazooClient, requested: float,
                            timeout: float = 5.0) -> float:
    """Seconds of session timeout a server of ``client``'s ensemble grants a session that asked
    for ``requested`` seconds: from the server's ``conf`` bounds, else from a probe session
    (see the module docstring). Raises :class:`SessionTimeoutUnknown` when neither says."""
    try:
        answer = ask_server(client, b"conf", timeout)
    except SessionTimeoutUnknown as exc:
        answer, unreachable = "", str(exc)
    else:
        unreachable = ""
    bounds = session_timeout_bounds(answer)
    if bounds is not None:
        return clamp_session_timeout(requested, *bounds)
    try:
        granted = negotiated_session_timeout(client, requested, timeout)
    except SessionTimeoutUnknown as exc:
        conf_said = unreachable or f"its answer to 'conf' has no bounds: {answer.strip()[:120]!r}"
        raise SessionTimeoutUnknown(
            f"ZooKeeper did not say which session timeout it grants ({conf_said}; {exc}): the "
            f"fence cannot bound its lease without it; let the daemon reach a serving server, "
            f"or add conf to 4lw.commands.whitelist in zoo.cfg") from None
    LOG.info("ZooKeeper grants a %g s session timeout for the %g s asked (read from a probe "
             "session: 'conf' is not in its 4lw.commands.whitelist)", granted, requested)
    return granted


def negotiated_session_timeout(client: KazooClient, requested: float,
                               timeout: float = 5.0) -> float:
    """The session timeout, in seconds, the servers of ``client``'s ensemble grant a new session
    asking for ``requested`` seconds, read from the answer to a probe session's connect request
    (ZooKeeper's ConnectResponse carries the negotiated timeout), with the client's TLS
    settings; the smallest of the servers that answer. Each probe session is closed at once.
    Raises :class:`SessionTimeoutUnknown` when no server answers."""
    granted, failures = [], []
    for host, port in client.hosts:
        try:
            sock = _connect(client, host, port, timeout)
            try:
                granted.append(_probe(sock, int(requested * 1000)) / 1000)
            finally:
                sock.close()
        except Exception as exc:  # socket, TLS and protocol errors: try the next server
            failures.append(f"{host}:{port}: {exc or type(exc).__name__}")
    if not granted:
        raise SessionTimeoutUnknown(f"no server answered a probe session: {'; '.join(failures)}")
    return min(granted)


def _connect(client: KazooClient, host: str, port: int, timeout: float) -> Any:
    """A socket to one server with the client's TLS settings, through its handler."""
    return client.handler.create_connection(
        (host, port), hostname=host, timeout=timeout, use_ssl=client.use_ssl,
        ca=client.ca, certfile=client.certfile, keyfile=client.keyfile,
        keyfile_password=client.keyfile_password, verify_certs=client.verify_certs,
        check_hostname=client.check_hostname)


#: The xid of the probe session's close request (any positive number: nothing else is pending).
_PROBE_CLOSE_XID = 1
#: ZooKeeper's opcode of closeSession.
_CLOSE_SESSION = -11


def _probe(sock: Any, requested_ms: int) -> int:
    """Open a session on ``sock`` asking for ``requested_ms``, close it, and return the timeout
    in ms the server granted (kazoo's own serialisation of the connect request)."""
    request = Connect(0, 0, requested_ms, 0, b"\x00" * 16, False).serialize()
    sock.sendall(int_struct.pack(len(request)) + request)
    (length,) = int_struct.unpack(_receive(sock, int_struct.size))
    if not 0 < length <= 4096:
        raise ValueError(f"not a ZooKeeper connect response ({length} bytes)")
    response, _ = Connect.deserialize(_receive(sock, length), 0)
    if response.time_out <= 0:
        raise ValueError("the server refused the probe session")
    try:  # end the probe session now rather than after its timeout
        close = int_int_struct.pack(_PROBE_CLOSE_XID, _CLOSE_SESSION)
        sock.sendall(int_struct.pack(len(close)) + close)
        _receive(sock, int_struct.size)
    except Exception:  # noqa: BLE001 - it expires by itself; the answer is already read
        pass
    return response.time_out


def _receive(sock: Any, size: int) -> bytes:
    data = b""
    while len(data) < size:
        chunk = sock.recv(size - len(data))
        if not chunk:
            raise ConnectionError(f"the server closed the connection after {len(data)} of "
                                  f"{size} bytes")
        data += chunk
    return data


#: What a server out of its ensemble's quorum (cut from its peers, or with too few of them up)
#: answers every four-letter command but ``ruok``.
NOT_SERVING = "not currently serving requests"


def ask_server(client: KazooClient, command: bytes, timeout: float = 5.0) -> str:
    """The answer of the first server of ``client``'s ensemble that answers the four-letter
    ``command``, over TLS when the client uses TLS, with the client's certificates. A server
    that is not serving (out of the quorum) is passed over for the next one, as one that cannot
    be reached is.

    kazoo's own ``KazooClient.command`` passes the server's port as the TLS host name (kazoo
    2.11: "'int' object has no attribute 'decode'" on every TLS session) and reads a single
    ``recv``; this reads to the end, through the client's connection handler (sockets that
    cooperate with eventlet when the handler is eventlet's)."""
    failures = []
    for host, port in client.hosts:
        try:
            sock = _connect(client, host, port, timeout)
            try:
                sock.sendall(command)
                chunks = []
                while chunk := sock.recv(8192):
                    chunks.append(chunk)
            finally:
                sock.close()
        except Exception as exc:  # socket and TLS errors: try the next server
            failures.append(f"{host}:{port}: {exc or type(exc).__name__}")
            continue
        answer = b"".join(chunks).decode("utf-8", "replace")
        if NOT_SERVING in answer:  # out of the quorum: it says so instead of answering
            failures.append(f"{host}:{port}: {NOT_SERVING}")
            continue
        return answer
    raise SessionTimeoutUnknown(f"cannot ask ZooKeeper for its session timeout bounds "
                                f"('{command.decode()}' command): {'; '.join(failures)}")


def session_timeout_bounds(conf_answer: str) -> tuple[float, float] | None:
    """``(minSessionTimeout, maxSessionTimeout)`` in seconds from the server's answer to
    ``conf``; None when it does not hold both (pure)."""
    found = dict(re.findall(r"^\s*(minSessionTimeout|maxSessionTimeout)\s*=\s*(\d+)\s*$",
                            conf_answer, re.MULTILINE))
    if len(found) != 2:
        return None
    return int(found["minSessionTimeout"]) / 1000, int(found["maxSessionTimeout"]) / 1000


def clamp_session_timeout(requested: float, minimum: float, maximum: float) -> float:
    """The timeout a server with these bounds grants (ZooKeeperServer's rule; pure)."""
    return min(max(requested, minimum), maximum)


def protect(client: KazooClient, paths: Iterable[str], timeout: float) -> list[str]:
    """Create ``paths`` if missing and give each the ACL the session creates znodes with;
    returns the paths whose ACL was changed. Does nothing without credentials (no
    ``default_acl``: znodes stay open, as ZooKeeper creates them by default). Each request is
    answered within ``timeout`` seconds, else :class:`NoAnswer`."""
    acl = list(client.default_acl or ())
    if not acl:
        return []
    changed = []
    for path in paths:
        answer(client.ensure_path_async(path), timeout, f"the creation of {path}")
        current, _stat = answer(client.get_acls_async(path), timeout, f"the ACL of {path}")
        if sorted(map(repr, current)) == sorted(map(repr, acl)):
            continue
        try:
            answer(client.set_acls_async(path, acl), timeout, f"a new ACL for {path}")
        except zk_exc.NoAuthError:
            raise zk_exc.NoAuthError(f"cannot protect {path}: its ACL {current} does not let "
                                     f"the backend_url's user change it") from None
        LOG.warning("%s had the ACL %s; set it to the backend_url user's only", path, current)
        changed.append(path)
    return changed
