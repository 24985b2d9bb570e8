"""`aot export safetensors` / `aot export hf` never land on a user's run and write all at once
(docs/guarantees.md): an OUT_DIR holding a run, a checkpoint (the run's own or another's) or other files is refused
in one line unless --force (which moves it aside, never deletes it); an earlier export of the same format is replaced;
kill -9 at random moments leaves the old export or the whole new one, never a mixture; a file-size limit below the
model's file is one line, exit 2, the earlier export intact and no scratch folder left."""

from __future__ import annotations

import hashlib
import os
import random
import resource
import shutil
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
from test_guarantees import ROOT, TINY

from aot.cli import main
from aot.models import AotModel
from aot.run_folder import LOCK_FILE, MODEL_WEIGHTS, atomic_folder
from aot.train.export_folder import EXPORT_RECORD

FORMATS = ["safetensors", "hf"]


@pytest.fixture(scope="module")
def runs(tmp_path_factory):
    """Two finished `aot train lm` runs (3 steps, seeds 7 and 8: same shapes, other weights) and their data."""
    root = tmp_path_factory.mktemp("export-runs")
    with pytest.MonkeyPatch.context() as patch:
        patch.setenv("AOT_DATA", str(root / "data"))
        for name, seed in (("a", "7"), ("b", "8")):
            argv = ["train", "lm", "--out", str(root / name), *TINY, "--seed", seed, "--set", "train.steps=3"]
            assert main(argv) == 0
    return root


def snapshot(folder: Path) -> dict[str, str] | None:
    """{relative path: digest} of every file under ``folder`` (its lock file aside), None when it does not exist."""
    if not folder.exists():
        return None
    return {
        str(p.relative_to(folder)): digest(p) for p in sorted(folder.rglob("*")) if p.is_file() and p.name != LOCK_FILE
    }


def digest(path: Path) -> str:
    """The sha256 of a file; of a safetensors file, of its metadata and tensors (safetensors writes the metadata in
    no fixed order, so two saves of one model differ in bytes); a damaged one digests as its bytes."""
    from safetensors import safe_open

    if path.suffix == ".safetensors":
        try:
            with safe_open(str(path), "pt") as handle:
                canonical = [sorted((handle.metadata() or {}).items())]
                for name in sorted(handle.keys()):
                    tensor = handle.get_tensor(name)
                    canonical.append([name, str(tensor.dtype), list(tensor.shape), tensor.numpy().tobytes().hex()])
            return hashlib.sha256(repr(canonical).encode()).hexdigest()
        except Exception:  # not a whole safetensors file: its bytes
            pass
    return hashlib.sha256(path.read_bytes()).hexdigest()


def scratch_left(out: Path) -> list[str]:
    return sorted(p.name for p in out.parent.iterdir() if p.name.startswith(f".{out.name}."))


def export_argv(fmt: str, run: Path, out: Path, *extra: str) -> list[str]:
    return ["export", fmt, str(run / "checkpoint" if fmt == "safetensors" else run), str(out), *extra]


def aot_process(argv: list[str], file_limit: int | None = None) -> subprocess.Popen:
    """``aot ARGV`` in a fresh process; ``file_limit``: RLIMIT_FSIZE in bytes (SIGXFSZ ignored: the write fails
    with EFBIG, as on a full disk)."""

    def limit() -> None:
        if file_limit is not None:
            signal.signal(signal.SIGXFSZ, signal.SIG_IGN)
            resource.setrlimit(resource.RLIMIT_FSIZE, (file_limit, file_limit))

    env = {**os.environ, "PYTHONPATH": str(ROOT / "src"), "OMP_NUM_THREADS": "1"}
    return subprocess.Popen(
        [sys.executable, "-m", "aot.cli", *argv],
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        preexec_fn=limit,
    )


# -- refusals -------------------------------------------------------------------------------------------------


