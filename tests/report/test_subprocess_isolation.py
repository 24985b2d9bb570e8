"""Python started by the package never imports from the caller's working directory (docs/guarantees.md):
`aot reproduce` started in a folder holding a `yaml.py` (a module every `aot` command imports) runs its steps
without importing it; the same for the helper's two forms (``-P`` and the bootstrap of Pythons before 3.11) and for
torchrun's workers."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from aot.interpreter import module_argv, torchrun_argv
from aot.report.part import Step

ROOT = Path(__file__).resolve().parents[2]


@pytest.fixture
def hostile(tmp_path: Path) -> tuple[Path, Path]:
    """A working directory holding a ``yaml.py`` that writes a marker file when imported, and the marker's path."""
    folder = tmp_path / "cwd"
    folder.mkdir()
    marker = tmp_path / "imported"
    (folder / "yaml.py").write_text(f"open({str(marker)!r}, 'w').write('yaml.py from the working directory ran')\n")
    return folder, marker


def _env() -> dict[str, str]:
    return {**os.environ, "PYTHONPATH": str(ROOT / "src"), "OMP_NUM_THREADS": "1"}


@pytest.mark.parametrize("safe_path_flag", [True, False], ids=["-P", "bootstrap"])
def test_module_argv_keeps_the_working_directory_off_sys_path(hostile, safe_path_flag):
    folder, marker = hostile
    if safe_path_flag and sys.version_info < (3, 11):
        pytest.skip("-P needs Python 3.11")
    argv = [*module_argv("aot.cli", safe_path_flag=safe_path_flag), "--version"]
    done = subprocess.run(argv, cwd=folder, env=_env(), capture_output=True, text=True, timeout=300)
    assert done.returncode == 0 and done.stdout.startswith("aot "), done.stderr
    assert not marker.exists()
    subprocess.run([sys.executable, "-m", "aot.cli", "--version"], cwd=folder, env=_env(), capture_output=True)
    assert marker.exists()  # `python -m` in that folder does run it: the check above can fail


def test_torchrun_workers_keep_the_working_directory_off_sys_path(hostile):
    folder, marker = hostile
    pytest.importorskip("torch.distributed.run")
    argv = [*torchrun_argv(["--standalone", "--nproc_per_node=1"], "aot.cli"), "--version"]
    done = subprocess.run(argv, cwd=folder, env=_env(), capture_output=True, text=True, timeout=300)
    assert done.returncode == 0 and "aot " in done.stdout, done.stderr[-2000:]
    assert not marker.exists()


def test_a_steps_command_as_printed_is_unchanged():
    """What the report shows is what a user types; only what starts is this interpreter, -P or the bootstrap."""
    part = Path("PART")
    plain, launched = Step("main", ["denoise"]), Step("lm", ["train", "lm"], ["torchrun", "--nproc_per_node=2"])
    assert plain.command(part) == ["aot", "denoise", "--out", "PART/main"]
    assert launched.command(part) == ["torchrun", "--nproc_per_node=2", "-m", "aot.cli", "train", "lm", "--out",
                                      "PART/lm"]  # fmt: skip
    assert plain.process_argv(part) == [*module_argv("aot.cli"), "denoise", "--out", "PART/main"]
    launcher = module_argv("torch.distributed.run")
    assert launched.process_argv(part) == [*launcher, "--nproc_per_node=2", "--no-python", *module_argv("aot.cli"),
                                           "train", "lm", "--out", "PART/lm"]  # fmt: skip


def test_reproduce_in_a_folder_holding_yaml_py_never_imports_it(hostile, tmp_path):
    """`aot reproduce --scale tiny --only theory` (one `aot denoise` step, seconds) started in that folder: the
    part is done and the marker was never written."""
    folder, marker = hostile
    aot = Path(sys.executable).with_name("aot")  # what a user types: the console script (not the working directory)
    parent = [str(aot)] if aot.is_file() else module_argv("aot.cli")
    out = tmp_path / "report"
    argv = [*parent, "reproduce", "--scale", "tiny", "--only", "theory", "--out", str(out)]
    env = {**_env(), "AOT_DATA": str(tmp_path / "data")}
    done = subprocess.run(argv, cwd=folder, env=env, capture_output=True, text=True, timeout=600)
    assert done.returncode == 0, (done.stdout + done.stderr)[-2000:]
    assert json.loads((out / "theory" / "status.json").read_text())["state"] == "done"
    assert (out / "theory" / "main" / "results.json").is_file()
    assert not marker.exists(), marker.read_text()
