"""Scheduling decision benchmark (issue 26): the time one build spends deciding among Placement's
candidates with 10 filters and 3 weighers, for a 10,000-node fleet, beside Placement's query time.

The decision (pure, no I/O) is what :func:`computed.instances.scheduler.choose` does for a build:
make the Nova-shaped host state of every candidate, run the enabled filters on each, weigh the
survivors, order them. Its candidates are **synthetic** (``NodeFacts`` as
:mod:`computed.scheduling.candidates` makes them from Placement's answer: a resource class,
capability traits and the capabilities read back from them): the decision's cost depends on the
number of candidates and the filters, not on where the facts came from. Two sizes: ``--limit``
candidates (1,000 by default: Nova's and computed's ``[scheduler] max_placement_results``) and
every node of the fleet (10,000: the worst case, a request Placement narrows down not at all).

The filters: the built-in ComputeCapabilitiesFilter (the flavor has three capability operators),
JsonFilter (a ``query`` hint), AvailabilityZoneFilter, AllHostsFilter, and six downstream-style
filters defined below as operators write them for Nova (plain classes reading ``stats``,
``properties``, the flavor's extra specs, hints and project). The weighers: the three built-in
ones (PropertyWeigher on a capability, ConductorGroupSpreadWeigher, FewestTraitsWeigher, every
multiplier 1). ``--runs`` runs of ``--builds`` decisions each; per run p50/p95/max, and the
median of the runs' p95.

With ``--placement``, also Placement's side: a real Placement (and PostgreSQL where available)
is started, ``--nodes`` providers are created in it with the same traits (one unit of
CUSTOM_BENCH each), and ``GET /allocation_candidates`` for one exact capability (what a build
asks, ``limit`` = ``--limit``) is timed ``--builds`` times per run, answer parsed into facts
included (:func:`computed.scheduling.candidates.read`); the decision is then also timed on those
real candidates.

    .venv/bin/python -m bench.scheduling_bench [--placement] [--nodes 10000 --limit 1000]
"""

from __future__ import annotations

import os
import random
import statistics
import sys
import time
import uuid as uuidlib
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

from bench.common import (
    arguments,
    command,
    fmt,
    machine,
    publish,
    say,
    section_head,
    stack_for,
    workdir_or_tmp,
)
from computed.instances import scheduler
from computed.placement.http import PlacementHTTP
from computed.providers.capabilities import capability_traits
from computed.scheduling import candidates, loader
from computed.scheduling.host_state import NodeFacts, RequestSpec
from computed.scheduling.pipeline import Pipeline
from computed.scheduling.weighers import WeigherSettings

HEADING = "## Scheduling decision per build, 10 filters and 3 weighers (issue 26)"
RC = "CUSTOM_BENCH"
MODULE = "bench.scheduling_bench"


# --- six downstream-style filters, as operators write them for Nova ----------------------------

class RaidLevelFilter:
    def host_passes(self, host_state, spec_obj):
        wanted = spec_obj.flavor.extra_specs.get("raid:level")
        return not wanted or host_state.stats.get("raid_level") in wanted.split(",")


class RackFilter:
    def host_passes(self, host_state, spec_obj):
        rack = spec_obj.get_scheduler_hint("not_rack")
        return not rack or host_state.stats.get("rack") != rack


class CpuArchFilter:
    def host_passes(self, host_state, spec_obj):
        arch = spec_obj.flavor.extra_specs.get("cpu_arch_required")
        return not arch or host_state.stats.get("cpu_arch") == arch


class ProjectIsolationFilter:
    isolated = {"quarantine"}

    def host_passes(self, host_state, spec_obj):
        if spec_obj.project_id in self.isolated:
            return host_state.stats.get("isolated") == "yes"
        return host_state.stats.get("isolated") != "yes"


class DiskCountFilter:
    def host_passes(self, host_state, spec_obj):
        wanted = int(spec_obj.flavor.extra_specs.get("disk:min_count", 0))
        return int(host_state.stats.get("disk_count", 0)) >= wanted


class NotFailedFilter:
    def host_passes(self, host_state, spec_obj):
        return host_state.failed_builds == 0 and not host_state.service.get("disabled")


SELF = f"{MODULE}."
FILTERS = (["computed.scheduling.filters.all_filters"],
           ["AvailabilityZoneFilter", "ComputeCapabilitiesFilter", "JsonFilter", "AllHostsFilter",
            SELF + "RaidLevelFilter", SELF + "RackFilter", SELF + "CpuArchFilter",
            SELF + "ProjectIsolationFilter", SELF + "DiskCountFilter", SELF + "NotFailedFilter"])
WEIGHERS = ["computed.scheduling.weighers.all_weighers"]
SETTINGS = WeigherSettings(property_weigher_key="capabilities:priority",
                           property_weight_multiplier=1.0,
                           conductor_group_spread_multiplier=1.0, fewest_traits_multiplier=1.0)
