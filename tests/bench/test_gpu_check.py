"""bench/gpu_check.py, run here on the CPU (``--device cpu``): what a GPU machine runs.

On a GPU machine the same script compares the DPO and speculative-sampler checks' grades
of code computing on cuda with those on the CPU, and runs the ring over NCCL; here the
device is the CPU and the ring runs over gloo, so that the script is known to work
before a GPU is lent.
"""

from __future__ import annotations

import importlib.util
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
SCRIPT = ROOT / "bench" / "gpu_check.py"


def _script():
    spec = importlib.util.spec_from_file_location("gpu_check", SCRIPT)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_the_gpu_check_runs_on_the_cpu_and_every_check_agrees():
    done = subprocess.run(
        [sys.executable, str(SCRIPT), "--device", "cpu", "--seeds", "1",
         "--ring-elements", "4096"],
        capture_output=True, text=True, timeout=300,
    )  # fmt: skip
    assert done.returncode == 0, done.stdout + done.stderr
    out = done.stdout
    assert "DPO loss, 1 seeds: the same grade, full marks" in out
    assert "speculative sampler, 1 seeds: the same grade, full marks" in out
    assert "ring all-reduce over gloo, 2 CPU ranks" in out and "the exact sum on every rank" in out


def test_a_device_that_changes_the_grade_is_reported(capsys):
    """The comparison can fail: code that computes otherwise on "the device" (here a DPO
    loss that forgets β there) gets another grade, and the check says so."""
    gpu_check = _script()
    reference = gpu_check.dpo_on("cpu")

    def make(device):
        if device == "cpu":
            return reference

        def dpo_loss(pw, pl, rw, rl, beta):
            return reference(pw, pl, rw, rl, 1.0)

        return dpo_loss

    assert gpu_check.check_question("DPO loss", gpu_check.DPO, make, "elsewhere", [7]) is False
    assert "DPO loss, 1 seeds: DIFFERENT" in capsys.readouterr().out


def test_without_a_gpu_the_default_says_what_to_do():
    done = subprocess.run([sys.executable, str(SCRIPT)], capture_output=True, text=True,
                          timeout=120)  # fmt: skip
    assert done.returncode == 2 and "try --device cpu" in done.stdout
