"""The WSD schedule (warm-up, stable, 1-sqrt cooldown) and cooldown branches: one long WSD run, checkpoints kept in
its stable phase, and a branch from one of them to a shorter budget gives the weights of that budget's run from
scratch, bit for bit."""

from __future__ import annotations

import itertools
import json
import math
from pathlib import Path

import pytest
from safetensors.torch import load_file

from aot.cli import main
from aot.run_folder import verify_checkpoint
from aot.train import Trainer
from aot.train.schedule import decay_start, lr_at

FIXTURE = Path(__file__).resolve().parents[1] / "fixtures" / "sonnets.txt"

# a 1-layer, 16-wide model with dropout (so the branch must restore the RNG too), WSD with a 25 % cooldown
SETS = (
    "model.n_layer=1 model.n_embd=16 model.n_head=2 model.block_size=16 model.dropout=0.1 train.batch_size=4 "
    "train.warmup_steps=2 train.precision=fp32 train.log_every=2 train.eval_every=4 train.progress=false "
    "train.schedule=wsd train.decay_fraction=0.25 eval.periodic_windows=2 eval.final_windows=4 eval.batch_size=2"
)
TINY_WSD = [
    *("--recipe", "cpu-quick", "--corpus", str(FIXTURE), "--model", "aot-mssa-l-cpu", "--device", "cpu", "--seed", "3"),
    *(arg for item in SETS.split() for arg in ("--set", item)),
]


def _weights(run: Path) -> dict:
    return load_file(str(run / "checkpoint" / "model.safetensors"))


# -- the schedule -------------------------------------------------------------------------------------------


def _cosine_before_wsd(step: int, base: float, warmup: int, total: int, low: float) -> float:
    """lr_at as it was before train.schedule existed (nanoGPT's warm-up + cosine), written out again."""
    if step < warmup:
        return base * (step + 1) / warmup
    if step >= total:
        return low
    progress = (step - warmup) / max(1, total - warmup)
    return low + 0.5 * (base - low) * (1.0 + math.cos(math.pi * progress))


def test_cosine_is_unchanged_bit_for_bit():
    for warmup, total in ((0, 7), (3, 50), (30, 800), (10, 10)):
        for step in range(total + 2):
            expected = _cosine_before_wsd(step, 2e-3, warmup, total, 2e-4)
            assert lr_at(step, 2e-3, warmup, total, 2e-4) == expected
            assert lr_at(step, 2e-3, warmup, total, 2e-4, "cosine", 0.5) == expected


def test_wsd_rate_against_a_direct_computation():
    base, low, warmup, total, fraction = 1.0, 0.1, 4, 40, 0.25  # cooldown: the last 10 steps, 30..39
    assert decay_start(total, warmup, fraction) == 30
    rates = [lr_at(s, base, warmup, total, low, "wsd", fraction) for s in range(total + 1)]
    assert rates[:4] == [0.25, 0.5, 0.75, 1.0]  # linear warm-up
    assert rates[4:30] == [base] * 26  # stable
    for i, step in enumerate(range(30, 40), start=1):  # 1 - sqrt over the cooldown, min_lr at the last step
        assert rates[step] == pytest.approx(low + (base - low) * (1 - math.sqrt(i / 10)), abs=1e-15)
    assert rates[39] == pytest.approx(low) and rates[40] == low
    assert all(a >= b for a, b in itertools.pairwise(rates[29:]))  # non-increasing
    # the stable phase does not depend on the run's length
    for longer in (41, 80, 400):
        assert [lr_at(s, base, warmup, longer, low, "wsd", fraction) for s in range(30)] == rates[:30]


def test_wsd_cooldown_never_starts_before_warmup_ends():
    assert decay_start(10, 8, 0.5) == 8
    assert decay_start(10, 0, 0.01) == 9  # at least one cooldown step


# -- cooldown branches --------------------------------------------------------------------------------------


