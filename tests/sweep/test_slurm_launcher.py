"""``aot sweep --launcher slurm`` against a real Slurm (tests/sweep/local_slurm.py: munged, slurmctld and slurmd on
this machine): a two-phase sweep (an lr sweep, then a second seed at the winner) with one job cancelled mid-run and
the command resubmitted ends with the same store rows and bitwise the same weights as the local launcher's run of
the same sweep file; and each way a cluster run goes wrong is one line that leaves the store as it was.

Where Slurm cannot start, the real-cluster tests skip with the reason; with AOT_REQUIRE_SLURM=1 (``.ci/run``) they
fail instead."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from pathlib import Path

import pytest
import torch
import yaml
from local_slurm import LocalSlurm, start_cluster
from safetensors.torch import load_file

from aot.cli import main
from aot.sweep.launch.jobs import ENDINGS, JobState, failure_line
from aot.sweep.launch.local import run_local
from aot.sweep.launch.resources import Resources, time_minutes
from aot.sweep.sweep_file import read_sweep_file

pytest.importorskip("submitit")

FIXTURE = Path(__file__).resolve().parents[1] / "fixtures" / "sonnets.txt"
#: long enough (about 5 s of training here; the test cluster's KillWait is 1 s) that a job can be cancelled between
#: its first checkpoint and its end
GRID = {
    "data.corpus": str(FIXTURE),
    "model.n_layer": 1,
    "model.n_embd": 16,
    "model.n_head": 2,
    "model.block_size": 16,
    "train.steps": 3000,
    "train.batch_size": 4,
    "train.warmup_steps": 1,
    "train.precision": "fp32",
    "train.eval_every": 0,
    "train.checkpoint_every": 100,
    "train.progress": "false",
    "eval.periodic_windows": 2,
    "eval.final_windows": 4,
    "eval.batch_size": 2,
    "train.lr": [1.0e-3, 3.0e-3],
}
#: what differs between two trainings of one run: where and how fast
VOLATILE = {"run_dir", "tokens_per_second", "train_seconds", "wall_seconds", "date"}


@pytest.fixture(scope="module")
def cluster(tmp_path_factory) -> LocalSlurm:
    started = start_cluster(tmp_path_factory.mktemp("slurm"))
    if isinstance(started, str):
        if os.environ.get("AOT_REQUIRE_SLURM") == "1":
            pytest.fail(f"AOT_REQUIRE_SLURM=1 but {started}")
        pytest.skip(started)
    yield started
    started.stop()


@pytest.fixture
def on_cluster(cluster, monkeypatch, tmp_path):
    monkeypatch.setenv("SLURM_CONF", str(cluster.conf))
    monkeypatch.setenv("OMP_NUM_THREADS", "1")  # the jobs' torch, as the local run's below
    monkeypatch.setenv("AOT_DATA", str(tmp_path / "data"))
    return cluster


def sweep_file(tmp_path: Path, grid: dict | None = None, **launcher) -> Path:
    path = tmp_path / "sweep.yaml"
    spec = {"task": "lm", "recipe": "cpu-quick", "grid": grid or GRID, "seeds": [0, 1]}
    spec["launcher"] = {"cpus": 1, "mem": "1G", "time": "10", **launcher}
    path.write_text(yaml.safe_dump(spec))
    return path


def wait_until(condition, seconds: float = 120, every: float = 0.1):
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        value = condition()
        if value:
            return value
        time.sleep(every)
    raise AssertionError(f"waited {seconds} s for {condition.__name__}")


def idle(cluster: LocalSlurm) -> bool:
    return cluster.run("squeue", "-h").stdout.strip() == ""


def comparable(store: dict) -> dict[str, dict]:
    return {row["key"]: {k: v for k, v in row.items() if k not in VOLATILE} for row in store["runs"]}


def weights(run_dir: str) -> dict[str, torch.Tensor]:
    return load_file(str(Path(run_dir) / "checkpoint" / "model.safetensors"))


def test_a_cancelled_and_resubmitted_slurm_sweep_equals_the_local_one(on_cluster, tmp_path, capsys):
    file = sweep_file(tmp_path)
    threads = torch.get_num_threads()
    torch.set_num_threads(1)
    try:
        local = run_local(read_sweep_file(file).study, tmp_path / "local", "cpu", log=lambda _: None)
    finally:
        torch.set_num_threads(threads)
    assert len(local["runs"]) == 3  # two lrs at seed 0, then seed 1 at the winner

    out = tmp_path / "cluster"
    start = time.monotonic()
    argv = ["sweep", "--file", str(file), "--out", str(out), "--launcher", "slurm", "--device", "cpu"]
    assert main(argv) == 0
    printed = capsys.readouterr().out
    assert printed.count("submitted job") == 2 and "planner job" in printed  # phase 1, and the job that plans phase 2
    ledger = json.loads((out / "launch.json").read_text())
    victim_key, victim = next((k, e) for k, e in ledger["trials"].items() if "lr 0.001" in e["describe"])
    folder = Path(victim["folder"])

    def has_checkpoint() -> bool:
        return (folder / "checkpoint" / "trainer.json").is_file()

    wait_until(has_checkpoint)
    assert on_cluster.run("scancel", victim["job"]).returncode == 0
    wait_until(lambda: idle(on_cluster))
    assert not (folder / "results.json").exists()  # cancelled mid-run, after its first checkpoint

    assert main(["sweep", "status", str(out)]) == 0
    status = capsys.readouterr().out
    assert "failed" in status and "cancelled" in status.lower() and "1 finished" in status
    # the planner job ran when phase 1 ended, and left the cancelled trial (and so its seed 1) to the user
    assert len(json.loads((out / "launch.json").read_text())["trials"]) == 2

    assert main([*argv, "--wait"]) == 0  # resubmit: the cancelled trial resumes, then phase 2 runs
    printed = capsys.readouterr().out
    assert "submitted job" in printed and "lr 0.001 seed 0" in printed
    wall = time.monotonic() - start
    ledger = json.loads((out / "launch.json").read_text())
    assert ledger["trials"][victim_key]["tries"] == 2 and len(ledger["trials"]) == 3
    resumed_log = out / "slurm" / f"{ledger['trials'][victim_key]['job']}_0_log.out"
    assert "resuming from" in resumed_log.read_text() + (resumed_log.with_suffix(".err")).read_text()

    cluster_store = json.loads((out / "results.json").read_text())
    assert comparable(cluster_store) == comparable(local)
    local_dirs = {row["key"]: row["run_dir"] for row in local["runs"]}
    for row in cluster_store["runs"]:
        ours, theirs = weights(row["run_dir"]), weights(local_dirs[row["key"]])
        assert ours.keys() == theirs.keys()
        assert all(torch.equal(ours[name], theirs[name]) for name in ours), row["key"]
    (tmp_path / "wall.txt").write_text(f"{wall:.1f}")
    print(f"real Slurm sweep: {wall:.1f} s from the first submission to the last row")


def test_a_failing_job_is_one_line_in_the_status_and_the_store_is_untouched(on_cluster, tmp_path, capsys):
    grid = {**GRID, "train.steps": 5, "train.lr": 1.0e-3, "data.corpus": str(tmp_path / "missing.txt")}
    out = tmp_path / "out"
    (out).mkdir()
    (out / "results.json").write_text('{"runs": [{"key": "kept", "val_loss": 1.0}]}\n')
    before = (out / "results.json").read_text()
    argv = ["sweep", "--file", str(sweep_file(tmp_path, grid)), "--out", str(out), "--launcher", "slurm"]
    assert main([*argv, "--wait"]) == 0
    capsys.readouterr()
    assert main(["sweep", "status", str(out)]) == 0
    status = capsys.readouterr().out
    failed = [line for line in status.splitlines() if line.startswith("failed")]
    assert len(failed) == 2  # both seeds (one lr: no sweep to wait for), each with the job's own one-line error
    assert all(line.endswith(f"source '{tmp_path / 'missing.txt'}' does not exist)") for line in failed)
    assert (out / "results.json").read_text() == before


def test_a_trial_folder_held_by_another_process_is_not_submitted(on_cluster, tmp_path, capsys):
    grid = {**GRID, "train.steps": 5, "train.lr": 1.0e-3}
    file = sweep_file(tmp_path, grid)
    study = read_sweep_file(file).study
    out = tmp_path / "out"
    held, free = study.plan({"runs": []}).runs  # seeds 0 and 1
    folder = held.folder(out / "runs")
    folder.mkdir(parents=True)
    holder = subprocess.Popen(  # another process (a job, a command) writing that folder
        [sys.executable, "-c", HOLD, str(folder)], stdout=subprocess.PIPE, text=True
    )
    try:
        assert holder.stdout is not None and holder.stdout.readline().strip() == "held"
        assert main(["sweep", "--file", str(file), "--out", str(out), "--launcher", "slurm"]) == 0
    finally:
        holder.kill()
        holder.wait()
    printed = capsys.readouterr().out
    assert f"not submitted: {held.describe()}: its run folder is held by another process" in printed
    assert printed.count("submitted job") == 1 and free.describe() in printed
    wait_until(lambda: idle(on_cluster))


HOLD = """
import sys, time
from aot.run_folder import folder_lock
with folder_lock(sys.argv[1]):
    print("held", flush=True)
    time.sleep(120)
