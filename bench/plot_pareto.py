#!/usr/bin/env python3
"""Throughput vs per-user speed Pareto plot from `deepinfer bench --mode decode` JSON.

Each input file is one series (a model, context length or machine); each of its runs (one per
--decode-num-requests value) is a point at x = output tokens/s per user, y = output tokens/s in
total, labelled with its request count. The Pareto frontier of each series (no other point is both
faster per user and higher in throughput) is drawn as a line.

    python3 bench/plot_pareto.py bench/results/sweep-*.json --out bench/results/pareto.png

Uses matplotlib when it is installed (the GPU machine has it). Without it, a small built-in
rasteriser writes the PNG (zlib + struct only), so the plot can be made anywhere; pass
--no-matplotlib to force that path.
"""

import argparse
import json
import math
import os
import struct
import sys
import zlib


def load_series(path, label=None):
    with open(path) as f:
        doc = json.load(f)
    runs = [r for r in doc.get("runs", []) if r.get("mode") == "decode"]
    if not runs:
        sys.exit(f"{path}: no decode runs (expected `deepinfer bench --mode decode` JSON)")
    points = []
    for r in runs:
        s = r["summary"]
        points.append((s["tokens_per_s_per_user"], s["tokens_per_s"], r["num_seqs"]))
    if label is None:
        model = os.path.basename(os.path.normpath(doc.get("model", path)))
        ctx = runs[0].get("context_length", 0)
        label = f"{model} ctx {ctx}"
    return {"label": label, "points": points, "device": doc.get("device", "?")}


def pareto(points):
    """Points not dominated by another (higher per-user speed and higher throughput)."""
    front = [p for p in points
             if not any(q[0] >= p[0] and q[1] >= p[1] and q[:2] != p[:2] for q in points)]
    return sorted(front)


def plot_matplotlib(series, out, title, log):
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    fig, ax = plt.subplots(figsize=(8, 6), dpi=110)
    for s in series:
        xs = [p[0] for p in s["points"]]
        ys = [p[1] for p in s["points"]]
        sc = ax.scatter(xs, ys, label=s["label"])
        front = pareto(s["points"])
        ax.plot([p[0] for p in front], [p[1] for p in front], color=sc.get_facecolor()[0])
        for x, y, n in s["points"]:
            ax.annotate(f"{n}", (x, y), textcoords="offset points", xytext=(4, 4), fontsize=8)
    if log:
        ax.set_xscale("log")
        ax.set_yscale("log")
    ax.set_xlabel("output tokens/s per user")
    ax.set_ylabel("output tokens/s (all users)")
    ax.set_title(title)
    ax.grid(True, alpha=0.3)
    ax.legend()
    fig.tight_layout()
    fig.savefig(out)


# ---- a tiny rasteriser for machines without matplotlib -------------------------------------

# 5x7 glyphs, one int per row (bit 4 = leftmost column).
FONT = {
    " ": [0, 0, 0, 0, 0, 0, 0], ".": [0, 0, 0, 0, 0, 0, 4], ",": [0, 0, 0, 0, 0, 4, 8],
    ":": [0, 4, 0, 0, 0, 4, 0], "-": [0, 0, 0, 31, 0, 0, 0], "+": [0, 4, 4, 31, 4, 4, 0],
    "/": [1, 1, 2, 4, 8, 16, 16], "(": [2, 4, 8, 8, 8, 4, 2], ")": [8, 4, 2, 2, 2, 4, 8],
    "%": [24, 25, 2, 4, 8, 19, 3], "=": [0, 0, 31, 0, 31, 0, 0], "_": [0, 0, 0, 0, 0, 0, 31],
    "0": [14, 17, 19, 21, 25, 17, 14], "1": [4, 12, 4, 4, 4, 4, 14],
    "2": [14, 17, 1, 2, 4, 8, 31], "3": [31, 2, 4, 2, 1, 17, 14], "4": [2, 6, 10, 18, 31, 2, 2],
    "5": [31, 16, 30, 1, 1, 17, 14], "6": [6, 8, 16, 30, 17, 17, 14],
    "7": [31, 1, 2, 4, 8, 8, 8], "8": [14, 17, 17, 14, 17, 17, 14],
    "9": [14, 17, 17, 15, 1, 2, 12], "A": [14, 17, 17, 31, 17, 17, 17],
    "B": [30, 17, 17, 30, 17, 17, 30], "C": [14, 17, 16, 16, 16, 17, 14],
    "D": [28, 18, 17, 17, 17, 18, 28], "E": [31, 16, 16, 30, 16, 16, 31],
    "F": [31, 16, 16, 30, 16, 16, 16], "G": [14, 17, 16, 23, 17, 17, 15],
    "H": [17, 17, 17, 31, 17, 17, 17], "I": [14, 4, 4, 4, 4, 4, 14],
    "J": [7, 2, 2, 2, 2, 18, 12], "K": [17, 18, 20, 24, 20, 18, 17],
    "L": [16, 16, 16, 16, 16, 16, 31], "M": [17, 27, 21, 21, 17, 17, 17],
    "N": [17, 17, 25, 21, 19, 17, 17], "O": [14, 17, 17, 17, 17, 17, 14],
    "P": [30, 17, 17, 30, 16, 16, 16], "Q": [14, 17, 17, 17, 21, 18, 13],
    "R": [30, 17, 17, 30, 20, 18, 17], "S": [15, 16, 16, 14, 1, 1, 30],
    "T": [31, 4, 4, 4, 4, 4, 4], "U": [17, 17, 17, 17, 17, 17, 14],
    "V": [17, 17, 17, 17, 17, 10, 4], "W": [17, 17, 17, 21, 21, 21, 10],
    "X": [17, 17, 10, 4, 10, 17, 17], "Y": [17, 17, 17, 10, 4, 4, 4],
    "Z": [31, 1, 2, 4, 8, 16, 31],
}
PALETTE = [(31, 119, 180), (255, 127, 14), (44, 160, 44), (214, 39, 40), (148, 103, 189),
           (140, 86, 75)]