def test_a_branch_from_a_stable_checkpoint_is_the_shorter_run_bit_for_bit(tmp_path, capsys, monkeypatch):
    """A 16-step WSD run keeps its step-6 checkpoint; a branch from it to 10 steps (which trains steps 7-10 only)
    equals a 10-step run from scratch (weights and optimizer state bit for bit, the same metrics rows, results.json
    names the parent)."""
    long, short, branch = tmp_path / "long", tmp_path / "short", tmp_path / "branch"
    keep = ["--set", "train.keep_checkpoints=[6]"]
    assert main(["train", "lm", "--out", str(long), *TINY_WSD, "--set", "train.steps=16", *keep]) == 0
    kept = long / "checkpoint-step6"
    assert verify_checkpoint(kept)["step"] == 6
    assert main(["train", "lm", "--out", str(short), *TINY_WSD, "--set", "train.steps=10"]) == 0
    capsys.readouterr()
    trained: list[int] = []
    step = Trainer.train_step

    def counted(self: Trainer) -> tuple:
        trained.append(self.step)
        return step(self)

    monkeypatch.setattr(Trainer, "train_step", counted)
    assert main(["train", "lm", "--out", str(branch), "--branch-from", str(kept), "--set", "train.steps=10"]) == 0
    assert "branching from" in capsys.readouterr().err
    assert trained == [6, 7, 8, 9]  # it started from the kept state, not from scratch
    mine, theirs = _weights(branch), _weights(short)
    assert mine.keys() == theirs.keys() and all(mine[k].equal(theirs[k]) for k in mine)
    optim = [load_file(str(run / "checkpoint" / "optimizer.safetensors")) for run in (branch, short)]
    assert all(optim[0][k].equal(optim[1][k]) for k in optim[1])
    assert not _weights(long)["lm_head.weight"].equal(theirs["lm_head.weight"])  # the long run is another run
    results = [json.loads((run / "results.json").read_text()) for run in (branch, short)]
    assert results[0]["val"] == results[1]["val"]
    assert results[0]["train"]["curve"] == results[1]["train"]["curve"]  # the parent's rows up to step 6 copied
    assert results[0]["train"]["branched_from"] == {"checkpoint": str(kept.resolve()), "step": 6}
    assert results[0]["config"] == results[1]["config"]


def test_a_branch_refuses_what_would_not_be_exact(tmp_path, capsys):
    long = tmp_path / "long"
    assert main(["train", "lm", "--out", str(long), *TINY_WSD, "--set", "train.steps=12",
                 "--set", "train.keep_checkpoints=[4,10]"]) == 0  # fmt: skip
    capsys.readouterr()
    cases = {
        "changed lr": (["--set", "train.steps=8", "--set", "train.lr=1e-2"], "train.lr=0.002 there, 0.01 here"),
        "too short": (["--set", "train.steps=4"], "set train.steps to at least 5"),
        "a preset": (["--recipe", "cpu-bench"], "drop --recipe / --model"),
    }
    for name, (extra, message) in cases.items():
        out = tmp_path / name.replace(" ", "-")
        assert main(["train", "lm", "--out", str(out), "--branch-from", str(long / "checkpoint-step4"), *extra]) == 2
        err = capsys.readouterr().err
        assert err.startswith("aot: error:") and message in err and err.count("\n") == 1, (name, err)
        assert not out.exists() or not any(out.iterdir()), name
    # step 10 lies in the 12-step run's cooldown (from step 9)
    assert main(["train", "lm", "--out", str(tmp_path / "late"), "--branch-from", str(long / "checkpoint-step10"),
                 "--set", "train.steps=20"]) == 2  # fmt: skip
    assert "lies in its run's cooldown (from step 9)" in capsys.readouterr().err
    # a run folder is not a checkpoint; a branch into its own parent is refused
    assert main(["train", "lm", "--out", str(tmp_path / "x"), "--branch-from", str(long)]) == 2
    assert "is not a training checkpoint" in capsys.readouterr().err
    assert main(["train", "lm", "--out", str(long), "--branch-from", str(long / "checkpoint-step4"), "--force"]) == 2
    assert "lies inside --out" in capsys.readouterr().err
    assert (long / "results.json").is_file()
    weights = long / "checkpoint-step4" / "model.safetensors"  # a damaged checkpoint is named, never trained from
    data = bytearray(weights.read_bytes())
    data[-1] ^= 0xFF
    weights.write_bytes(bytes(data))
    assert main(["train", "lm", "--out", str(tmp_path / "d"), "--branch-from", str(weights.parent)]) == 2
    err = capsys.readouterr().err
    assert "model.safetensors does not match its sha256" in err and err.count("\n") == 1
    assert not (tmp_path / "d").exists() or not any((tmp_path / "d").iterdir())


def test_a_cosine_run_cannot_be_branched(tmp_path, capsys):
    run = tmp_path / "cosine"
    argv = [a if a != "train.schedule=wsd" else "train.schedule=cosine" for a in TINY_WSD]
    assert main(["train", "lm", "--out", str(run), *argv, "--set", "train.steps=6",
                 "--set", "train.keep_checkpoints=[3]"]) == 0  # fmt: skip
    capsys.readouterr()
    assert main(["train", "lm", "--out", str(tmp_path / "b"), "--branch-from", str(run / "checkpoint-step3")]) == 2
    assert "train.schedule='cosine' sets every step's rate from train.steps" in capsys.readouterr().err
