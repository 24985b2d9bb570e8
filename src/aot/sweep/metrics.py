"""What a sweep ranks its runs by, per task, and the numbers a results-store row keeps of a finished run.

Each task declares one :class:`Metric` (the value its lr sweep minimises or maximises) and one row function (the
fields of a run's ``results.json`` that a store row records): lm ranks by val nats/byte, vision by val top-1,
icl by the held-out error at k = 2d in-context examples (the point benchmarks/icl reads its models at), recall by the
accuracy on its validation set (its test set is reported, not ranked by).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any

from aot.errors import ConfigError


@dataclass(frozen=True)
class Metric:
    """A row field that a sweep ranks runs by: ``goal`` ``min`` (a loss) or ``max`` (an accuracy)."""

    field: str
    goal: str = "min"
    label: str = ""

    def rank(self, row: dict[str, Any]) -> float:
        """Sort key of a row: smaller is better whatever the goal."""
        value = float(row[self.field])
        return value if self.goal == "min" else -value

    @property
    def name(self) -> str:
        """How a table heads the metric."""
        return self.label or self.field


def pick(results: dict[str, Any], fields: Mapping[str, tuple[str, ...]]) -> dict[str, Any]:
    """``{name: results[a][b]...}`` for each ``name: (a, b, ...)`` of ``fields`` (a missing key gives None)."""
    row = {}
    for name, path in fields.items():
        value: Any = results
        for key in path:
            value = value.get(key) if isinstance(value, dict) else None
        row[name] = value
    return row


#: the numbers a store keeps of a run, per task: row field -> where it is in the run's results.json
TIMES: dict[str, tuple[str, ...]] = {name: ("train", name) for name in ("train_seconds", "wall_seconds")}
LM_FIELDS: dict[str, tuple[str, ...]] = {
    **{name: ("model", name) for name in ("block", "n_layer", "n_embd", "non_embedding_params")},
    "tokens": ("train", "tokens"),
    **{f"{split}_loss": (split, "loss") for split in ("val", "test")},
    **{f"{split}_nats_per_byte": (split, "nats_per_byte") for split in ("val", "test")},
    # how the final scores were taken (aot.eval.lm.evaluate_lm): their standard error over windows, how many
    # windows, whether that is the whole split; None in rows recorded before these were (a 128-window sample)
    **{f"{split}_loss_se": (split, "loss_se") for split in ("val", "test")},
    "val_windows": ("val", "windows"),
    "val_full_split": ("val", "full_split"),
    "tokens_per_second": ("train", "tokens_per_second"),
    **TIMES,
    "bigram_val_loss": ("baselines", "val", "bigram", "loss"),
}
VISION_FIELDS: dict[str, tuple[str, ...]] = {
    **{name: ("model", name) for name in ("block", "n_layer", "n_embd", "norm", "residual_scale", "params")},
    "epochs": ("train", "epochs"),
    "val_top1": ("val", "top1"),
    **{f"test_{name}": ("test", name) for name in ("top1", "top5", "loss")},
    "images_per_second": ("train", "images_per_second"),
    **TIMES,
}
ICL_FIELDS: dict[str, tuple[str, ...]] = {
    **{name: ("model", name) for name in ("block", "n_layer", "n_embd", "params")},
    **{name: ("train", name) for name in ("steps", "train_seconds", "final_train_loss")},
    **{f"error_at_{name}": ("eval", f"k={k}") for name, k in (("half_d", "d/2"), ("d", "d"), ("2d", "2d"))},
}

RECALL_FIELDS: dict[str, tuple[str, ...]] = {
    **{name: ("model", name) for name in ("block", "n_layer", "n_embd", "position", "token_shift", "params")},
    **{name: ("config", "data", name) for name in ("vocab_size", "seq_len", "n_pairs")},
    **{f"{split}_{name}": (split, name) for split in ("val", "test") for name in ("accuracy", "loss")},
    "test_sequence_accuracy": ("test", "sequence_accuracy"),
    **{name: ("train", name) for name in ("steps", "sequences", "tokens_per_second")},
    **TIMES,
}


def lm_row(results: dict[str, Any]) -> dict[str, Any]:
    """An lm run's row: size, budget, val / test loss, speed, the bigram, the periodic evaluations, the date."""
    evals = [{"tokens": e["tokens"], "val_loss": e["val_loss"]} for e in results["train"]["evals"]]
    return {**pick(results, LM_FIELDS), "evals": evals, "date": results["machine"]["date"]}


def vision_row(results: dict[str, Any]) -> dict[str, Any]:
    """A vision run's row: size, epochs, val / test accuracy, speed, the date."""
    return {**pick(results, VISION_FIELDS), "date": results["machine"]["date"]}


def icl_row(results: dict[str, Any]) -> dict[str, Any]:
    """An icl run's row: size, steps, the held-out error at k = d/2, d and 2d, the date."""
    return {**pick(results, ICL_FIELDS), "date": results["machine"]["date"]}


def recall_row(results: dict[str, Any]) -> dict[str, Any]:
    """A recall run's row: size, the MQAR setting, val / test accuracy (per query; per sequence on test) and loss,
    steps, speed, the date."""
    return {**pick(results, RECALL_FIELDS), "date": results["machine"]["date"]}


@dataclass(frozen=True)
class TaskMetrics:
    """A task's sweep declaration: the metric its lr sweep ranks by and the row its runs leave in a store."""

    metric: Metric
    row: Callable[[dict[str, Any]], dict[str, Any]]


TASK_METRICS: dict[str, TaskMetrics] = {
    "lm": TaskMetrics(Metric("val_nats_per_byte", "min", "val nats/byte"), lm_row),
    "vision": TaskMetrics(Metric("val_top1", "max", "val top-1"), vision_row),
    "icl": TaskMetrics(Metric("error_at_2d", "min", "error at k = 2d"), icl_row),
    "recall": TaskMetrics(Metric("val_accuracy", "max", "val accuracy"), recall_row),
}


def task_metrics(task: str) -> TaskMetrics:
    """The sweep declaration of ``task``; a one-line error naming the tasks a sweep knows otherwise."""
    if task not in TASK_METRICS:
        raise ConfigError(f"aot sweep knows no metric for task {task!r}; use one of {', '.join(TASK_METRICS)}")
    return TASK_METRICS[task]
