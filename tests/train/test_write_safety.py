"""One writer per run folder, full disks and refused runs (docs/guarantees.md): two `aot train lm` on one
--out (started together, or the second mid-run) — one refuses in one line, the other ends bit for bit as a lone run;
a file-size limit below the model's file, or a full tmpfs, during a checkpoint is one line, exit 2, the previous
checkpoint intact and --resume afterwards ends as the lone run (an export onto a full tmpfs: one line, nothing
left); a refused or failed run leaves the machine's measurement cache as it was; the folder lock is the OS's (gone
after kill -9) and follows a folder that --force made anew."""

from __future__ import annotations

import hashlib
import json
import os
import resource
import shutil
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
import torch
from test_guarantees import ROOT, TINY, _aot_train, _checkpoint_step, _finish, _run_record

from aot.bench import machine_cache, peaks
from aot.cli import main
from aot.errors import AotError
from aot.run_folder import LOCK_FILE, FolderBusy, folder_busy, folder_lock, follow_lock, move_aside

#: imports everything `aot` needs, says so (READY file), waits for the GO file, then runs `aot ARGV`: two processes
#: started this way meet the folder lock within milliseconds of each other, however long their imports took (the
#: first model built on the meta device, as the memory check before the lock does, imports torch._refs: seconds)
LAUNCHER = """
import pathlib, sys, time
import torch
from aot.cli import build_parser, main
build_parser()
with torch.device("meta"):
    torch.nn.Embedding(2, 2)
ready, go = pathlib.Path(sys.argv[1]), pathlib.Path(sys.argv[2])
ready.write_text("")
while not go.exists():
    time.sleep(0.001)
sys.exit(main(sys.argv[3:]))
"""


@pytest.fixture(scope="module")
def lone(tmp_path_factory):
    """A lone `aot train lm` run of the TINY command (and the data folder the other runs share)."""
    root = tmp_path_factory.mktemp("lone")
    _finish(_aot_train(root / "run", root / "data"))
    return root


