"""Benchmark hashring.HashRing against tooz.hashring.HashRing, side by side.

Prints, for both rings in one run:
  * balance: busiest member / mean over random UUID keys at 3..100 members,
    mean and worst over several seeds, beside the "floor": the same figure
    for an ideal assignment drawing each key's owner uniformly at random,
    i.e. the sampling noise no per-key scheme can beat;
  * movement: keys that change owner when one member joins or leaves, as a
    share of the ideal 1/(n+1) or 1/n, and keys moved between two members
    that both stayed;
  * speed: single get_nodes lookups per second, a bulk assignment of
    100,000 keys among 50 members (tooz has no bulk call: a get_nodes loop),
    and ring build time;
  * bounded loads (hashring.bounded_assign, opt-in) at each --max-loads
    factor c on the same keys and rings: busiest/mean, keys moved on join
    and leave and how many of them moved between two members that both
    stayed, other keys moved when one key is added or removed (an Ironic
    node enrolled or deleted), and the bulk time for 100,000 keys among 50
    members.

Run from the repository root:
    .venv/bin/python -m bench.ring_bench [--seeds 5] [--max-loads 1.02,1.05,1.10]
"""

from __future__ import annotations

import argparse
import random
import statistics
import time
import uuid

import tooz
from tooz import hashring as tooz_hashring

import hashring
from bench.common import machine_facts

SIZES = (3, 5, 10, 20, 50, 100)


def ours(members):
    return hashring.HashRing(members)


def theirs(members):
    return tooz_hashring.HashRing(members)  # tooz defaults: 32 md5 tokens


def keys_for(seed, count):
    rnd = random.Random(seed)
    return [str(uuid.UUID(int=rnd.getrandbits(128), version=4)).encode()
            for _ in range(count)]


def members_for(seed, n):
    return [f"compute-{seed}-{i}" for i in range(n)]


def assign(ring, keys):
    if isinstance(ring, hashring.HashRing):
        return ring.assign(keys)
    return {k: next(iter(ring.get_nodes(k))) for k in keys}


def busiest(owners, n):
    counts = {}
    for owner in owners.values():
        counts[owner] = counts.get(owner, 0) + 1
    return max(counts.values()) * n / len(owners)


def floor(seed, n, count):
    rnd = random.Random(seed ^ 0x5EED)
    return busiest({i: rnd.randrange(n) for i in range(count)}, n)


def balance(seeds, count):
    print(f"\n== Balance: busiest/mean over {count} UUID keys, "
          f"{len(seeds)} seeds (mean / worst)")
    print(f"{'members':>8} {'computed':>16} {'tooz 32 md5':>16} "
          f"{'floor (ideal)':>16}")
    for n in SIZES:
        rows = {"ours": [], "tooz": [], "floor": []}
        for seed in seeds:
            keys = keys_for(seed, count)
            names = members_for(seed, n)
            rows["ours"].append(busiest(assign(ours(names), keys), n))
            rows["tooz"].append(busiest(assign(theirs(names), keys), n))
            rows["floor"].append(floor(seed, n, count))
        print(f"{n:>8} " + " ".join(
            f"{statistics.mean(v):>8.3f} /{max(v):>6.3f}"
            for v in rows.values()))


def movement(seeds, count, sizes=(10, 50)):
    print(f"\n== Movement: keys moved / ideal share, {count} keys, "
          f"{len(seeds)} seeds (mean / worst); stayer->stayer moves")
    print(f"{'members':>8} {'ring':>9} {'join':>16} {'leave':>16} "
          f"{'stayer moves':>13}")
    for n in sizes:
        for label, make in (("computed", ours), ("tooz", theirs)):
            joins, leaves, stray = [], [], 0
            for seed in seeds:
                keys = keys_for(seed, count)
                names = members_for(seed, n)
                base = assign(make(names), keys)
                grown = assign(make(names + [f"new-{seed}"]), keys)
                leaver = names[seed % n]
                shrunk = assign(make([m for m in names if m != leaver]), keys)
                moved_in = [k for k in keys if base[k] != grown[k]]
                moved_out = [k for k in keys if base[k] != shrunk[k]]
                joins.append(len(moved_in) / count * (n + 1))
                leaves.append(len(moved_out) / count * n)
                stray += sum(1 for k in moved_in if grown[k] != f"new-{seed}")
                stray += sum(1 for k in moved_out if base[k] != leaver)
            print(f"{n:>8} {label:>9} "
                  f"{statistics.mean(joins):>8.3f} /{max(joins):>6.3f} "
                  f"{statistics.mean(leaves):>8.3f} /{max(leaves):>6.3f} "
                  f"{stray:>13}")


