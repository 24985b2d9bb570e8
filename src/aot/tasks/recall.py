"""`aot train recall`: multi-query associative recall (MQAR, Zoology: Arora et al. 2023) with any language-model
block, trained by the shared trainer.

The run config has the sections ``model`` (an LM model preset plus overrides; ``vocab_size`` and ``block_size`` come
from the data section), ``train`` (:class:`aot.train.TrainConfig`), ``data`` (:class:`aot.data.mqar.MQARConfig`:
vocabulary, sequence length, pairs, queries and where they fall) and ``eval``. The loss is the cross-entropy of the
answers only (every other position's target is ignored); accuracy is the argmax over the whole vocabulary at each
answer (per query), and the share of sequences whose every query is right (per sequence). Periodic evaluations and
the lr a sweep picks use a fixed validation set; results.json reports a fixed test set beside it.

The recipes train 2-layer models (Zoology's setting): ``cpu-quick`` (AoT-MHSA learns 8 pairs in 64 tokens in under a
minute on one CPU thread; benchmarks/recall starts every run from it) and ``zoology`` (Zoology's Figure 2 at 64 tokens:
V = 8192, 100k sequences x 64 epochs; a GPU job).
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from pathlib import Path
from typing import Any, ClassVar

import torch
import torch.nn.functional as F

from aot.config import ModelConfig
from aot.data.mqar import IGNORE, MQARBatches, MQARConfig, MQARSequences, held_out
from aot.errors import renamed_attributes
from aot.models import build_model
from aot.models.base import AotModel
from aot.tasks.figures import plot_training_curve
from aot.tasks.metric import TIMES, Metric, dated_row
from aot.tasks.protocol import SMOKE, Setup, Task, TaskCommand, TaskOption, TaskRun, model_summary, sets_field
from aot.train.trainer import Trainer, TrainResult
from aot.validation import Limit, within


@dataclass
class RecallEvalConfig:
    """val_sequences: the validation set (periodic evaluations, and what a sweep ranks by); test_sequences: the test
    set of results.json (Zoology: 3,000); batch_size: sequences per forward pass."""

    val_sequences: int = 500
    test_sequences: int = 3000
    batch_size: int = 250

    LIMITS: ClassVar[dict[str, Limit]] = {
        "val_sequences": within(1, 10**6),
        "test_sequences": within(1, 10**6),
        "batch_size": within(1, 10**5),
    }


# Zoology's attention: 2 layers, one head, learned positions. Init std 0.05 (docs/math.md, "The init scale and the
# self-score"): at nanoGPT's 0.02 a 2 x 64 AoT-MHSA stayed at chance (1 / pairs) for thousands of steps in our trials.
_TWO_LAYERS = {"n_layer": 2, "n_head": 1, "init_std": 0.05}
RECALL_RECIPES: dict[str, dict[str, Any]] = {
    "cpu-quick": {
        "model": {"preset": "aot-mhsa-l-cpu", **_TWO_LAYERS, "n_embd": 64},
        "data": {"vocab_size": 64, "seq_len": 64, "n_pairs": 8, "random_fill": False},
        "train": {"steps": 1000, "batch_size": 64, "lr": 3e-3, "warmup_steps": 50, "eval_every": 250},
        "eval": {"val_sequences": 500, "test_sequences": 1000},
    },
    "zoology": {  # Figure 2 of Zoology at T = 64: 100k sequences x 64 epochs in batches of 512, dropout 0.1
        "model": {"preset": "aot-mhsa-l-cpu", **_TWO_LAYERS, "n_embd": 128, "dropout": 0.1, "init_std": 0.02},
        "data": {"vocab_size": 8192, "seq_len": 64, "n_pairs": 4, "random_fill": False},
        "train": {"steps": 12_500, "batch_size": 512, "lr": 2e-3, "warmup_steps": 500, "eval_every": 1000},
        "eval": {"val_sequences": 1000, "test_sequences": 3000},
    },
}
for _recipe in RECALL_RECIPES.values():
    _recipe["train"] = {"precision": "fp32", "weight_decay": 0.1, "grad_clip": 1.0, **_recipe["train"]}


#: the blocks the recall study compares (benchmarks/recall, the report's recall part): label -> the --set assignments
#: that make it from cpu-quick's 2-layer, one-head model (Mamba needs aot[mamba])
RECALL_BLOCKS: dict[str, tuple[str, ...]] = {
    "GPT-2": ("model.preset=gpt2-cpu",),
    "AoT-MHSA": ("model.preset=aot-mhsa-l-cpu",),
    "AoT-MSSA (W_O)": ("model.preset=aot-mssa-l-cpu", "model.tied_output=false"),
    "AoT-MSSA (tied)": ("model.preset=aot-mssa-tied-l-cpu", "model.tied_output=true"),
    "CRATE": ("model.preset=crate-l-cpu",),
    "Llama": ("model.preset=llama-l-cpu",),
    "linear attention": ("model.preset=aot-mhsa-l-cpu", "model.block=linear-attn"),
    "Mamba": ("model.preset=aot-mhsa-l-cpu", "model.block=mamba"),
    "AoT-MSSA (W_O) + token shift": (
        "model.preset=aot-mssa-l-cpu",
        "model.tied_output=false",
        "model.token_shift=channel",
    ),
}


def study_sets(block: str, width: int, seq_len: int, n_pairs: int, vocab_size: int) -> list[str]:
    """The ``--set`` assignments of one point of the recall study on top of cpu-quick: the block of
    :data:`RECALL_BLOCKS`, 2 layers of ``width``, one head, and the MQAR setting."""
    return [
        *RECALL_BLOCKS[block],
        "model.n_layer=2",
        "model.n_head=1",
        f"model.n_embd={width}",
        f"data.seq_len={seq_len}",
        f"data.n_pairs={n_pairs}",
        f"data.vocab_size={vocab_size}",
    ]


@dataclass
class RecallRun(TaskRun):
    """The config of ``aot train recall``: sections model, train, data and eval. Its models are language models
    (``aot models --task lm``)."""

    task: ClassVar[str] = "lm"
    recipes: ClassVar[dict[str, dict[str, Any]]] = RECALL_RECIPES
    data: MQARConfig
    eval: RecallEvalConfig

    def recall_model_config(self) -> Any:
        """The model config with the fields the data decides: the vocabulary and the context (= sequence length)."""
        return self.model_config(vocab_size=self.data.vocab_size, block_size=self.data.seq_len)


def recall_loss(model: torch.nn.Module, batch: tuple[torch.Tensor, ...]) -> torch.Tensor:
    """Cross-entropy of the answers: ``batch = (tokens, targets)``, targets aligned with the tokens (the answer after
    reading a query), every other position :data:`aot.data.mqar.IGNORE`."""
    tokens, targets = batch
    logits, _ = model(tokens)
    return F.cross_entropy(logits.flatten(0, 1).float(), targets.flatten(), ignore_index=IGNORE)


@torch.no_grad()
def recall_scores(
    model: torch.nn.Module, seqs: MQARSequences, batch_size: int, device: torch.device, limit: int | None = None
) -> dict[str, float]:
    """On the first ``limit`` (default: all) of ``seqs``: the answers' mean cross-entropy (``loss``), the share of
    answers whose argmax over the vocabulary is right (``accuracy``, per query), the share of sequences with every
    answer right (``sequence_accuracy``), and how many sequences and queries that is."""
    n = len(seqs) if limit is None else min(limit, len(seqs))
    loss, right, asked, whole = 0.0, 0, 0, 0
    for start in range(0, n, batch_size):
        tokens = seqs.tokens[start : min(start + batch_size, n)].to(device)
        targets = seqs.targets[start : min(start + batch_size, n)].to(device)
        logits, _ = model(tokens)
        answer = targets != IGNORE
        loss += float(F.cross_entropy(logits[answer].float(), targets[answer], reduction="sum"))
        correct = (logits.argmax(dim=-1) == targets) & answer
        right += int(correct.sum())
        asked += int(answer.sum())
        whole += int((correct.sum(dim=1) == answer.sum(dim=1)).sum())
    return {
        "loss": loss / asked,
        "accuracy": right / asked,
        "sequence_accuracy": whole / n,
        "sequences": n,
        "queries": asked,
    }


@dataclass
class HeldOut:
    """The fixed validation and test sequences of a run's data config."""

    val: MQARSequences
    test: MQARSequences


