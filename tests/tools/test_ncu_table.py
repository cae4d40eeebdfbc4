"""tools/device/ncu_table.py on a synthetic `ncu --csv --page raw` log: the launches in order
with the chosen metrics, the grouped means, the kernel filter, and an unknown metric refused."""
import os
import subprocess
import sys

ROOT = os.environ.get("DEEPINFER_SOURCE_DIR",
                      os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", ".."))
SCRIPT = os.path.join(ROOT, "tools", "device", "ncu_table.py")
LOG = '''==PROF== Connected to process 1
mode seqs ... (the bench's own output)
"ID","Kernel Name","Grid Size","device__attribute_chip","dram__throughput.avg.pct_of_peak_sustained_elapsed","gpu__time_duration.sum"
"","","","","%","ns"
"0","void deepinfer::cuda::gemm_tiles::grouped_gemm_kernel<(Mode)2, 1>(GroupedArgs)","(2048, 1, 1)","1","64.5","23,000"
"1","void deepinfer::cuda::(anonymous namespace)::rms_norm4_kernel(const float *)","(1, 1, 1)","1","1.5","2,000"
"2","void deepinfer::cuda::gemm_tiles::grouped_gemm_kernel<(Mode)2, 1>(GroupedArgs)","(2048, 1, 1)","1","66.5","21,000"
'''
METRICS = "gpu__time_duration.sum,dram__throughput.avg.pct_of_peak_sustained_elapsed"


def table(tmp_path, *args):
    log = tmp_path / "ncu.csv"
    log.write_text(LOG)
    res = subprocess.run([sys.executable, SCRIPT, str(log), *args], capture_output=True, text=True)
    return res.returncode, [l.split("\t") for l in res.stdout.strip().split("\n")], res.stderr


def test_launches_in_order_with_the_chosen_metrics(tmp_path):
    rc, rows, err = table(tmp_path, "--metrics", METRICS)
    assert rc == 0, err
    assert rows[0] == ["kernel", "grid", "gpu__time_duration.sum (ns)",
                       "dram__throughput.avg.pct_elaps (%)"]
    assert rows[1][0].startswith("grouped_gemm_kernel<")
    assert rows[1][1:] == ["(2048, 1, 1)", "2.3e+04", "64.5"]
    assert rows[2][0] == "rms_norm4_kernel" and rows[2][2:] == ["2000", "1.5"]
    assert len(rows) == 4


def test_group_averages_a_kernel_and_grid(tmp_path):
    rc, rows, err = table(tmp_path, "--metrics", METRICS, "--group", "--match", "gemm")
    assert rc == 0, err
    assert rows[0][:3] == ["kernel", "grid", "n"]
    assert len(rows) == 2 and rows[1][1:] == ["(2048, 1, 1)", "2", "2.2e+04", "65.5"]


def test_default_columns_skip_device_attributes(tmp_path):
    rc, rows, err = table(tmp_path)
    assert rc == 0, err
    assert not any(h.startswith("device__") for h in rows[0])
    assert len(rows[0]) == 4


def test_an_unknown_metric_is_named(tmp_path):
    rc, _, err = table(tmp_path, "--metrics", "sm__nothing.sum")
    assert rc != 0 and "sm__nothing.sum" in err