def rate(func, *args, repeat=3):
    """The best of ``repeat`` timings of ``func(*args)``, seconds."""
    best = float("inf")
    for _ in range(repeat):
        start = time.perf_counter()
        func(*args)
        best = min(best, time.perf_counter() - start)
    return best


def lookups(ring, keys):
    return [ring.get_nodes(k) for k in keys]


def speed():
    print("\n== Speed (best of 3)")
    keys = keys_for(1, 100_000)
    single = keys[:20_000]
    print(f"{'members':>8} {'ring':>9} {'build s':>9} "
          f"{'get_nodes/s':>12} {'bulk 100k s':>12}")
    for n in (3, 50, 100):
        names = members_for(0, n)
        for label, make in (("computed", ours), ("tooz", theirs)):
            build = rate(make, names)
            ring = make(names)
            lookup = rate(lookups, ring, single)
            bulk = rate(assign, ring, keys)
            print(f"{n:>8} {label:>9} {build:>9.4f} "
                  f"{len(single) / lookup:>12,.0f} {bulk:>12.3f}")


def machine():
    facts = machine_facts()
    print(f"nproc={facts['nproc']} cpu={facts['cpu']!r} "
          f"python={facts['python']} tooz={tooz_version()}")


def tooz_version():
    try:
        from importlib.metadata import version
        return version("tooz")
    except Exception:  # the figure is informative only
        return getattr(tooz, "__version__", "?")


def bounded_balance(seeds, count, factors):
    print(f"\n== Bounded loads balance: busiest/mean over {count} UUID "
          f"keys, {len(seeds)} seeds (mean / worst)")
    print(f"{'members':>8} " + " ".join(f"{'c=' + str(c):>16}"
                                        for c in factors))
    for n in SIZES:
        rows = {c: [] for c in factors}
        for seed in seeds:
            keys = keys_for(seed, count)
            ring = ours(members_for(seed, n))
            for c in factors:
                rows[c].append(busiest(hashring.bounded_assign(ring, keys, c),
                                       n))
        print(f"{n:>8} " + " ".join(
            f"{statistics.mean(v):>8.3f} /{max(v):>6.3f}"
            for v in rows.values()))


def bounded_movement(seeds, count, factors, sizes=(3, 10, 50, 100)):
    print(f"\n== Bounded loads movement: keys moved / ideal share, {count} "
          f"keys, {len(seeds)} seeds (mean / worst); keys moved between "
          f"two members that both stayed, per join or leave (mean / worst)")
    print(f"{'members':>8} {'c':>5} {'join':>16} {'leave':>16} "
          f"{'stayer join':>14} {'stayer leave':>14}")
    for n in sizes:
        stats = {c: ([], [], [], []) for c in factors}
        for seed in seeds:
            keys = keys_for(seed, count)
            names = members_for(seed, n)
            newcomer, leaver = f"new-{seed}", names[seed % n]
            rings = (ours(names), ours(names + [newcomer]),
                     ours([m for m in names if m != leaver]))
            for c in factors:
                base, grown, shrunk = (hashring.bounded_assign(r, keys, c)
                                       for r in rings)
                moved_in = [k for k in keys if base[k] != grown[k]]
                moved_out = [k for k in keys if base[k] != shrunk[k]]
                joins, leaves, stay_in, stay_out = stats[c]
                joins.append(len(moved_in) / count * (n + 1))
                leaves.append(len(moved_out) / count * n)
                stay_in.append(sum(1 for k in moved_in
                                   if grown[k] != newcomer))
                stay_out.append(sum(1 for k in moved_out
                                    if base[k] != leaver))
        for c in factors:
            joins, leaves, stay_in, stay_out = stats[c]
            print(f"{n:>8} {c:>5} "
                  f"{statistics.mean(joins):>8.3f} /{max(joins):>6.3f} "
                  f"{statistics.mean(leaves):>8.3f} /{max(leaves):>6.3f} "
                  f"{statistics.mean(stay_in):>7.1f} /{max(stay_in):>5} "
                  f"{statistics.mean(stay_out):>7.1f} /{max(stay_out):>5}")


