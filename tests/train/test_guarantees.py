"""What `aot` guarantees about a user's runs (docs/guarantees.md): kill -9 at random moments and resume
gives the uninterrupted run bit for bit; a damaged latest checkpoint falls back to the previous one; a partial
metrics row is tolerated; run folders are never overwritten; a full disk or a NaN keeps the last checkpoint."""

from __future__ import annotations

import errno
import json
import os
import random
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
import torch
from safetensors.torch import load_file

from aot import run_folder
from aot.cli import main
from aot.data.shards import LMBatches
from aot.errors import AotError
from aot.models import AotModel, build_model, preset_config
from aot.run_folder import atomic_target
from aot.train import TrainConfig, Trainer, read_metrics
from conftest import gloo_group, lm_loss

ROOT = Path(__file__).resolve().parents[2]
FIXTURE = ROOT / "tests" / "fixtures" / "sonnets.txt"

# -- a real `aot train lm` process, killed with SIGKILL at random moments -----------------------------------

TINY = [
    "--corpus",
    str(FIXTURE),
    "--model",
    "aot-mssa-l-cpu",
    "--device",
    "cpu",
    "--seed",
    "7",
    "--set",
    "model.n_layer=1",
    "--set",
    "model.n_embd=16",
    "--set",
    "model.n_head=2",
    "--set",
    "model.block_size=16",
    "--set",
    "model.dropout=0.1",
    "--set",
    "train.steps=40",
    "--set",
    "train.batch_size=4",
    "--set",
    "train.warmup_steps=2",
    "--set",
    "train.precision=fp32",
    "--set",
    "train.log_every=3",
    "--set",
    "train.eval_every=10",
    "--set",
    "train.checkpoint_every=1",
    "--set",
    "train.progress=false",
    "--set",
    "eval.periodic_windows=2",
    "--set",
    "eval.final_windows=4",
    "--set",
    "eval.batch_size=2",
]


def _aot_train(out: Path, data: Path, *extra: str) -> subprocess.Popen:
    env = {**os.environ, "AOT_DATA": str(data), "PYTHONPATH": str(ROOT / "src"), "OMP_NUM_THREADS": "1"}
    return subprocess.Popen(
        [sys.executable, "-m", "aot.cli", "train", "lm", "--out", str(out), *TINY, *extra],
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )


def _finish(proc: subprocess.Popen) -> str:
    _stdout, stderr = proc.communicate(timeout=300)
    assert proc.returncode == 0, stderr
    return stderr


def _checkpoint_step(out: Path) -> int:
    """The step of the newest checkpoint in ``out`` (-1 when none is readable at this instant)."""
    steps = [-1]
    for folder in run_folder.checkpoint_candidates(out):
        try:
            steps.append(int(run_folder.read_trainer_state(folder)["step"]))
        except (AotError, KeyError, ValueError):  # mid-rename
            continue
    return max(steps)


def _run_record(out: Path) -> tuple[list, dict, dict]:
    """(the metrics log without timings, results.json's curve and evals, the final weights)."""
    timing = {"tokens_per_s", "mfu", "train_seconds", "wall", "data_wait_s", "warmup"}  # what a resume changes
    rows = [{k: v for k, v in r.items() if k not in timing} for r in read_metrics(out)]
    results = json.loads((out / "results.json").read_text())
    return (
        rows,
        {k: results["train"][k] for k in ("curve", "evals", "steps")},
        load_file(out / "checkpoint" / "model.safetensors"),
    )