"""


def test_the_controller_down_is_one_line(on_cluster, tmp_path, monkeypatch, capsys):
    dead = tmp_path / "dead.conf"
    text = on_cluster.conf.read_text()
    port = next(line for line in text.splitlines() if line.startswith("SlurmctldPort="))
    dead.write_text(text.replace(port, "SlurmctldPort=9"))  # nothing listens there
    monkeypatch.setenv("SLURM_CONF", str(dead))
    argv = ["sweep", "--file", str(sweep_file(tmp_path)), "--out", str(tmp_path / "o"), "--launcher", "slurm"]
    assert main(argv) == 2
    err = capsys.readouterr().err.strip()
    assert err.startswith("aot: error:") and "controller" in err and "\n" not in err
    assert not (tmp_path / "o" / "results.json").exists()


# -- without a cluster ------------------------------------------------------------------------------------------


def test_sbatch_missing_is_one_line(tmp_path, monkeypatch, capsys):
    monkeypatch.setenv("PATH", str(tmp_path))  # no Slurm commands on it
    argv = ["sweep", "--file", str(sweep_file(tmp_path)), "--out", str(tmp_path / "o"), "--launcher", "slurm"]
    assert main(argv) == 2
    err = capsys.readouterr().err.strip()
    assert "sbatch" in err and "--launcher local" in err and "\n" not in err


@pytest.mark.parametrize(
    ("spec", "message"),
    [
        ({"task": "lm", "grid": {}, "bogus": 1}, "'bogus' is unknown"),
        ({"task": "lm", "launcher": {"gpu": 1}}, "launcher field 'gpu' is unknown"),
        ({"task": "lm", "launcher": {"time": "forever"}}, "time limit 'forever'"),
        ({"task": "lmm"}, "task 'lmm' is unknown"),
        ({"kind": "grids", "task": "lm"}, "kind 'grids' is unknown"),
        ({"grid": {}}, "no task"),
    ],
)
def test_a_sweep_file_with_a_wrong_field_is_one_line(tmp_path, capsys, spec, message):
    path = tmp_path / "s.yaml"
    path.write_text(yaml.safe_dump(spec))
    assert main(["sweep", "--file", str(path), "--plan", "--out", str(tmp_path / "o")]) == 2
    err = capsys.readouterr().err.strip()
    assert message in err and "\n" not in err


def test_time_limits_read_as_sbatch_reads_them():
    assert [time_minutes(t) for t in ("90", "30:00", "30:01", "4:00:00", "1-12", "1-0:30", "2-00:00:30")] == [
        90, 30, 31, 240, 2160, 1470, 2881,
    ]  # fmt: skip
    options = Resources(gpus=2, cpus=8, mem="64G", time="4:00:00", partition="gpu", extra=(("qos", "high"),))
    assert options.sbatch_options() == {
        "time": 240, "nodes": 1, "ntasks_per_node": 1, "cpus_per_task": 8, "gpus_per_node": 2, "mem": "64G",
        "partition": "gpu", "additional_parameters": {"qos": "high"},
    }  # fmt: skip
    assert "gpus_per_node" not in Resources().sbatch_options()  # a CPU trial asks for no GPU at all


def test_why_a_job_ended_reads_its_exception_then_its_log_then_its_state(tmp_path):
    import pickle

    (tmp_path / "7_0_result.pkl").write_bytes(pickle.dumps(("error", "Traceback ...\naot.errors.AotError: no corpus")))
    assert failure_line("7", JobState("FAILED"), tmp_path) == "no corpus"
    (tmp_path / "8_0_log.err").write_text("slurmstepd: error: *** JOB 8 ON n1 CANCELLED AT 12:00 DUE TO TIME LIMIT ***")
    assert failure_line("8", JobState("UNKNOWN"), tmp_path) == ENDINGS["TIMEOUT"]
    (tmp_path / "9_0_log.err").write_text("slurmstepd: error: Detected 1 oom-kill event(s) in StepId=9.0.")
    assert failure_line("9", JobState("FAILED"), tmp_path) == ENDINGS["OUT_OF_MEMORY"]
    assert failure_line("10", JobState("OUT_OF_MEMORY"), tmp_path) == ENDINGS["OUT_OF_MEMORY"]
    assert failure_line("11", JobState("FAILED", "exit 1:0"), tmp_path) == "failed exit 1:0"


def test_a_trial_with_several_gpus_trains_under_torchrun_inside_its_job(tmp_path, monkeypatch):
    """What a job of a trial asking for 2 GPUs runs (TrialJob, without Slurm): torchrun with 2 processes (here on
    the CPU, with gloo: train.strategy=ddp), then the finished run's row recorded."""
    import aot.sweep.launch.slurm as slurm

    monkeypatch.setenv("AOT_DATA", str(tmp_path / "data"))
    monkeypatch.setenv("OMP_NUM_THREADS", "1")
    grid = {**GRID, "train.steps": 4, "train.lr": 1.0e-3, "train.strategy": "ddp"}
    study = read_sweep_file(sweep_file(tmp_path, grid)).study
    trial = study.plan({"runs": []}).runs[0]
    started = []
    real_call = subprocess.call

    def spy(command, *args, **kwargs):
        started.append(command)
        return real_call(command, *args, **kwargs)

    monkeypatch.setattr(slurm.subprocess, "call", spy)
    assert slurm.TrialJob(study, trial, tmp_path / "out", "cpu", gpus=2)() == "finished"  # trained by torchrun
    assert len(started) == 1 and "--nproc_per_node=2" in started[0] and "torch.distributed.run" in started[0]
    rows = json.loads((tmp_path / "out" / "results.json").read_text())["runs"]
    assert [row["key"] for row in rows] == [trial.key] and rows[0]["seed"] == 0
