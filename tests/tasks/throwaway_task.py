"""A throwaway task, written as a contributor would add one: this file is all of it (registered by the test with
:func:`aot.tasks.register_task`), and ``aot train``, ``aot sweep``, the trainer's MFU and the run folder's
checkpoint then work for it with no line changed elsewhere (tests/tasks/test_throwaway_task.py).

``first-token``: random sequences of ``seq_len`` tokens; at the last position the model must name the first token
(a look back over the whole context). The loss is the cross-entropy there; the metric is its accuracy on a fixed
validation set."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any, ClassVar

import numpy as np
import torch
import torch.nn.functional as F

from aot.config import ModelConfig
from aot.models import build_model
from aot.models.base import AotModel
from aot.tasks import Setup, Task, TaskCommand, TaskRun
from aot.tasks.metric import Metric, dated_row
from aot.tasks.protocol import SMOKE, model_summary
from aot.train.trainer import Trainer, TrainResult
from aot.validation import Limit, within


@dataclass
class FirstTokenData:
    """vocab_size: tokens drawn uniformly; seq_len: tokens per sequence; val_sequences: the fixed validation set."""

    vocab_size: int = 16
    seq_len: int = 8
    val_sequences: int = 64

    LIMITS: ClassVar[dict[str, Limit]] = {
        "vocab_size": within(2, 10**5),
        "seq_len": within(2, 4096),
        "val_sequences": within(1, 10**6),
    }


@dataclass
class FirstTokenRun(TaskRun):
    task: ClassVar[str] = "lm"
    recipes: ClassVar[dict[str, dict[str, Any]]] = {
        "cpu-quick": {
            "model": {"preset": "aot-mhsa-l-cpu", "n_layer": 2, "n_embd": 32, "n_head": 2, "init_std": 0.05},
            "data": {},
            "train": {"steps": 200, "batch_size": 32, "lr": 3e-3, "warmup_steps": 10, "precision": "fp32"},
        }
    }
    data: FirstTokenData

    def planned(self) -> ModelConfig:
        return self.model_config(vocab_size=self.data.vocab_size, block_size=self.data.seq_len)


def draw(cfg: FirstTokenData, n: int, rng: np.random.Generator) -> torch.Tensor:
    return torch.from_numpy(rng.integers(0, cfg.vocab_size, size=(n, cfg.seq_len)))


class Batches:
    """The trainer's batch source: step ``step``'s global batch drawn from its own seed, rows [start, stop)."""

    def __init__(self, cfg: FirstTokenData, batch_size: int, seed: int) -> None:
        self.cfg, self.batch_size, self.seed = cfg, batch_size, seed

    def get(self, step: int, start: int = 0, stop: int | None = None) -> tuple[torch.Tensor]:
        return (draw(self.cfg, self.batch_size, np.random.default_rng([self.seed, step]))[start:stop],)


def loss(model: torch.nn.Module, batch: tuple[torch.Tensor]) -> torch.Tensor:
    (tokens,) = batch
    logits, _ = model(tokens)
    return F.cross_entropy(logits[:, -1].float(), tokens[:, 0])


@torch.no_grad()
def accuracy(model: torch.nn.Module, tokens: torch.Tensor, device: torch.device) -> float:
    logits, _ = model(tokens.to(device))
    return float((logits[:, -1].argmax(-1) == tokens[:, 0].to(device)).float().mean())


class FirstTokenTask(Task[torch.Tensor]):
    """Name the first token at the last position."""

    name = "first-token"
    run_cls = FirstTokenRun
    metric = Metric("val_accuracy", "max", "val accuracy")
    smoke = ("cpu-quick", (*SMOKE, "model.n_embd=16", "train.batch_size=8", "data.val_sequences=8"))
    command = TaskCommand(
        help="name the first token at the last position (a throwaway task)",
        description="A throwaway task that shows what adding one takes.",
        examples=("aot train first-token",),
        recipe_notes=("cpu-quick  2 layers x 32, 8 tokens of 16",),
        default_recipe="cpu-quick",
    )

    def planned_model(self, run: FirstTokenRun) -> tuple[ModelConfig, int]:
        return run.planned(), run.data.seq_len

    def check(self, run: FirstTokenRun, device: torch.device | None = None) -> None:
        self.check_memory(run, *self.planned_model(run), device=device)

    def load_data(self, run: FirstTokenRun, is_main: bool) -> torch.Tensor:
        return draw(run.data, run.data.val_sequences, np.random.default_rng(12345))  # the fixed validation set

    def build_model(self, run: FirstTokenRun, data: torch.Tensor) -> AotModel:
        return build_model(run.planned())

    def seq_len(self, run: FirstTokenRun, model: AotModel) -> int:
        return run.data.seq_len

    def setup(self, run: FirstTokenRun, data: torch.Tensor, model: AotModel, device: torch.device) -> Setup:
        def periodic_eval(net: torch.nn.Module) -> dict[str, float]:
            return {"val_accuracy": accuracy(net, data, device)}

        fingerprint = {"model": model.cfg.to_dict(), "data": vars(run.data), "seed": run.train.seed}
        return Setup(Batches(run.data, run.train.batch_size, run.train.seed), loss, periodic_eval, fingerprint)

    def final_eval(self, run: FirstTokenRun, data: torch.Tensor, setup: Setup, trainer: Trainer, device) -> dict:
        return {"val": {"accuracy": accuracy(trainer.model, data, device)}}

    def results(
        self, run: FirstTokenRun, data: torch.Tensor, setup: Setup, model: AotModel, result: TrainResult, final: dict
    ) -> dict[str, Any]:
        return {"model": model_summary(model, model.cfg), "train": {"mfu": result.mfu}, "val": final["val"]}

    def store_row(self, results: dict[str, Any]) -> dict[str, Any]:
        return dated_row(results, {"val_accuracy": ("val", "accuracy"), "train_seconds": ("train", "train_seconds")})

    def summary(self, results: dict[str, Any], out: Path) -> str:
        return f"first-token: val accuracy {results['val']['accuracy']:.3f}. Wrote {out / 'results.json'}"
