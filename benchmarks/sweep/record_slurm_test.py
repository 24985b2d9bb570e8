"""Record the wall time of the launcher's real-Slurm tests (tests/sweep/test_slurm_launcher.py): a local one-node
Slurm started by the test itself, a two-phase sweep with a job cancelled mid-run and resubmitted, compared with the
local launcher's run of the same sweep file, and the bad-input cases.

    OMP_NUM_THREADS=1 .venv/bin/python benchmarks/sweep/record_slurm_test.py

Writes slurm_test.json beside this script: pytest's outcome, the wall time of the whole file and of each test (from
pytest's --durations), the machine with its CPU model, and the date. Needs root and Debian's munge, slurmctld and
slurmd (what .ci/run installs); without them the tests skip and the record says so.
"""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
ROOT = HERE.parents[1]
sys.path.insert(0, str(ROOT / "src"))

from aot.runinfo import machine_info  # noqa: E402

TESTS = "tests/sweep/test_slurm_launcher.py"


def main() -> int:
    env = {**os.environ, "OMP_NUM_THREADS": "1", "AOT_REQUIRE_SLURM": "1"}
    command = [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", "--durations=0", TESTS]
    start = time.monotonic()
    done = subprocess.run(command, cwd=ROOT, env=env, capture_output=True, text=True, check=False)
    wall = time.monotonic() - start
    durations = {
        match.group(3): float(match.group(1))
        for match in re.finditer(r"^([\d.]+)s (call|setup)\s+\S+::(\S+)$", done.stdout, re.MULTILINE)
        if match.group(2) == "call"
    }
    counts = re.findall(r"^.*\b\d+ (?:passed|failed|skipped|error)\b.*$", done.stdout, re.MULTILINE)
    summary = counts[-1].strip("= ") if counts else (done.stdout + done.stderr).strip()[-200:]
    record = {
        "what": f"wall time of {TESTS} against a real local Slurm (munged, slurmctld, slurmd started by the test)",
        "command": "OMP_NUM_THREADS=1 .venv/bin/python benchmarks/sweep/record_slurm_test.py",
        "exit_code": done.returncode,
        "summary": summary,
        "wall_seconds": round(wall, 1),
        "test_seconds": durations,
        "machine": machine_info(),
    }
    (HERE / "slurm_test.json").write_text(json.dumps(record, indent=1) + "\n")
    print(f"{summary}; {wall:.0f} s; wrote {HERE / 'slurm_test.json'}")
    return done.returncode


if __name__ == "__main__":
    raise SystemExit(main())
