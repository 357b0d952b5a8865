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
  2.11 reads the negotiated value in its connection thread and keeps it nowhere (not even a
  private attribute), so the value is computed the way the server computes it, from the bounds
  the server reports to the ``conf`` four-letter command (:func:`ask_server`, over TLS when
  the session uses TLS, to the ensemble's servers in turn, passing over one that cannot be
  reached or is out of the quorum: it answers "not currently serving requests"). A server that
  refuses ``conf`` (not in ``4lw.commands.whitelist``) leaves the lease unknowable: that is an
  error naming the fix, never a guess.

* :func:`protect`: the ACL of the znodes computed keeps its fleet under. With credentials in the
  backend URL (``zookeeper://user:password@host:2181``) tooz's driver authenticates the session
  with the ``digest`` scheme and makes kazoo create every znode with an ACL that gives that user
  all rights and nobody else any (kazoo's ``default_acl``); computed creates everything through
  that session, so nothing else needs to be done for new znodes. Containers created *before*
  credentials were configured keep the open ACL they were created with, and ZooKeeper checks the
  *parent's* ACL to create or delete a child: :func:`protect` gives the fleet's containers the
  session's ACL, so that an anonymous client can neither delete a claim nor plant a member or a
  drain marker. See docs/security.md.

No other module may touch tooz's private names. ``tests/unit/fleet/test_zookeeper.py`` builds a
real tooz coordinator from a URL (without connecting) and fails as soon as a tooz release moves
either name.
"""

from __future__ import annotations

import logging
import re
from collections.abc import Iterable

from kazoo import exceptions as zk_exc
from kazoo.client import KazooClient
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


class SessionTimeoutUnknown(coordination.ToozError):
    """The server did not say which session timeout it grants; the message names the server
    and the fix."""


def granted_session_timeout(client: KazooClient, requested: float,
                            timeout: float = 5.0) -> float:
    """Seconds of session timeout a server of ``client``'s ensemble grants a session that asked
    for ``requested`` seconds. Raises :class:`SessionTimeoutUnknown` when no server answers
    ``conf`` with its bounds."""
    answer = ask_server(client, b"conf", timeout)
    bounds = session_timeout_bounds(answer)
    if bounds is None:
        raise SessionTimeoutUnknown(
            f"ZooKeeper did not report its session timeout bounds to the 'conf' command "
            f"(answer: {answer.strip()[:120]!r}); add conf to 4lw.commands.whitelist in "
            f"zoo.cfg: the fence cannot bound its lease without the granted session timeout")
    return clamp_session_timeout(requested, *bounds)


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
            sock = client.handler.create_connection(
                (host, port), hostname=host, timeout=timeout, use_ssl=client.use_ssl,
                ca=client.ca, certfile=client.certfile, keyfile=client.keyfile,
                keyfile_password=client.keyfile_password, verify_certs=client.verify_certs,
                check_hostname=client.check_hostname)
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


def protect(client: KazooClient, paths: Iterable[str]) -> list[str]:
    """Create ``paths`` if missing and give each the ACL the session creates znodes with;
    returns the paths whose ACL was changed. Does nothing without credentials (no
    ``default_acl``: znodes stay open, as ZooKeeper creates them by default)."""
    acl = list(client.default_acl or ())
    if not acl:
        return []
    changed = []
    for path in paths:
        client.ensure_path(path)
        current, _stat = client.get_acls(path)
        if sorted(map(repr, current)) == sorted(map(repr, acl)):
            continue
        try:
            client.set_acls(path, acl)
        except zk_exc.NoAuthError:
            raise zk_exc.NoAuthError(f"cannot protect {path}: its ACL {current} does not let "
                                     f"the backend_url's user change it") from None
        LOG.warning("%s had the ACL %s; set it to the backend_url user's only", path, current)
        changed.append(path)
    return changed
