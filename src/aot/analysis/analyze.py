"""`aot analyze` on a trained run: load its checkpoint and data, run every measurement, write results.json and
the figures. Reads the model only through its hook points and weights (never the training code's internals).

Runs of `aot train lm` and `aot train vision`, and of `aot train recall`: a causal LM like an lm run's (its results.json
records the model task ``lm``) told apart by its data section, an MQAR config (:mod:`aot.data.mqar`). A recall run is
analysed on its fixed held-out sequences (``--data val`` or ``test``) and gets, beside everything an lm run gets, the
``recall`` section of :mod:`aot.analysis.recall_attention`."""

from __future__ import annotations

import importlib
import json
import math
from pathlib import Path
from typing import Any

import numpy as np
import torch
from tqdm import tqdm

from aot.analysis.circuits import composition_table, copying_scores, head_scores, repeated_random_tokens
from aot.analysis.config import AnalyzeConfig
from aot.analysis.geometry import subspace_geometry
from aot.analysis.profile import denoising_profile
from aot.analysis.recall_attention import recall_head_scores
from aot.analysis.vision import cls_attention_entropy
from aot.blockspec import output_tying
from aot.data.mqar import IGNORE, SPLITS, MQARConfig, MQARSequences, held_out
from aot.errors import AotError, ConfigError
from aot.loader import load_run as read_run
from aot.models.base import AotModel
from aot.models.budget import Need, check_fits, forward_need, image_tokens, machine_memory
from aot.runinfo import machine_info
from aot.validation import from_dict, path_kind, read_text_file

SPLIT_NAMES = ("val", "test", "train")


#: the results.json fields the analysis reads of a finished run, by kind of run (lm_tokens, recall_config,
#: image_batches)
NEEDED_RESULTS = {
    "lm": ("config.data.corpus", "config.data.tokenizer"),
    "recall": ("config.data.vocab_size", "config.data.seq_len", "config.data.n_pairs"),
    "image": ("config.data.dataset",),
}


def run_kind(model: AotModel, run_results: dict[str, Any]) -> str:
    """``lm``, ``recall`` or ``image``: a recall run (`aot train recall`) is a causal LM whose results.json holds an
    MQAR data section (``n_pairs``, no corpus)."""
    data = run_results.get("config", {}).get("data", {})
    if model.cfg.task == "lm" and "n_pairs" in data and "corpus" not in data:
        return "recall"
    return model.cfg.task


def load_run(run_dir: str | Path) -> tuple[AotModel, dict[str, Any]]:
    """The trained model of an lm, recall or image run (read by :func:`aot.loader.load_run`: the newest checkpoint
    that verifies), in eval mode, and the run's schema-checked ``results.json`` (empty while the run is still
    training; once there, it must hold the data fields the analysis reads)."""
    run = read_run(run_dir, task=("lm", "image"), purpose="`aot analyze`", tokenizer=False)
    if run.results:
        for dotted in NEEDED_RESULTS[run_kind(run.model, run.results)]:
            run.need(dotted)
    return run.model, run.results


def training_summary(run_results: dict[str, Any]) -> dict[str, Any]:
    """What the analysed model had reached: steps, tokens and val figures of the run (and the bigram's)."""
    train = run_results.get("train", {})
    val = run_results.get("val", {})
    summary = {"steps": train.get("steps"), "tokens": train.get("tokens"), "val": val or None}
    bigram = run_results.get("baselines", {}).get("val", {}).get("bigram")
    if bigram:
        summary["val_bigram_nats_per_byte"] = bigram["nats_per_byte"]
    return summary


def lm_tokens(config: dict[str, Any], data: str) -> np.ndarray:
    """Token ids to analyse: a split of the run's corpus (``val``, ``test``, ``train``) or a text file encoded
    with the run's tokenizer."""
    from aot.data.shards import prepare_lm_data

    section = config.get("data")
    if not section:
        raise AotError("the run has no results.json with its data config yet; wait until training has finished")
    corpus = prepare_lm_data(
        section["corpus"], section["tokenizer"], section.get("val_fraction", 0.05), section.get("test_fraction", 0.05)
    )
    if data in SPLIT_NAMES:
        return np.asarray(corpus.splits[data], dtype=np.int64)
    if path_kind(Path(data)) == "missing":
        raise AotError(f"--data {data!r} is neither a split ({', '.join(SPLIT_NAMES)}) nor a text file")
    text = read_text_file(data, "--data file", "give a UTF-8 text file or a split (val, test, train)")
    return np.asarray(corpus.tokenizer.encode(text), dtype=np.int64)


