#!/usr/bin/env python3
"""Summarises an `ncu --csv --page raw --metrics gpu__time_duration.sum` log: GPU time per kernel
name (total over the profiled steps, per step, count per step, mean), largest first, and the sum.
Usage: kernel_summary.py NCU_CSV STEPS [TOP] [--by-grid] [--sequence]  (--by-grid: one line per
kernel and grid, e.g. to tell the products of one GEMM kernel apart; --sequence: then the first
step's launches in order, each with its grid and time, e.g. to tell which product is which)"""
import csv
import re
import sys
from collections import defaultdict


def short(name):
    # ncu spells the anonymous namespace "<unnamed>"; demanglers "(anonymous namespace)".
    name = re.sub(r"deepinfer::(cuda::)?|<unnamed>::|\(anonymous namespace\)::|^void ", "", name)
    name = re.sub(r"\((?![^<]*>).*$", "", name)  # drop the argument list (not a template's)
    return name[:70]


def main():
    flags = {a for a in sys.argv[1:] if a.startswith("--")}
    args = [a for a in sys.argv[1:] if not a.startswith("--")]
    by_grid, sequence = "--by-grid" in flags, "--sequence" in flags
    path, steps = args[0], int(args[1])
    top = int(args[2]) if len(args) > 2 else 40
    rows = list(csv.reader(open(path, errors="replace")))
    head = next(i for i, r in enumerate(rows) if "Kernel Name" in r and "gpu__time_duration.sum" in r)
    cols = rows[head]
    kn, tm, gs = cols.index("Kernel Name"), cols.index("gpu__time_duration.sum"), cols.index("Grid Size")
    unit = rows[head + 1][tm] if len(rows) > head + 1 else ""
    scale = {"ns": 1e-3, "nsecond": 1e-3, "usecond": 1.0, "us": 1.0, "msecond": 1e3, "ms": 1e3}.get(unit, None)
    start = head + 2 if scale is not None else head + 1
    scale = 1e-3 if scale is None else scale  # ncu's base unit for durations is ns
    tot, cnt, grids = defaultdict(float), defaultdict(int), defaultdict(set)
    launches = []  # (kernel, grid, us) in launch order
    for r in rows[start:]:
        if len(r) <= max(kn, tm):
            continue
        try:
            us = float(r[tm].replace(",", "")) * scale
        except ValueError:
            continue
        launches.append((short(r[kn]), r[gs], us))
        k = short(r[kn]) + (f" {r[gs]}" if by_grid else "")
        tot[k] += us
        cnt[k] += 1
        grids[k].add(r[gs])
    all_us = sum(tot.values())
    width = 86 if by_grid else 72
    print(f"{'kernel':{width}} {'us/step':>9} {'n/step':>7} {'mean us':>8}  grids")
    for k in sorted(tot, key=tot.get, reverse=True)[:top]:
        g = ",".join(sorted(grids[k]))[:40]
        print(f"{k:{width}} {tot[k] / steps:9.1f} {cnt[k] / steps:7.1f} {tot[k] / cnt[k]:8.2f}  {g}")
    print(f"{'TOTAL (kernel time, no gaps)':{width}} {all_us / steps:9.1f} {sum(cnt.values()) / steps:7.1f}")
    if sequence:
        per_step = len(launches) // max(steps, 1)
        print(f"first step's {per_step} launches in order:")
        for i, (k, g, us) in enumerate(launches[:per_step]):
            print(f"{i:4} {k:70} {g:>16} {us:8.2f}")


if __name__ == "__main__":
    main()
