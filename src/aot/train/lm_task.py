"""`aot train lm`: train a causal language model on a text corpus and report val / test loss, perplexity and
bits per byte beside the unigram and bigram reference points.

A run is described by one config with three sections — ``model`` (a model preset plus field overrides),
``data`` (corpus, tokenizer, split) and ``train`` (:class:`aot.train.TrainConfig`) — plus ``eval``. Named
training presets (:data:`LM_PRESETS`) fill it; ``--config FILE``, flags and ``--set section.key=value``
override it, in that order.
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
from aot.config import Limit, at_least, within
from aot.data.corpora import CORPORA, DEFAULT_CORPUS, fetch_corpus, is_fetched
from aot.data.shards import LMBatches, LMData, prepare_lm_data
from aot.devices import resolve_device
from aot.errors import AotError
from aot.eval.lm import evaluate_lm, ngram_baselines
from aot.eval.runs import save_tokenizer
from aot.models import build_model
from aot.outdir import check_writable_dir, write_text_atomic
from aot.runinfo import machine_info
from aot.train import experiment
from aot.train.distributed import barrier, init_distributed
from aot.train.experiment import TaskRun
from aot.train.trainer import Trainer, TrainResult


@dataclass
class LMDataConfig:
    """corpus: a registered name (shakespeare, austen), a .txt file / folder, or hf:NAME.
    tokenizer: bytes, gpt2 or bpe-N. fetch: fetch the default corpus when it is missing."""

    corpus: str = DEFAULT_CORPUS
    tokenizer: str = "bytes"
    val_fraction: float = 0.05
    test_fraction: float = 0.05
    fetch: bool = True

    LIMITS: ClassVar[dict[str, Limit]] = {
        "val_fraction": within(0, 1, low_open=True, high_open=True),
        "test_fraction": within(0, 1, low_open=True, high_open=True),
    }


@dataclass
class LMEvalConfig:
    """periodic_windows: context windows used by the evaluations during training; final_windows: for the final
    val / test figures (``None`` = every window of the split); batch_size: windows per forward pass."""

    periodic_windows: int = 32
    final_windows: int | None = None
    batch_size: int = 16

    LIMITS: ClassVar[dict[str, Limit]] = {
        "periodic_windows": at_least(1),
        "final_windows": at_least(1),
        "batch_size": at_least(1),
    }


# Named training presets. cpu-quick is the command the README opens with: it must beat the bigram on
# Shakespeare bytes (2.529 nats/byte on the val split; benchmarks/main_job/results.json) on a 2-core CPU.
LM_PRESETS: dict[str, dict[str, Any]] = {
    "cpu-quick": {
        # rotary positions: with learned absolute ones attention-only models learn far more slowly; init std 0.05:
        # val 1.860 against 1.936 at 0.02 (benchmarks/lm/README.md, "The main job's init")
        "model": {"preset": "aot-mhsa-l-cpu", "n_layer": 6, "block_size": 128, "position": "rope", "init_std": 0.05},
        "data": {"corpus": DEFAULT_CORPUS, "tokenizer": "bytes"},
        "train": {"steps": 800, "batch_size": 16, "lr": 2e-3, "warmup_steps": 30, "eval_every": 200},
        "eval": {"periodic_windows": 16, "final_windows": 256},
    },
    "cpu-bench": {
        "model": {"preset": "gpt2-cpu", "block_size": 256},
        "data": {"corpus": DEFAULT_CORPUS, "tokenizer": "bytes"},
        "train": {"steps": 400, "batch_size": 16, "lr": 1e-3, "warmup_steps": 40, "eval_every": 100},
        "eval": {"periodic_windows": 16, "final_windows": 128},
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
        "eval": {"periodic_windows": 64, "final_windows": None},
    },
}


@dataclass
class LMRun(TaskRun):
    """The config of ``aot train lm``: sections model, train, data and eval."""

    task: ClassVar[str] = "lm"
    presets: ClassVar[dict[str, dict[str, Any]]] = LM_PRESETS
    data: LMDataConfig
    eval: LMEvalConfig


# preset < config file < flags < --set assignments, validated (see aot.train.experiment.build_run_config)
build_run_config = LMRun.build


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


def lm_loss(model: torch.nn.Module, batch: tuple[torch.Tensor, ...]) -> torch.Tensor:
    """Mean next-token cross-entropy of a window ``batch = (tokens,)``: the tokens are the labels and the
    model shifts them (``CausalLM.forward``, HF's convention)."""
    _, loss = model(batch[0], labels=batch[0])
    return loss


def train_lm(
    run: LMRun, out_dir: str | Path, device_name: str = "auto", resume: bool | str = False, force: bool = False
) -> dict:
    """Train, evaluate on val and test, and write ``results.json`` and ``loss_curve.png`` into ``out_dir``.
    ``run.train.seed`` seeds everything (model init, data order, dropout); ``resume``/``force``: see
    :meth:`aot.train.Trainer.fit`."""
    out = Path(out_dir)
    from aot.train.distributed import env_from_torchrun

    device = resolve_device(device_name, env_from_torchrun().local_rank)
    env = init_distributed(device)
    if env.is_main:
        check_writable_dir(out)  # a file or a read-only folder is an error before any data is read
    ensure_corpus(run.data, env.is_main)
    if env.is_main:  # tokenize once, then the other processes read the cache
        data = prepare_lm_data(run.data.corpus, run.data.tokenizer, run.data.val_fraction, run.data.test_fraction)
    barrier()
    if not env.is_main:
        data = prepare_lm_data(run.data.corpus, run.data.tokenizer, run.data.val_fraction, run.data.test_fraction)
    model_cfg = run.model_config(vocab_size=data.vocab_size)
    seed = run.train.seed
    torch.manual_seed(seed)
    model = build_model(model_cfg)
    token_bytes = data.tokenizer.token_byte_lengths()
    block = model_cfg.block_size
    batches = LMBatches(data.splits["train"], run.train.batch_size, block, seed=seed)

    def periodic_eval(net: torch.nn.Module) -> dict[str, float]:
        scores = evaluate_lm(
            net, data.splits["val"], block, token_bytes, run.eval.batch_size, run.eval.periodic_windows, device
        )
        return {"val_loss": scores["loss"], "val_nats_per_byte": scores["nats_per_byte"]}

    fingerprint = {
        "model": model_cfg.to_dict(),
        "data": {
            "corpus_key": data.key,
            "tokenizer": data.tokenizer.name,
            "split": [run.data.val_fraction, run.data.test_fraction],
        },
    }
    trainer = Trainer(
        model,
        batches,
        lm_loss,
        run.train,
        out,
        device=device,
        evaluate=periodic_eval,
        fingerprint=fingerprint,
        model_config=model_cfg.to_dict(),
        flops_per_sample=None
        if model_cfg.block in RECURRENT_BLOCKS
        else block * flops_per_token(model_cfg, block).training_causal(),  # useful FLOPs: MFU <= 1
    )
    wall_start = time.perf_counter()
    result = trainer.fit(resume=resume, force=force)
    final = {}
    with torch.no_grad():
        trainer.model.eval()
        for split in ("val", "test"):
            with trainer.autocast():
                final[split] = evaluate_lm(
                    trainer.model,
                    data.splits[split],
                    block,
                    token_bytes,
                    run.eval.batch_size,
                    run.eval.final_windows,
                    device,
                )
    results = {}
    if env.is_main:
        results = _results(
            run, model, model_cfg, data, result, final, token_bytes, seed, time.perf_counter() - wall_start
        )
        out.mkdir(parents=True, exist_ok=True)
        write_text_atomic(out / "results.json", json.dumps(results, indent=2) + "\n")
        save_tokenizer(data.tokenizer, out)  # the run folder loads on its own (aot eval lm, aot sample)
        plot_loss_curve(out, results)
    return results


def _results(run, model, model_cfg, data: LMData, result: TrainResult, final, token_bytes, seed, wall) -> dict:  # type: ignore[no-untyped-def]
    baselines = {
        split: ngram_baselines(data.splits["train"], data.splits[split], data.vocab_size, token_bytes)
        for split in ("val", "test")
    }
    bigram = baselines["val"]["bigram"]["nats_per_byte"]
    return {
        "task": "lm",
        "machine": machine_info(),
        "seed": seed,
        "config": run.to_dict(),
        "model": {
            "block": model_cfg.block,
            "n_layer": model_cfg.n_layer,
            "n_embd": model_cfg.n_embd,
            "params": model.num_params(),
            "non_embedding_params": model.num_params(non_embedding=True),
        },
        "data": data.info(),
        "train": {
            "steps": result.step,
            "tokens": result.tokens,
            "train_seconds": result.train_seconds,
            "wall_seconds": wall,
            "tokens_per_second": result.tokens_per_second,
            "mfu": result.mfu,
            "peak_flops": result.peak_flops,
            "precision": result.precision,
            "final_train_loss": result.last_loss,
            "curve": [{"step": s, "loss": v} for s, v in result.losses],
            "evals": result.evals,
        },
        "val": final["val"],
        "test": final["test"],
        "baselines": baselines,
        "beats_bigram": final["val"]["nats_per_byte"] < bigram,
    }


def plot_loss_curve(out: Path, results: dict[str, Any]) -> Path:
    """Train and val loss against training tokens, with the unigram and bigram (val) as reference lines."""
    model, train = results["model"], results["train"]
    return experiment.plot_training_curve(
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


# -- command line -----------------------------------------------------------------------------------------


def register(subparsers: argparse._SubParsersAction) -> None:
    parser = subparsers.add_parser(
        "lm",
        help="train a causal language model on text",
        description=textwrap.fill(
            "Train a causal LM (AoT-MSSA, AoT-MHSA, GPT-2, CRATE, Llama blocks) on a text corpus with the shared "
            "trainer, then report val and test loss, perplexity and bits per byte beside the unigram and bigram "
            "baselines. Writes results.json, loss_curve.png, metrics.jsonl and checkpoint/ (safetensors + JSON) "
            "into --out. The default (preset cpu-quick) fetches Shakespeare if missing and trains a small AoT-MHSA "
            "on a 2-core CPU; its recorded time and loss are in benchmarks/main_job. Under torchrun the global "
            "batch stays the same for any number of processes.",
            width=100,
        ),
        epilog="Examples:\n"
        "  aot train lm                                   # cpu-quick: AoT-MHSA on Shakespeare bytes\n"
        "  aot train lm --model aot-mssa-l-cpu --tokenizer bpe-4096 --steps 2000\n"
        "  aot train lm --set model.residual_scale=channel --set train.lr=3e-3\n"
        "  aot train lm --out runs/lm --resume            # continue an interrupted run exactly\n"
        "  aot train lm --out runs/lm --force             # start over; the old run moves to runs/lm.old-1\n"
        "  torchrun --nproc_per_node 2 -m aot.cli train lm --set train.strategy=ddp\n"
        "Presets:\n"
        "  cpu-quick  AoT-MHSA 6 x 256, Shakespeare bytes, context 128, 800 steps x 16 (1.6M tokens); its\n"
        "             recorded time and loss: benchmarks/main_job (times vary with the CPU and --precision)\n"
        "  cpu-bench  the recipe of benchmarks/lm (context 256, batch 16, lr 1e-3)\n"
        "  gpu-base   GPT-2 small scale (12 x 768) on GPT-2 BPE, torch.compile\n"
        "Print the full config with --dump-config.",
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    parser.add_argument("--corpus", help=f"corpus: {', '.join(CORPORA)}, a .txt file or folder, or hf:NAME")
    parser.add_argument("--tokenizer", help="bytes, gpt2 (needs aot[gpt2]) or bpe-N, e.g. bpe-4096")
    parser.add_argument("--no-fetch", action="store_true", help="do not fetch a missing default corpus; fail instead")
    experiment.add_train_args(parser, LM_PRESETS, default_preset="cpu-quick", default_out="runs/lm")
    parser.set_defaults(func=run_command)


def run_command(args: argparse.Namespace) -> int:
    flags = experiment.train_flags(args)
    for key, value in (
        ("corpus", args.corpus),
        ("tokenizer", args.tokenizer),
        ("fetch", False if args.no_fetch else None),
    ):
        if value is not None:
            flags.setdefault("data", {})[key] = value
    run = build_run_config(args.preset, args.config, flags, args.set, model_preset=args.model)
    if args.dump_config:
        print(experiment.dump_config(run), end="")
        return 0
    results = train_lm(run, args.out, args.device, **experiment.fit_options(args))
    if results:
        val, test = results["val"], results["test"]
        bigram = results["baselines"]["val"]["bigram"]["nats_per_byte"]
        print(
            f"{results['model']['block']} ({results['model']['non_embedding_params'] / 1e6:.2f}M non-emb.) "
            f"{results['train']['tokens']:,} tokens in {results['train']['train_seconds']:.0f}s "
            f"({results['train']['tokens_per_second']:,.0f} tok/s): val loss {val['loss']:.4f} "
            f"(ppl {val['perplexity']:.2f}, {val['nats_per_byte']:.3f} nats/byte, {val['bits_per_byte']:.3f} bpb), "
            f"test loss {test['loss']:.4f}; bigram {bigram:.3f} nats/byte -> "
            f"{'beats' if results['beats_bigram'] else 'does NOT beat'} the bigram. "
            f"Wrote {Path(args.out) / 'results.json'}"
        )
    if not math.isfinite(results.get("val", {}).get("loss", 0.0)):
        raise AotError("training diverged (non-finite val loss); lower --lr")
    return 0
