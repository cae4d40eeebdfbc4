"""The study patches kept beside the tools (applied only in scratch trees or on the GPU machine)
still apply to this tree: tools/golden/operand_rounding.patch (the CPU backend under the GPU's
operand roundings, tools/golden/rounding_study.sh), tools/device/expert_gemm_stamps.patch,
tools/device/weight_prefetch.patch and tools/device/decode_fusions.patch (dropped experiments,
kept for an H200 to measure), tools/device/expert_l2_prefetch.patch (built, not yet measured).
A change to the files they touch that breaks them fails here, not in a later session."""
import os
import shutil
import subprocess

import pytest

ROOT = os.environ.get("DEEPINFER_SOURCE_DIR",
                      os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", ".."))
PATCHES = ["tools/golden/operand_rounding.patch", "tools/device/expert_gemm_stamps.patch",
           "tools/device/weight_prefetch.patch", "tools/device/decode_fusions.patch",
           "tools/device/expert_l2_prefetch.patch"]


@pytest.mark.parametrize("patch", PATCHES)
def test_patch_applies(patch):
    if shutil.which("git") is None:
        pytest.skip("no git")
    # --check against the files on disk (not the index).
    res = subprocess.run(["git", "apply", "--check", os.path.join(ROOT, patch)], cwd=ROOT,
                         capture_output=True, text=True)
    assert res.returncode == 0, f"{patch} no longer applies:\n{res.stderr}"
