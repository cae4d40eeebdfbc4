"""tools/golden/rounding_summary.py on synthetic rounding_study.sh lines: runs over the bound
counted per variant, argmax mismatches summed, each fixture's rel L2 and flipped-row ranges."""
import os
import subprocess
import sys

ROOT = os.environ.get("DEEPINFER_SOURCE_DIR",
                      os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", ".."))
SCRIPT = os.path.join(ROOT, "tools", "golden", "rounding_summary.py")

LINES = """== EMU_BF16_GEMM=1
seed 0: tiny-a prefill 2.663e-02 m0 r1; tiny-a chunk 1 3.100e-02 m0 r2; tiny-b chunk 7 2.822e-02 m1 r1;
seed 1: tiny-a prefill 2.500e-02 m0 r1; tiny-a chunk 1 2.661e-02 m0 r1; tiny-b chunk 7 3.429e-02 m2 r3;
== EMU_BF16_GEMM=1 EMU_FP16_ATTN_QP=1
seed 0: tiny-a prefill 2.000e-02 m0 r0; tiny-b chunk 1 2.100e-02 m0 r4;
== empty variant
"""


def summary():
    res = subprocess.run([sys.executable, SCRIPT], input=LINES, capture_output=True, text=True)
    assert res.returncode == 0, res.stderr
    return {line.split("|")[1].strip(): [c.strip() for c in line.split("|")[2:5]]
            for line in res.stdout.splitlines()[2:]}


def test_counts_runs_over_the_bound_and_mismatches():
    s = summary()
    assert s["EMU_BF16_GEMM=1"][:2] == ["2 of 6", "3"]
    assert s["EMU_BF16_GEMM=1 EMU_FP16_ATTN_QP=1"][:2] == ["0 of 2", "0"]


def test_gives_each_fixtures_ranges_and_skips_variants_without_runs():
    s = summary()
    assert s["EMU_BF16_GEMM=1"][2] == ("tiny-a 2.50e-02-3.10e-02, 1-2; "
                                       "tiny-b 2.82e-02-3.43e-02, 1-3")
    assert "empty variant" not in s