class Canvas:
    def __init__(self, w, h):
        self.w, self.h = w, h
        self.px = [bytearray(b"\xff" * (3 * w)) for _ in range(h)]

    def set(self, x, y, c):
        x, y = int(round(x)), int(round(y))
        if 0 <= x < self.w and 0 <= y < self.h:
            self.px[y][3 * x:3 * x + 3] = bytes(c)

    def rect(self, x0, y0, x1, y1, c):
        for y in range(int(y0), int(y1) + 1):
            for x in range(int(x0), int(x1) + 1):
                self.set(x, y, c)

    def line(self, x0, y0, x1, y1, c, width=1, dash=0):
        n = int(max(abs(x1 - x0), abs(y1 - y0))) + 1
        for i in range(n + 1):
            if dash and (i // dash) % 2:
                continue
            t = i / n
            x, y = x0 + t * (x1 - x0), y0 + t * (y1 - y0)
            for dx in range(-(width // 2), width - width // 2):
                for dy in range(-(width // 2), width - width // 2):
                    self.set(x + dx, y + dy, c)

    def disc(self, cx, cy, r, c):
        for y in range(int(cy - r), int(cy + r) + 1):
            for x in range(int(cx - r), int(cx + r) + 1):
                if (x - cx) ** 2 + (y - cy) ** 2 <= r * r:
                    self.set(x, y, c)

    def text(self, x, y, s, c=(0, 0, 0), scale=2, vertical=False):
        """Draws s with its top-left at (x, y); vertical text reads bottom to top."""
        for i, ch in enumerate(s.upper()):
            glyph = FONT.get(ch, FONT[" "])
            for row, bits in enumerate(glyph):
                for col in range(5):
                    if bits & (16 >> col):
                        for sy in range(scale):
                            for sx in range(scale):
                                gx, gy = i * 6 * scale + col * scale + sx, row * scale + sy
                                if vertical:
                                    self.set(x + gy, y - gx, c)
                                else:
                                    self.set(x + gx, y + gy, c)

    def save(self, path):
        raw = b"".join(b"\x00" + bytes(r) for r in self.px)
        def chunk(tag, data):
            return (struct.pack(">I", len(data)) + tag + data +
                    struct.pack(">I", zlib.crc32(tag + data) & 0xFFFFFFFF))
        with open(path, "wb") as f:
            f.write(b"\x89PNG\r\n\x1a\n")
            f.write(chunk(b"IHDR", struct.pack(">IIBBBBB", self.w, self.h, 8, 2, 0, 0, 0)))
            f.write(chunk(b"IDAT", zlib.compress(raw, 9)))
            f.write(chunk(b"IEND", b""))


def text_width(s, scale=2):
    return len(s) * 6 * scale


def nice_ticks(lo, hi, n=6):
    span = hi - lo if hi > lo else abs(hi) or 1.0
    step = 10 ** math.floor(math.log10(span / n))
    for m in (1, 2, 5, 10):
        if span / (step * m) <= n:
            step *= m
            break
    start = math.floor(lo / step) * step
    ticks = []
    t = start
    while t <= hi + 1e-9 * step:
        if t >= lo - 1e-9 * step:
            ticks.append(t)
        t += step
    return ticks


def log_ticks(lo, hi):
    """1, 2, 5 x 10^e between 10^lo and 10^hi (lo, hi are log10 values)."""
    return [m * 10.0 ** e for e in range(math.floor(lo), math.ceil(hi) + 1) for m in (1, 2, 5)
            if lo <= math.log10(m * 10.0 ** e) <= hi]


def fmt_tick(v):
    if v == 0:
        return "0"
    if abs(v) >= 1000:
        return f"{v / 1000:g}K"
    return f"{v:g}"


def plot_builtin(series, out, title, log):
    W, H = 960, 720
    L, R, T, B = 110, 30, 60, 90
    cv = Canvas(W, H)
    pts = [p for s in series for p in s["points"]]
    f = (lambda v: math.log10(v)) if log else (lambda v: v)
    xs, ys = [f(p[0]) for p in pts], [f(p[1]) for p in pts]
    x0, x1 = (min(xs), max(xs)) if log else (0.0, max(xs))
    y0, y1 = (min(ys), max(ys)) if log else (0.0, max(ys))
    pad_x, pad_y = 0.08 * ((x1 - x0) or 1), 0.08 * ((y1 - y0) or 1)
    x0, x1, y0, y1 = (x0 - pad_x if log else x0), x1 + pad_x, (y0 - pad_y if log else y0), y1 + pad_y
    sx = lambda v: L + (f(v) - x0) / (x1 - x0) * (W - L - R)
    sy = lambda v: H - B - (f(v) - y0) / (y1 - y0) * (H - T - B)
    grid = (225, 225, 225)
    for t in (log_ticks(x0, x1) if log else nice_ticks(x0, x1)):
        if f(t) < x0 or f(t) > x1:
            continue
        X = sx(t)
        cv.line(X, T, X, H - B, grid, dash=4)
        lbl = fmt_tick(t)
        cv.text(X - text_width(lbl) / 2, H - B + 10, lbl)
    for t in (log_ticks(y0, y1) if log else nice_ticks(y0, y1)):
        if f(t) < y0 or f(t) > y1:
            continue
        Y = sy(t)
        cv.line(L, Y, W - R, Y, grid, dash=4)
        lbl = fmt_tick(t)
        cv.text(L - 10 - text_width(lbl), Y - 7, lbl)
    cv.line(L, H - B, W - R, H - B, (0, 0, 0), width=2)
    cv.line(L, T, L, H - B, (0, 0, 0), width=2)
    xl = "OUTPUT TOKENS/S PER USER"
    cv.text((L + W - R) / 2 - text_width(xl) / 2, H - B + 40, xl)
    yl = "OUTPUT TOKENS/S (ALL USERS)"
    cv.text(20, (T + H - B) / 2 + text_width(yl) / 2, yl, vertical=True)
    cv.text(W / 2 - text_width(title) / 2, 20, title)
    for i, s in enumerate(series):
        c = PALETTE[i % len(PALETTE)]
        front = pareto(s["points"])
        for a, b in zip(front, front[1:]):
            cv.line(sx(a[0]), sy(a[1]), sx(b[0]), sy(b[1]), c, width=2)
        for x, y, n in s["points"]:
            cv.disc(sx(x), sy(y), 5, c)
            cv.text(sx(x) + 7, sy(y) - 18, str(n), c)
        # Legend in the bottom-left corner, which a Pareto cloud leaves empty.
        ly = H - B - 30 - 22 * (len(series) - 1 - i)
        cv.disc(L + 24, ly + 7, 5, c)
        cv.text(L + 36, ly, s["label"], c)
    cv.save(out)


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("inputs", nargs="+", help="deepinfer bench --mode decode --json-out files")
    ap.add_argument("--out", required=True, help="output PNG")
    ap.add_argument("--labels", help="comma-separated series labels (default: model + context)")
    ap.add_argument("--title", default="Decode: throughput vs per-user speed")
    ap.add_argument("--log", action="store_true", help="log-log axes")
    ap.add_argument("--no-matplotlib", action="store_true", help="use the built-in rasteriser")
    a = ap.parse_args()
    labels = a.labels.split(",") if a.labels else [None] * len(a.inputs)
    if len(labels) != len(a.inputs):
        sys.exit("--labels needs one label per input")
    series = [load_series(p, l) for p, l in zip(a.inputs, labels)]
    use_mpl = not a.no_matplotlib
    if use_mpl:
        try:
            import matplotlib  # noqa: F401
        except ImportError:
            print("matplotlib is not installed: using the built-in PNG rasteriser", file=sys.stderr)
            use_mpl = False
    (plot_matplotlib if use_mpl else plot_builtin)(series, a.out, a.title, a.log)
    for s in series:
        print(f"{s['label']}: " + ", ".join(
            f"{n} req: {y:.1f} tok/s ({x:.1f}/user)" for x, y, n in s["points"]))
    print(f"wrote {a.out}")


if __name__ == "__main__":
    main()
