"""`aot train icl`: train an in-context regressor (Garg et al. 2022) on linear, sparse or noisy linear regression.

The run config has the sections ``model`` (a model preset plus overrides; ``n_dims`` and ``n_points`` come from
the data section), ``train`` (:class:`aot.train.TrainConfig`), ``data`` (:class:`aot.data.icl.ICLDataConfig`:
task, d, prompt length, curriculum, task pool) and ``eval``. The loss is the mean squared error of the
prediction at every x position of the prompt (Garg et al.). Periodic evaluations report the normalised error
on a fixed held-out set of full-size prompts at k = d/2, d and 2d in-context examples.

The run folder holds ``checkpoint/`` (the model, loadable by ``AotModel.from_pretrained``), ``results.json``,
``metrics.jsonl`` and ``loss_curve.png``; ``aot eval icl RUN_DIR...`` draws the error curves.
"""

from __future__ import annotations

import argparse
import json
import math
import textwrap
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any, ClassVar

import torch

from aot.bench.flops import RECURRENT_BLOCKS, flops_per_token
from aot.data.icl import ICL_TASKS, ICLBatches, ICLDataConfig, eval_prompts
from aot.devices import resolve_device
from aot.errors import AotError
from aot.eval.icl import model_predictions, squared_errors
from aot.models import build_model
from aot.runinfo import machine_info
from aot.train import experiment
from aot.train.experiment import TaskRun
from aot.train.trainer import Trainer


@dataclass
class ICLEvalConfig:
    """periodic_prompts: held-out prompts of the evaluations during training; final_prompts: for results.json."""

    periodic_prompts: int = 256
    final_prompts: int = 1000


# The CPU presets train in minutes at d = 5 (11 points) with a short curriculum; `garg` is Garg et al.'s recipe
# (d = 20, 41 points, 500k steps of 64, lr 1e-4) for a GPU.
ICL_PRESETS: dict[str, dict[str, Any]] = {
    "cpu-quick": {
        "model": {"preset": "aot-mhsa-icl-cpu"},
        "data": {
            "task": "linear",
            "n_dims": 5,
            "n_points": 11,
            "dims_start": 2,
            "points_start": 5,
            "curriculum_interval": 200,
        },
        "train": {"steps": 2000, "batch_size": 64, "lr": 1e-3, "warmup_steps": 100, "weight_decay": 0.0},
        "eval": {"periodic_prompts": 256, "final_prompts": 1000},
    },
    "cpu-bench": {
        "model": {"preset": "aot-mhsa-icl-cpu"},
        "data": {"task": "linear", "n_dims": 10, "n_points": 21, "curriculum_interval": 500},
        "train": {"steps": 4000, "batch_size": 64, "lr": 1e-3, "warmup_steps": 200, "weight_decay": 0.0},
        "eval": {"periodic_prompts": 256, "final_prompts": 1000},
    },
    "garg": {
        "model": {"preset": "gpt2-icl"},
        "data": {"task": "linear", "n_dims": 20, "n_points": 41, "curriculum_interval": 2000},
        "train": {
            "steps": 500_000,
            "batch_size": 64,
            "lr": 1e-4,
            "warmup_steps": 0,
            "weight_decay": 0.0,
            "min_lr_ratio": 1.0,
            "eval_every": 10_000,
            "checkpoint_every": 10_000,
        },
        "eval": {"periodic_prompts": 1000, "final_prompts": 1000},
    },
}
for _preset in ICL_PRESETS.values():
    _preset["train"] = {"precision": "fp32", "eval_every": 500, "grad_clip": 1.0, **_preset["train"]}


@dataclass
class ICLRun(TaskRun):
    """The config of ``aot train icl``: sections model, train, data and eval."""

    task: ClassVar[str] = "icl"
    presets: ClassVar[dict[str, dict[str, Any]]] = ICL_PRESETS
    data: ICLDataConfig
    eval: ICLEvalConfig


# preset < config file < flags < --set assignments, validated (see aot.train.experiment.build_run_config)
build_run_config = ICLRun.build


