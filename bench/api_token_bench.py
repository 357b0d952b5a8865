"""Compute API token burst benchmark (issues 22 and 23): ``--requests`` concurrent
``GET /v2.1/servers/detail``, each with its own new Keystone token, against ``computed-api`` in
keystone mode.

Stack: ZooKeeper, RabbitMQ, PostgreSQL (where available) and Placement (``computed-api``
connects to them at start; no daemon is needed to list servers), and the harness's real Keystone
(:mod:`computed.testing.keystone`). ``computed-api`` runs as a process with ``[api]
auth_strategy = keystone``, ``--workers`` and ``--threads`` (``[api] workers`` and ``threads``):
keystonemiddleware's ``auth_token`` validates every token it has not seen against Keystone, with
the admin as its service user (as tests/functional/test_api_keystone.py). The project's server
list is empty: what is measured is the API taking, validating and answering the requests.

Each run first obtains ``--requests`` distinct tokens of ``member-a`` (project ``project-a``)
from Keystone, none ever sent to the API; then as many client threads, released together by a
barrier, each open a connection and send one ``GET /v2.1/servers/detail`` with its own token,
with ``--timeout`` seconds per socket operation (an answer later than that counts as
unanswered). Before the first run a few requests with other tokens warm the API up (the
middleware's own service token, version discovery) in each worker. Prints per run: answered (by
status), unanswered (why), p50/p95/max of the answer time (barrier to the last byte, answered
requests only; with some unanswered, also the p95 of all, an unanswered request counting as
never answered), the wall time of the burst, and ``uptime``; then the median of the runs' p95s
(of all requests), the machine, and the API log's ERROR and Traceback lines. With
``--direct``, each run also sends as many concurrent validations of other fresh tokens straight
to Keystone (``GET /v3/auth/tokens``), to tell Keystone's share from the API's.

    .venv/bin/python -m bench.api_token_bench [--stack-dir .services] [--runs 3] \\
        [--workers 1 --threads 16] [--requests 200 --timeout 60] [--direct]
"""

from __future__ import annotations

import http.client
import os
import statistics
import subprocess
import sys
import threading
import time
import uuid as uuidlib
from collections import Counter
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from urllib.parse import urlsplit

from keystoneauth1 import exceptions as ks_exc

from bench.common import arguments, fmt, machine, say, stack_for, wait_for_api, workdir_or_tmp
from computed import db
from computed.testing.keystone import ADMIN, MEMBER_A, PEOPLE, Keystone
from computed.testing.process import free_port
from tests.functional.daemons import Process, fleet_database

SERVICES = ["zookeeper", "rabbitmq", "postgres", "placement"]
PATH = "/v2.1/servers/detail"
#: Threads that ask Keystone for the tokens before a burst (not part of the measure).
ISSUERS = 8
TOKEN_TRIES = 5


class ApiProcess(Process):
    script = "computed-api"


@dataclass
class Burst:
    """What one burst of requests gave."""

    statuses: Counter = field(default_factory=Counter)
    failures: Counter = field(default_factory=Counter)  # why a request got no answer in time
    times: list[float] = field(default_factory=list)  # answered requests, seconds
    wall: float = 0.0

    @property
    def answered(self) -> int:
        return sum(self.statuses.values())

    @property
    def unanswered(self) -> int:
        return sum(self.failures.values())

    def pct(self, fraction: float) -> float | None:
        """Of the answered requests."""
        return _pct(self.times, fraction)

    def pct_all(self, fraction: float) -> float | None:
        """Of every request, an unanswered one counted as never answered (infinite)."""
        return _pct(self.times + [float("inf")] * self.unanswered, fraction)


def _pct(values: list[float], fraction: float) -> float | None:
    if not values:
        return None
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(round(fraction * (len(ordered) - 1))))]


def fresh_token(keystone: Keystone, who: str) -> str:
    """A new token of ``who`` (its own password authentication). The harness's Keystone keeps
    sqlite: the first authentications of a day update the user's ``last_active_at`` at once
    and may fail "database is locked" (a 500), so a 5xx is tried again, a few times."""
    for attempt in range(TOKEN_TRIES):
        try:
            return keystone.token(who)
        except ks_exc.HttpError as exc:
            if exc.http_status < 500 or attempt == TOKEN_TRIES - 1:
                raise
            time.sleep(0.5 * (attempt + 1))
    raise AssertionError("unreachable")