def test_killed_and_resumed_run_is_bitwise_the_uninterrupted_run(tmp_path):
    """A real `aot train lm` (dropout on, a checkpoint every step) killed with SIGKILL at three random moments
    (also inside checkpoint writes), each time resumed with --resume: the whole metrics log (losses, lr, evals),
    results.json's curve and the final weights equal the uninterrupted run's bit for bit."""
    data = tmp_path / "data"
    _finish(_aot_train(tmp_path / "full", data))
    rng = random.Random(11)
    out, kills, steps_at_kill = tmp_path / "killed", 0, []
    proc = _aot_train(out, data)
    for target in sorted(rng.sample(range(2, 38), 3)):  # kill once a checkpoint of this step exists ...
        deadline = time.monotonic() + 120
        while _checkpoint_step(out) < target and proc.poll() is None:
            assert time.monotonic() < deadline
            time.sleep(0.002)
        time.sleep(rng.uniform(0.0, 0.03))  # ... plus a random instant (mid-step, mid-checkpoint, mid-row)
        if proc.poll() is not None:  # it finished first (a fast machine): fewer kills
            break
        proc.send_signal(signal.SIGKILL)
        proc.wait()
        kills += 1
        steps_at_kill.append(_checkpoint_step(out))
        proc = _aot_train(out, data, "--resume")
    stderr = _finish(proc)
    print(f"kills: {kills}, last checkpoint steps at the kills: {steps_at_kill}")
    assert kills >= 1 and "resuming from" in stderr
    rows_full, curve_full, weights_full = _run_record(tmp_path / "full")
    rows, curve, weights = _run_record(out)
    assert rows == rows_full  # every row: step, tokens, loss and lr (float repr round-trips exactly), evals
    assert curve == curve_full and curve["steps"] == 40 and len(curve["curve"]) == 14
    assert weights.keys() == weights_full.keys()
    for name, value in weights_full.items():
        assert torch.equal(weights[name], value), name


# -- in-process: the trainer's guarantees -------------------------------------------------------------------


def _tokens():
    import numpy as np

    return np.frombuffer(FIXTURE.read_bytes(), dtype=np.uint8).astype(np.uint16)


def test_damaged_latest_checkpoint_falls_back_to_the_previous_one(tiny_trainer, tmp_path, capsys):
    full = tiny_trainer(tmp_path / "full", checkpoint_every=1).fit()
    out = tmp_path / "cut"
    tiny_trainer(out, checkpoint_every=1).fit(stop_at=4)
    assert run_folder.read_trainer_state(out / "checkpoint.prev")["step"] == 3
    weights = out / "checkpoint" / "model.safetensors"
    blob = bytearray(weights.read_bytes())
    blob[-5] ^= 0x01  # one flipped bit
    weights.write_bytes(bytes(blob))
    with pytest.raises(
        run_folder.CheckpointDamaged, match=r"checkpoint/?'? is damaged: model.safetensors does not match"
    ):
        run_folder.verify_checkpoint(out / "checkpoint")
    resumed = tiny_trainer(out, checkpoint_every=1, seed=5).fit(resume=True)
    err = capsys.readouterr().err
    assert "is damaged: model.safetensors does not match its sha256" in err
    assert "resuming from the previous checkpoint" in err and "(step 3)" in err
    assert resumed.losses == full.losses  # the whole log, as if nothing happened
    assert (out / "checkpoint.damaged").is_dir()  # kept for inspection, not deleted


@pytest.mark.parametrize("damage", ["truncate", "delete_optimizer", "delete_trainer", "garbage_trainer"])
def test_every_kind_of_damage_is_one_line_and_resume_needs_a_good_checkpoint(tiny_trainer, tmp_path, damage):
    out = tmp_path / "run"
    tiny_trainer(out, steps=2).fit(stop_at=1)  # only one checkpoint: nothing to fall back to
    folder = out / "checkpoint"
    if damage == "truncate":
        path = folder / "model.safetensors"
        path.write_bytes(path.read_bytes()[:100])
    elif damage == "delete_optimizer":
        (folder / "optimizer.safetensors").unlink()
    elif damage == "delete_trainer":
        (folder / "trainer.json").unlink()
    else:
        (folder / "trainer.json").write_bytes(os.urandom(64))
    before = {p: p.read_bytes() for p in folder.iterdir()}
    with pytest.raises(AotError) as info:
        tiny_trainer(out, steps=2).fit(resume=True)
    message = str(info.value)
    assert "\n" not in message
    assert ("is damaged" in message and "--force" in message) or "holds no checkpoint" in message
    assert {p: p.read_bytes() for p in folder.iterdir()} == before  # nothing changed


