#!/usr/bin/env python3
"""One row per profiled launch of an `ncu --csv --page raw --metrics ...` log: the kernel (short
name), its grid and the chosen metrics, in launch order; `--group` instead averages the metrics
over launches of the same kernel and grid (count first). The metrics are those named by
--metrics (comma-separated, as given to ncu; default: every column but the device attributes),
shortened (pct_of_peak_sustained_ -> pct_, launch__occupancy_limit_ -> occ_limit_), with ncu's
units. Usage: ncu_table.py NCU_CSV [--metrics a,b] [--group] [--match REGEX]"""
import argparse
import csv
import io
import re
from collections import OrderedDict

import kernel_summary  # this directory's: its kernel-name shortening


def short(name):
    return kernel_summary.short(name).replace("gemm_tiles::", "")[:60]


def number(text):
    try:
        return float(text.replace(",", ""))
    except ValueError:
        return None


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("csv")
    ap.add_argument("--group", action="store_true")
    ap.add_argument("--match", default="", help="only kernels whose name matches")
    ap.add_argument("--metrics", default="", help="the columns to show (default: all metrics)")
    args = ap.parse_args()
    text = open(args.csv, errors="replace").read()
    start = text.find('"ID"')
    if start < 0:
        raise SystemExit("no ncu CSV table in " + args.csv)
    rows = list(csv.reader(io.StringIO(text[start:])))
    head = rows[0]
    kn, gs = head.index("Kernel Name"), head.index("Grid Size")
    wanted = [m for m in args.metrics.split(",") if m]
    if wanted:
        missing = [m for m in wanted if m not in head]
        if missing:
            raise SystemExit("not in the log: " + ", ".join(missing))
        metrics = [head.index(m) for m in wanted]
    else:
        metrics = [i for i, h in enumerate(head) if "__" in h and not h.startswith("device__")]
    units = rows[1] if len(rows) > 1 and not rows[1][0].strip().isdigit() else [""] * len(head)
    body = rows[2:] if units is rows[1] else rows[1:]

    def label(i):
        name = head[i].replace("pct_of_peak_sustained_", "pct_")
        name = name.replace("launch__occupancy_limit_", "occ_limit_")[:30]
        return f"{name} ({units[i]})" if units[i] else name

    labels = [label(i) for i in metrics]
    launches = [(short(r[kn]), r[gs], [number(r[i]) for i in metrics])
                for r in body if len(r) == len(head) and re.search(args.match, r[kn])]
    if args.group:
        groups = OrderedDict()
        for k, g, vals in launches:
            groups.setdefault((k, g), []).append(vals)
        print("\t".join(["kernel", "grid", "n"] + labels))
        for (k, g), runs in groups.items():
            means = []
            for j in range(len(metrics)):
                vs = [v[j] for v in runs if v[j] is not None]
                means.append(f"{sum(vs) / len(vs):.4g}" if vs else "-")
            print("\t".join([k, g, str(len(runs))] + means))
        return
    print("\t".join(["kernel", "grid"] + labels))
    for k, g, vals in launches:
        print("\t".join([k, g] + ["-" if v is None else f"{v:.4g}" for v in vals]))


if __name__ == "__main__":
    main()