def icl_loss(model: torch.nn.Module, batch: tuple[torch.Tensor, ...]) -> torch.Tensor:
    """Mean squared error of the predictions at every position: ``batch = (xs, ys)``."""
    xs, ys = batch
    return (model(xs, ys).float() - ys).square().mean()


def curve_at(errors: list[float], n_dims: int) -> dict[str, float]:
    """The normalised error at k = d/2, d and 2d in-context examples (position k predicts from k examples)."""
    picks = {"k=d/2": n_dims // 2, "k=d": n_dims, "k=2d": 2 * n_dims}
    return {name: errors[k] for name, k in picks.items() if k < len(errors)}


def train_icl(
    run: ICLRun, out_dir: str | Path, device_name: str = "auto", resume: bool | str = False, force: bool = False
) -> dict:
    """Train, evaluate on held-out prompts, and write ``results.json`` and ``loss_curve.png`` into ``out_dir``.
    ``run.train.seed`` seeds everything (model init, prompts, dropout); ``resume`` / ``force``: see
    :meth:`aot.train.Trainer.fit`."""
    out = Path(out_dir)
    seed = run.train.seed
    device = resolve_device(device_name)
    model_cfg = run.model_config(task="icl", n_dims=run.data.n_dims, n_points=run.data.n_points)
    torch.manual_seed(seed)
    model = build_model(model_cfg)
    batches = ICLBatches(run.data, run.train.batch_size, seed=seed)
    held_out = eval_prompts(run.data, run.eval.final_prompts)

    def evaluate(net: torch.nn.Module, n_prompts: int) -> list[float]:
        n = min(n_prompts, len(held_out.xs))
        xs, ys = held_out.xs[:n].to(device), held_out.ys[:n].to(device)
        preds = model_predictions(net, xs, ys).cpu()
        return squared_errors(preds, held_out.ys[:n], held_out.error_scale).mean(0).tolist()

    def periodic_eval(net: torch.nn.Module) -> dict[str, float]:
        return curve_at(evaluate(net, run.eval.periodic_prompts), run.data.n_dims)

    fingerprint = {"model": model_cfg.to_dict(), "data": vars(run.data), "seed": seed}
    seq = 2 * run.data.n_points
    trainer = Trainer(
        model,
        batches,
        icl_loss,
        run.train,
        out,
        device=device,
        evaluate=periodic_eval,
        fingerprint=fingerprint,
        model_config=model_cfg.to_dict(),
        flops_per_sample=None
        if model_cfg.block in RECURRENT_BLOCKS
        else seq * flops_per_token(model_cfg, seq).training(),
    )
    wall_start = time.perf_counter()
    result = trainer.fit(resume=resume, force=force)
    with trainer.autocast():
        errors = evaluate(trainer.model, run.eval.final_prompts)
    curve = [{"step": s, "loss": v} for s, v in result.losses]
    results: dict[str, Any] = {
        "task": "icl",
        "machine": machine_info(),
        "seed": seed,
        "config": run.to_dict(),
        "model": {
            "block": model_cfg.block,
            "n_layer": model_cfg.n_layer,
            "n_embd": model_cfg.n_embd,
            "position": model_cfg.position,
            "params": model.num_params(),
            "non_embedding_params": model.num_params(non_embedding=True),
        },
        "train": {
            "steps": result.step,
            "prompts": result.step * run.train.batch_size,
            "train_seconds": result.train_seconds,
            "wall_seconds": time.perf_counter() - wall_start,
            "final_train_loss": result.last_loss,
            "curve": curve,
            "evals": result.evals,
        },
        "eval": {"n_prompts": run.eval.final_prompts, "error_by_k": errors, **curve_at(errors, run.data.n_dims)},
    }
    out.mkdir(parents=True, exist_ok=True)
    (out / "results.json").write_text(json.dumps(results, indent=2) + "\n")
    experiment.plot_training_curve(
        out,
        curve,
        result.evals,
        x_per_step=1,
        x_label="step",
        eval_key="k=d",
        y_label="squared error (train: raw; held out: / d at k = d)",
        title=f"{model_cfg.block} L={model_cfg.n_layer} d={model_cfg.n_embd}, {run.data.task} regression",
    )
    return results


# -- command line -----------------------------------------------------------------------------------------


def register(subparsers: argparse._SubParsersAction) -> None:
    parser = subparsers.add_parser(
        "icl",
        help="train an in-context regressor (Garg et al.)",
        description=textwrap.fill(
            "Train a model to regress in context (Garg et al. 2022): prompts x_1, y_1, ..., x_n, y_n with "
            "y = w.x for a fresh w per prompt (linear, sparse with k non-zeros, or noisy), x ~ N(0, I_d), Garg's "
            "curriculum over dimensions and points, optionally a finite pool of w's. Every block works "
            "(aot-mssa, aot-mhsa, transformer, llama, crate, linear-attn, mamba). Writes checkpoint/, "
            "results.json (normalised error by number of in-context examples on 1,000 held-out prompts), "
            "metrics.jsonl and loss_curve.png into --out; compare runs and baselines with `aot eval icl`.",
            width=100,
        ),
        epilog="Examples:\n"
        "  aot train icl                                  # cpu-quick: AoT-MHSA, d = 5, a few minutes\n"
        "  aot train icl --model aot-mssa-icl-cpu --task sparse --set data.sparsity=2\n"
        "  aot train icl --preset cpu-bench --model mamba-icl-cpu --out runs/icl/mamba\n"
        "  aot train icl --set data.pool_size=64 --set model.position=rope\n"
        "  aot train icl --out runs/icl --resume          # continue an interrupted run exactly\n"
        "Presets:\n"
        "  cpu-quick  d = 5, 11 points, curriculum from 2 dims / 5 points, +1 / +2 every 200 steps, 2000 x 64\n"
        "  cpu-bench  d = 10, 21 points, curriculum every 500 steps, 4000 steps x 64\n"
        "  garg       Garg et al.: GPT-2 12 x 256, d = 20, 41 points, 500k steps x 64, lr 1e-4 (a GPU job)\n"
        "Print the full config with --dump-config.",
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    parser.add_argument("--task", help=f"function class: {', '.join(ICL_TASKS)}")
    parser.add_argument("--dims", type=int, help="d, the dimension of x (the prompt length follows: 2d + 1)")
    experiment.add_train_args(parser, ICL_PRESETS, default_preset="cpu-quick", default_out="runs/icl")
    parser.set_defaults(func=run_command)


def run_command(args: argparse.Namespace) -> int:
    flags = experiment.train_flags(args)
    if args.task is not None:
        if args.task not in ICL_TASKS:
            raise AotError(f"unknown ICL task {args.task!r}; use one of {', '.join(ICL_TASKS)}")
        flags.setdefault("data", {})["task"] = args.task
    if args.dims is not None:
        flags.setdefault("data", {}).update(n_dims=args.dims, n_points=2 * args.dims + 1)
    run = build_run_config(args.preset, args.config, flags, args.set, model_preset=args.model)
    if args.dump_config:
        print(experiment.dump_config(run), end="")
        return 0
    results = train_icl(run, args.out, args.device, **experiment.fit_options(args))
    ev, d = results["eval"], run.data.n_dims
    summary = ", ".join(f"{k} {ev[k]:.3f}" for k in ("k=d/2", "k=d", "k=2d") if k in ev)
    print(
        f"{results['model']['block']} ({results['model']['params'] / 1e6:.2f}M params) {results['train']['steps']} "
        f"steps in {results['train']['train_seconds']:.0f}s; {run.data.task} regression d={d}: squared error / d "
        f"at {summary}. Wrote {Path(args.out) / 'results.json'}"
    )
    if not math.isfinite(results["train"]["final_train_loss"]):
        raise AotError("training diverged (non-finite loss); lower --lr")
    return 0