def test_partial_last_metrics_row_is_tolerated(tiny_trainer, tmp_path):
    full = tiny_trainer(tmp_path / "full").fit()
    out = tmp_path / "cut"
    tiny_trainer(out).fit(stop_at=3)
    with open(out / "metrics.jsonl", "a") as handle:
        handle.write('{"step": 4, "tokens": 2')  # a kill in the middle of a row
    resumed = tiny_trainer(out).fit(resume=True)
    assert resumed.losses == full.losses
    assert all(line.startswith("{") and line.endswith("}") for line in (out / "metrics.jsonl").read_text().splitlines())


def test_run_folder_is_never_overwritten(tiny_trainer, tmp_path, capsys):
    out = tmp_path / "run"
    tiny_trainer(out, steps=2).fit()
    before = {p.relative_to(out): p.read_bytes() for p in out.rglob("*") if p.is_file()}
    with pytest.raises(AotError, match="already holds a run; add --resume to continue it, or --force"):
        tiny_trainer(out, steps=2).fit()
    assert {p.relative_to(out): p.read_bytes() for p in out.rglob("*") if p.is_file()} == before
    tiny_trainer(out, steps=2, seed=3).fit(force=True)
    assert "--force: moved the old run" in capsys.readouterr().err
    moved = tmp_path / "run.old-1"
    assert {p.relative_to(moved): p.read_bytes() for p in moved.rglob("*") if p.is_file()} == before
    with pytest.raises(AotError, match="holds no checkpoint to resume from"):
        tiny_trainer(tmp_path / "empty", steps=2).fit(resume=True)
    logs_only = tmp_path / "logs-only"  # killed before its first checkpoint
    logs_only.mkdir()
    (logs_only / "metrics.jsonl").write_text('{"step": 1, "loss": 5.0}\n')
    assert tiny_trainer(logs_only, steps=2).fit(resume="auto").step == 2
    assert "no usable checkpoint" in capsys.readouterr().err
    assert (tmp_path / "logs-only.old-1" / "metrics.jsonl").read_text() == '{"step": 1, "loss": 5.0}\n'
    assert tiny_trainer(tmp_path / "fresh", steps=2).fit(resume="auto").step == 2  # auto: nothing to resume, starts


def test_checkpoints_by_time_as_well_as_by_steps(tiny_trainer, tmp_path):
    """checkpoint_every=0 (steps: only at the end), but a checkpoint is due after checkpoint_minutes: with a
    tiny interval every step saves, so the previous checkpoint is step 3 of 4."""
    tiny_trainer(tmp_path, steps=4, checkpoint_every=0, checkpoint_minutes=1e-9).fit()
    assert run_folder.read_trainer_state(tmp_path / "checkpoint.prev")["step"] == 3
    tiny_trainer(tmp_path / "steps-only", steps=4, checkpoint_every=0, checkpoint_minutes=0).fit()
    assert not (tmp_path / "steps-only" / "checkpoint.prev").exists()


def test_full_disk_during_a_checkpoint_keeps_the_last_one(tiny_trainer, tmp_path, monkeypatch):
    out = tmp_path / "run"
    trainer = tiny_trainer(out, steps=4, checkpoint_every=2)
    trainer.fit(stop_at=2)
    before = {p.name: p.read_bytes() for p in (out / "checkpoint").iterdir()}
    import safetensors.torch

    def full_disk(tensors, filename, metadata=None):
        raise OSError(errno.ENOSPC, "No space left on device", filename)

    monkeypatch.setattr(safetensors.torch, "save_file", full_disk)
    with pytest.raises(AotError) as info:
        trainer.fit(resume=True)
    message = str(info.value)
    assert "No space left on device" in message and "is intact" in message and "\n" not in message
    assert not (out / ".checkpoint.tmp").exists()
    assert {p.name: p.read_bytes() for p in (out / "checkpoint").iterdir()} == before