#: the numbers a results-store row keeps of a recall run: row field -> where it is in the run's results.json
RECALL_FIELDS: dict[str, tuple[str, ...]] = {
    **{name: ("model", name) for name in ("block", "n_layer", "n_embd", "position", "token_shift", "params")},
    **{name: ("config", "data", name) for name in ("vocab_size", "seq_len", "n_pairs")},
    **{f"{split}_{name}": (split, name) for split in ("val", "test") for name in ("accuracy", "loss")},
    "test_sequence_accuracy": ("test", "sequence_accuracy"),
    **{name: ("train", name) for name in ("steps", "sequences", "tokens_per_second")},
    **TIMES,
}


class RecallTask(Task[HeldOut]):
    """Multi-query associative recall: the cross-entropy of the answers to keys asked again (Zoology)."""

    name = "recall"
    # the accuracy on its validation set (its test set is reported, not ranked by)
    metric = Metric("val_accuracy", "max", "val accuracy")
    smoke = ("cpu-quick", (*SMOKE, "model.n_embd=32", "eval.val_sequences=8", "eval.test_sequences=8",
                           "train.batch_size=8", "data.seq_len=16", "data.n_pairs=2"))  # fmt: skip
    run_cls = RecallRun
    finite_result = ("test", "loss", "test loss")
    command = TaskCommand(
        help="train a model on multi-query associative recall (Zoology)",
        description="Train a language-model block on multi-query associative recall (MQAR; Arora et al. 2023, "
        "Zoology): key-value pairs from disjoint halves of the vocabulary, then queries of some keys later in the "
        "sequence (Zoology's power-law placement, or uniform); the model must answer each query with its key's "
        "value. Loss and accuracy on the answers only. Every LM block works (aot-mssa, aot-mhsa, transformer, "
        "llama, crate, linear-attn, mamba; `aot models --task lm`). Writes checkpoint/, results.json (per-query "
        "and per-sequence accuracy and loss on fixed validation and test sets), metrics.jsonl and loss_curve.png "
        "into --out.",
        examples=(
            "aot train recall                               # cpu-quick: AoT-MHSA 2 x 64, 8 pairs in 64 tokens",
            "aot train recall --model aot-mssa-l-cpu --set model.tied_output=false",
            "aot train recall --pairs 16 --seq-len 128 --set model.n_embd=128",
            "aot train recall --model aot-mssa-l-cpu --set model.token_shift=channel   # MSSA with a token shift",
            "aot train recall --out runs/recall --resume    # continue an interrupted run exactly",
        ),
        recipe_notes=(
            "cpu-quick  2 layers x 64, one head, init std 0.05, V = 64, 64 tokens, 8 pairs, 1000 steps x 64 (~40 s)",
            "zoology    Zoology's Figure 2 at T = 64: V = 8192, 4 pairs, 12.5k steps x 512, dropout 0.1 (a GPU job)",
        ),
        default_recipe="cpu-quick",
        options=(
            TaskOption("--pairs", "key-value pairs per sequence (data.n_pairs)", sets_field("data", "n_pairs"), int),
            TaskOption("--seq-len", "tokens per sequence (data.seq_len)", sets_field("data", "seq_len"), int),
            TaskOption("--vocab", "vocabulary size V (data.vocab_size)", sets_field("data", "vocab_size"), int),
        ),
    )

    def check(self, run: RecallRun, device: torch.device | None = None) -> None:
        """The run's training step and its held-out sequences (tokens and targets, int64) must fit in memory."""
        sequence = run.data.seq_len * 8 * 2
        data = {
            "held-out sequences": (run.eval.val_sequences + run.eval.test_sequences) * sequence,
            "a batch of sequences": run.train.batch_size * sequence,
        }
        self.check_memory(run, *self.planned_model(run), data, device=device)

    def planned_model(self, run: RecallRun) -> tuple[ModelConfig, int]:
        return run.recall_model_config(), run.data.seq_len

    def load_data(self, run: RecallRun, is_main: bool) -> HeldOut:
        return HeldOut(
            held_out(run.data, "val", run.eval.val_sequences), held_out(run.data, "test", run.eval.test_sequences)
        )

    def build_model(self, run: RecallRun, data: HeldOut) -> AotModel:
        return build_model(run.recall_model_config())

    def seq_len(self, run: RecallRun, model: AotModel) -> int:
        return run.data.seq_len

    def setup(self, run: RecallRun, data: HeldOut, model: AotModel, device: torch.device) -> Setup:
        batches = MQARBatches(run.data, run.train.batch_size, seed=run.train.seed)

        def periodic_eval(net: torch.nn.Module) -> dict[str, float]:
            scores = recall_scores(net, data.val, run.eval.batch_size, device)
            return {"val_loss": scores["loss"], "val_accuracy": scores["accuracy"]}

        fingerprint = {"model": model.cfg.to_dict(), "data": vars(run.data), "seed": run.train.seed}
        return Setup(batches, recall_loss, periodic_eval, fingerprint)

    def final_eval(self, run: RecallRun, data: HeldOut, setup: Setup, trainer: Trainer, device: torch.device) -> dict:
        return {
            split: recall_scores(trainer.model, getattr(data, split), run.eval.batch_size, device)
            for split in ("val", "test")
        }

    def results(
        self, run: RecallRun, data: HeldOut, setup: Setup, model: AotModel, result: TrainResult, final: dict
    ) -> dict[str, Any]:
        return {
            "model": model_summary(model, model.cfg, "position", "n_head", "tied_output", "token_shift"),
            "train": {
                "sequences": result.step * run.train.batch_size,
                "tokens": result.seen,
                "tokens_per_second": result.seen_per_second,
                "mfu": result.mfu,
            },
            "data": {"queries": run.data.queries, "slots": run.data.slots, "chance_loss": chance_loss(run.data)},
            "val": final["val"],
            "test": final["test"],
        }

    def figures(self, out: Path, results: dict[str, Any]) -> list[Path]:
        model, train, data = results["model"], results["train"], results["config"]["data"]
        path = plot_training_curve(
            out,
            train["curve"],
            train["evals"],
            x_per_step=train["sequences"] / max(train["steps"], 1),
            x_label="training sequences",
            eval_key="val_loss",
            y_label="cross-entropy of the answers (nats)",
            title=f"{model['block']} L={model['n_layer']} d={model['n_embd']}: MQAR, "
            f"{data['n_pairs']} pairs in {data['seq_len']} tokens",
            reference_lines={"uniform over the values": results["data"]["chance_loss"]},
        )
        return [path]

    def store_row(self, results: dict[str, Any]) -> dict[str, Any]:
        """Size, the MQAR setting, val / test accuracy (per query; per sequence on test) and loss, steps, speed,
        the date."""
        return dated_row(results, RECALL_FIELDS)

    def summary(self, results: dict[str, Any], out: Path) -> str:
        test, data = results["test"], results["config"]["data"]
        return (
            f"{results['model']['block']} ({results['model']['non_embedding_params'] / 1e6:.3f}M non-emb.) "
            f"{results['train']['steps']} steps in {results['train']['train_seconds']:.0f}s; MQAR "
            f"{data['n_pairs']} pairs in {data['seq_len']} tokens, V = {data['vocab_size']}: test accuracy "
            f"{test['accuracy']:.3f} per query, {test['sequence_accuracy']:.3f} per sequence, loss {test['loss']:.3f} "
            f"({test['sequences']:,} sequences). Wrote {out / 'results.json'}"
        )


def chance_loss(cfg: MQARConfig) -> float:
    """The answers' cross-entropy of a model that knows only that answers are values: ln(V − ⌊V/2⌋)."""
    return math.log(cfg.vocab_size - cfg.vocab_size // 2)


__getattr__ = renamed_attributes(__name__, {"RECALL_PRESETS": "RECALL_RECIPES"}, "training recipes")
