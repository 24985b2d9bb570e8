"""``aot sweep --plan``'s cost: a run's training FLOPs against the count written out by hand for its block (the
MFU convention: 3 × the forward's matrix products, causal attention over (T + 1) / 2 keys on average), and the
GPU-hours those take on a named GPU at a stated MFU."""

from __future__ import annotations

import pytest

from aot.cli import main
from aot.sweep.launch.cost import CostModel, run_flops
from aot.sweep.task_sweep import GridSweep

SETS = ("model.n_layer=3", "model.n_embd=64", "model.n_head=4", "model.block_size=32", "train.steps=100",
        "train.batch_size=8")  # fmt: skip


def hand_count(n_layer: int, d: int, T: int, vocab: int, steps: int, batch: int) -> float:
    """AoT-MHSA: W_QKV and W_O (8·d² a token and layer), scores and values (4·d a key), the LM head (2·d·V)."""
    causal_keys = (T + 1) / 2
    forward = n_layer * 8 * d * d + n_layer * 4 * causal_keys * d + 2 * d * vocab
    return T * 3 * forward * steps * batch


def test_a_runs_flops_and_gpu_hours_are_its_hand_count(capsys):
    sweep = GridSweep("lm", "cpu-quick", (*SETS, "train.lr=1e-3,3e-3"), seeds=(0,), model="aot-mhsa-l-cpu")
    trial = sweep.plan({"runs": []}).runs[0]
    flops = run_flops("lm", trial.build())
    expected = hand_count(3, 64, 32, 256, 100, 8)  # the byte tokenizer: 256 ids
    assert flops == pytest.approx(expected, rel=1e-12)
    cost = CostModel("H100", 0.4)
    assert cost.gpu_hours(expected) == pytest.approx(expected / (989e12 * 0.4) / 3600, rel=1e-12)
    argv = ["sweep", "lm", "--recipe", "cpu-quick", "--model", "aot-mhsa-l-cpu", "--out", "unused", "--plan"]
    assert main([*argv, *(a for s in (*SETS, "train.lr=1e-3,3e-3") for a in ("--set", s))]) == 0
    printed = capsys.readouterr().out
    assert printed.count(f"{expected:.3g} FLOPs, {cost.gpu_hours(expected):.3g} GPU-h") == 2
    assert f"{2 * expected:.3g} FLOPs, {cost.gpu_hours(2 * expected):.3g} GPU-hours on H100 bf16 at 40 % MFU" in printed


@pytest.mark.parametrize(("gpu", "mfu", "message"), [("H1000", 0.4, "not a known GPU"), ("H100", 1.5, "--mfu")])
def test_an_unknown_gpu_or_an_impossible_mfu_is_one_line(gpu, mfu, message, capsys):
    argv = ["sweep", "lm", "--plan", "--out", "unused", "--gpu-type", gpu, "--mfu", str(mfu)]
    assert main(argv) == 2
    err = capsys.readouterr().err.strip()
    assert message in err and "\n" not in err


def test_the_gpu_designs_plan_with_their_gpu_hours_and_a_branch_costs_its_cooldown_only(capsys):
    """`aot sweep --file benchmarks/scaling/gpu-a.yaml --plan`: every run with its FLOPs and GPU-hours, and a
    cooldown branch costs the steps it trains (from its parent's kept checkpoint), not its whole budget."""
    from pathlib import Path

    from aot.sweep.execute import branch_parent
    from aot.sweep.launch.cost import start_step
    from aot.sweep.sweep_file import read_sweep_file

    root = Path(__file__).resolve().parents[2] / "benchmarks" / "scaling"
    for name in ("gpu-a.yaml", "gpu-b.yaml"):
        assert main(["sweep", "--file", str(root / name), "--plan", "--out", "unused-out"]) == 0
        printed = capsys.readouterr().out.splitlines()
        runs = [line for line in printed if line.startswith(("run ", "waiting "))]
        assert runs and all("GPU-h" in line for line in runs), name
        total = next(line for line in printed if "GPU-hours on H100 bf16 at 40 % MFU" in line)
        assert total.startswith(f"{len(runs)} runs, {len(runs)} to train")
    study = read_sweep_file(root / "gpu-a.yaml").study
    plan = study.plan({"runs": []})
    branch = next(t for t in plan.pending if branch_parent(t, Path("r")) is not None)
    start, run = start_step(branch_parent(branch, Path("r"))), branch.build()
    assert 0 < start < run.train.steps
    whole = run_flops("lm", run)
    assert run_flops("lm", run, start) == pytest.approx(whole * (run.train.steps - start) / run.train.steps)