def test_nonfinite_loss_stops_at_its_step_or_is_skipped(tiny_trainer, tmp_path):
    def poisoned(model, batch):
        loss = lm_loss(model, batch)
        return loss * float("nan") if poisoned.step == 3 else loss

    poisoned.step = 0

    class Counting:
        def __init__(self, inner):
            self.inner = inner

        def get(self, step, start=0, stop=None):
            poisoned.step = step + 1
            return self.inner.get(step, start, stop)

    out = tmp_path / "stop"
    trainer = tiny_trainer(out, steps=5, checkpoint_every=1, loss_fn=poisoned)
    trainer.batches = Counting(trainer.batches)
    with pytest.raises(AotError, match=r"non-finite loss or gradients \(NaN/Inf\) at step 3; .*checkpoint.* is kept"):
        trainer.fit()
    assert run_folder.read_trainer_state(out / "checkpoint")["step"] == 2
    skipping = tiny_trainer(tmp_path / "skip", steps=5, loss_fn=poisoned, skip_nonfinite=True)
    skipping.batches = Counting(skipping.batches)
    result = skipping.fit()
    assert result.skipped_steps == 1 and result.step == 5
    assert all(torch.isfinite(p).all() for p in skipping.model.parameters())


def test_the_host_reads_the_device_only_on_logging_and_checkpoint_steps(tiny_trainer, tmp_path, monkeypatch):
    """No per-step synchronisation: the non-finite and checkpoint-due flags are read (one all-reduce) on logging,
    evaluation and checkpoint steps and the last; a non-finite step is still reported with its own number, before
    anything after it is logged or saved."""
    import aot.train.trainer as trainer_module

    reads: list[int] = []
    real = trainer_module.all_reduce_max

    def counting(flags):
        reads.append(trainer.step)
        return real(flags)

    monkeypatch.setattr(trainer_module, "all_reduce_max", counting)
    trainer = tiny_trainer(tmp_path / "quiet", steps=12, log_every=5, checkpoint_every=0, checkpoint_minutes=0)
    trainer.fit()
    assert reads == [5, 10, 12]

    def poisoned(model, batch):
        loss = lm_loss(model, batch)
        return loss * float("nan") if trainer.step == 2 else loss  # step 3 (numbered from 1)

    reads.clear()
    trainer = tiny_trainer(tmp_path / "nan", steps=12, log_every=5, checkpoint_every=0, loss_fn=poisoned)
    with pytest.raises(AotError, match=r"non-finite loss or gradients \(NaN/Inf\) at step 3; .*no checkpoint"):
        trainer.fit()
    assert reads == [5] and not any(r.get("step", 0) >= 3 for r in read_metrics(tmp_path / "nan"))


# -- FSDP: sharded checkpoints through torch.distributed.checkpoint -----------------------------------------


def _fsdp_worker(rank: int, world: int, store: str, out: str, stop_at: int | None, resume: bool) -> None:
    with gloo_group(rank, world, store):
        torch.manual_seed(0)
        model = build_model(
            preset_config("aot-mssa-l-cpu", n_layer=2, n_embd=16, n_head=2, block_size=16, vocab_size=256)
        ).double()
        cfg = TrainConfig(
            steps=6, batch_size=4, lr=1e-2, warmup_steps=1, log_every=1, checkpoint_every=2, progress=False,
            precision="fp32", strategy="fsdp",
        )  # fmt: skip
        trainer = Trainer(model, LMBatches(_tokens(), 4, 16, seed=2), lm_loss, cfg, out)
        trainer.model_config = model.cfg.to_dict()
        trainer.fit(resume=resume, stop_at=stop_at)