#: The flavor of every build: one exact capability (a trait in Placement), three operators.
EXTRA_SPECS = {f"resources:{RC}": "1", "capabilities:boot_mode": "uefi",
               "capabilities:memory_gb": ">= 128", "capabilities:cpu_flags": "<in> avx2",
               "capabilities:raid_level": "<or> 1 <or> 5", "raid:level": "1,5",
               "disk:min_count": "2"}
HINTS = {"query": '["and", [">=", "$stats.disk_count", "2"], ["=", "$hypervisor_type", '
                  '"ironic"]]', "not_rack": "r9"}


def pipeline() -> Pipeline:
    return Pipeline(loader.filters(*FILTERS), loader.weighers(WEIGHERS, SETTINGS),
                    time_budget=None)


def capabilities_of(rand: random.Random) -> dict[str, str]:
    return {"boot_mode": rand.choice(["uefi", "uefi", "bios"]),
            "memory_gb": rand.choice(["64", "128", "256", "512"]),
            "cpu_flags": "/".join(sorted(rand.sample(["avx2", "aes", "sse4", "avx512"], 2))),
            "raid_level": rand.choice(["0", "1", "5"]),
            "rack": f"r{rand.randint(1, 20)}", "disk_count": str(rand.randint(1, 12)),
            "priority": str(rand.randint(0, 9)),
            "isolated": "yes" if rand.random() < 0.02 else "no"}


def fleet(count: int, seed: int = 26) -> list[NodeFacts]:
    rand = random.Random(seed)
    nodes = []
    for index in range(count):
        capabilities = capabilities_of(rand)
        text = ",".join(f"{k}:{v}" for k, v in capabilities.items())
        nodes.append(NodeFacts(str(uuidlib.UUID(int=index + 1)), RC,
                               traits=frozenset(capability_traits(text)),
                               capabilities=capabilities,
                               properties={"cpu_arch": "x86_64"},
                               conductor_group=f"g{index % 8}"))
    return nodes


def request_spec() -> RequestSpec:
    return RequestSpec({"id": "bench", "name": "bench", "extra_specs": EXTRA_SPECS},
                       hints=HINTS, project_id="bench", instance_uuid=str(uuidlib.uuid4()),
                       resource_class=RC)


def decision_times(pipe: Pipeline, facts: list[NodeFacts], builds: int,
                   seed: int) -> tuple[list[float], int]:
    """Seconds per decision over ``facts`` for ``builds`` builds; how many passed the last."""
    rand = random.Random(seed)
    times = []
    passed = 0
    for _ in range(builds):
        spec = request_spec()
        began = time.perf_counter()
        decision = scheduler.choose(pipe, facts, spec, rand)
        times.append(time.perf_counter() - began)
        passed = len(decision.hosts)
    return times, passed


def pct(values: list[float], q: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(round(q * (len(ordered) - 1))))]


def summary(values: list[float]) -> dict[str, float]:
    return {"p50": statistics.median(values) * 1000, "p95": pct(values, 0.95) * 1000,
            "max": max(values) * 1000}


# --- Placement ---------------------------------------------------------------------------------

def seed_placement(http: PlacementHTTP, nodes: list[NodeFacts], threads: int = 8) -> float:
    """Create one provider per node (one unit of RC, the node's traits); seconds taken."""
    began = time.monotonic()
    _ok(http.request("PUT", f"/resource_classes/{RC}"), RC)
    for trait in sorted(set().union(*(n.traits for n in nodes))):
        _ok(http.request("PUT", f"/traits/{trait}"), trait)

    def one(node: NodeFacts) -> None:
        _ok(http.request("POST", "/resource_providers",
                         body={"uuid": node.uuid, "name": node.uuid}), node.uuid)
        _ok(http.request("PUT", f"/resource_providers/{node.uuid}/inventories",
                         body={"resource_provider_generation": 0,
                               "inventories": {RC: {"total": 1}}}), node.uuid)
        _ok(http.request("PUT", f"/resource_providers/{node.uuid}/traits",
                         body={"resource_provider_generation": 1,
                               "traits": sorted(node.traits)}), node.uuid)

    with ThreadPoolExecutor(threads) as pool:
        for done, _ in enumerate(pool.map(one, nodes), 1):
            if done % 2000 == 0:
                say(f"  {done} providers")
    return time.monotonic() - began


def _ok(resp, what: str) -> None:
    if resp.status_code >= 300:
        raise RuntimeError(f"Placement refused {what}: {resp.status_code} {resp.text[:300]}")


def placement_only_adapter(stack, work: Path):
    """A keystoneauth adapter for the stack's Placement (a stack without ZooKeeper: the
    configuration still needs a [coordination] backend_url, which nothing here uses)."""
    from oslo_config import cfg

    from computed import conf as computed_conf
    from computed.runtime import keystone
    path = work / "bench-client.conf"
    path.write_text(stack.computed_conf(host="bench", extra="[coordination]\n"
                                        "backend_url = zookeeper://127.0.0.1:1\n"))
    conf = cfg.ConfigOpts()
    computed_conf.register_opts(conf)
    conf(["--config-file", str(path)], project="computed")
    return keystone.load_adapter(conf, "placement")


