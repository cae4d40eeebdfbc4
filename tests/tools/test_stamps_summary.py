"""tools/device/stamps_summary.py on a synthetic stamps CSV (expert_gemm_stamps.patch's): the
phases of each launch from its blocks' stamps, medians over launches, and blocks past the tile
count (no stamps past entry) left out."""
import os
import re
import subprocess
import sys

ROOT = os.environ.get("DEEPINFER_SOURCE_DIR",
                      os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", ".."))
SCRIPT = os.path.join(ROOT, "tools", "device", "stamps_summary.py")


def run(tmp_path, rows, *args):
    csv = tmp_path / "stamps.csv"
    csv.write_text("mode,launch,block,smid,t0,t1,t2,t3,t4\n" +
                   "".join(",".join(str(v) for v in r) + "\n" for r in rows))
    res = subprocess.run([sys.executable, SCRIPT, str(csv), *args], capture_output=True, text=True)
    assert res.returncode == 0, res.stderr
    return res.stdout


def value(out, section, field):
    body = out.split(section, 1)[1]
    m = re.search(re.escape(field) + r"\s+([0-9.]+)", body)
    assert m, (field, out)
    return float(m.group(1))


def test_phases_of_a_launch(tmp_path):
    us = 1000
    rows = []
    for launch, base in ((0, 10**9), (1, 10**9 + 1000 * us)):  # globaltimer ns, never 0
        # two live blocks and one past the tile count; times in ns from the launch's start
        rows.append((0, launch, 0, 3, base, base + 2 * us, base + 4 * us, base + 50 * us,
                     base + 51 * us))
        rows.append((0, launch, 1, 5, base + 1 * us, base + 2 * us, base + 5 * us, base + 53 * us,
                     base + 55 * us))
        rows.append((0, launch, 2, 7, base + 1 * us, 0, 0, 0, 0))
    out = run(tmp_path, rows)
    assert "up (gate/up + swiglu): 2 launches" in out
    assert "down" not in out
    assert value(out, "up", "span") == 55.0
    assert value(out, "up", "start spread") == 1.0
    assert value(out, "up", "first stage (median)") == 2.5  # 2 and 3 us
    assert value(out, "up", "k loop (median)") == 47.0  # 46 and 48 us
    assert value(out, "up", "epilogue (median)") == 1.5
    assert value(out, "up", "first block done") == 51.0
    assert value(out, "up", "tail (last - median done)") == 2.0  # 55 - 53
    assert value(out, "up", "blocks") == 2.0
    assert value(out, "up", "SMs") == 2.0