def test_fsdp_sharded_save_resume_and_export(tmp_path):
    """2 gloo processes: sharded checkpoints (one .distcp file per process, no full gather), a run stopped at
    step 3 (its last checkpoint: step 2) and resumed ends equal to the uninterrupted run within 1e-6; `aot export
    safetensors` turns the shards into one model that loads in one process with the same logits."""
    import torch.multiprocessing as mp

    full, cut = tmp_path / "full", tmp_path / "cut"
    mp.spawn(_fsdp_worker, args=(2, str(tmp_path / "store-full"), str(full), None, False), nprocs=2, join=True)
    mp.spawn(_fsdp_worker, args=(2, str(tmp_path / "store-cut"), str(cut), 3, False), nprocs=2, join=True)
    state = run_folder.read_trainer_state(cut / "checkpoint")
    assert state["format"] == "sharded" and state["step"] == 3
    assert sorted(p.name for p in (cut / "checkpoint" / "sharded").glob("*.distcp")) == ["__0_0.distcp", "__1_0.distcp"]
    assert not (cut / "checkpoint" / "model.safetensors").exists()  # nothing gathered on rank 0
    rng = [load_file(cut / "checkpoint" / f"rng-rank{r}.safetensors")["rng.torch"] for r in (0, 1)]
    assert not torch.equal(rng[0], rng[1])  # every process's own generator state, not rank 0's for all
    import shutil

    shutil.rmtree(cut / "checkpoint")  # as if killed after step 3's checkpoint was lost: resume from step 2
    mp.spawn(_fsdp_worker, args=(2, str(tmp_path / "store-resume"), str(cut), None, True), nprocs=2, join=True)
    assert [r["loss"] for r in read_metrics(cut)] == pytest.approx([r["loss"] for r in read_metrics(full)], abs=1e-6)
    for run in (full, cut):
        assert main(["export", "safetensors", str(run), str(tmp_path / f"{run.name}-export")]) == 0
    reference = AotModel.from_pretrained(tmp_path / "full-export")
    resumed = AotModel.from_pretrained(tmp_path / "cut-export")
    for name, value in reference.state_dict().items():
        torch.testing.assert_close(resumed.state_dict()[name], value, rtol=0, atol=1e-6, msg=name)
    idx = torch.randint(0, 256, (2, 16))
    torch.testing.assert_close(resumed(idx)[0], reference(idx)[0], rtol=0, atol=1e-6)
    torch.manual_seed(0)
    init = build_model(reference.cfg)
    assert not torch.allclose(init.state_dict()["tok_embed.weight"], reference.state_dict()["tok_embed.weight"])


# -- bad input on the command line: one line, exit status 2, nothing changed --------------------------------

BAD_COMMANDS = [
    (["bench", "--repeat", "0", "--quick"], "bench.repeat=0 must be >= 1"),
    (["bench", "--threads", "-1", "--quick"], "bench.threads=-1 must be >= 0"),
    (["bench", "--quick", "--config", "{cfg:bench: {batch: 0}}"], "bench.batch=0 must be >= 1"),
    (["bench", "--quick", "--config", "{cfg:bench: {seq_lens: []}}"], "bench.seq_lens is empty"),
    (["denoise", "--eta", "nan", "--no-sweeps"], "denoise.eta=nan must be a finite number"),
    (["denoise", "--eta", "inf", "--no-sweeps"], "denoise.eta=inf must be a finite number"),
    (["denoise", "--deltas", "0.2", "inf", "--no-sweeps"], "denoise.deltas[1]=inf must be a finite number"),
    (["train", "lm", "--seed", "-1"], "--seed=-1 must be an integer in [0, 2**63)"),
    (["train", "lm", "--seed", str(2**64)], "must be an integer in [0, 2**63)"),
    (["train", "lm", "--set", "train.lr=abc"], "train.lr='abc' must be a number"),
    (["train", "lm", "--set", "train.lr=nan"], "train.lr=nan must be a finite number"),
    (["train", "lm", "--set", "train.weight_decay=abc"], "train.weight_decay='abc' must be a number"),
    (["train", "lm", "--set", "train.grad_clip=abc"], "train.grad_clip='abc' must be a number"),
    (["train", "lm", "--set", "train.beta2=1.5"], "train.beta2=1.5 must be >= 0 and < 1"),
    (["train", "lm", "--set", "eval.batch_size=0"], "eval.batch_size=0 must be >= 1"),
    (["train", "lm", "--set", "eval.final_windows=0"], "eval.final_windows=0 must be >= 1"),
    (["train", "lm", "--set", "eval.periodic_windows=0"], "eval.periodic_windows=0 must be >= 1"),
    (["train", "lm", "--config", "{bin}"], "is not a text (UTF-8) YAML or JSON file"),
    (["train", "lm", "--config", "{cfg:[1, 2]}"], "must hold a mapping at the top level"),
    (["train", "lm", "--out", "{file}"], "is a file, not a folder"),
    (["train", "lm", "--resume", "--out", "{empty}", "--corpus", str(FIXTURE)], "holds no checkpoint to resume"),
    (["export", "safetensors", "{empty}", "{exported}"], "holds no good checkpoint"),
]


