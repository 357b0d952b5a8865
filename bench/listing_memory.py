"""A daemon's RSS across full listings of 50,000 nodes, in this process (issue 27 item 2).

The catalog (:class:`computed.baremetal.catalog.NodeCatalog`) lists through the real
:class:`computed_ironic.IronicDriver` (keystoneauth, pages of ``?fields=``, marker paging, the
driver's parsing) from a fake Ironic in a child process that serves ``--nodes`` nodes in pages
of 1,000 (bench/daemon_memory.py's population), from a thread of its own as the daemon's
listing thread does. Prints the RSS after the imports, after the first listing, and after each
of ``--rounds`` listings again (a fleet round that lists: every node unchanged, as in a steady
state; ``--change`` of them changed each time), and the peak of Python's allocations during the
last one (:mod:`tracemalloc`, with ``--trace``).

Run it under ``MALLOC_ARENA_MAX=2`` to see what glibc's per-thread arenas keep.

    .venv/bin/python -m bench.listing_memory [--nodes 50000] [--rounds 5] [--change 0]
"""

from __future__ import annotations

import argparse
import gc
import http.server
import json
import os
import subprocess
import sys
import threading
import time
import tracemalloc
from urllib import parse

import psutil

PAGE = 1000


def _rss() -> float:
    return psutil.Process().memory_info().rss / 2**20


def serve(count: int, port_file: str) -> None:
    """The fake Ironic: the versions document and ``GET /v1/nodes`` by marker."""
    from bench.daemon_memory import listing_page

    nodes = json.loads(listing_page(count))["nodes"]
    for record in nodes:
        record.pop("links", None)
    index = {record["uuid"]: i for i, record in enumerate(nodes)}
    listings = [0]

    class Handler(http.server.BaseHTTPRequestHandler):
        protocol_version = "HTTP/1.1"

        def log_message(self, *args):
            pass

        def _answer(self, body: dict) -> None:
            data = json.dumps(body).encode()
            self.send_response(200)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(data)))
            self.end_headers()
            self.wfile.write(data)

        def do_GET(self):  # noqa: N802 (http.server's name)
            url = parse.urlsplit(self.path)
            base = f"http://{self.headers['Host']}"
            if url.path.rstrip("/") in ("", "/v1"):
                version = {"id": "v1", "status": "CURRENT", "version": "1.99",
                           "min_version": "1.1",
                           "links": [{"href": f"{base}/v1/", "rel": "self"}]}
                return self._answer({"versions": [version], "default_version": version}
                                    if url.path.rstrip("/") == "" else
                                    {"id": "v1", "version": version,
                                     "links": version["links"]})
            query = dict(parse.parse_qsl(url.query))
            start = index[query["marker"]] + 1 if "marker" in query else 0
            if start == 0:
                listings[0] += 1
                change = int(os.environ.get("LISTING_MEMORY_CHANGE", "0"))
                for i in range(change):  # a few nodes changed since the last listing
                    record = nodes[(listings[0] * change + i) % len(nodes)]
                    record["power_state"] = ("power on" if record["power_state"] == "power off"
                                             else "power off")
            limit = int(query.get("limit", PAGE))
            page = nodes[start:start + limit]
            body = {"nodes": page}
            if len(page) == limit:
                body["next"] = f"{base}/v1/nodes?marker={page[-1]['uuid']}&limit={limit}"
            self._answer(body)

    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    with open(port_file + ".tmp", "w") as f:
        f.write(str(server.server_address[1]))
    os.rename(port_file + ".tmp", port_file)
    server.serve_forever()


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0], allow_abbrev=False)
    parser.add_argument("--nodes", type=int, default=50000)
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--change", type=int, default=0)
    parser.add_argument("--trace", action="store_true")
    parser.add_argument("--threads", type=int, default=1,
                        help="listings take turns among this many threads (glibc arenas)")
    parser.add_argument("--serve", help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    if args.serve:
        serve(args.nodes, args.serve)
        return 0

    import computed.cmd.daemon  # noqa: F401  (the daemon's imports: the floor)
    from computed.baremetal.catalog import NodeCatalog
    from computed_ironic import IronicDriver

    floor = _rss()
    port_file = f"/tmp/listing-memory-{os.getpid()}.port"
    env = dict(os.environ, LISTING_MEMORY_CHANGE=str(args.change))
    env.pop("MALLOC_ARENA_MAX", None)
    child = subprocess.Popen([sys.executable, "-m", "bench.listing_memory", "--nodes",
                              str(args.nodes), "--serve", port_file], env=env)
    try:
        while not os.path.exists(port_file):
            time.sleep(0.1)
        with open(port_file) as f:
            port = int(f.read())
        driver = IronicDriver.for_endpoint(f"http://127.0.0.1:{port}", timeout=120)
        catalog = NodeCatalog(driver)

        print(f"{args.nodes} nodes, {args.threads} listing thread(s), MALLOC_ARENA_MAX="
              f"{os.environ.get('MALLOC_ARENA_MAX', '-')}, load {os.getloadavg()[0]:.1f}")
        print(f"  imports                 {floor:6.1f} MB")
        steps: list[tuple[str, float]] = []
        done = threading.Event()
        go = [threading.Semaphore(0) for _ in range(args.threads)]

        def listing_thread(turn):
            for step in range(turn, args.rounds + 1, args.threads):
                go[turn].acquire()
                if args.trace and step == args.rounds:
                    tracemalloc.start()
                started = time.monotonic()
                view = catalog.refresh()
                took = time.monotonic() - started
                peak = None
                if args.trace and step == args.rounds:
                    peak = tracemalloc.get_traced_memory()[1] / 2**20
                    tracemalloc.stop()
                del view
                gc.collect()
                steps.append((took, _rss(), peak))
                done.set()

        # One long-lived listing thread, as in the daemon (glibc gives it an arena of its own);
        # with --threads, listings take turns among several.
        for turn in range(args.threads):
            threading.Thread(target=listing_thread, args=(turn,), name=f"listing-{turn}",
                             daemon=True).start()
        for step in range(args.rounds + 1):
            done.clear()
            go[step % args.threads].release()
            done.wait()
            took, rss, peak = steps[-1]
            name = "first listing" if step == 0 else f"listing again {step}"
            extra = "" if peak is None else f", Python peak {peak:.1f} MB"
            print(f"  {name:22s}  {rss:6.1f} MB  ({took:.1f} s{extra})")
        assert len(catalog.view()) == args.nodes
        print(f"  load at the end {os.getloadavg()[0]:.1f}")
    finally:
        child.terminate()
        child.wait()
        if os.path.exists(port_file):
            os.unlink(port_file)
    return 0


if __name__ == "__main__":
    sys.exit(main())