def placement_times(adapter, required: frozenset[str], limit: int,
                    builds: int) -> tuple[list[float], list[NodeFacts]]:
    times = []
    facts: list[NodeFacts] = []
    for _ in range(builds):
        began = time.perf_counter()
        facts = candidates.read(adapter, RC, sorted(required), limit=limit)
        times.append(time.perf_counter() - began)
    return times, facts


# --- the run -----------------------------------------------------------------------------------

def main(argv: list[str] | None = None) -> int:
    parser = arguments(__doc__)
    parser.add_argument("--nodes", type=int, default=10000)
    parser.add_argument("--limit", type=int, default=1000)
    parser.add_argument("--builds", type=int, default=50)
    parser.add_argument("--runs", type=int, default=3)
    parser.add_argument("--placement", action="store_true",
                        help="also time a real Placement's allocation candidates query")
    args = parser.parse_args(argv)
    pipe = pipeline()
    nodes = fleet(args.nodes)
    from computed.instances import flavor_specs
    required = flavor_specs.placement_request(EXTRA_SPECS).required
    # What Placement returns for the exact capability: the nodes with its trait, limit-many.
    eligible = [n for n in nodes if required <= n.traits]
    sizes = {f"{min(args.limit, len(eligible))} candidates (limit {args.limit})":
             eligible[:args.limit],
             f"{len(nodes)} candidates (every node)": nodes}
    say(f"{len(pipe.filters)} filters: {', '.join(type(f).__name__ for f in pipe.filters)}")
    say(f"{len(pipe.weighers)} weighers: {', '.join(type(w).__name__ for w in pipe.weighers)}")
    rows: dict[str, list[dict[str, float]]] = {}
    passed: dict[str, int] = {}
    for run in range(args.runs):
        for label, facts in sizes.items():
            times, passed[label] = decision_times(pipe, facts, args.builds, seed=run)
            rows.setdefault(label, []).append(summary(times))
            say(f"run {run + 1}, decision over {label}: "
                + ", ".join(f"{k} {v:.2f} ms" for k, v in rows[label][-1].items())
                + f" ({passed[label]} passed the filters)")
    placement_rows: list[dict[str, float]] = []
    real_rows: list[dict[str, float]] = []
    seeded = None
    real_count = 0
    if args.placement:
        work = workdir_or_tmp(args.workdir, "scheduling-bench-")
        with stack_for(args, work, ["postgres", "placement"], prefix="scheduling",
                       keep_nodes=True) as stack:
            adapter = placement_only_adapter(stack, work)
            say(f"creating {len(nodes)} providers in Placement")
            seeded = seed_placement(PlacementHTTP(adapter), nodes)
            say(f"created in {seeded:.0f} s")
            for run in range(args.runs):
                times, facts = placement_times(adapter, required, args.limit, args.builds)
                placement_rows.append(summary(times))
                real_count = len(facts)
                say(f"run {run + 1}, Placement query ({real_count} candidates): "
                    + ", ".join(f"{k} {v:.2f} ms" for k, v in placement_rows[-1].items()))
                times, _ = decision_times(pipe, facts, args.builds, seed=run)
                real_rows.append(summary(times))
                say(f"run {run + 1}, decision over Placement's {real_count} candidates: "
                    + ", ".join(f"{k} {v:.2f} ms" for k, v in real_rows[-1].items()))

    def markdown() -> str:
        load = os.getloadavg()
        lines = section_head(HEADING, command(MODULE, argv),
                             "PostgreSQL and Placement" if args.placement else "nothing")
        lines += [f"Machine: {machine()}; load average at the end {load[0]:.2f}, {load[1]:.2f}, "
                  f"{load[2]:.2f} (1, 5, 15 min; other developers' tests were running).", "",
                  f"{args.runs} runs of {args.builds} builds; each cell is the median over the "
                  f"runs (min-max of the runs in brackets), in milliseconds per build.", "",
                  "| what | p50 | p95 | max |", "|---|---:|---:|---:|"]

        def row(label: str, runs: list[dict[str, float]]) -> str:
            cells = []
            for key in ("p50", "p95", "max"):
                values = [r[key] for r in runs]
                cells.append(f"{fmt(statistics.median(values))} "
                             f"({fmt(min(values))}-{fmt(max(values))})")
            return f"| {label} | " + " | ".join(cells) + " |"
        for label, runs in rows.items():
            lines.append(row(f"decision over {label}, synthetic", runs))
        if placement_rows:
            lines.append(row(f"Placement `GET /allocation_candidates` ({real_count} of "
                             f"{len(nodes)} providers, limit {args.limit}), parsed",
                             placement_rows))
            lines.append(row(f"decision over those {real_count} real candidates", real_rows))
        return "\n".join(lines) + "\n"

    publish(args, HEADING, markdown)
    if seeded is not None:
        say(f"(seeding Placement took {seeded:.0f} s)")
    return 0


if __name__ == "__main__":
    sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
    sys.exit(main())