def lm_batches(tokens: np.ndarray, batches: int, batch_size: int, seq_len: int, seed: int) -> list[torch.Tensor]:
    """``batches`` batches of ``batch_size`` random windows of ``seq_len`` tokens (seeded)."""
    if len(tokens) <= seq_len:
        raise AotError(f"the data has {len(tokens)} tokens, fewer than --seq-len {seq_len}; lower --seq-len")
    rng = np.random.default_rng(seed)
    out = []
    for _ in range(batches):
        starts = rng.integers(0, len(tokens) - seq_len, size=batch_size)
        out.append(torch.from_numpy(np.stack([tokens[s : s + seq_len] for s in starts])))
    return out


def analyze_lm(
    model: AotModel,
    tokens: np.ndarray,
    *,
    batches: int = 8,
    batch_size: int = 8,
    seq_len: int = 128,
    induction_length: int = 32,
    eps: float = 0.5,
    seed: int = 0,
    device: torch.device | str = "cpu",
) -> dict[str, Any]:
    """Denoising profile on real text, circuits (spectra, composition, previous-token and induction scores) and
    subspace geometry of a causal LM."""
    data = lm_batches(tokens, batches, batch_size, seq_len, seed)
    return analyze_causal(model, data, induction_length=induction_length, eps=eps, seed=seed, device=device)


def analyze_causal(
    model: AotModel,
    data: list[torch.Tensor],
    *,
    induction_length: int = 32,
    eps: float = 0.5,
    seed: int = 0,
    device: torch.device | str = "cpu",
) -> dict[str, Any]:
    """What :func:`analyze_lm` measures, on given batches of token ids (B, T): the denoising profile on them, and
    the circuits (previous-token and induction scores on repeated random tokens of the model's vocabulary, twice as
    many rows as a batch) and geometry of the model."""
    model = model.to(device)
    profile = denoising_profile(model, tqdm([(b.to(device),) for b in data], desc="denoising", leave=False), eps=eps)
    length = induction_length
    generator = torch.Generator().manual_seed(seed)
    repeated = repeated_random_tokens(len(data[0]) * 2, length, model.cfg.vocab_size, generator).to(device)
    scores = head_scores(model, repeated)
    copying = copying_scores(model)
    return {
        "denoising": profile,
        "circuits": {
            **composition_table(model),
            "sequence_length": length,
            "previous_token": scores["previous_token"].tolist(),
            "induction": scores["induction"].tolist(),
            "copying": None if copying is None else copying.tolist(),
        },
        "geometry": subspace_geometry(model),
    }


def recall_config(run_dir: str | Path, config: dict[str, Any]) -> MQARConfig:
    """The MQAR config of a recall run's results.json (its ``config.data``); one line naming the file when it is
    not a valid one."""
    try:
        return from_dict(MQARConfig, config["data"], "data")
    except ConfigError as exc:
        raise AotError(
            f"{str(Path(run_dir) / 'results.json')!r}: config.data is not the MQAR config `aot train recall` writes "
            f"({exc}); restore the file the run wrote, or train the run again"
        ) from None


def recall_sequences(cfg: MQARConfig, data: str, n: int) -> MQARSequences:
    """The first ``n`` of the run's fixed held-out MQAR sequences ``data`` (``val`` or ``test``, :func:`held_out`:
    the sequences the run was evaluated on)."""
    if data == "train":
        raise AotError(
            "--data train: a recall run has no fixed training set (its batches are drawn afresh each step); give "
            "--data val or test, the held-out sequences it was evaluated on"
        )
    if data not in SPLITS:
        raise AotError(
            f"--data {data!r}: a recall run is analysed on its own MQAR sequences, not on a text file; give --data "
            "val or test"
        )
    return held_out(cfg, data, n)


def analyze_recall(
    model: AotModel,
    seqs: MQARSequences,
    n_pairs: int,
    *,
    batch_size: int = 8,
    induction_length: int = 32,
    eps: float = 0.5,
    seed: int = 0,
    device: torch.device | str = "cpu",
) -> dict[str, Any]:
    """:func:`analyze_causal` on MQAR sequences in batches of ``batch_size``, and the ``recall`` section: the
    key / value / self / previous-token / value-to-key scores of every head (:mod:`aot.analysis.recall_attention`;
    ``None`` for blocks without attention patterns)."""
    data = [seqs.tokens[start : start + batch_size] for start in range(0, len(seqs), batch_size)]
    measured = analyze_causal(model, data, induction_length=induction_length, eps=eps, seed=seed, device=device)
    scores = recall_head_scores(model, seqs.tokens, seqs.targets, n_pairs, batch_size)
    measured["recall"] = {
        "n_pairs": n_pairs,
        "seq_len": int(seqs.tokens.shape[1]),
        "sequences": len(seqs),
        "queries": int((seqs.targets != IGNORE).sum()),
        **{name: None if value is None else value.tolist() for name, value in scores.items()},
    }
    return measured


