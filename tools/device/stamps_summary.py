#!/usr/bin/env python3
"""Where the routed experts' batch-1 GEMMs spend their time, block by block.

Reads the CSV that a build with tools/device/expert_gemm_stamps.patch writes at exit
(STAMP_OUT, default /tmp/stamps.csv): one row per block of the last 64 up (mode 0) and down
(mode 1) launches, with %globaltimer stamps t0 (entry), t1 (past the grid dependency wait),
t2 (the first weight stage landed), t3 (the k loop done) and t4 (the epilogue done), in ns.
Prints, per mode, the medians over the launches of: the kernel's span, when blocks start and
leave their wait, how long the first stage takes to land, the k loop, the epilogue, and how
far apart the blocks finish (the tail).
"""
import argparse
import collections
import csv
import statistics


def pct(values, q):
    s = sorted(values)
    return s[min(len(s) - 1, int(q * (len(s) - 1) + 0.5))]


def summarise(rows):
    """rows: one launch's blocks (dicts of ints). The launch's phases in us."""
    live = [r for r in rows if r["t4"]]  # blocks past the tile count exit before any stamp
    if not live:
        return None
    t_start = min(r["t0"] for r in rows)
    us = lambda ns: ns / 1000.0
    loops = [r["t3"] - r["t2"] for r in live]
    return {
        "span": us(max(r["t4"] for r in live) - t_start),
        "start spread": us(max(r["t0"] for r in live) - t_start),
        "wait end (median)": us(statistics.median(r["t1"] - t_start for r in live)),
        "first stage (median)": us(statistics.median(r["t2"] - r["t1"] for r in live)),
        "k loop (median)": us(statistics.median(loops)),
        "k loop (p10..p90)": (us(pct(loops, 0.1)), us(pct(loops, 0.9))),
        "epilogue (median)": us(statistics.median(r["t4"] - r["t3"] for r in live)),
        "first block done": us(min(r["t4"] for r in live) - t_start),
        "tail (last - median done)": us(max(r["t4"] for r in live) -
                                         statistics.median(r["t4"] for r in live)),
        "blocks": len(live),
        "SMs": len({r["smid"] for r in live}),
    }


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("csv")
    ap.add_argument("--last", type=int, default=32, help="launches per mode (the latest)")
    args = ap.parse_args()
    launches = collections.defaultdict(list)
    with open(args.csv) as f:
        for r in csv.DictReader(f):
            r = {k: int(v) for k, v in r.items()}
            if r["t0"]:
                launches[(r["mode"], r["launch"])].append(r)
    for mode, name in ((0, "up (gate/up + swiglu)"), (1, "down (+ combine)")):
        keys = sorted(k for k in launches if k[0] == mode)[-args.last:]
        sums = [s for s in (summarise(launches[k]) for k in keys) if s]
        if not sums:
            continue
        print(f"{name}: {len(sums)} launches, medians (us)")
        for field in sums[0]:
            vals = [s[field] for s in sums]
            if isinstance(vals[0], tuple):
                lo = statistics.median(v[0] for v in vals)
                hi = statistics.median(v[1] for v in vals)
                print(f"  {field:28s} {lo:8.2f} .. {hi:.2f}")
            else:
                print(f"  {field:28s} {statistics.median(vals):8.2f}")


if __name__ == "__main__":
    main()