def _waiting(name: str, out: Path, data: Path, gate: Path) -> tuple[subprocess.Popen, Path]:
    """`aot train lm --out OUT TINY --resume auto`, imported and waiting for ``gate`` to exist."""
    ready = gate.with_name(f"{name}.ready")
    env = {**os.environ, "AOT_DATA": str(data), "PYTHONPATH": str(ROOT / "src"), "OMP_NUM_THREADS": "1"}
    argv = ["train", "lm", "--out", str(out), *TINY, "--resume", "auto"]
    proc = subprocess.Popen(
        [sys.executable, "-c", LAUNCHER, str(ready), str(gate), *argv],
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    return proc, ready


def _wait_for(paths: list[Path], procs: list[subprocess.Popen]) -> None:
    deadline = time.monotonic() + 120
    while not all(p.exists() for p in paths):
        assert time.monotonic() < deadline and all(proc.poll() is None for proc in procs)
        time.sleep(0.01)


def _assert_one_refused(procs: list[subprocess.Popen], out: Path, lone: Path) -> subprocess.Popen:
    """Exactly one process refused with the lock's one line (naming the other's pid); the other finished and its
    run equals the lone run bit for bit (metrics, curve, weights). Returns the one that ran."""
    outcomes = [(proc, *proc.communicate(timeout=300)) for proc in procs]
    refused = [(p, err) for p, _, err in outcomes if p.returncode == 2]
    finished = [p for p, _, err in outcomes if p.returncode == 0]
    assert len(refused) == 1 and len(finished) == 1, [(p.returncode, err[-500:]) for p, _, err in outcomes]
    (_, err), ran = refused[0], finished[0]
    assert err.count("\n") == 1 and err.startswith("aot: error: another aot process"), err
    assert f"(pid {ran.pid}) is using {str(out)!r}" in err and "pick another --out" in err
    rows, curve, weights = _run_record(out)
    rows_lone, curve_lone, weights_lone = _run_record(lone / "run")
    assert rows == rows_lone and curve == curve_lone and weights.keys() == weights_lone.keys()
    for name, value in weights_lone.items():
        assert torch.equal(weights[name], value), name
    assert not (out / LOCK_FILE).exists()  # released and removed at the end
    return ran


def test_two_trainings_started_together_one_refuses_the_other_equals_a_lone_run(lone, tmp_path):
    out, gate = tmp_path / "run", tmp_path / "go"
    (first, ready_1), (second, ready_2) = (_waiting(n, out, lone / "data", gate) for n in ("first", "second"))
    _wait_for([ready_1, ready_2], [first, second])
    gate.write_text("")
    _assert_one_refused([first, second], out, lone)


def test_a_training_started_mid_run_refuses_and_the_first_ends_as_a_lone_run(lone, tmp_path):
    """The second `--resume auto` would have resumed from the first's last checkpoint while it still trained."""
    out, gate = tmp_path / "run", tmp_path / "go"
    second, ready = _waiting("second", out, lone / "data", gate)
    _wait_for([ready], [second])
    first = _aot_train(out, lone / "data", "--resume", "auto")
    deadline = time.monotonic() + 120
    while _checkpoint_step(out) < 5:
        assert time.monotonic() < deadline and first.poll() is None
        time.sleep(0.002)
    gate.write_text("")
    assert _assert_one_refused([first, second], out, lone) is first


def test_file_size_limit_during_a_checkpoint_is_one_line_and_resume_works(lone, tmp_path):
    """RLIMIT_FSIZE below model.safetensors' size while `aot train lm --resume` writes its last checkpoint: one
    line, exit 2, the previous checkpoint byte for byte as it was, no scratch folder; then `--resume` without the
    limit ends as the lone run."""
    out = tmp_path / "run"
    shutil.copytree(lone / "run", out)
    shutil.rmtree(out / "checkpoint")  # as a kill between two renames leaves it: only the step-39 checkpoint
    before = {p.name: p.read_bytes() for p in (out / "checkpoint.prev").iterdir()}
    limit = (lone / "run" / "checkpoint" / "model.safetensors").stat().st_size // 2

    def file_limit() -> None:
        signal.signal(signal.SIGXFSZ, signal.SIG_IGN)  # the write fails with EFBIG instead of killing the process
        resource.setrlimit(resource.RLIMIT_FSIZE, (limit, limit))

    env = {**os.environ, "AOT_DATA": str(lone / "data"), "PYTHONPATH": str(ROOT / "src"), "OMP_NUM_THREADS": "1"}
    proc = subprocess.run(
        [sys.executable, "-m", "aot.cli", "train", "lm", "--out", str(out), *TINY, "--resume"],
        env=env,
        capture_output=True,
        text=True,
        preexec_fn=file_limit,
        timeout=300,
    )
    assert proc.returncode == 2, proc.stderr
    [line] = [line for line in proc.stderr.splitlines() if line.startswith("aot: error:")]
    assert "cannot write a checkpoint" in line and "File too large" in line and "is intact" in line, line
    assert "Traceback" not in proc.stderr and "SafetensorError" not in proc.stderr
    assert {p.name: p.read_bytes() for p in (out / "checkpoint.prev").iterdir()} == before
    assert not (out / "checkpoint").exists() and not (out / ".checkpoint.tmp").exists()
    _finish(_aot_train(out, lone / "data", "--resume"))
    rows, curve, weights = _run_record(out)
    rows_lone, curve_lone, weights_lone = _run_record(lone / "run")
    assert rows == rows_lone and curve == curve_lone
    assert all(torch.equal(weights[name], value) for name, value in weights_lone.items())


@pytest.fixture
def small_tmpfs(tmp_path):  # type: ignore[no-untyped-def]
    """A tmpfs mounted at a fresh folder, sized by the test through ``remount`` (root only: skips elsewhere)."""
    mount = tmp_path / "tmpfs"
    mount.mkdir()
    made = subprocess.run(["mount", "-t", "tmpfs", "-o", "size=64m", "tmpfs", str(mount)], capture_output=True)
    if made.returncode != 0:
        pytest.skip("mounting a tmpfs needs root (CAP_SYS_ADMIN); the file-size-limit test covers the rule elsewhere")

    def remount(size: int) -> None:
        subprocess.run(["mount", "-o", f"remount,size={size}", str(mount)], check=True)

    yield mount, remount
    subprocess.run(["umount", "-l", str(mount)], check=False)


def test_a_full_tmpfs_during_a_checkpoint_is_one_line_and_resume_works_elsewhere(lone, tmp_path, small_tmpfs):
    """A real full disk: the run folder on a tmpfs with room for the run but not for another checkpoint. `aot train
    lm --resume` ends its training, fails to write the checkpoint: one line, exit 2, the previous checkpoint byte for
    byte as it was, no scratch folder; the folder copied to a roomy disk then resumes to the lone run's end."""
    mount, remount = small_tmpfs
    out = mount / "run"
    shutil.copytree(lone / "run", out)
    shutil.rmtree(out / "checkpoint")  # only the step-39 checkpoint.prev: the resumed run must write a new one
    before = {p.name: p.read_bytes() for p in (out / "checkpoint.prev").iterdir()}
    used = sum(p.stat().st_size for p in out.rglob("*") if p.is_file())
    model = (lone / "run" / "checkpoint" / "model.safetensors").stat().st_size
    remount(used + model // 2 + 64 * 1024)  # the folder, half a model file and the logs: no whole checkpoint
    env = {**os.environ, "AOT_DATA": str(lone / "data"), "PYTHONPATH": str(ROOT / "src"), "OMP_NUM_THREADS": "1"}
    proc = subprocess.run(
        [sys.executable, "-m", "aot.cli", "train", "lm", "--out", str(out), *TINY, "--resume"],
        env=env, capture_output=True, text=True, timeout=300,
    )  # fmt: skip
    assert proc.returncode == 2, proc.stderr
    [line] = [line for line in proc.stderr.splitlines() if line.startswith("aot: error:")]
    assert "No space left on device" in line and "is intact" in line, line
    assert "Traceback" not in proc.stderr
    assert {p.name: p.read_bytes() for p in (out / "checkpoint.prev").iterdir()} == before
    assert not (out / "checkpoint").exists() and not (out / ".checkpoint.tmp").exists()
    elsewhere = tmp_path / "moved"
    shutil.copytree(out, elsewhere)
    _finish(_aot_train(elsewhere, lone / "data", "--resume"))
    rows, curve, weights = _run_record(elsewhere)
    rows_lone, curve_lone, weights_lone = _run_record(lone / "run")
    assert rows == rows_lone and curve == curve_lone
    assert all(torch.equal(weights[name], value) for name, value in weights_lone.items())


def test_an_export_onto_a_full_tmpfs_is_one_line_and_leaves_nothing(lone, small_tmpfs):
    """`aot export safetensors` and `aot export hf` into a full disk: one line, exit 2, no partial folder."""
    mount, remount = small_tmpfs
    remount((lone / "run" / "checkpoint" / "model.safetensors").stat().st_size // 2)
    for fmt, argv in (
        ("safetensors", [str(lone / "run"), str(mount / "st")]),
        ("hf", [str(lone / "run"), str(mount / "hf")]),
    ):
        proc = subprocess.run(
            [sys.executable, "-m", "aot.cli", "export", fmt, *argv],
            env={**os.environ, "PYTHONPATH": str(ROOT / "src")}, capture_output=True, text=True, timeout=300,
        )  # fmt: skip
        if fmt == "hf" and "needs transformers" in proc.stderr:
            continue
        assert proc.returncode == 2, (fmt, proc.stderr)
        errors = [line for line in proc.stderr.splitlines() if line.startswith("aot: error:")]
        assert len(errors) == 1 and "No space left on device" in errors[0], (fmt, proc.stderr)
        assert "Traceback" not in proc.stderr
        assert sorted(p.name for p in mount.iterdir()) == [], (fmt, list(mount.iterdir()))


# -- the machine's measurement cache --------------------------------------------------------------------------


def _hashes(folder: Path) -> dict[str, str]:
    return {p.name: hashlib.sha256(p.read_bytes()).hexdigest() for p in folder.glob("*.json")}


def test_a_refused_or_failed_run_leaves_the_machine_cache_as_it_was(tmp_path, monkeypatch, capsys, tiny_trainer):
    """precision auto and a peak to measure: a run refused for a val split shorter than its context, and a run
    whose evaluation fails after the measurement, leave precision.json / peaks.json as they were (an entry of
    another machine kept, byte for byte; no new file); a run that finishes stores what it measured."""
    data = tmp_path / "data"
    data.mkdir()
    monkeypatch.setenv("AOT_DATA", str(data))
    (data / "precision.json").write_text(json.dumps({"another machine": {"shape": {"seconds": {}}}}) + "\n")
    monkeypatch.setattr(peaks, "measure_matmul_peak", lambda dtype, device, *sizes_repeat: {"peak": 1e9})
    monkeypatch.setattr(peaks.os, "getloadavg", lambda: (0.0, 0.0, 0.0))  # quiet: only a quiet peak is cached
    before = _hashes(data)
    argv = ["train", "lm", "--out", str(tmp_path / "short"), *TINY, "--set", "train.precision=auto"]
    assert main([*argv, "--set", "data.val_fraction=0.0001"]) == 2
    assert "split" in capsys.readouterr().err  # refused for its val split (before or at its first evaluation)
    assert _hashes(data) == before

    def failing_eval(model: torch.nn.Module) -> dict[str, float]:
        raise AotError("the evaluation split is too short")

    trainer = tiny_trainer(tmp_path / "failing", steps=2, precision="auto")
    trainer.evaluate, trainer.flops_per_sample = failing_eval, 1.0
    with pytest.raises(AotError, match="too short"):
        trainer.fit()
    assert trainer.precision_choice["reason"].startswith(("bf16", "fp32"))  # it did measure
    assert _hashes(data) == before
    trainer = tiny_trainer(tmp_path / "good", steps=2, precision="auto")
    trainer.flops_per_sample = 1.0
    trainer.fit()
    stored = json.loads((data / "precision.json").read_text())
    assert "another machine" in stored and machine_cache.machine_key() in stored
    assert machine_cache.machine_key() in json.loads((data / "peaks.json").read_text())


# -- the lock itself ------------------------------------------------------------------------------------------


def test_the_lock_is_the_oss_gone_after_kill_9_and_follows_a_folder_made_anew(tmp_path):
    holder = subprocess.Popen(
        [sys.executable, "-c", "import sys, time\nfrom aot.run_folder import folder_lock\n"
         "with folder_lock(sys.argv[1]):\n    print('locked', flush=True)\n    time.sleep(600)", str(tmp_path / "run")],
        env={**os.environ, "PYTHONPATH": str(ROOT / "src")}, stdout=subprocess.PIPE, text=True,
    )  # fmt: skip
    assert holder.stdout.readline().strip() == "locked"
    assert folder_busy(tmp_path / "run") and not folder_busy(tmp_path / "elsewhere")
    busy = rf"another aot process \(pid {holder.pid}\) is using .*pick another --out"
    with pytest.raises(FolderBusy, match=busy), folder_lock(tmp_path / "run"):
        pass
    holder.send_signal(signal.SIGKILL)
    holder.wait()
    assert (tmp_path / "run" / LOCK_FILE).exists()  # a stale file: it blocks nobody
    assert not folder_busy(tmp_path / "run")
    with folder_lock(tmp_path / "run"):
        (tmp_path / "run" / "metrics.jsonl").write_text("{}\n")
        move_aside(tmp_path / "run")  # what --force does: the old run renamed, the folder made anew
        follow_lock(tmp_path / "run")
        other = subprocess.run(
            [sys.executable, "-c", "import sys\nfrom aot.run_folder import folder_lock\nwith folder_lock(sys.argv[1]):"
             " pass", str(tmp_path / "run")],
            env={**os.environ, "PYTHONPATH": str(ROOT / "src")}, capture_output=True, text=True,
        )  # fmt: skip
        assert other.returncode == 1 and "FolderBusy: another aot process" in other.stderr
        assert not (tmp_path / "run.old-1" / LOCK_FILE).exists()  # the moved run keeps no lock file of ours
    assert sorted(p.name for p in tmp_path.iterdir()) == ["run", "run.old-1"]
    assert not list((tmp_path / "run").iterdir())  # the lock file went with the lock
    with folder_lock(tmp_path / "new" / "run"):
        pass
    assert not (tmp_path / "new" / "run").exists()  # a refused command leaves no folder behind
    with folder_lock(tmp_path / "nest"), folder_lock(tmp_path / "nest"):  # nested in one process: the same lock
        assert (tmp_path / "nest" / LOCK_FILE).read_text().strip() == str(os.getpid())
    assert not (tmp_path / "nest").exists()


# -- save_pretrained and the report: one line, the old files whole -------------------------------------------


def test_save_pretrained_and_report_writes_on_a_full_disk_are_one_line(tmp_path, monkeypatch):
    """safetensors' own error for a failed write (as a full disk raises it) and an OSError under the report: one
    line naming the folder and the OS error, the earlier files byte for byte, no scratch file left."""
    import safetensors.torch

    from aot.models import build_model, preset_config
    from aot.report.build import write_report
    from aot.run_folder import WriteFailed

    model = build_model(preset_config("aot-mssa-l-cpu", n_layer=1, n_embd=16, n_head=2, block_size=8))
    model.save_pretrained(tmp_path / "model")
    before = {p.name: p.read_bytes() for p in (tmp_path / "model").iterdir()}

    class SafetensorError(Exception):  # what safetensors raises (its type lives in its Rust extension)
        pass

    def full_disk(*args, **kwargs):
        raise SafetensorError("Error while serializing: I/O error: No space left on device (os error 28)")

    monkeypatch.setattr(safetensors.torch, "save_model", full_disk)
    with pytest.raises(WriteFailed) as info:
        model.save_pretrained(tmp_path / "model")
    assert "\n" not in str(info.value) and "No space left on device" in str(info.value)
    assert str(tmp_path / "model") in str(info.value)
    assert {p.name: p.read_bytes() for p in (tmp_path / "model").iterdir()} == before  # no scratch, nothing new

    (tmp_path / "report").mkdir()
    (tmp_path / "report" / "report.md").write_text("the earlier report\n")

    def no_space(path, text):
        raise OSError(28, "No space left on device", str(path))

    monkeypatch.setattr("aot.report.build.write_text_atomic", no_space)
    machine = {"date": "d", "processor": "p", "cpu_count": 1, "platform": "x", "python": "3", "torch": "2"}
    with pytest.raises(WriteFailed, match=r"cannot write the report .*report.md.*No space left on device"):
        write_report([], [], preset="tiny", out=tmp_path / "report", command="c", machine=machine, code="", commit=None)
    assert (tmp_path / "report" / "report.md").read_text() == "the earlier report\n"