def image_batches(
    config: dict[str, Any],
    data: str,
    batches: int,
    batch_size: int,
    seed: int,
    shape: tuple[int, int] = (1, 28),
    stats: tuple[list[float], list[float]] | None = None,
) -> list[torch.Tensor]:
    """Normalised images of a split of the run's image set (``aot.data.images``, the `aot train vision` task), at the
    model's input size: an in-memory set's own pixels, or decoded as the run evaluated them, normalised by the run's
    ``stats`` (mean, std from its results.json); ``shape`` is the model's (in_chans, image_size)."""
    in_chans, image_size = shape  # the model's input
    mean, std = stats or ([0.0], [1.0])
    try:
        image_sets: Any = importlib.import_module("aot.data.images")
    except ImportError:
        raise AotError("an image run needs aot.data.images (`aot train vision`); this install has none") from None
    section = config.get("data")
    if not section or "dataset" not in section:
        raise AotError("the run has no results.json with its image set yet; wait until training has finished")
    if data not in SPLIT_NAMES:
        raise AotError(f"--data {data!r}: an image run takes a split ({', '.join(SPLIT_NAMES)})")
    val_size = section.get("val_size", 0.1)
    image_data = image_sets.open_images(section["dataset"], val_size if val_size < 1 else int(val_size))
    generator = torch.Generator().manual_seed(seed)
    chosen = [torch.randint(image_data.size(data), (batch_size,), generator=generator) for _ in range(batches)]
    if isinstance(image_data, image_sets.ImageData) and image_data.image_shape == (in_chans, image_size, image_size):
        pixels = image_data.splits[data][0]
        return [image_data.normalise(pixels[rows]) for rows in chosen]  # the in-memory set, as trained
    stream: Any = importlib.import_module("aot.data.image_stream")
    normalise = stream.Normaliser(mean, std)
    crop_pct = section.get("crop_pct", 0.875)
    return [
        normalise(image_sets.eval_pixels(image_data, data, rows.numpy(), image_size, in_chans, crop_pct)[0])
        for rows in chosen
    ]


def analyze_vision(
    model: AotModel, images: list[torch.Tensor], *, eps: float = 0.5, device: torch.device | str = "cpu"
) -> dict[str, Any]:
    """Denoising profile, the class token's attention entropy per layer and head, composition and spectra, and
    subspace geometry of an image classifier."""
    model = model.to(device)
    batches = [(x.to(device),) for x in images]
    profile = denoising_profile(model, tqdm(batches, desc="denoising", leave=False), eps=eps)
    entropy = torch.stack([cls_attention_entropy(model, x) for (x,) in batches]).mean(0)  # (L, H)
    n_tokens = images[0].shape[-1] // model.cfg.patch_size * (images[0].shape[-2] // model.cfg.patch_size) + 1
    return {
        "denoising": profile,
        "circuits": {
            **composition_table(model),
            "cls_attention_entropy": entropy.tolist(),
            "uniform_entropy": math.log(n_tokens),
        },
        "geometry": subspace_geometry(model),
    }


def describe(model: AotModel) -> dict[str, Any]:
    cfg = model.cfg
    return {
        "block": cfg.block,
        "n_layer": cfg.n_layer,
        "n_embd": cfg.n_embd,
        "n_head": cfg.n_head,
        "head_dim": cfg.head_dim,
        "tied_output": output_tying(cfg),
        "position": cfg.position,
        "params": model.num_params(),
    }


