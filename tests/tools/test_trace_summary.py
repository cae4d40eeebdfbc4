"""tools/device/trace_summary.py on synthetic cuda_trace.sh CSVs: busy time per stream, the
device's idle gaps (the complement of the union of all streams' records), the timeline and the
per-kernel sums."""
import os
import re
import subprocess
import sys

ROOT = os.environ.get("DEEPINFER_SOURCE_DIR",
                      os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", ".."))
SCRIPT = os.path.join(ROOT, "tools", "device", "trace_summary.py")
HEADER = "kind,start_ns,end_ns,stream,graph,correlation,a,b,c,d,name\n"


def summary(tmp_path, rows, *args):
    csv = tmp_path / "trace.csv"
    csv.write_text(HEADER + "".join(",".join(str(v) for v in r) + "\n" for r in rows))
    res = subprocess.run([sys.executable, SCRIPT, str(csv), *args], capture_output=True, text=True)
    assert res.returncode == 0, res.stderr
    return res.stdout


def kernel(start_us, end_us, name, stream=7, grid=(1, 1, 1)):
    return ("kernel", int(start_us * 1000), int(end_us * 1000), stream, 1, 0, *grid, 128, name)


def copy(start_us, end_us, stream=7):
    return ("memcpy", int(start_us * 1000), int(end_us * 1000), stream, 1, 0, 1, 4096, 0, 0,
            "memcpy_kind_1")


def test_busy_time_and_idle_gaps(tmp_path):
    rows = [kernel(0, 10, "kA"), kernel(12, 20, "kB"), copy(25, 26), kernel(26, 40, "kA"),
            kernel(30, 35, "kC", stream=9)]  # inside kA's time on another stream: no gap
    out = summary(tmp_path, rows, "--window-ms", "1")
    assert "stream 7: busy 33.0 us" in out
    assert "stream 9: busy 5.0 us" in out
    idle = re.search(r"device idle ([0-9.]+) us .* in (\d+) gaps", out)
    assert idle and float(idle.group(1)) == 7.0 and int(idle.group(2)) == 2
    gaps = re.findall(r"^\s+([0-9.]+) at\s+([0-9.]+)\s+(\S+)\s+->\s+(\S+)", out, re.M)
    assert gaps[0] == ("5.00", "20.0", "kB", "memcpy_kind_1")  # the largest first
    assert gaps[1] == ("2.00", "10.0", "kA", "kB")


def test_the_window_keeps_the_last_records(tmp_path):
    rows = [kernel(0, 10, "early"), kernel(5000, 5010, "late")]
    out = summary(tmp_path, rows, "--window-ms", "0.1")
    assert "late" in out and "early" not in out


def test_by_kernel_sums_per_name_and_grid(tmp_path):
    rows = [kernel(0, 10, "kA"), kernel(10, 14, "kA"), kernel(14, 20, "gemm_x", grid=(64, 8, 1)),
            kernel(20, 23, "gemm_x", grid=(2048, 1, 1)), kernel(23, 30, "gemm_x", grid=(64, 8, 1))]
    out = summary(tmp_path, rows, "--window-ms", "1", "--by-kernel")
    table = by_kernel_table(out)
    assert table["kA"] == (14.0, 2, 7.0, 14.0)
    assert table["gemm_x  64x8x1"] == (13.0, 2, 6.5, 13.0)
    assert table["gemm_x  2048x1x1"] == (3.0, 1, 3.0, 3.0)


def by_kernel_table(out):
    return dict((m.group(5).strip(),
                 (float(m.group(1)), int(m.group(2)), float(m.group(3)), float(m.group(4))))
                for m in re.finditer(r"^\s*([0-9.]+)\s+(\d+)\s+([0-9.]+)\s+([0-9.]+)\s+(.+)$",
                                     out, re.M))


def test_by_kernel_shares_split_overlapping_time(tmp_path):
    # kB runs beside kA for 4 us (2 each), then alone for 2; kC beside kA's first 2 us.
    rows = [kernel(0, 10, "kA"), kernel(6, 12, "kB", stream=9), kernel(0, 2, "kC", stream=11)]
    out = summary(tmp_path, rows, "--window-ms", "1", "--by-kernel")
    table = by_kernel_table(out)
    assert table["kA"] == (10.0, 1, 10.0, 7.0)  # 1 + 4 alone + 2
    assert table["kB"] == (6.0, 1, 6.0, 4.0)
    assert table["kC"] == (2.0, 1, 2.0, 1.0)
    assert "busy time 12.0" in out
    assert out.index("  kA") < out.index("  kB") < out.index("  kC")  # largest share first