@pytest.mark.parametrize(("argv", "message"), BAD_COMMANDS, ids=[" ".join(a) for a, _ in BAD_COMMANDS])
def test_bad_command_line_is_one_line_exit_2_and_changes_nothing(tmp_path, monkeypatch, capsys, argv, message):
    monkeypatch.setenv("AOT_DATA", str(tmp_path / "data"))
    (tmp_path / "file").write_text("precious\n")
    (tmp_path / "bin.yaml").write_bytes(bytes(range(256)))
    args = []
    for arg in argv:
        if arg.startswith("{cfg:"):
            (tmp_path / "cfg.yaml").write_text(arg[5:-1] + "\n")
            arg = str(tmp_path / "cfg.yaml")
        arg = {
            "{bin}": str(tmp_path / "bin.yaml"),
            "{file}": str(tmp_path / "file"),
            "{empty}": str(tmp_path / "e"),
            "{exported}": str(tmp_path / "exported"),
        }.get(arg, arg)
        args.append(arg)
    if "--out" not in args and argv[0] in ("bench", "denoise"):
        args += ["--out", str(tmp_path / "out")]
    if argv[0] == "train" and "--dump-config" not in args and "--out" not in args:
        args += ["--dump-config"]
    before = sorted(p.relative_to(tmp_path) for p in tmp_path.rglob("*") if "data" not in p.parts)
    assert main(args) == 2
    err = capsys.readouterr().err
    assert err.startswith("aot: error: ") and err.count("\n") == 1 and message in err, err
    after = sorted(p.relative_to(tmp_path) for p in tmp_path.rglob("*") if "data" not in p.parts)
    assert [p for p in after if p not in before] in ([], [Path("e")])  # at most the empty --out folder
    assert (tmp_path / "file").read_text() == "precious\n"


def test_from_pretrained_rejects_damaged_files_in_one_line(tmp_path):
    model = build_model(preset_config("aot-mssa-l-cpu", n_layer=1, n_embd=16, n_head=2, block_size=8))
    model.save_pretrained(tmp_path)
    weights = tmp_path / "model.safetensors"
    weights.write_bytes(weights.read_bytes()[:200])
    with pytest.raises(AotError, match="is damaged or not a safetensors file"):
        AotModel.from_pretrained(tmp_path)
    for text, message in (("[1, 2]", "must hold a JSON object"), ("{not json", "is not valid JSON")):
        (tmp_path / "config.json").write_text(text)
        with pytest.raises(AotError, match=message):
            AotModel.from_pretrained(tmp_path)


