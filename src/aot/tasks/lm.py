"""`aot train lm`: train a causal language model on a text corpus and report val / test loss, perplexity and
bits per byte beside the unigram and bigram reference points.

A run is described by one config with three sections — ``model`` (a model preset plus field overrides),
``data`` (corpus, tokenizer, split) and ``train`` (:class:`aot.train.TrainConfig`) — plus ``eval``. Named
training recipes (:data:`LM_RECIPES`; ``aot train lm --recipe NAME``) fill it; ``--config FILE``, flags and
``--set section.key=value`` override it, in that order. :func:`aot.tasks.run_task` runs it.
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass
from pathlib import Path
from typing import Any, ClassVar

import torch

from aot.config import ModelConfig
from aot.data.corpora import CORPORA, DEFAULT_CORPUS, SPLITS, check_hub_corpus, fetch_corpus, is_fetched
from aot.data.shards import LMBatches, LMData, corpus_cache, is_small, open_lm_data, prepare_lm_data
from aot.data.tokenizers import ByteTokenizer, GPT2Tokenizer, save_tokenizer
from aot.errors import AotError, renamed_attributes
from aot.eval.lm import evaluate_lm, ngram_baselines
from aot.models import build_model
from aot.models.base import AotModel
from aot.tasks.figures import plot_training_curve
from aot.tasks.metric import TIMES, Metric, pick
from aot.tasks.protocol import SMOKE, Setup, Task, TaskCommand, TaskOption, TaskRun, model_summary, sets_field
from aot.train.distributed import barrier, env_from_torchrun
from aot.train.trainer import Trainer, TrainResult
from aot.validation import Limit, at_least, within


@dataclass
class LMDataConfig:
    """corpus: a registered name (shakespeare, austen), a .txt / .jsonl / .parquet file, a folder, or hf:NAME,
    prepared once into the cache (:func:`aot.data.shards.prepare_lm_data`). shards (``--data``): instead of a
    corpus, a folder written by ``aot data prepare`` or llm.c ``.bin`` shards (a folder or a glob); the tokenizer then
    comes from the folder's meta.json (shards from elsewhere: ``tokenizer`` names it). tokenizer: bytes, gpt2 or
    bpe-N. fetch: fetch the default corpus when it is missing. verify: check each prepared shard's sha256 before
    training (the ranks of a distributed run share the work)."""

    corpus: str = DEFAULT_CORPUS
    tokenizer: str = "bytes"
    val_fraction: float = 0.05
    test_fraction: float = 0.05
    fetch: bool = True
    shards: str | None = None
    verify: bool = True

    LIMITS: ClassVar[dict[str, Limit]] = {
        "val_fraction": within(0, 1, low_open=True, high_open=True),
        "test_fraction": within(0, 1, low_open=True, high_open=True),
    }


@dataclass
class LMEvalConfig:
    """periodic_windows: context windows (spread evenly over the val split) scored by the evaluations during
    training: a sample, ``val_windows`` in each ``train.evals`` row; final_windows: for the final val / test figures,
    ``None`` (the default, and every preset's) = every window of the split, with standard errors over windows
    (:func:`aot.eval.lm.evaluate_lm`: ``windows``, ``split_windows``, ``full_split``); batch_size: windows per
    forward pass (memory stays flat for any split)."""

    periodic_windows: int = 32
    final_windows: int | None = None
    batch_size: int = 16

    LIMITS: ClassVar[dict[str, Limit]] = {
        "periodic_windows": at_least(1),
        "final_windows": at_least(1),
        "batch_size": at_least(1),
    }


# Named training recipes. cpu-mssa is the command the README opens with (`make run`, `aot train lm`): the paper's
# model, which must beat the bigram on Shakespeare bytes (2.529 nats/byte on the val split;
# benchmarks/main_job/results.json) on a 2-core CPU.
LM_RECIPES: dict[str, dict[str, Any]] = {
    "cpu-mssa": {
        # AoT-MSSA (learned W_O) at its best recorded CPU recipe: benchmarks/lm's "tied-recipe" rows, cpu-bench's
        # recipe with aot-mssa-l-cpu-wide (16 x 384, rotary, init std 0.05) at lr 3e-3, the winner of 1e-3 / 3e-3 / 1e-2
        # (val 2.031-2.036 nats/byte over three seeds after 1 M tokens; GPT-2 reaches 1.835 with its own best)
        "model": {"preset": "aot-mssa-l-cpu-wide", "block_size": 256},
        "data": {"corpus": DEFAULT_CORPUS, "tokenizer": "bytes"},
        "train": {"steps": 250, "batch_size": 16, "lr": 3e-3, "warmup_steps": 40, "eval_every": 50},
        "eval": {"periodic_windows": 16},
    },
    "cpu-quick": {
        # rotary positions: with learned absolute ones attention-only models learn far more slowly; init std 0.05:
        # val 1.860 against 1.936 at 0.02 (benchmarks/lm/README.md, "The main job's init")
        "model": {"preset": "aot-mhsa-l-cpu", "n_layer": 6, "block_size": 128, "position": "rope", "init_std": 0.05},
        "data": {"corpus": DEFAULT_CORPUS, "tokenizer": "bytes"},
        "train": {"steps": 800, "batch_size": 16, "lr": 2e-3, "warmup_steps": 30, "eval_every": 200},
        "eval": {"periodic_windows": 16},
    },
    "cpu-bench": {
        "model": {"preset": "gpt2-cpu", "block_size": 256},
        "data": {"corpus": DEFAULT_CORPUS, "tokenizer": "bytes"},
        "train": {"steps": 400, "batch_size": 16, "lr": 1e-3, "warmup_steps": 40, "eval_every": 100},
        "eval": {"periodic_windows": 16},
    },
    "gpu-base": {
        "model": {"preset": "gpt2-base"},
        "data": {"corpus": DEFAULT_CORPUS, "tokenizer": "gpt2"},
        "train": {
            "steps": 5000,
            "batch_size": 64,
            "micro_batch_size": 16,
            "lr": 6e-4,
            "warmup_steps": 200,
            "eval_every": 500,
            "checkpoint_every": 1000,
            "compile": True,
        },
        "eval": {"periodic_windows": 64},
    },
}


@dataclass
class LMRun(TaskRun):
    """The config of ``aot train lm``: sections model, train, data and eval."""

    task: ClassVar[str] = "lm"
    recipes: ClassVar[dict[str, dict[str, Any]]] = LM_RECIPES
    data: LMDataConfig
    eval: LMEvalConfig


# -- running ----------------------------------------------------------------------------------------------


def ensure_corpus(data_cfg: LMDataConfig, is_main: bool) -> None:
    """Fetch the embedded default corpus when missing (if allowed); any other missing corpus is an error that
    names the command fetching it."""
    name = data_cfg.corpus
    if name not in CORPORA or is_fetched(name):
        return
    if name == DEFAULT_CORPUS and data_cfg.fetch:
        if is_main:
            print(f"aot: fetching {name} (once; `{CORPORA[name].fetch_command}`)", flush=True)
            fetch_corpus(name)
        barrier()
        return
    raise AotError(f"corpus {name!r} is not fetched yet; run `{CORPORA[name].fetch_command}`")


def vocab_field(tokenizer: str) -> dict[str, int]:
    """``{"vocab_size": V}`` of tokenizer ``tokenizer`` as it is named (bytes: 256, gpt2: 50257, bpe-N: N) before
    any data is read; ``{}`` for a name it does not know (loading the data then names the problem)."""
    known = {"bytes": ByteTokenizer.vocab_size, "gpt2": GPT2Tokenizer.vocab_size}
    match = re.fullmatch(r"bpe-(\d+)", tokenizer)
    if match:
        return {"vocab_size": int(match.group(1))}
    return {"vocab_size": known[tokenizer]} if tokenizer in known else {}


def tokenizer_of(data_cfg: LMDataConfig) -> str:
    """The tokenizer a run will use: a prepared folder's (its meta.json), else ``data.tokenizer``."""
    if data_cfg.shards is not None:
        meta = Path(data_cfg.shards).expanduser() / "meta.json"
        try:
            return str(json.loads(meta.read_text())["tokenizer"]["name"])
        except (OSError, ValueError, KeyError, TypeError):
            pass  # llm.c shards from elsewhere, or a damaged folder: opening the data says which
    return data_cfg.tokenizer


def check_splits(data: LMData, data_cfg: LMDataConfig, block_size: int) -> None:
    """Every split must hold a window of ``block_size + 1`` tokens (a context and its next tokens; training draws
    windows from one token more): one line naming the split, its size and the fix, before the trainer exists."""
    for split in SPLITS:
        need = block_size + (2 if split == "train" else 1)
        have = len(data.splits[split])
        if have >= need:
            continue
        grow = (
            f"raise data.{split}_fraction (now {getattr(data_cfg, split + '_fraction'):g})"
            if split != "train"
            else "lower data.val_fraction / test_fraction"
        )
        raise AotError(
            f"the {split} split of corpus {data_cfg.corpus!r} has {have:,} tokens, fewer than the {need:,} a window "
            f"of model.block_size={block_size} needs; use a larger corpus, {grow} or lower model.block_size"
        )


def lm_loss(model: torch.nn.Module, batch: tuple[torch.Tensor, ...]) -> torch.Tensor:
    """Mean next-token cross-entropy of a window ``batch = (tokens,)``: the tokens are the labels and the
    model shifts them (``CausalLM.forward``, HF's convention)."""
    _, loss = model(batch[0], labels=batch[0])
    return loss


def load_lm_data(data_cfg: LMDataConfig, is_main: bool) -> LMData:
    """The corpus tokenized into train / val / test shards: the main process tokenizes (once, cached), then the
    others read the cache. With ``data.shards``, the prepared folder or llm.c shards it names (each rank checks its
    share of the shards' sha256)."""
    if data_cfg.shards is not None:
        env = env_from_torchrun()
        return open_lm_data(
            data_cfg.shards, data_cfg.tokenizer, verify=data_cfg.verify, rank=env.rank, world=env.world_size
        )
    ensure_corpus(data_cfg, is_main)
    refuse_in_run_preparation(data_cfg)
    prepare = lambda: prepare_lm_data(  # noqa: E731
        data_cfg.corpus, data_cfg.tokenizer, data_cfg.val_fraction, data_cfg.test_fraction
    )
    data = prepare() if is_main else None
    barrier()
    return data if data is not None else prepare()


def refuse_in_run_preparation(data_cfg: LMDataConfig) -> None:
    """Under torchrun, a large corpus that is not prepared yet is one line: the main process would tokenize it while
    the others wait at a barrier, past the process group's timeout. Small corpora are prepared in the run as always."""
    if env_from_torchrun().world_size <= 1:
        return
    sources, _, folder = corpus_cache(
        data_cfg.corpus, data_cfg.tokenizer, data_cfg.val_fraction, data_cfg.test_fraction
    )
    if is_small(sources) or (folder / "meta.json").is_file():
        return
    size = f" ({sources.total_bytes / 1e9:.2f} GB)" if sources.hf is None else ""
    raise AotError(
        f"corpus {data_cfg.corpus!r}{size} is not prepared, and a distributed run does "
        f"not tokenize while its other processes wait; prepare it once: `aot data prepare {data_cfg.corpus} "
        f"--tokenizer {data_cfg.tokenizer} --out DIR`, then train with --data DIR"
    )


#: the numbers a results-store row keeps of an lm run: row field -> where it is in the run's results.json
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


class LMTask(Task[LMData]):
    """Causal language modelling: next-token cross-entropy on windows of a tokenized corpus."""

    name = "lm"
    metric = Metric("val_nats_per_byte", "min", "val nats/byte")
    smoke = ("cpu-quick", (*SMOKE, "model.n_embd=16", "model.n_head=2", "model.block_size=16", "train.batch_size=4",
                           "eval.final_windows=4", "eval.batch_size=2"))  # fmt: skip
    run_cls = LMRun
    finite_result = ("val", "loss", "val loss")
    command = TaskCommand(
        help="train a causal language model on text",
        description="Train a causal LM (AoT-MSSA, AoT-MHSA, GPT-2, CRATE, Llama blocks) on a text corpus with the "
        "shared trainer, then report val and test loss, perplexity and bits per byte beside the unigram and bigram "
        "baselines. Writes results.json, loss_curve.png, metrics.jsonl and checkpoint/ (safetensors + JSON) "
        "into --out. The default (recipe cpu-mssa) fetches Shakespeare if missing and trains the paper's model, "
        "AoT-MSSA, on a 2-core CPU; its recorded time and loss are in the README's main-job table. Under "
        "torchrun the global batch stays the same for any number of processes.",
        examples=(
            "aot train lm                                   # cpu-mssa: AoT-MSSA on Shakespeare bytes",
            "aot train lm --recipe cpu-quick                # AoT-MHSA, faster: a first look in two minutes",
            "aot train lm --model aot-mssa-l-cpu --tokenizer bpe-4096 --steps 2000",
            "aot train lm --data data/owt-gpt2 --config configs/paper/owt-aot-mssa-l-base.yaml  # aot data prepare",
            "aot train lm --set model.residual_scale=channel --set train.lr=3e-3",
            "aot train lm --out runs/lm --resume            # continue an interrupted run exactly",
            "aot train lm --out runs/lm --force             # start over; the old run moves to runs/lm.old-1",
            "torchrun --nproc_per_node 2 -m aot.cli train lm --set train.strategy=ddp",
        ),
        recipe_notes=(
            "cpu-mssa   the default: the paper's AoT-MSSA (learned W_O) at its best recorded CPU recipe, model",
            "           preset aot-mssa-l-cpu-wide (16 x 384, rotary, init std 0.05), context 256, 250 steps x 16",
            "           (1M tokens), lr 3e-3 (benchmarks/lm: the lr sweep's winner over three seeds)",
            "cpu-quick  model preset aot-mhsa-l-cpu cut to 6 layers (AoT-MHSA 6 x 256; --dump-config shows",
            "           `preset: aot-mhsa-l-cpu` and `n_layer: 6`), Shakespeare bytes, context 128, 800 steps x 16",
            "           (1.6M tokens); its recorded time and loss: benchmarks/main_job in the repository (times",
            "           vary with the CPU and --precision)",
            "cpu-bench  the recipe of benchmarks/lm (context 256, batch 16, lr 1e-3)",
            "gpu-base   GPT-2 small scale (12 x 768) on GPT-2 BPE, torch.compile",
        ),
        default_recipe="cpu-mssa",
        options=(
            TaskOption(
                "--corpus",
                f"corpus: {', '.join(CORPORA)}, a .txt file or folder, or hf:NAME",
                sets_field("data", "corpus"),
            ),
            TaskOption(
                "--data",
                "train from token shards instead of --corpus: a folder made by `aot data prepare`, or llm.c .bin "
                "shards (a folder or a glob, e.g. 'fineweb10B/fineweb_*.bin': name their tokenizer with --tokenizer)",
                sets_field("data", "shards"),
            ),
            TaskOption(
                "--tokenizer", "bytes, gpt2 (needs aot[gpt2]) or bpe-N, e.g. bpe-4096", sets_field("data", "tokenizer")
            ),
            TaskOption(
                "--no-fetch",
                "do not fetch a missing default corpus; fail instead",
                lambda _: {"data": {"fetch": False}},
                kind=bool,
            ),
        ),
    )

    def check(self, run: LMRun, device: torch.device | None = None) -> None:
        """An ``hf:`` corpus's hub must answer (checked first: it takes a second, the memory check more), and the
        run's training step must fit in memory (with the vocabulary its tokenizer will give)."""
        if run.data.shards is None:
            check_hub_corpus(run.data.corpus)
        self.check_memory(run, *self.planned_model(run), device=device)

    def planned_model(self, run: LMRun) -> tuple[ModelConfig, int]:
        cfg = run.model_config(**vocab_field(tokenizer_of(run.data)))
        return cfg, cfg.block_size

    def load_data(self, run: LMRun, is_main: bool) -> LMData:
        data = load_lm_data(run.data, is_main)
        check_splits(data, run.data, run.model_config(vocab_size=data.vocab_size).block_size)
        return data

    def build_model(self, run: LMRun, data: LMData) -> AotModel:
        return build_model(run.model_config(vocab_size=data.vocab_size))

    def seq_len(self, run: LMRun, model: AotModel) -> int:
        return model.cfg.block_size

    def setup(self, run: LMRun, data: LMData, model: AotModel, device: torch.device) -> Setup:
        token_bytes = data.tokenizer.token_byte_lengths()
        context = model.cfg.block_size  # tokens per window

        def periodic_eval(net: torch.nn.Module) -> dict[str, float]:
            scores = evaluate_lm(
                net, data.splits["val"], context, token_bytes, run.eval.batch_size, run.eval.periodic_windows, device
            )
            return {
                "val_loss": scores["loss"],
                "val_nats_per_byte": scores["nats_per_byte"],
                "val_windows": scores["windows"],  # a sample of the split: the final evaluation scores all of it
            }

        data_print: dict[str, Any] = {"corpus_key": data.key, "tokenizer": data.tokenizer.name}
        if run.data.shards is None:  # a prepared folder's key already names its split
            data_print["split"] = [run.data.val_fraction, run.data.test_fraction]
        fingerprint = {"model": model.cfg.to_dict(), "data": data_print}
        batches = LMBatches(
            data.splits["train"], run.train.batch_size, context, seed=run.train.seed, vocab_size=data.vocab_size
        )
        return Setup(batches, lm_loss, periodic_eval, fingerprint, state=token_bytes)

    def final_eval(self, run: LMRun, data: LMData, setup: Setup, trainer: Trainer, device: torch.device) -> dict:
        context = setup.batches.block_size  # the windows the model was trained on
        return {
            split: evaluate_lm(
                trainer.model,
                data.splits[split],
                context,
                setup.state,
                run.eval.batch_size,
                run.eval.final_windows,
                device,
                across_ranks=True,  # each process scores its share of the windows; one all-reduce assembles them
            )
            for split in ("val", "test")
        }

    def results(
        self, run: LMRun, data: LMData, setup: Setup, model: AotModel, result: TrainResult, final: dict
    ) -> dict[str, Any]:
        return lm_results(model, data, result, final, setup.state)

    def save_artifacts(self, out: Path, data: LMData) -> None:
        save_tokenizer(data.tokenizer, out)  # the run folder loads on its own (aot eval lm, aot sample)

    def figures(self, out: Path, results: dict[str, Any]) -> list[Path]:
        return [plot_loss_curve(out, results)]

    def store_row(self, results: dict[str, Any]) -> dict[str, Any]:
        """Size, budget, val / test loss, speed, the bigram, the periodic evaluations, the date."""
        evals = [{"tokens": e["tokens"], "val_loss": e["val_loss"]} for e in results["train"]["evals"]]
        return {**pick(results, LM_FIELDS), "evals": evals, "date": results["machine"]["date"]}

    def summary(self, results: dict[str, Any], out: Path) -> str:
        val, test, train = results["val"], results["test"], results["train"]
        bigram = results["baselines"]["val"]["bigram"]["nats_per_byte"]
        periodic = results["config"]["eval"]["periodic_windows"]
        return (
            f"{results['model']['block']} ({results['model']['non_embedding_params'] / 1e6:.2f}M non-emb.) "
            f"{train['tokens']:,} tokens in {train['train_seconds']:.0f}s "
            f"({train['tokens_per_second']:,.0f} tok/s): val loss {val['loss']:.4f}{_error(val)} "
            f"(ppl {val['perplexity']:.2f}, {val['nats_per_byte']:.3f} nats/byte, {val['bits_per_byte']:.3f} bpb; "
            f"{_coverage(val)}; periodic evaluations: {periodic} windows), "
            f"test loss {test['loss']:.4f}{_error(test)}{_notes(results)}; bigram {bigram:.3f} nats/byte -> "
            f"{'beats' if results['beats_bigram'] else 'does NOT beat'} the bigram. "
            f"Wrote {out / 'results.json'}"
        )


def _notes(results: dict[str, Any]) -> str:
    """What the data says about its splits (shards without a test split score val as test)."""
    notes = results.get("data", {}).get("notes", [])
    return f" ({'; '.join(notes)})" if notes else ""


def _error(scores: dict[str, Any]) -> str:
    """`` ± SE`` of a final score (results.json written before standard errors were recorded have none)."""
    return f" ± {scores['loss_se']:.4f}" if "loss_se" in scores else ""


def _coverage(scores: dict[str, Any]) -> str:
    """Which windows a final score covers: the whole split or a sample of it."""
    if "windows" not in scores:
        return "windows not recorded"
    if scores["full_split"]:
        return f"the full split, {scores['windows']:,} windows"
    return f"sampled: {scores['windows']:,} of the split's {scores['split_windows']:,} windows"


def lm_results(model: AotModel, data: LMData, result: TrainResult, final: dict, token_bytes: Any) -> dict[str, Any]:
    """lm's entries of results.json: parameter counts, tokens and MFU, val / test scores, the n-gram baselines."""
    baselines = lm_baselines(data, token_bytes)
    bigram = baselines["val"]["bigram"]["nats_per_byte"]
    return {
        "model": model_summary(model, model.cfg),
        "data": data.info(),
        "train": {
            "tokens": result.seen,
            "tokens_per_second": result.seen_per_second,
            "mfu": result.mfu,
            "peak_flops": result.peak_flops,  # what mfu divides by: never a peak measured under load
            "peak_raised": result.peak_raised,  # the achieved rate exceeded the peak, so the peak was raised to it
            "precision": result.precision,
        },
        "val": final["val"],
        "test": final["test"],
        "baselines": baselines,
        "beats_bigram": final["val"]["nats_per_byte"] < bigram,
    }


#: the n-gram baselines are fitted on at most this many training tokens and scored on at most this many held-out
#: ones (every recorded corpus is smaller: their baselines are exact); past that, on an even sample of the split
BASELINE_TRAIN_TOKENS = 32_000_000
BASELINE_HELD_OUT_TOKENS = 4_000_000


def lm_baselines(data: LMData, token_bytes: Any) -> dict[str, Any]:
    """Unigram and bigram baselines on val and test (:func:`aot.eval.lm.ngram_baselines`), in bounded time and
    memory: on a split larger than :data:`BASELINE_TRAIN_TOKENS` / :data:`BASELINE_HELD_OUT_TOKENS` tokens, on an
    evenly spread sample of it (``sampled_tokens`` says how many), so nothing O(corpus) runs after training."""
    train = data.splits["train"].sample(BASELINE_TRAIN_TOKENS)
    out: dict[str, Any] = {}
    for split in ("val", "test"):
        held = data.splits[split].sample(BASELINE_HELD_OUT_TOKENS)
        out[split] = ngram_baselines(train, held, data.vocab_size, token_bytes)
        if len(train) < len(data.splits["train"]) or len(held) < len(data.splits[split]):
            for scores in out[split].values():
                scores["sampled_tokens"] = {"train": len(train), split: len(held)}
    return out


def plot_loss_curve(out: Path, results: dict[str, Any]) -> Path:
    """Train and val loss against training tokens, with the unigram and bigram (val) as reference lines."""
    model, train = results["model"], results["train"]
    return plot_training_curve(
        out,
        train["curve"],
        train["evals"],
        x_per_step=train["tokens"] / max(train["steps"], 1),
        x_label="training tokens",
        eval_key="val_loss",
        y_label="loss (nats / token)",
        title=f"{model['block']} L={model['n_layer']} d={model['n_embd']} on {results['data']['tokenizer']}",
        reference_lines={f"{name} (val)": results["baselines"]["val"][name]["loss"] for name in ("unigram", "bigram")},
    )


__getattr__ = renamed_attributes(__name__, {"LM_PRESETS": "LM_RECIPES"}, "training recipes")
