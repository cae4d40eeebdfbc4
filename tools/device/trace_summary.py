#!/usr/bin/env python3
"""Summary of a cuda_trace.sh CSV over its last --window-ms of device time: how long each stream
was busy, how much of the window the device was idle (no kernel, copy or set running), the
largest idle gaps with what ran before and after them, and the last --last records in start
order (offset, duration, gap since the previous record of any stream, stream, grid, name).
--by-kernel: instead of the timeline, the window's device time summed per kernel name (and grid,
for names matching --grid-for), with counts, means and shares (each instant of device time split
evenly among the records running then, so the shares add up to the busy time and a kernel that
runs beside others counts only its part): where a step's time goes."""
import argparse
import csv
import re
import shutil
import subprocess


def demangle(names):
    """Readable kernel names (c++filt where installed), trimmed of namespaces and arguments."""
    out = dict((n, n) for n in names)
    if shutil.which("c++filt"):
        res = subprocess.run(["c++filt"], input="\n".join(names), capture_output=True, text=True)
        if res.returncode == 0:
            out = dict(zip(names, res.stdout.split("\n")))
    for n, d in out.items():
        d = d.replace("(anonymous namespace)::", "").replace("deepinfer::", "").replace("cuda::", "")
        d = re.sub(r"\([^()]*\)$", "", d)  # the parameter list (template arguments stay)
        d = d.replace("gemm_tiles::", "").replace("(Mode)", "mode ").replace("TileShape", "")
        out[n] = d[:110]
    return out


def record_shares(win, t0):
    """Each record's share of the device time from t0 on: every instant split evenly among the
    records running then."""
    events = []
    for i, r in enumerate(win):
        events.append((max(r["s"], t0), 1, i))
        events.append((r["e"], 0, i))  # ends sort before starts at the same instant
    events.sort()
    shares, running, last = [0.0] * len(win), set(), None
    for t, starts, i in events:
        if running and t > last:
            for j in running:
                shares[j] += (t - last) / len(running)
        last = t
        if starts:
            running.add(i)
        else:
            running.discard(i)
    return shares


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("csv")
    ap.add_argument("--window-ms", type=float, default=10.0)
    ap.add_argument("--last", type=int, default=200)
    ap.add_argument("--gaps", type=int, default=15)
    ap.add_argument("--by-kernel", action="store_true")
    ap.add_argument("--grid-for", default="gemm", help="names whose rows are split by grid")
    args = ap.parse_args()
    recs = []
    with open(args.csv) as f:
        for r in csv.DictReader(f):
            recs.append(r)
    if not recs:
        print("empty trace")
        return
    for r in recs:
        r["s"], r["e"] = int(r["start_ns"]), int(r["end_ns"])
    recs.sort(key=lambda r: r["s"])
    t_end = max(r["e"] for r in recs)
    t0 = t_end - int(args.window_ms * 1e6)
    win = [r for r in recs if r["e"] > t0]
    t0 = max(t0, win[0]["s"])  # a window longer than the trace starts at its first record
    names = demangle(sorted(set(r["name"] for r in win)))
    span = t_end - t0
    print(f"{len(recs)} records; window: the last {span / 1e6:.3f} ms, {len(win)} records")

    busy = {}
    for r in win:
        busy[r["stream"]] = busy.get(r["stream"], 0) + r["e"] - max(r["s"], t0)
    for s, b in sorted(busy.items()):
        print(f"stream {s}: busy {b / 1e3:.1f} us ({100 * b / span:.1f}% of the window)")

    # Idle gaps: the complement of the union of busy intervals.
    gaps, cur_end, prev = [], t0, None
    for r in win:
        if r["s"] > cur_end:
            gaps.append((r["s"] - cur_end, cur_end, prev, r))
        if r["e"] > cur_end:
            cur_end, prev = r["e"], r
    idle = sum(g[0] for g in gaps)
    print(f"device idle {idle / 1e3:.1f} us ({100 * idle / span:.1f}% of the window) in {len(gaps)} gaps")
    print(f"\nlargest {args.gaps} idle gaps (us, after -> before):")
    for g, at, a, b in sorted(gaps, key=lambda g: -g[0])[: args.gaps]:
        an = names.get(a["name"], a["name"]) if a else "-"
        print(f"  {g / 1e3:8.2f} at {(at - t0) / 1e3:9.1f}  {an}  ->  {names.get(b['name'], b['name'])}")

    if args.by_kernel:
        total, per = 0, {}
        shares = record_shares(win, t0)
        for r, share in zip(win, shares):
            name = names.get(r["name"], r["name"])
            if args.grid_for and args.grid_for in r["name"]:
                name += f"  {r['a']}x{r['b']}x{r['c']}"
            d = r["e"] - max(r["s"], t0)
            total += d
            acc = per.setdefault(name, [0, 0, 0.0])
            acc[0] += d
            acc[1] += 1
            acc[2] += share
        print(f"\ndevice time per kernel (us; records of all streams overlap, so the sum "
              f"{total / 1e3:.1f} may exceed the window; the shares add up to its busy time "
              f"{sum(shares) / 1e3:.1f}), by share:")
        print(f"{'total':>9} {'count':>6} {'mean':>8} {'share':>9}  name")
        for name, (d, n, sh) in sorted(per.items(), key=lambda kv: -kv[1][2]):
            print(f"{d / 1e3:9.1f} {n:6d} {d / 1e3 / n:8.2f} {sh / 1e3:9.1f}  {name}")
        return

    print(f"\nthe last {args.last} records (us from the window start):")
    print(f"{'start':>9} {'dur':>8} {'gap':>7} {'strm':>4}  {'grid':>14}  name")
    last_end = None
    for r in win[-args.last:]:
        gap = (r["s"] - last_end) / 1e3 if last_end is not None else 0.0
        last_end = r["e"] if last_end is None else max(last_end, r["e"])
        grid = f"{r['a']}x{r['b']}x{r['c']}" if r["kind"] == "kernel" else r["kind"]
        print(f"{(r['s'] - t0) / 1e3:9.2f} {(r['e'] - r['s']) / 1e3:8.2f} {gap:7.2f} {r['stream']:>4}  "
              f"{grid:>14}  {names.get(r['name'], r['name'])}")


if __name__ == "__main__":
    main()