def test_models_say_what_they_expect():
    lm = build_model(preset_config("aot-mssa-l-cpu", n_layer=1, n_embd=16, n_head=2, block_size=8, vocab_size=32))
    for idx, message in (
        (torch.tensor([[1, 32]]), r"token id 32 is outside the vocabulary \[0, 32\)"),
        (torch.tensor([[-1, 2]]), r"token id -1 is outside the vocabulary"),
        (torch.tensor([1, 2]), r"shape \(batch, time\), got \(2,\); add the batch dimension"),
        (torch.tensor([[1.0, 2.0]]), "must be torch.long"),
    ):
        with pytest.raises(AotError, match=message):
            lm(idx)
    vit = build_model(preset_config("aot-mssa-l-cpu", task="image", n_layer=1, n_embd=16, n_head=2))
    with pytest.raises(AotError, match=r"images must have shape \(batch, 1, 28, 28\) .* got \(1, 1, 27, 27\)"):
        vit(torch.zeros(1, 1, 27, 27))
    with pytest.raises(AotError, match=r"got \(1, 3, 28, 28\)"):
        vit(torch.zeros(1, 3, 28, 28))
    with pytest.raises(AotError, match="NaN or Inf"):
        vit(torch.full((1, 1, 28, 28), float("nan")))
    icl = build_model(preset_config("aot-mssa-l-cpu", task="icl", n_layer=1, n_embd=16, n_head=2, n_dims=3))
    with pytest.raises(AotError, match=r"prompt of 2 points in 4 dims does not fit this model \(n_dims=3"):
        icl(torch.zeros(1, 2, 4), torch.zeros(1, 2))
    with pytest.raises(AotError, match="NaN or Inf"):
        icl(torch.zeros(1, 2, 3), torch.tensor([[0.0, float("inf")]]))


def test_one_seed_a_dumped_config_fed_back_is_the_same_run(tmp_path, capsys):
    """--seed sets train.seed (the run's only seed); the dumped config, fed back with --config and no --seed,
    keeps it: the same config, so the same model init, data order and dropout."""
    assert main(["train", "lm", "--seed", "5", "--set", "train.lr=3e-3", "--dump-config"]) == 0
    dumped = capsys.readouterr().out
    assert "  seed: 5\n" in dumped
    (tmp_path / "run.yaml").write_text(dumped)
    assert main(["train", "lm", "--config", str(tmp_path / "run.yaml"), "--dump-config"]) == 0
    assert capsys.readouterr().out == dumped


def test_read_only_out_folder_is_one_line_before_any_work(tmp_path, monkeypatch, capsys):
    """A folder the process may not write into (simulated: the tests run as root, for whom chmod does not bite)."""
    real = Path.write_bytes

    def denied(self, data):
        if self.parent == tmp_path / "ro":
            raise PermissionError(errno.EACCES, "Permission denied", str(self))
        return real(self, data)

    (tmp_path / "ro").mkdir()
    monkeypatch.setattr(Path, "write_bytes", denied)
    for argv in (["denoise", "--no-sweeps"], ["bench", "--quick"], ["train", "lm", "--corpus", str(FIXTURE)]):
        assert main([*argv, "--out", str(tmp_path / "ro")]) == 2
        err = capsys.readouterr().err
        assert err.startswith("aot: error: cannot write into --out") and "Permission denied" in err, err
        assert err.count("\n") == 1 and not any((tmp_path / "ro").iterdir())


def test_two_writers_of_one_file_each_finish_whole(tmp_path):
    """The interleaving that broke two benchmark lanes tokenizing one corpus into a fresh cache: writer B starts
    and finishes while writer A is still writing. Each writes its own scratch file, so A's rename still finds its
    file, the target is always one writer's whole content, and no scratch is left; a writer that fails leaves the
    target as it was."""
    target = tmp_path / "train.bin"
    with atomic_target(target) as first:
        first.write_bytes(b"A" * 1000)
        with atomic_target(target) as second:
            assert second != first
            second.write_bytes(b"B" * 1000)
        assert target.read_bytes() == b"B" * 1000
    assert target.read_bytes() == b"A" * 1000
    with pytest.raises(OSError), atomic_target(target) as failing:
        failing.write_bytes(b"half")
        raise OSError(errno.ENOSPC, "No space left on device")
    assert target.read_bytes() == b"A" * 1000
    assert [p.name for p in tmp_path.iterdir()] == ["train.bin"]
