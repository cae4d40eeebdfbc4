#!/usr/bin/env python3
"""Summarises `ncu --import R --page source --print-source sass --csv` (a report taken with
`--set full --import-source yes`): per profiled kernel, its warp stall samples before its hot
loop, in it and after it, and the top stall reasons of each part. The hot loop is the span of
instructions executed more than twice as often as the kernel's first instruction, so a
prologue or an epilogue that costs as much as the loop (a divide per load, a fence) shows up.
Usage: source_regions.py SOURCE_CSV [TOP_INSTRUCTIONS]"""
import csv
import re
import sys


def short(name):
    name = re.sub(r"deepinfer::(cuda::)?|<unnamed>::|\(deepinfer::cuda::<unnamed>::Mode\)|\(int\)|\(bool\)", "", name)
    return re.sub(r"\((?![^<]*>).*$", "", name.replace("void ", ""))[:110]


def kernels(path):
    """(kernel name, header, rows) per kernel section of the CSV."""
    name, header, rows = None, None, []
    for r in csv.reader(open(path, errors="replace")):
        if r and r[0] == "Kernel Name":
            if name is not None:
                yield name, header, rows
            name, header, rows = r[1], None, []
        elif header is None and r and r[0] == "Address":
            header = r
        elif header is not None and len(r) == len(header):
            rows.append(r)
    if name is not None:
        yield name, header, rows


def as_int(v):
    try:
        return int(float(v))
    except ValueError:
        return 0


def main():
    path = sys.argv[1]
    top = int(sys.argv[2]) if len(sys.argv) > 2 else 0
    seen = set()
    for name, hdr, rows in kernels(path):
        if hdr is None or not rows:
            continue
        samp = hdr.index("Warp Stall Sampling (All Samples)")
        execd = hdr.index("Instructions Executed")
        src = hdr.index("Source")
        stalls = [i for i, h in enumerate(hdr) if h.startswith("stall_") and "Not Issued" not in h]
        ex = [as_int(r[execd]) for r in rows]
        s = [as_int(r[samp]) for r in rows]
        key = (name, tuple(ex[:50]))
        if key in seen:  # ncu prints a kernel once per launch: one summary per distinct one
            continue
        seen.add(key)
        hot = [j for j, e in enumerate(ex) if e > 2 * max(ex[0], 1)]
        a, b = (min(hot), max(hot) + 1) if hot else (len(rows), len(rows))
        total = sum(s) or 1
        print(f"{short(name)}: {total} samples, {len(rows)} instructions, loop [{a}, {b})")
        for part, (lo, hi) in (("before", (0, a)), ("loop", (a, b)), ("after", (b, len(rows)))):
            agg = {}
            for r in rows[lo:hi]:
                for i in stalls:
                    v = as_int(r[i])
                    if v:
                        agg[hdr[i][6:]] = agg.get(hdr[i][6:], 0) + v
            part_samples = sum(s[lo:hi])
            reasons = ", ".join(f"{k} {v * 100 // max(part_samples, 1)}%"
                                for k, v in sorted(agg.items(), key=lambda x: -x[1])[:4])
            print(f"  {part:6} {part_samples:6} ({part_samples * 100 // total:2}%)  {reasons}")
        for j in sorted(sorted(range(len(rows)), key=lambda j: -s[j])[:top]):
            print(f"    [{j}] x{ex[j]} {s[j]:4}  {rows[j][src].strip()[:70]}")


if __name__ == "__main__":
    main()
