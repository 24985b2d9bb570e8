"""Installed, not only cloned: the wheel built from this checkout, installed into a folder of its own and run from
a temporary directory (no checkout on the path), imports from there and its commands work. What reads the
checkout's benchmark records (the report's lr sweep and scaling study) says in one line that an install holds none
and how to pass them (--data), instead of pointing at a path beside the package."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
FIXTURE = ROOT / "tests" / "fixtures" / "sonnets.txt"


def _run(args: list[str], cwd: Path, site: Path) -> subprocess.CompletedProcess:
    env = {**os.environ, "PYTHONPATH": str(site), "OMP_NUM_THREADS": "1", "AOT_DATA": str(cwd / "data")}
    return subprocess.run([sys.executable, "-P", *args], cwd=cwd, env=env, capture_output=True, text=True, timeout=300)


def test_the_wheel_works_from_another_directory(tmp_path):
    wheels, site, work = tmp_path / "wheels", tmp_path / "site", tmp_path / "work"
    pip = [sys.executable, "-m", "pip", "--disable-pip-version-check", "-q"]
    build = [*pip, "wheel", "--no-deps", "-w", str(wheels), str(ROOT)]
    if subprocess.run([*build, "--no-build-isolation"]).returncode != 0:  # no setuptools here: pip fetches it
        subprocess.run(build, check=True)
    (wheel,) = wheels.glob("aot-*.whl")
    subprocess.run([*pip, "install", "--no-deps", "--target", str(site), str(wheel)], check=True)
    work.mkdir()
    shutil.copy(FIXTURE, work / "text.txt")
    where = _run(["-c", "import aot, aot.hf; print(aot.__file__)"], work, site)
    assert where.returncode == 0 and where.stdout.strip() == str(site / "aot" / "__init__.py"), where.stderr
    assert (site / "aot" / "hf" / "modeling_aot.py").is_file()  # what `aot export hf` ships
    models = _run(["-m", "aot.cli", "models", "--json"], work, site)
    assert models.returncode == 0 and any(row["name"] == "aot-mssa-l-cpu" for row in json.loads(models.stdout))
    train = ["-m", "aot.cli", "train", "lm", "--corpus", "text.txt", "--steps", "2", "--set", "model.n_layer=1",
             "--set", "model.block_size=32", "--set", "eval.final_windows=4", "--set", "train.progress=false",
             "--out", "runs/lm"]  # fmt: skip
    trained = _run(train, work, site)
    assert trained.returncode == 0, trained.stderr
    assert json.loads((work / "runs" / "lm" / "results.json").read_text())["train"]["steps"] == 2
    report = _run(["-m", "aot.cli", "reproduce", "--preset", "tiny", "--dry-run", "--out", "rep"], work, site)
    assert report.returncode == 0, report.stderr
    output = report.stdout + report.stderr
    assert "this install holds no recorded scaling study" in output and "--data scaling-runs=FILE" in output
    assert str(ROOT) not in output and "/benchmarks/" not in output  # nothing points at a checkout
