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

from dataclasses import dataclass
from pathlib import Path
from typing import Any, ClassVar

import torch

from aot.config import ModelConfig
from aot.data.icl import ICL_TASKS, ICLBatches, ICLDataConfig, Prompts, eval_prompts
from aot.errors import renamed_attributes
from aot.eval.icl import model_predictions, squared_errors
from aot.models import build_model
from aot.models.base import AotModel
from aot.tasks.figures import plot_training_curve
from aot.tasks.metric import Metric, dated_row
from aot.tasks.protocol import SMOKE, Setup, Task, TaskCommand, TaskOption, TaskRun, model_summary, sets_field
from aot.train.trainer import Trainer, TrainResult
from aot.validation import Limit, at_least


@dataclass
class ICLEvalConfig:
    """periodic_prompts: held-out prompts of the evaluations during training; final_prompts: for results.json."""

    periodic_prompts: int = 256
    final_prompts: int = 1000

    LIMITS: ClassVar[dict[str, Limit]] = {"periodic_prompts": at_least(1), "final_prompts": at_least(1)}


# The CPU recipes train in minutes at d = 5 (11 points) with a short curriculum; `garg` is Garg et al.'s recipe
# (d = 20, 41 points, 500k steps of 64, lr 1e-4) for a GPU.
ICL_RECIPES: dict[str, dict[str, Any]] = {
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
for _recipe in ICL_RECIPES.values():
    _recipe["train"] = {"precision": "fp32", "eval_every": 500, "grad_clip": 1.0, **_recipe["train"]}


@dataclass
class ICLRun(TaskRun):
    """The config of ``aot train icl``: sections model, train, data and eval."""

    task: ClassVar[str] = "icl"
    recipes: ClassVar[dict[str, dict[str, Any]]] = ICL_RECIPES
    data: ICLDataConfig
    eval: ICLEvalConfig


def prompt_tokens(run: ICLRun) -> int:
    """Tokens a full prompt puts through the backbone: x_1, y_1, ..., x_n, y_n."""
    return 2 * run.data.n_points


def icl_loss(model: torch.nn.Module, batch: tuple[torch.Tensor, ...]) -> torch.Tensor:
    """Mean squared error of the predictions at every position: ``batch = (xs, ys)``."""
    xs, ys = batch
    return (model(xs, ys).float() - ys).square().mean()


def curve_at(errors: list[float], n_dims: int) -> dict[str, float]:
    """The normalised error at k = d/2, d and 2d in-context examples (position k predicts from k examples)."""
    picks = {"k=d/2": n_dims // 2, "k=d": n_dims, "k=2d": 2 * n_dims}
    return {name: errors[k] for name, k in picks.items() if k < len(errors)}


def held_out_errors(net: torch.nn.Module, held_out: Prompts, n_prompts: int, device: torch.device) -> list[float]:
    """The normalised squared error by number of in-context examples, on the first ``n_prompts`` held-out prompts."""
    n = min(n_prompts, len(held_out.xs))
    xs, ys = held_out.xs[:n].to(device), held_out.ys[:n].to(device)
    preds = model_predictions(net, xs, ys).cpu()
    return squared_errors(preds, held_out.ys[:n], held_out.error_scale).mean(0).tolist()


#: the numbers a results-store row keeps of an icl run: row field -> where it is in the run's results.json
ICL_FIELDS: dict[str, tuple[str, ...]] = {
    **{name: ("model", name) for name in ("block", "n_layer", "n_embd", "params")},
    **{name: ("train", name) for name in ("steps", "train_seconds", "final_train_loss")},
    **{f"error_at_{name}": ("eval", f"k={k}") for name, k in (("half_d", "d/2"), ("d", "d"), ("2d", "2d"))},
}


class ICLTask(Task[None]):
    """In-context regression (Garg et al. 2022): the mean squared error of the prediction at every x position."""

    name = "icl"
    # the held-out error at k = 2d in-context examples: the point benchmarks/icl reads its models at
    metric = Metric("error_at_2d", "min", "error at k = 2d")
    smoke = ("cpu-quick", (*SMOKE, "model.n_embd=32", "eval.final_prompts=16", "train.batch_size=8"))
    run_cls = ICLRun
    command = TaskCommand(
        help="train an in-context regressor (Garg et al.)",
        description="Train a model to regress in context (Garg et al. 2022): prompts x_1, y_1, ..., x_n, y_n with "
        "y = w.x for a fresh w per prompt (linear, sparse with k non-zeros, or noisy), x ~ N(0, I_d), Garg's "
        "curriculum over dimensions and points, optionally a finite pool of w's. Every block works "
        "(aot-mssa, aot-mhsa, transformer, llama, crate, linear-attn, mamba). Writes checkpoint/, "
        "results.json (normalised error by number of in-context examples on 1,000 held-out prompts), "
        "metrics.jsonl and loss_curve.png into --out; compare runs and baselines with `aot eval icl`.",
        examples=(
            "aot train icl                                  # cpu-quick: AoT-MHSA, d = 5, a few minutes",
            "aot train icl --model aot-mssa-icl-cpu --task sparse --set data.sparsity=2",
            "aot train icl --recipe cpu-bench --model mamba-icl-cpu --out runs/icl/mamba",
            "aot train icl --set data.pool_size=64 --set model.position=rope",
            "aot train icl --out runs/icl --resume          # continue an interrupted run exactly",
        ),
        recipe_notes=(
            "cpu-quick  d = 5, 11 points, curriculum from 2 dims / 5 points, +1 / +2 every 200 steps, 2000 x 64",
            "cpu-bench  d = 10, 21 points, curriculum every 500 steps, 4000 steps x 64",
            "garg       Garg et al.: GPT-2 12 x 256, d = 20, 41 points, 500k steps x 64, lr 1e-4 (a GPU job)",
        ),
        default_recipe="cpu-quick",
        options=(
            TaskOption("--task", f"function class: {', '.join(ICL_TASKS)}", sets_field("data", "task")),
            TaskOption(
                "--dims",
                "d, the dimension of x (the prompt length follows: 2d + 1)",
                lambda d: {"data": {"n_dims": d, "n_points": 2 * d + 1}},
                kind=int,
            ),
        ),
    )

    def check(self, run: ICLRun, device: torch.device | None = None) -> None:
        """The run's training step and its prompts (the held-out set and a batch, float64 as they are drawn) must
        fit in memory."""
        prompt = run.data.n_points * (run.data.n_dims + 2) * 8  # xs, ys and a w per prompt, float64
        data = {
            "held-out prompts": run.eval.final_prompts * prompt,
            "a batch of prompts": run.train.batch_size * prompt * 2,  # drawn in float64, fed as a float32 copy
        }
        self.check_memory(run, *self.planned_model(run), data, device=device)

    def planned_model(self, run: ICLRun) -> tuple[ModelConfig, int]:
        return run.model_config(task="icl", n_dims=run.data.n_dims, n_points=run.data.n_points), prompt_tokens(run)

    def load_data(self, run: ICLRun, is_main: bool) -> None:
        return None  # prompts are drawn from the step (ICLBatches); the held-out set is fixed by its own seed

    def build_model(self, run: ICLRun, data: None) -> AotModel:
        return build_model(run.model_config(task="icl", n_dims=run.data.n_dims, n_points=run.data.n_points))

    def seq_len(self, run: ICLRun, model: AotModel) -> int:
        return prompt_tokens(run)

    def setup(self, run: ICLRun, data: None, model: AotModel, device: torch.device) -> Setup:
        batches = ICLBatches(run.data, run.train.batch_size, seed=run.train.seed)
        held_out = eval_prompts(run.data, run.eval.final_prompts)

        def periodic_eval(net: torch.nn.Module) -> dict[str, float]:
            return curve_at(held_out_errors(net, held_out, run.eval.periodic_prompts, device), run.data.n_dims)

        fingerprint = {"model": model.cfg.to_dict(), "data": vars(run.data), "seed": run.train.seed}
        return Setup(batches, icl_loss, periodic_eval, fingerprint, state=held_out)

    def final_eval(self, run: ICLRun, data: None, setup: Setup, trainer: Trainer, device: torch.device) -> dict:
        return {"errors": held_out_errors(trainer.model, setup.state, run.eval.final_prompts, device)}

    def results(
        self, run: ICLRun, data: None, setup: Setup, model: AotModel, result: TrainResult, final: dict
    ) -> dict[str, Any]:
        errors = final["errors"]
        return {
            "model": model_summary(model, model.cfg, "position"),
            "train": {"prompts": result.step * run.train.batch_size},
            "eval": {"n_prompts": run.eval.final_prompts, "error_by_k": errors, **curve_at(errors, run.data.n_dims)},
        }

    def figures(self, out: Path, results: dict[str, Any]) -> list[Path]:
        model, train, cfg = results["model"], results["train"], results["config"]["data"]
        path = plot_training_curve(
            out,
            train["curve"],
            train["evals"],
            x_per_step=1,
            x_label="step",
            eval_key="k=d",
            y_label="squared error (train: raw; held out: / d at k = d)",
            title=f"{model['block']} L={model['n_layer']} d={model['n_embd']}, {cfg['task']} regression",
        )
        return [path]

    def store_row(self, results: dict[str, Any]) -> dict[str, Any]:
        """Size, steps, the held-out error at k = d/2, d and 2d, the date."""
        return dated_row(results, ICL_FIELDS)

    def summary(self, results: dict[str, Any], out: Path) -> str:
        ev, d = results["eval"], results["config"]["data"]["n_dims"]
        errors = ", ".join(f"{k} {ev[k]:.3f}" for k in ("k=d/2", "k=d", "k=2d") if k in ev)
        return (
            f"{results['model']['block']} ({results['model']['params'] / 1e6:.2f}M params) "
            f"{results['train']['steps']} steps in {results['train']['train_seconds']:.0f}s; "
            f"{results['config']['data']['task']} regression d={d}: squared error / d at {errors}. "
            f"Wrote {out / 'results.json'}"
        )


__getattr__ = renamed_attributes(__name__, {"ICL_PRESETS": "ICL_RECIPES"}, "training recipes")
