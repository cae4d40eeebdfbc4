"""Summarises rounding_study.sh's lines (stdin): per variant, how many of its runs (seeds x
fixtures x splits) exceed the golden bound, and each fixture's range of rel L2 and of rows off by
more than 10%."""
import re
import sys

BOUND = 3e-2
RUN = re.compile(r"(tiny-\w+) (\w+(?: \d+)?) ([0-9.e+-]+) m(\d+) r(\d+);")


def summarise(lines):
    variants, cur = {}, None
    for line in lines:
        if line.startswith("== "):
            cur = variants.setdefault(line[3:].strip(), [])
        elif line.startswith("seed") and cur is not None:
            cur += [(f, float(e), int(m), int(r)) for f, _, e, m, r in RUN.findall(line)]
    out = ["| variant | runs over %g | argmax mismatches | per fixture: rel L2, rows off > 10%% |" % BOUND,
           "| --- | ---: | ---: | --- |"]
    for name, runs in variants.items():
        if not runs:
            continue
        over = sum(e > BOUND for _, e, _, _ in runs)
        mism = sum(m for _, _, m, _ in runs)
        per = []
        for fx in sorted({f for f, _, _, _ in runs}):
            es = [e for f, e, _, _ in runs if f == fx]
            rs = [r for f, _, _, r in runs if f == fx]
            per.append("%s %.2e-%.2e, %d-%d" % (fx, min(es), max(es), min(rs), max(rs)))
        out.append("| %s | %d of %d | %d | %s |" % (name, over, len(runs), mism, "; ".join(per)))
    return "\n".join(out)


if __name__ == "__main__":
    print(summarise(sys.stdin))
