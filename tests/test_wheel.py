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
import sysconfig
import zipfile
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
FIXTURE = ROOT / "tests" / "fixtures" / "sonnets.txt"


def _run(args: list[str], cwd: Path, site: Path) -> subprocess.CompletedProcess:
    env = {**os.environ, "PYTHONPATH": str(site), "OMP_NUM_THREADS": "1", "AOT_DATA": str(cwd / "data")}
    return subprocess.run([sys.executable, "-P", *args], cwd=cwd, env=env, capture_output=True, text=True, timeout=300)


PIP = [sys.executable, "-m", "pip", "--disable-pip-version-check", "-q"]


@pytest.fixture(scope="module")
def wheel(tmp_path_factory: pytest.TempPathFactory) -> Path:
    wheels = tmp_path_factory.mktemp("wheels")
    build = [*PIP, "wheel", "--no-deps", "-w", str(wheels), str(ROOT)]
    if subprocess.run([*build, "--no-build-isolation"]).returncode != 0:  # no setuptools here: pip fetches it
        subprocess.run(build, check=True)
    (found,) = wheels.glob("aot-*.whl")
    return found


def test_the_wheel_works_from_another_directory(tmp_path, wheel):
    site, work = tmp_path / "site", tmp_path / "work"
    subprocess.run([*PIP, "install", "--no-deps", "--target", str(site), str(wheel)], check=True)
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
    report = _run(["-m", "aot.cli", "reproduce", "--scale", "tiny", "--dry-run", "--out", "rep"], work, site)
    assert report.returncode == 0, report.stderr
    output = report.stdout + report.stderr
    assert "this install holds no recorded scaling study" in output and "--data scaling-runs=FILE" in output
    assert str(ROOT) not in output and "/benchmarks/" not in output  # nothing points at a checkout


def test_the_installed_wheel_registers_aot_in_lm_eval(tmp_path, wheel):
    """The wheel's root holds ``aot-plugins.pth`` and ``_aot_plugins.py`` (site-packages once installed); installed
    into a virtual environment of its own (this one's packages behind it, its .pth files not run), a Python there
    that never imports aot resolves lm-eval's ``aot`` to the wheel's harness model."""
    pytest.importorskip("lm_eval")
    with zipfile.ZipFile(wheel) as archive:
        assert {"_aot_plugins.py", "aot-plugins.pth"} <= {name for name in archive.namelist() if "/" not in name}
        assert archive.read("aot-plugins.pth") == b"import _aot_plugins\n"
    venv = tmp_path / "venv"
    subprocess.run([sys.executable, "-m", "venv", "--without-pip", str(venv)], check=True)
    python = venv / "bin" / "python"
    purelib = Path(
        subprocess.check_output(
            [python, "-c", "import sysconfig; print(sysconfig.get_paths()['purelib'])"], text=True
        ).strip()
    )
    (purelib / "zz-this-environment.pth").write_text(sysconfig.get_paths()["purelib"] + "\n")  # torch, lm-eval, ...
    subprocess.run([*PIP, "install", "--no-deps", "--target", str(purelib), str(wheel)], check=True)
    code = (
        "import sys\n"
        "from lm_eval.api.registry import get_model\n"
        "model = get_model('aot')\n"
        "print(model.__name__, sys.modules['aot'].__file__)\n"
    )
    env = {k: v for k, v in os.environ.items() if k not in ("PYTHONPATH", "AOT_NO_PLUGINS")}
    done = subprocess.run([python, "-c", code], cwd=tmp_path, env=env, capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stderr[-3000:]
    assert done.stdout.split() == ["AotHarnessLM", str(purelib / "aot" / "__init__.py")]