def fresh_tokens(keystone: Keystone, who: str, count: int) -> list[str]:
    """``count`` new tokens of ``who``, each from its own password authentication."""
    with ThreadPoolExecutor(ISSUERS) as pool:
        tokens = list(pool.map(lambda _i: fresh_token(keystone, who), range(count)))
    if len(set(tokens)) != count:
        raise RuntimeError(f"Keystone gave {len(set(tokens))} distinct tokens of {count}")
    return tokens


def get(host: str, port: int, path: str, headers: dict[str, str],
        timeout: float) -> tuple[int, float]:
    """One request on a new connection: (status, seconds to the last byte of the answer)."""
    started = time.monotonic()
    conn = http.client.HTTPConnection(host, port, timeout=timeout)
    try:
        conn.request("GET", path, headers=headers)
        response = conn.getresponse()
        response.read()
        return response.status, time.monotonic() - started
    finally:
        conn.close()


def burst(host: str, port: int, path: str, headers: list[dict[str, str]],
          timeout: float) -> Burst:
    """One request per header set, all at once (threads released by a barrier)."""
    result = Burst()
    lock = threading.Lock()
    barrier = threading.Barrier(len(headers) + 1)

    def client(own: dict[str, str]) -> None:
        try:
            barrier.wait(timeout=120)
        except threading.BrokenBarrierError:
            with lock:
                result.failures["barrier broken"] += 1
            return
        try:
            status, took = get(host, port, path, own, timeout)
        except TimeoutError:
            outcome = "timed out"
        except OSError as exc:
            outcome = type(exc).__name__
        except http.client.HTTPException as exc:
            outcome = type(exc).__name__
        else:
            outcome = f"late ({took:.0f} s)" if took > timeout else None
        with lock:
            if outcome is None:
                result.statuses[status] += 1
                result.times.append(took)
            else:
                result.failures[outcome.split(" (")[0]] += 1

    threads = [threading.Thread(target=client, args=(h,), daemon=True) for h in headers]
    for thread in threads:
        thread.start()
    barrier.wait(timeout=120)
    released = time.monotonic()
    # Every socket operation has ``timeout``; a connection trickling bytes could outlast it,
    # so the wait is bounded as a whole too.
    deadline = released + 2 * timeout + 10
    for thread in threads:
        thread.join(max(0.0, deadline - time.monotonic()))
    result.wall = time.monotonic() - released
    stuck = sum(thread.is_alive() for thread in threads)
    if stuck:
        with lock:
            result.failures["still waiting at the end"] += stuck
    return result


def uptime() -> str:
    try:
        return subprocess.run(["uptime"], capture_output=True, text=True,
                              timeout=10).stdout.strip()
    except (OSError, subprocess.SubprocessError):
        load = os.getloadavg()
        return f"load average: {load[0]:.2f}, {load[1]:.2f}, {load[2]:.2f}"


def describe(result: Burst, requests: int) -> str:
    statuses = ", ".join(f"{count} x {status}" for status, count in sorted(result.statuses.items()))
    failures = ", ".join(f"{count} {why}" for why, count in result.failures.most_common())
    return (f"{result.answered} of {requests} answered ({statuses or 'none'}), "
            f"{result.unanswered} unanswered{f' ({failures})' if failures else ''}; "
            f"answer time p50 {fmt(result.pct(0.5))} s, p95 {fmt(result.pct(0.95))} s, "
            f"max {fmt(max(result.times, default=None))} s"
            + (f" (p95 of all {requests}: {seconds(result.pct_all(0.95))})"
               if result.unanswered else "")
            + f"; burst wall {result.wall:.2f} s")


def seconds(value: float | None) -> str:
    """A time, "never" for an unanswered request's (infinite)."""
    return "never answered" if value == float("inf") else f"{fmt(value)} s"


def log_problems(path) -> tuple[int, int, list[str]]:
    """(ERROR lines, Traceback lines, the first few ERROR lines) of a log."""
    try:
        lines = path.read_text(errors="replace").splitlines()
    except OSError:
        return 0, 0, []
    errors = [line for line in lines if " ERROR " in line]
    return len(errors), sum("Traceback" in line for line in lines), errors[:5]


