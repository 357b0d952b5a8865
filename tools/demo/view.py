"""What the local run's screen says, decided from a snapshot of the fleet: no I/O here.

The screen explains itself to someone who has not read the code: each daemon's state in words
(a daemon stopped with SIGTERM is ``stopped``, one killed with SIGKILL is ``killed``, and ZooKeeper
keeps listing it until its session expires), what the member epoch is, which members joined from
outside this run, why nodes are unclaimed (an instance waiting for re-homing, with the seconds
left), how many providers Placement offers and how many it holds back as reserved, and the exact
``computed-manage`` command prefix with the metrics endpoints, on every refresh; with the compute
API, its URL and how openstackclient and openstacksdk reach it in noauth2 mode (docs/api.md);
with Glance, its URL, the image ``demo`` and the flavor ``bm.demo``, and the commands of a first
server with a key pair and user data (README.md's walkthrough).
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field

from computed.fleet.membership import MemberInfo

BAR = 40
KEYS = ("keys: k kill -9 a daemon (one hosting an instance first) | t stop one (SIGTERM: it "
        "drains)\n      a add a daemon | m toggle maintenance on a node | q quit")
# The compute API in noauth2 mode: the token USER:PROJECT, and "admin" has the admin role.
API_TOKEN = "admin:admin"
API_MICROVERSION = "2.61"
EPOCH_NOTE = ("MEMBER EPOCH: the ZooKeeper transaction id of the daemon's join, new on every "
              "(re)join; instances record it, and re-homing compares it.")


@dataclass(frozen=True)
class ProcessRow:
    """One line of the process table."""

    name: str
    state: str
    member_epoch: int | None = None
    nodes: int | None = None
    metrics: str = ""


@dataclass(frozen=True)
class Waiting:
    """Nodes hosting instances of a daemon that left, until a peer adopts them."""

    host: str
    nodes: int
    seconds_left: float


@dataclass(frozen=True)
class Watched:
    """The node the last ``m`` toggled, as Ironic and Placement have it now."""

    node: str
    maintenance: bool | None  # None: Ironic did not answer
    reserved: int | None  # None: Placement has no inventory for it (yet)


@dataclass
class Snapshot:
    node_count: int
    manage: str
    workdir: str
    services: list[str]
    processes: list[ProcessRow]
    outsiders: list[ProcessRow]
    claimed: int
    unclaimed: int
    waiting: list[Waiting]
    rehome_grace: float
    applied: int
    providers: int | None  # None: Placement did not answer
    free: int | None
    instances: Mapping[str, int]
    watched: Watched | None
    events: list[str] = field(default_factory=list)
    clock: str = ""
    api: str | None = None  # the compute API's base URL, when it runs
    glance: str | None = None  # Glance's URL, when it runs
    image: str | None = None  # the id of the image "demo" in Glance
    flavor: str | None = None  # the name of the demo flavor, once the API has it


def daemon_state(running: bool, returncode: int | None, sent: str | None,
                 member: MemberInfo | None) -> str:
    """A process of ours in words, from what we did to it and what ZooKeeper says."""
    if member is not None:
        if member.draining:
            return "draining"
        if not running:
            # Its ephemeral znodes live until ZooKeeper expires the session.
            return "killed, session open" if sent == "SIGKILL" else "dead, session open"
        return "stopping" if sent else "member"
    if running:
        return "stopping" if sent else "joining"
    if sent == "SIGKILL":
        return "killed"
    if sent == "SIGTERM" and returncode in (0, -15):
        return "stopped"
    return f"exited {returncode}"


def waiting_for_rehome(unclaimed: Iterable[str], instance_hosts: Mapping[str, str],
                       members: Iterable[str], gone_since: Mapping[str, float], now: float,
                       grace: float) -> list[Waiting]:
    """Unclaimed nodes that host an instance of a host no longer a member, per host.

    ``instance_hosts`` maps node -> host of its live instance; ``gone_since`` when this run saw
    each host leave (the daemons start their grace clock at about the same moment).
    """
    live = set(members)
    per_host: dict[str, int] = {}
    for node in unclaimed:
        host = instance_hosts.get(node)
        if host is not None and host not in live:
            per_host[host] = per_host.get(host, 0) + 1
    return [Waiting(host, count, max(0.0, grace - (now - gone_since.get(host, now))))
            for host, count in sorted(per_host.items())]


def _epoch(value: int | None) -> str:
    return "-" if value is None else str(value)


def _count(value: int | None) -> str:
    return "-" if value is None else str(value)


def _table(rows: Iterable[ProcessRow], mark: str = "") -> list[str]:
    return [f"{row.name + mark:<16}{row.state:<22}{_epoch(row.member_epoch):>14}"
            f"{_count(row.nodes):>7}  {row.metrics}" for row in rows]


def unclaimed_line(snapshot: Snapshot) -> str:
    line = f"nodes: claimed {snapshot.claimed}, unclaimed {snapshot.unclaimed}"
    if not snapshot.unclaimed:
        return line
    held = sum(w.nodes for w in snapshot.waiting)
    members = any(row.member_epoch is not None for row in snapshot.processes + snapshot.outsiders)
    parts = []
    for w in snapshot.waiting:
        if not members:
            when = "no member left to adopt them"
        elif w.seconds_left >= 0.5:
            when = f"a peer adopts them in {w.seconds_left:.0f} s"
        else:
            when = "any moment now"
        parts.append(f"{w.nodes} hosting instances of {w.host} (gone), waiting for re-homing: "
                     f"{when}")
    if snapshot.unclaimed > held:
        parts.append(f"{snapshot.unclaimed - held} not yet claimed " + (
            "(a daemon joining, or the session of a dead one not yet expired)" if members else
            "(no daemon is a member: a adds one)"))
    note = f" ([fleet] rehome_grace {snapshot.rehome_grace:.0f} s)" if snapshot.waiting else ""
    return f"{line}: " + "; ".join(parts) + note


def placement_line(snapshot: Snapshot) -> str:
    filled = int(BAR * snapshot.applied / max(1, snapshot.node_count))
    line = (f"providers in Placement (applied) [{'#' * filled}{'.' * (BAR - filled)}] "
            f"{snapshot.applied}/{snapshot.node_count}")
    if snapshot.providers is None:
        return line + "; Placement does not answer"
    held = snapshot.providers - snapshot.free
    return (f"{line}\n  free {snapshot.free}, reserved or in use {held} (reserved: maintenance, "
            f"no power state, not available, or hosting an instance)")


def api_lines(url: str, glance: str | None = None, image: str | None = None,
              flavor: str | None = None) -> list[str]:
    """How to reach the compute API at ``url`` in noauth2 mode, as docs/api.md says: the
    environment for openstackclient (which builds an Identity v3 client even when it does not call
    it; the API's root stands in for Keystone) and an openstacksdk connection. With ``glance``
    (its URL) the client finds images there (``OS_IMAGE_ENDPOINT_OVERRIDE``: there is no
    catalog), and with the ``image`` demo and the ``flavor`` the commands of a first server."""
    endpoint = f"{url}/v2.1"
    lines = [f"compute API: {endpoint} (noauth2: the token USER:PROJECT; {API_TOKEN} is an "
             f"admin)",
             f"  export OS_AUTH_TYPE=admin_token OS_ENDPOINT={endpoint} OS_TOKEN={API_TOKEN}",
             f"  export OS_COMPUTE_API_VERSION={API_MICROVERSION} OS_IDENTITY_API_VERSION=3 "
             f"OS_IDENTITY_ENDPOINT_OVERRIDE={url}/"]
    if glance is not None:
        lines.append(f"  export OS_IMAGE_ENDPOINT_OVERRIDE={glance}/")
    lines.append("  then e.g. openstack server list --no-name-lookup")
    if glance is not None and image is not None and flavor is not None:
        lines += [f"  Glance: {glance} (no Keystone); image demo {image} (public, active); "
                  f"flavor {flavor}",
                  "  a first server: openstack keypair create k > k.pem; echo '#cloud-config' "
                  "> f",
                  f"    openstack server create --image demo --key-name k --user-data f "
                  f"--flavor {flavor} --wait s1"]
    lines.append(f"  python: import openstack; conn = openstack.connection.Connection("
                 f"auth_type=\"admin_token\", auth={{\"endpoint\": \"{endpoint}\", "
                 f"\"token\": \"{API_TOKEN}\"}})")
    return lines


def render(snapshot: Snapshot, height: int | None = None, width: int = 80) -> str:
    """The screen; with ``height`` and ``width`` (the terminal's rows and columns, long lines
    wrap) it fits by showing fewer recent events, then the services' URLs in one line, never by
    losing the command prefix, the compute API's lines or the table."""
    head = [f"computed local fleet: {snapshot.node_count} fake-hardware nodes in Ironic   "
            f"{snapshot.clock}", "",
            f"computed-manage: {snapshot.manage}",
            "  e.g. ... server create --resource-class baremetal-demo --image "
            "http://127.0.0.1/images/demo.qcow2 --wait",
            "       ... fleet status | server list | server show UUID",
            f"configs and logs: {snapshot.workdir}"]
    if snapshot.api is not None:
        head += api_lines(snapshot.api, snapshot.glance, snapshot.image, snapshot.flavor)
    services = ["services: " + "\n          ".join(snapshot.services)]
    body = ["", f"{'PROCESS':<16}{'STATE':<22}{'MEMBER EPOCH':>14}{'NODES':>7}  METRICS"]
    body += _table(snapshot.processes)
    body += _table(snapshot.outsiders, mark="*")
    if snapshot.outsiders:
        body.append("* a member that joined from outside this run (same ZooKeeper and group)")
    body += [EPOCH_NOTE, "", unclaimed_line(snapshot), placement_line(snapshot)]
    if snapshot.instances:
        body.append("instances: " + ", ".join(f"{state} {count}" for state, count
                                               in sorted(snapshot.instances.items())))
    else:
        body.append("instances: none yet (see the server create command above)")
    if snapshot.watched is not None:
        watched = snapshot.watched
        reserved = "no inventory yet" if watched.reserved is None else \
            f"reserved {watched.reserved}"
        maintenance = {True: "on", False: "off", None: "unknown"}[watched.maintenance]
        body.append(f"m: node {watched.node[:8]} maintenance {maintenance} in Ironic; its "
                    f"provider in Placement: {reserved}")
    events = [f"  {event}" for event in snapshot.events]
    tail = ["", KEYS]

    def rows(parts: list[str]) -> int:
        return sum(max(1, -(-len(line) // width)) for part in parts
                   for line in part.split("\n"))

    if height is not None:
        fixed = rows(head) + rows(body) + rows(tail) + 2  # "", "recent:"
        if fixed + rows(services) + 1 > height:
            services = ["services: " + ", ".join(s.split()[0] for s in snapshot.services) +
                        f" (URLs in {snapshot.workdir}/state.json)"]
        events = events[-max(1, height - fixed - rows(services)):]
    return "\n".join(head + services + body + ["", "recent:"] + events + tail)