def bounded_churn(seeds, count, factors, sizes=(10, 50, 100), per_seed=5):
    """Other keys changing owner when one key joins or leaves the set.

    A member's cap is ceil(c * K * w / W): most single-key changes leave
    every cap as it is, but one in about n / c steps all of them by one.
    ``count`` keys with c * count / n whole (10,000 with the default
    factors and sizes) sit right at a step, so "added" starts from
    count - 1 keys (caps unchanged), "removed" from count (caps
    unchanged) and "cap step" adds to count keys (every cap + 1).
    """
    print(f"\n== Bounded loads, one key added or removed (node enrolled or "
          f"deleted): other keys changing owner among ~{count}, "
          f"{len(seeds)} seeds x {per_seed} keys (mean / worst); "
          f"the default ring moves none")
    print(f"{'members':>8} {'c':>5} {'key added':>14} {'key removed':>14} "
          f"{'cap step':>14}")
    for n in sizes:
        stats = {c: ([], [], []) for c in factors}
        for seed in seeds:
            keys = keys_for(seed, count)
            extra = keys_for(seed + 1_000_000, per_seed)
            ring = ours(members_for(seed, n))
            for c in factors:
                full = hashring.bounded_assign(ring, keys, c)
                short = hashring.bounded_assign(ring, keys[:-1], c)
                added, removed, stepped = stats[c]
                for key in extra:
                    after = hashring.bounded_assign(ring, keys[:-1] + [key], c)
                    added.append(sum(1 for k in short
                                     if after[k] != short[k]))
                    after = hashring.bounded_assign(ring, keys + [key], c)
                    stepped.append(sum(1 for k in keys if after[k] != full[k]))
                for gone in keys[:per_seed]:
                    after = hashring.bounded_assign(
                        ring, [k for k in keys if k != gone], c)
                    removed.append(sum(1 for k in after
                                       if after[k] != full[k]))
        for c in factors:
            print(f"{n:>8} {c:>5} " + " ".join(
                f"{statistics.mean(v):>7.1f} /{max(v):>5}"
                for v in stats[c]))


def bounded_speed(factors):
    print("\n== Bounded loads speed: 100,000 keys among 50 members "
          "(best of 3)")
    keys = keys_for(1, 100_000)
    ring = ours(members_for(0, 50))
    print(f"{'c':>8} {'bulk 100k s':>12}")
    print(f"{'default':>8} {rate(ring.assign, keys):>12.3f}")
    for c in factors:
        took = rate(hashring.bounded_assign, ring, keys, c)
        print(f"{c:>8} {took:>12.3f}")


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0], allow_abbrev=False)
    parser.add_argument("--seeds", type=int, default=5)
    parser.add_argument("--keys", type=int, default=10_000)
    parser.add_argument("--max-loads", default="1.02,1.05,1.10",
                        help="bounded-loads factors c, comma-separated")
    args = parser.parse_args()
    seeds = list(range(args.seeds))
    factors = [float(c) for c in args.max_loads.split(",") if c]
    machine()
    balance(seeds, args.keys)
    movement(seeds, args.keys)
    speed()
    if factors:
        bounded_balance(seeds, args.keys, factors)
        bounded_movement(seeds, args.keys, factors)
        bounded_churn(seeds, args.keys, factors)
        bounded_speed(factors)


if __name__ == "__main__":
    main()