def main(argv: list[str] | None = None) -> int:
    parser = arguments(__doc__)
    parser.add_argument("--runs", type=int, default=1)
    parser.add_argument("--requests", type=int, default=200)
    parser.add_argument("--workers", type=int, default=1, help="[api] workers")
    parser.add_argument("--threads", type=int, default=16, help="[api] threads")
    parser.add_argument("--timeout", type=float, default=60.0,
                        help="client timeout, seconds (each socket operation, and the answer)")
    parser.add_argument("--direct", action="store_true",
                        help="also validate as many fresh tokens straight against Keystone")
    args = parser.parse_args(argv)
    work = workdir_or_tmp(args.workdir, "api-token-bench-")
    prefix = f"tb{uuidlib.uuid4().hex[:6]}"
    with stack_for(args, work, SERVICES, prefix, keep_nodes=True) as stack:
        keystone = Keystone(work / "keystone")
        api = None
        try:
            say("starting keystone")
            keystone.start()
            if "postgres" in stack:
                database = stack["postgres"].create_database(f"token_{prefix}")
                stack.save()  # dropped with the stack, borrowed or not
            else:
                database = fleet_database(work)
            db.sync(database)
            port = free_port()
            api = ApiProcess(stack, work, "api", group=f"r{prefix}", database=database, extra=(
                f"[api]\nbind_host = 127.0.0.1\nbind_port = {port}\nauth_strategy = keystone\n"
                f"workers = {args.workers}\nthreads = {args.threads}\n"
                f"[keystone_authtoken]\nwww_authenticate_uri = {keystone.auth_url}\n"
                f"auth_url = {keystone.auth_url}\nauth_type = password\nusername = {ADMIN}\n"
                f"password = {keystone.password(ADMIN)}\nproject_name = {PEOPLE[ADMIN][0]}\n"
                "user_domain_id = default\nproject_domain_id = default\n")).start()
            base = f"http://127.0.0.1:{port}"
            wait_for_api(base, lambda: api.alive, api.log)
            say(f"computed-api at {base}: keystone mode, [api] workers {args.workers}, "
                f"threads {args.threads}; database {database.split('://')[0]}; log {api.log}")

            # Warm-up, not measured: each worker's middleware gets its service token and
            # discovers Keystone's versions (connections spread over workers by the kernel).
            for token in fresh_tokens(keystone, MEMBER_A, 4 * args.workers):
                status, _seconds = get("127.0.0.1", port, PATH, {"X-Auth-Token": token}, 60)
                if status != 200:
                    raise RuntimeError(f"warm-up GET {PATH}: {status} (log: {api.log})")

            ks = urlsplit(keystone.url)
            service_token = fresh_token(keystone, ADMIN) if args.direct else ""
            p95s: list[float] = []
            direct_p95s: list[float] = []
            for run in range(1, args.runs + 1):
                started = time.monotonic()
                tokens = fresh_tokens(keystone, MEMBER_A, args.requests)
                say(f"run {run}: {len(tokens)} distinct new tokens from Keystone in "
                    f"{time.monotonic() - started:.1f} s; {uptime()}")
                result = burst("127.0.0.1", port, PATH,
                               [{"X-Auth-Token": t, "Accept": "application/json"}
                                for t in tokens], args.timeout)
                say(f"run {run}: {args.requests} concurrent GET {PATH}: "
                    f"{describe(result, args.requests)}; {uptime()}")
                p95s.append(result.pct_all(0.95))
                if args.direct:
                    others = fresh_tokens(keystone, MEMBER_A, args.requests)
                    direct = burst(ks.hostname, ks.port, "/v3/auth/tokens",
                                   [{"X-Auth-Token": service_token, "X-Subject-Token": t}
                                    for t in others], args.timeout)
                    say(f"run {run}: {args.requests} concurrent validations straight to "
                        f"Keystone: {describe(direct, args.requests)}")
                    direct_p95s.append(direct.pct_all(0.95))
                time.sleep(2)
            say(f"median of the {args.runs} runs' p95 (of all requests): "
                f"{seconds(statistics.median(p95s))}"
                + (f"; straight to Keystone: {seconds(statistics.median(direct_p95s))}"
                   if direct_p95s else ""))
            errors, tracebacks, first = log_problems(api.log)
            say(f"computed-api log: {errors} ERROR lines, {tracebacks} tracebacks")
            for line in first:
                say(f"  {line[:300]}")
            say(f"[api] workers {args.workers}, threads {args.threads}; machine: {machine()}; "
                f"{uptime()}")
            return 0
        finally:
            try:
                if api is not None:
                    api.stop(60)  # SIGTERM: the parent stops its workers too
            finally:
                if api is not None:
                    api.ensure_stopped()
                keystone.stop()


if __name__ == "__main__":
    sys.exit(main())