@pytest.mark.parametrize("fmt", FORMATS)
def test_an_out_holding_a_run_a_checkpoint_or_other_files_is_refused(runs, tmp_path, capsys, fmt):
    """OUT_DIR = the run's own checkpoint/, another run's checkpoint/, a run folder, a folder with a user's file,
    an export of the other format: each one line naming OUT_DIR and --force, exit 2, every file as it was."""
    pytest.importorskip("transformers")
    user = tmp_path / "notes"
    user.mkdir()
    (user / "notes.txt").write_text("mine")
    other_format = tmp_path / "other"
    assert main(export_argv("hf" if fmt == "safetensors" else "safetensors", runs / "b", other_format)) == 0
    before = {p: snapshot(p) for p in (runs / "a", runs / "b", user, other_format)}
    capsys.readouterr()
    for out, problem in (
        (runs / "a" / "checkpoint", "holds a checkpoint or model"),
        (runs / "b" / "checkpoint", "holds a checkpoint or model"),
        (runs / "b", "holds a training run"),
        (user, "holds other files"),
        (other_format, "holds an export of another format"),
    ):
        assert main(export_argv(fmt, runs / "a", out)) == 2
        err = capsys.readouterr().err
        assert err.startswith("aot: error: OUT_DIR ") and err.count("\n") == 1, err
        assert str(out) in err and problem in err and "--force" in err, err
    assert {p: snapshot(p) for p in before} == before
    assert not [p for p in tmp_path.iterdir() if p.name.startswith(".")] and not scratch_left(runs / "b")


@pytest.mark.parametrize("fmt", FORMATS)
def test_force_moves_what_out_held_aside_and_an_earlier_export_is_replaced(runs, tmp_path, capsys, fmt):
    pytest.importorskip("transformers")
    run = tmp_path / "run"
    shutil.copytree(runs / "b", run)
    held = snapshot(run / "checkpoint")
    assert main(export_argv(fmt, runs / "a", run / "checkpoint", "--force")) == 0
    assert "--force: moved what" in capsys.readouterr().err
    assert snapshot(run / "checkpoint.old-1") == held  # kept, not deleted
    assert (run / "checkpoint" / EXPORT_RECORD).is_file()
    out = tmp_path / "export"
    assert main(export_argv(fmt, runs / "a", out)) == 0
    first = snapshot(out)
    assert main(export_argv(fmt, runs / "b", out)) == 0  # an earlier export of the same format: replaced
    assert snapshot(out) not in (None, first) and not list(tmp_path.glob("export.old-*"))
    assert main(export_argv(fmt, runs / "a", out)) == 0
    assert snapshot(out) == first  # the same run exported again: the same bytes
    assert not scratch_left(out) and not (out / LOCK_FILE).exists()


# -- atomic: kill -9 at random moments ------------------------------------------------------------------------


def _kill_at_random(argv: list[str], out: Path, rng: random.Random, full_seconds: float) -> bool:
    """Start ``aot ARGV`` and kill -9 it: after a random delay over the whole export, or (every other time) at a
    random instant after its scratch folder appears (mid-write, mid-swap). False when it finished first."""
    proc = aot_process(argv)
    if rng.random() < 0.5:
        time.sleep(rng.uniform(0, full_seconds))
    else:
        deadline = time.monotonic() + 120
        while not scratch_left(out) and proc.poll() is None:
            assert time.monotonic() < deadline
            time.sleep(0.001)
        time.sleep(rng.uniform(0, 0.05))
    finished = proc.poll() is not None
    proc.send_signal(signal.SIGKILL)
    proc.communicate()
    return not finished


