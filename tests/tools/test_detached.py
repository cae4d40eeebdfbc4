"""tools/device/detached.sh: the first call starts the command detached and waits up to its
limit, a later call waits on the same run (it never starts a second), and each call packs the
run's directory (the command's own logs under DETACHED_DIR included) into $OUT/detached.tgz."""
import os
import subprocess
import tarfile

ROOT = os.environ.get("DEEPINFER_SOURCE_DIR",
                      os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", ".."))
SCRIPT = os.path.join(ROOT, "tools", "device", "detached.sh")


def call(tmp_path, out, *args):
    env = dict(os.environ, DETACHED_DIR=str(tmp_path / "run"), OUT=str(tmp_path / out))
    return subprocess.run(["bash", SCRIPT, *args], env=env, capture_output=True, text=True,
                          timeout=60)


def test_a_later_call_waits_on_the_first_run(tmp_path):
    flag = tmp_path / "go"
    job = ("echo started >>\"$DETACHED_DIR/runs\"; "
           f"while [ ! -e {flag} ]; do sleep 0.2; done; "
           "echo result >\"$DETACHED_DIR/log.txt\"; exit 3")
    first = call(tmp_path, "o1", "0", "bash", "-c", job)
    assert first.returncode == 0, first.stderr
    assert "still running" in first.stdout
    flag.touch()
    second = call(tmp_path, "o2", "30", "bash", "-c", "echo a second run; exit 9")
    assert second.returncode == 0, second.stderr
    assert "ended, rc 3" in second.stdout
    assert (tmp_path / "run" / "runs").read_text() == "started\n"  # one run, not two
    with tarfile.open(tmp_path / "o2" / "detached.tgz") as tar:
        names = tar.getnames()
    assert "run/log.txt" in names and "run/rc" in names and "run/output.log" in names


def test_a_first_call_needs_a_command(tmp_path):
    res = call(tmp_path, "o", "1")
    assert res.returncode == 2
    assert "no command" in res.stderr