def fit_context(options: dict[str, Any], model: AotModel) -> dict[str, Any]:
    """``options`` with the lengths a causal LM can take: ``seq_len`` at most its block_size, ``induction_length``
    (the repeated sequence [r, r] of the induction scores) at most half of it. A length left at its default is cut
    to fit; one given (--seq-len, --set, a config file) that does not fit is a one-line error."""
    limits = {"seq_len": model.cfg.block_size, "induction_length": model.cfg.block_size // 2}
    fitted = dict(options)
    for name, limit in limits.items():
        value = fitted.get(name, getattr(AnalyzeConfig, name))
        if value <= limit:
            continue
        if value != getattr(AnalyzeConfig, name):
            raise AotError(
                f"analyze.{name}={value} is longer than the model allows ({limit}: its block_size is "
                f"{model.cfg.block_size}); lower it (--seq-len / --set analyze.{name}=N)"
            )
        fitted[name] = limit
    return fitted


def check_memory(model: AotModel, options: dict[str, Any]) -> None:
    """The analysis must fit in memory before its data is read: every batch it draws (int64 windows of an LM,
    float32 images), and one batch through the hooks, which keep every layer's activations and attention
    patterns (:func:`aot.models.budget.forward_need`). One line naming the options to lower."""
    cfg = model.cfg
    batches = options.get("batches", AnalyzeConfig.batches)
    batch_size = options.get("batch_size", AnalyzeConfig.batch_size)
    if cfg.task == "lm":
        tokens = options.get("seq_len", AnalyzeConfig.seq_len)
        row_bytes = tokens * 8
    else:
        tokens, row_bytes = image_tokens(cfg), cfg.in_chans * cfg.image_size**2 * 4
    forward = forward_need(cfg, batch_size, tokens, hooked=True)
    need = Need({**forward.parts, "batches": batches * batch_size * row_bytes}, forward.detail)
    check_fits(need, machine_memory(), "--batches / --batch-size / --seq-len")


def recall_options(options: dict[str, Any], cfg: MQARConfig) -> dict[str, Any]:
    """``options`` for a recall run: its sequences are the run's own, ``data.seq_len`` tokens each, so a
    ``seq_len`` given (not the default) that differs is a one-line error."""
    given = options.get("seq_len", AnalyzeConfig.seq_len)
    if given not in (AnalyzeConfig.seq_len, cfg.seq_len):
        raise AotError(
            f"analyze.seq_len={given}: a recall run is analysed on its own MQAR sequences of data.seq_len="
            f"{cfg.seq_len} tokens; leave --seq-len out"
        )
    return {**options, "seq_len": cfg.seq_len}


def analyze_run(run_dir: str | Path, out: str | Path, data: str = "val", **options: Any) -> dict[str, Any]:
    """Analyse a trained LM, recall or image run and write ``results.json`` and the figures into ``out``. The
    options are fitted to the model (:func:`fit_context`) and checked against memory (:func:`check_memory`) before
    any data is read."""
    from aot.analysis.figures import plot_all

    model, run_results = load_run(run_dir)
    kind = run_kind(model, run_results)
    config = run_results.get("config", {})
    mqar = recall_config(run_dir, config) if kind == "recall" else None
    if mqar is not None:
        options = recall_options(options, mqar)
    if model.cfg.task == "lm":
        options = fit_context(options, model)
    check_memory(model, options)
    if mqar is not None:
        n = options.get("batches", AnalyzeConfig.batches) * options.get("batch_size", AnalyzeConfig.batch_size)
        passed = {k: v for k, v in options.items() if k not in ("batches", "seq_len")}
        measured = analyze_recall(model, recall_sequences(mqar, data, n), mqar.n_pairs, **passed)
        measured["recall"].update(
            split=data,
            val_accuracy=run_results.get("val", {}).get("accuracy"),
            test_accuracy=run_results.get("test", {}).get("accuracy"),
        )
    elif model.cfg.task == "lm":
        measured = analyze_lm(model, lm_tokens(config, data), **options)
    elif model.cfg.task == "image":
        sizes = options.get("batches", 8), options.get("batch_size", 8)
        stats = run_results.get("data", {}).get("mean"), run_results.get("data", {}).get("std")
        shape = model.cfg.in_chans, model.cfg.image_size
        images = image_batches(config, data, *sizes, seed=options.get("seed", 0), shape=shape, stats=stats)
        measured = analyze_vision(model, images, eps=options.get("eps", 0.5), device=options.get("device", "cpu"))
    else:
        raise AotError(f"{str(run_dir)!r} holds a {model.cfg.task!r} model; aot analyze reads lm and image models")
    results = {
        "run": str(run_dir),
        "machine": machine_info(),
        "model": describe(model),
        "training": training_summary(run_results),
        "data": data,
        "kind": kind,
        "options": {key: str(value) if key == "device" else value for key, value in options.items()},
        **measured,
    }
    out_dir = Path(out)
    out_dir.mkdir(parents=True, exist_ok=True)
    (out_dir / "results.json").write_text(json.dumps(results, indent=1) + "\n")
    plot_all(results, out_dir, title=f"{model.cfg.block} L={model.cfg.n_layer} d={model.cfg.n_embd}")
    return results