@pytest.mark.parametrize("fmt", FORMATS)
def test_kill_at_random_moments_leaves_the_old_export_or_the_whole_new_one(runs, tmp_path, fmt):
    """Ten kill -9 of `aot export FMT b OUT` over an earlier export of a (and of a first export into a new folder):
    after each, OUT holds exactly the old export or exactly the new one (every file's sha256; the two runs have the
    same shapes, so a mixture would load silently), or — a first export — nothing that loads."""
    pytest.importorskip("transformers")
    rng = random.Random({"safetensors": 3, "hf": 4}[fmt])
    out = tmp_path / "out"
    start = time.perf_counter()
    assert aot_process(export_argv(fmt, runs / "a", out)).wait(timeout=300) == 0
    full_seconds = time.perf_counter() - start
    old = snapshot(out)
    states, kills = [], 0
    for _ in range(10):
        kills += _kill_at_random(export_argv(fmt, runs / "b", out), out, rng, full_seconds)
        states.append(snapshot(out))
        if states[-1] != old:  # it finished (or the kill fell after the swap): back to the old export
            assert main(export_argv(fmt, runs / "a", out)) == 0
    first = tmp_path / "first"
    first_states = []
    for _ in range(4):
        kills += _kill_at_random(export_argv(fmt, runs / "b", first), first, rng, full_seconds)
        first_states.append(snapshot(first))
        shutil.rmtree(first, ignore_errors=True)
    assert main(export_argv(fmt, runs / "b", out)) == 0  # a clean export over what the kills left
    new = snapshot(out)
    assert main(export_argv(fmt, runs / "b", first)) == 0
    print(f"{fmt}: {kills} kills; states after them: {[s == old for s in states]}")
    assert kills >= 8 and new != old
    assert all(state in (old, new) for state in states)
    assert all(state in (None, {}, snapshot(first)) for state in first_states)
    assert not scratch_left(out) and not scratch_left(first)  # the stale scratch folders are gone
    AotModel.from_pretrained(out)


# -- a file-size limit below the model's file: one line, the earlier export intact -----------------------------


@pytest.mark.parametrize("fmt", FORMATS)
def test_file_size_limit_during_an_export_is_one_line_and_keeps_the_earlier_export(runs, tmp_path, fmt):
    pytest.importorskip("transformers")
    out = tmp_path / "out"
    assert main(export_argv(fmt, runs / "a", out)) == 0
    before = snapshot(out)
    limit = (out / MODEL_WEIGHTS).stat().st_size // 2
    proc = aot_process(export_argv(fmt, runs / "b", out), file_limit=limit)
    _, err = proc.communicate(timeout=300)
    assert proc.returncode == 2, err
    [line] = [line for line in err.splitlines() if line.startswith("aot: error:")]
    assert "File too large" in line and str(out) in line and "Traceback" not in err, err
    assert snapshot(out) == before and not scratch_left(out)
    assert main(export_argv(fmt, runs / "b", out)) == 0 and snapshot(out) != before  # without the limit: works


def test_a_failed_write_leaves_the_folder_as_it_was_and_no_scratch(tmp_path, monkeypatch):
    """atomic_folder: an error inside the block removes the scratch folder and leaves OUT as it was; a stale
    scratch folder of a killed process is removed by the next call; without an atomic exchange (other systems)
    two renames do the same."""
    out = tmp_path / "out"
    out.mkdir()
    (out / "model.txt").write_text("old")
    with pytest.raises(OSError), atomic_folder(out) as scratch:
        (scratch / "model.txt").write_text("new")
        raise OSError(28, "No space left on device")
    assert snapshot(out) == {"model.txt": hashlib.sha256(b"old").hexdigest()} and not scratch_left(out)
    dead = subprocess.run([sys.executable, "-c", "import os; print(os.getpid())"], capture_output=True, text=True)
    stale = tmp_path / f".out.{dead.stdout.strip()}-0123abcd.tmp"  # a killed export's scratch
    stale.mkdir()
    monkeypatch.setattr("aot.run_folder._exchange", lambda a, b: False)
    with atomic_folder(out) as scratch:
        (scratch / "model.txt").write_text("new")
    assert (out / "model.txt").read_text() == "new" and not scratch_left(out)
