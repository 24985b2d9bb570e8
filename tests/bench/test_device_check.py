"""scripts/device_check.py, the prepared GPU check, runs here at toy sizes (``--tiny``, compile off): every part a GPU
session runs has run on the CPU first, so the script itself is not what breaks there. The CUDA-only parts (two SDPA
backends) say they were skipped; everything else runs and records what the GPU run will."""

from __future__ import annotations

import json
import math
import os
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]


def test_the_device_check_runs_on_the_cpu_and_records_every_part(tmp_path):
    env = {**os.environ, "OMP_NUM_THREADS": "1", "PYTHONPATH": str(ROOT / "src"), "AOT_DATA": str(tmp_path / "d")}
    done = subprocess.run(
        [sys.executable, str(ROOT / "scripts" / "device_check.py"), "--tiny", "--out", str(tmp_path)],
        env=env, capture_output=True, text=True, timeout=600,
    )  # fmt: skip
    assert done.returncode == 0, done.stdout + done.stderr
    record = json.loads((tmp_path / "device_check.json").read_text())
    assert record["versions"]["torch"] and record["versions"]["device"] == "cpu"
    for kind in ("q=k=v", "distinct"):  # the math backend against the written-out reference, forward and backward
        math_row = record["sdpa"][kind]["math"]
        assert math_row["forward_max_abs_diff"] < 1e-5 and math_row["backward_max_abs_diff"] < 1e-4
        assert "CUDA" in record["sdpa"][kind]["efficient"]["skipped"]
    for preset in ("gpt2-base", "aot-mssa-l-base"):
        run = record["train"][preset]
        assert run["steps"] == record["sizes"]["steps"] and math.isfinite(run["loss_last"])
        assert run["median_step_seconds"] > 0 and run["tokens_per_s"] > 0 and run["mfu_independent"] > 0
    assert set(record["ab"]) >= {"baseline", "vocab_unpadded", "adamw_foreach", "sync_every_step"}
    assert record["resume"]["max_abs_diff_vs_uninterrupted"] == 0.0  # deterministic kernels, resumed exactly
    assert record["resume"]["checkpoint_bytes"] > 0
    assert record["strategies"]["ddp"]["wrapped"] == "DistributedDataParallel"
    assert record["strategies"]["fsdp"]["checkpoint_format"] == "sharded"
    assert all(record["strategies"][s]["resumed_to"] > 0 for s in ("ddp", "fsdp"))
    assert not [name for name, entry in record.items() if isinstance(entry, dict) and "error" in entry]
