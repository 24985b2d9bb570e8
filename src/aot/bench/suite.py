"""The benchmark suite behind `aot bench`: every block type at matched width/depth and at matched parameters,
sequence-length and depth scaling, decoding with and without the cache, and the HuggingFace GPT-2 peer.

Every figure is measured in one process with one thread count and one dtype, against a matmul peak measured
in the same run (the best of the measurements before and after the suite, so contention lowers MFU rather
than inflating it).
"""

from __future__ import annotations

import os
import statistics
from dataclasses import asdict, dataclass
from typing import Any, ClassVar

import torch

from aot.bench.breakdown import category_rates, time_breakdown
from aot.bench.decode import decode_benchmark
from aot.bench.flops import flops_per_token, measure_flops
from aot.bench.mfu import achieved_flops, mfu
from aot.bench.peaks import dtype_name, gpu_peak_flops, measure_matmul_peak
from aot.bench.timing import (
    forward_pass,
    interleaved_timings,
    make_optimizer,
    peak_training_memory,
    random_tokens,
    training_step,
)
from aot.blockspec import block_specs, output_tying
from aot.config import ModelConfig
from aot.errors import AotError, ConfigError
from aot.models import AotModel, build_model
from aot.runinfo import machine_info
from aot.validation import Limit, at_least, one_of, within

DTYPES = {"fp32": torch.float32, "bf16": torch.bfloat16, "fp16": torch.float16}


def bench_blocks() -> list[tuple[str, str, dict[str, Any]]]:
    """(label, block, extra config) of every row the suite compares: the ``bench`` rows of every registered
    block spec, in registration order (AoT-MSSA tied / W_O, AoT-MHSA, GPT-2, CRATE, Llama)."""
    return [(label, spec.name, dict(fields)) for spec in block_specs() for label, fields in spec.bench]


def __getattr__(name: str) -> Any:
    if name == "BLOCKS":  # derived on access, so a block registered later is included
        return bench_blocks()
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


BASELINE = "GPT-2"
#: the parts of the suite (``aot bench --only``, ``bench.sections``)
SUITE_SECTIONS = ("models", "seq", "depth", "decode", "peer")


@dataclass
class BenchSettings:
    """What `aot bench` measures (the ``bench:`` section of its config file). Defaults: the CPU bench size
    d = 256, 4 heads, T = 256, batch 16, fp32; ``--quick`` starts from :attr:`QUICK` instead."""

    n_embd: int = 256
    n_head: int = 4
    seq_len: int = 256
    batch: int = 16
    vocab_size: int = 256
    depth: int = 6  # matched width/depth: every block type at this depth; GPT-2's depth at matched params
    dtype: str = "fp32"
    device: str = "cpu"
    threads: int = 0  # 0: torch's default
    warmup: int = 2  # untimed calls before a model's first round
    repeat: int = 2  # timed calls per model and round
    rounds: int = 3  # interleaved rounds over the models of a comparison; figures are medians of all timings
    scaling_repeat: int = 1  # timed calls per model and round in the scaling sweeps
    seq_lens: tuple[int, ...] = (64, 128, 256, 512, 1024, 2048)
    scaling_tokens: int = 4096  # tokens per batch in the sequence sweep (batch = tokens // T)
    depths: tuple[int, ...] = (1, 2, 4, 8, 16)
    scaling_blocks: tuple[str, ...] = ("AoT-MSSA (tied)", "AoT-MHSA", "GPT-2")
    decode_new: int = 512
    decode_prompt: int = 16
    decode_blocks: tuple[str, ...] = ("AoT-MSSA (tied)", "AoT-MSSA (W_O)", "AoT-MHSA", "GPT-2")
    memory: bool = True
    breakdown: bool = True  # profile where the training step's time goes (matched width/depth rows)
    peer: bool = True
    peer_rounds: int = 6  # interleaved A/B rounds of the HF comparison (median of the per-round ratios)
    peak_sizes: tuple[int, ...] = (1024, 2048)
    sections: tuple[str, ...] = SUITE_SECTIONS

    LIMITS: ClassVar[dict[str, Limit]] = {
        **{name: at_least(1) for name in ("n_embd", "n_head", "seq_len", "batch", "vocab_size", "depth", "rounds")},
        "repeat": within(1, 10_000),  # timed calls per model and round: beyond this a bench never ends
        **{name: at_least(1) for name in ("scaling_repeat", "scaling_tokens", "decode_new", "decode_prompt")},
        **{name: at_least(1, nonempty=True) for name in ("seq_lens", "depths", "peak_sizes")},
        "peer_rounds": at_least(1),
        "warmup": at_least(0),
        "threads": within(0, 1024),  # torch threads (0: torch's default); more than any machine has is a typo
        "dtype": one_of(*DTYPES),
        "sections": one_of(*SUITE_SECTIONS, nonempty=True),
    }
    #: the fields of a tiny run for tests and smoke checks (seconds, not minutes): ``aot bench --quick``
    QUICK: ClassVar[dict[str, Any]] = {
        "n_embd": 64,
        "seq_len": 64,
        "batch": 2,
        "depth": 2,
        "warmup": 1,
        "repeat": 2,
        "rounds": 1,
        "scaling_repeat": 1,
        "peer_rounds": 2,
        "seq_lens": (32, 64),
        "scaling_tokens": 128,
        "depths": (1, 2),
        "decode_new": 24,
        "decode_prompt": 4,
        "decode_blocks": ("AoT-MSSA (tied)", "GPT-2"),
        "memory": False,
        "peak_sizes": (256,),
    }

    def __post_init__(self) -> None:
        """The block labels must be rows of the suite: those of the blocks registered now (not in LIMITS, which
        is fixed when the class is made)."""
        labels = one_of(*(label for label, _, _ in bench_blocks()))
        for name in ("scaling_blocks", "decode_blocks"):
            values = getattr(self, name)
            if not values:
                raise ConfigError(f"bench.{name} is empty; give at least one value")
            for i, value in enumerate(values):
                if not labels.allows(value):
                    raise ConfigError(f"bench.{name}[{i}]={value!r} must be {labels.describe()}")

    @classmethod
    def quick(cls) -> BenchSettings:
        """A tiny run for tests and smoke checks (:attr:`QUICK`)."""
        return cls(**cls.QUICK)

    @property
    def torch_dtype(self) -> torch.dtype:
        if self.dtype not in DTYPES:
            raise AotError(f"dtype={self.dtype!r} is not one of {', '.join(DTYPES)}")
        return DTYPES[self.dtype]


def block_config(s: BenchSettings, label: str, n_layer: int, seq_len: int | None = None) -> ModelConfig:
    """The config of block ``label`` (see :func:`bench_blocks`) at the bench width and ``n_layer`` layers."""
    extra = {lbl: (blk, ext) for lbl, blk, ext in bench_blocks()}
    if label not in extra:
        raise AotError(f"unknown block label {label!r}; choose from {', '.join(extra)}")
    block, fields = extra[label]
    return ModelConfig(
        block=block,
        n_layer=n_layer,
        n_embd=s.n_embd,
        n_head=s.n_head,
        vocab_size=s.vocab_size,
        block_size=max(seq_len or s.seq_len, s.seq_len),
        **fields,
    )


def matched_depth(s: BenchSettings, label: str) -> int:
    """The depth at which block ``label`` has the non-embedding parameters nearest GPT-2's at ``s.depth``."""

    def per_layer(lbl: str) -> int:
        with torch.device("meta"):
            one, two = (build_model(block_config(s, lbl, n)).num_params(non_embedding=True) for n in (1, 2))
        return two - one

    return max(1, round(s.depth * per_layer(BASELINE) / per_layer(label)))


def environment(s: BenchSettings) -> dict[str, Any]:
    device = torch.device(s.device)
    env = machine_info()
    env.update(threads=env["torch_threads"], device=str(device), dtype=s.dtype, load_average_start=_load_average())
    if device.type == "cuda":
        env["gpu"] = torch.cuda.get_device_name(device)
    return env


def _load_average() -> list[float] | None:
    try:
        return [round(x, 2) for x in os.getloadavg()]
    except OSError:
        return None


def measure_peak(s: BenchSettings) -> dict[str, Any]:
    peak = measure_matmul_peak(s.torch_dtype, s.device, sizes=s.peak_sizes, repeat=s.repeat)
    return {k: float(v) for k, v in peak.items()}


def describe_model(
    s: BenchSettings, cfg: ModelConfig, model: AotModel, seq_len: int, *, count_flops: bool
) -> dict[str, Any]:
    """What does not need a clock: parameters and FLOPs per token (analytic and ``flop_counter``) of ``model``,
    built from ``cfg``."""
    flops = flops_per_token(cfg, seq_len)
    row: dict[str, Any] = dict(
        block=cfg.block,
        tied_output=output_tying(cfg),
        n_layer=cfg.n_layer,
        n_embd=cfg.n_embd,
        n_head=cfg.n_head,
        seq_len=seq_len,
        params=model.num_params(),
        non_embedding_params=model.num_params(non_embedding=True),
        flops_forward=flops.forward,
        flops_training=flops.training(),
        flops_training_hw=flops.training(recompute=True),
        flops_training_causal=flops.training_causal(),
        attention_share=flops.attention / flops.forward,
    )
    if count_flops:  # per token, on one sequence (FLOPs per token do not depend on the batch)
        one = random_tokens(cfg, 1, seq_len, s.device)
        row["flop_counter_forward"] = measure_flops(model, one, training=False) / seq_len
        row["flop_counter_training"] = measure_flops(model, one, training=True) / seq_len
        row["flop_counter_agreement_forward"] = row["flop_counter_forward"] / flops.forward
        row["flop_counter_agreement_training"] = row["flop_counter_training"] / flops.training(recompute=True)
    return row


def _median_of_all(rounds: list[list[float]]) -> float:
    return statistics.median(t for round_ in rounds for t in round_)


def measure_models(
    s: BenchSettings,
    cfgs: list[ModelConfig],
    batch: int,
    seq_len: int,
    peak: float,
    *,
    count_flops: bool = True,
    forward: bool = True,
    memory: bool | None = None,
    repeat: int | None = None,
    breakdown: bool = False,
) -> list[dict[str, Any]]:
    """Every figure of the models built from ``cfgs``: parameters, FLOPs per token (analytic and flop_counter),
    median forward and training-step time, tokens/s, achieved FLOP/s, MFU, peak training memory and
    (``breakdown``) each step's time by category of op.

    The models are timed in ``s.rounds`` interleaved rounds (the order reversed every other round), ``repeat``
    calls each per round, and each figure is the median of all its timings: a burst of load on a shared
    machine then hits every model of a comparison alike instead of one of them."""
    device, dtype = torch.device(s.device), s.torch_dtype
    tokens = batch * seq_len
    idx = random_tokens(cfgs[0], batch, seq_len, device)
    models = []
    for cfg in cfgs:
        torch.manual_seed(0)
        models.append(build_model(cfg).to(device))
    rows = [describe_model(s, cfg, model, seq_len, count_flops=count_flops) for cfg, model in zip(cfgs, models)]
    steps = [training_step(model, make_optimizer(model), idx, dtype) for model in models]
    groups = [[forward_pass(model, idx, dtype), step] if forward else [step] for model, step in zip(models, steps)]
    timings = interleaved_timings(groups, device, s.rounds, s.warmup, repeat or s.repeat)
    for i, (cfg, row) in enumerate(zip(cfgs, rows)):
        flops = flops_per_token(cfg, seq_len)
        row["batch"] = batch
        if forward:
            row["forward_seconds"] = _median_of_all(timings[i][0])
            row["forward_tokens_per_s"] = tokens / row["forward_seconds"]
            row["forward_mfu"] = mfu(flops.forward, row["forward_tokens_per_s"], peak)
        row["train_seconds"] = _median_of_all(timings[i][-1])
        row["train_tokens_per_s"] = tokens / row["train_seconds"]
        row["train_flops_per_s"] = achieved_flops(flops.training(), row["train_tokens_per_s"])
        row["train_mfu"] = mfu(flops.training(), row["train_tokens_per_s"], peak)
        row["train_mfu_causal"] = mfu(flops.training_causal(), row["train_tokens_per_s"], peak)
        if breakdown:
            row["time_breakdown"] = time_breakdown(steps[i], device)
            row["category_flops_per_s"] = category_rates(row["time_breakdown"], flops, tokens)
    del models, steps
    if s.memory if memory is None else memory:  # one fresh subprocess per model, after the timings
        for cfg, row in zip(cfgs, rows):
            row["train_peak_bytes"] = peak_training_memory(cfg, batch, seq_len, device, dtype)["peak_bytes"]
    return rows


def run_suite(s: BenchSettings, log: Any = print) -> dict[str, Any]:
    """Run every section of the suite; returns the ``results.json`` document."""
    if s.threads:
        torch.set_num_threads(s.threads)
    device = torch.device(s.device)
    if device.type == "cuda" and not torch.cuda.is_available():
        raise AotError("--device cuda was asked for but CUDA is not available; use --device cpu")
    results: dict[str, Any] = dict(environment=environment(s), settings=_settings_dict(s))
    log(f"measuring the {s.dtype} matmul peak on {device} ...")
    peak_start = measure_peak(s)
    peak = peak_start["peak"]
    table_peak = gpu_peak_flops(results["environment"].get("gpu", ""), s.torch_dtype) if device.type == "cuda" else None
    results["peak"] = dict(measured_start=peak_start, table=table_peak, dtype=dtype_name(s.torch_dtype))

    if "models" in s.sections:
        rows = []
        for group in ("matched width/depth", "matched params"):
            depths = {
                lbl: s.depth if group == "matched width/depth" else matched_depth(s, lbl)
                for lbl, _, _ in bench_blocks()
            }
            layers = sorted(set(depths.values()))
            log(f"[{group}] {len(depths)} block types, {layers[0]}–{layers[-1]} layers ...")
            cfgs = [block_config(s, lbl, n) for lbl, n in depths.items()]
            breakdown = s.breakdown and group == "matched width/depth"
            measured = measure_models(s, cfgs, s.batch, s.seq_len, peak, breakdown=breakdown)
            rows += [dict(group=group, label=lbl, **row) for lbl, row in zip(depths, measured)]
        results["models"] = rows
    for section, key, values in (("seq", "seq_scaling", s.seq_lens), ("depth", "depth_scaling", s.depths)):
        if section not in s.sections:
            continue
        rows = []
        for value in values:  # at each point the blocks are timed interleaved
            seq_len, depth = (value, s.depth) if section == "seq" else (s.seq_len, value)
            batch = max(1, s.scaling_tokens // seq_len) if section == "seq" else s.batch
            log(f"[{section} scaling] T = {seq_len}, {depth} layers, batch {batch}: {len(s.scaling_blocks)} blocks ...")
            cfgs = [block_config(s, label, depth, seq_len) for label in s.scaling_blocks]
            measured = measure_models(
                s,
                cfgs,
                batch,
                seq_len,
                peak,
                count_flops=False,
                forward=False,
                memory=None if section == "seq" else False,
                repeat=s.scaling_repeat,
            )
            rows += [dict(label=label, **row) for label, row in zip(s.scaling_blocks, measured)]
        results[key] = sorted(rows, key=lambda row: s.scaling_blocks.index(row["label"]))  # stable: by block
    if "decode" in s.sections:
        rows = []
        for label in s.decode_blocks:
            log(f"[decode] {label}: {s.decode_new} tokens with and without the cache ...")
            cfg = block_config(s, label, s.depth, s.decode_prompt + s.decode_new)
            torch.manual_seed(0)
            model = build_model(cfg).to(device)
            row = decode_benchmark(model, s.decode_new, s.decode_prompt)  # type: ignore[arg-type]
            rows.append(dict(label=label, n_layer=cfg.n_layer, **row))
        results["decode"] = rows
    if "peer" in s.sections and s.peer:
        results["peer"] = run_peer(s, peak, log)
    peak_end = measure_peak(s)
    results["peak"]["measured_end"] = peak_end
    results["environment"]["load_average_end"] = _load_average()
    _rescale_mfu(results, max(peak, peak_end["peak"]))
    return results


def run_peer(s: BenchSettings, peak: float, log: Any = print) -> dict[str, Any]:
    """Our GPT-2 against HF transformers' GPT2LMHeadModel on the same config, threads and dtype."""
    from aot.bench.peer import MISSING_MESSAGE, hf_gpt2, hf_version, load_aot_weights_into_hf, num_params

    try:
        import transformers  # noqa: F401
    except ImportError:
        log("[peer] skipped: transformers is not installed (pip install 'aot[hf]')")
        return dict(skipped=MISSING_MESSAGE)
    device, dtype = torch.device(s.device), s.torch_dtype
    cfg = block_config(s, BASELINE, s.depth)
    log(f"[peer] HF GPT2LMHeadModel vs our GPT-2, {cfg.n_layer} layers ...")
    torch.manual_seed(0)
    ours, theirs = build_model(cfg).to(device), hf_gpt2(cfg).to(device)
    load_aot_weights_into_hf(ours, theirs)
    idx = torch.randint(0, cfg.vocab_size, (s.batch, s.seq_len), generator=torch.Generator().manual_seed(0)).to(device)
    ours.eval()
    theirs.eval()
    with torch.no_grad():
        logits_gap = float((ours(idx[:1])[0] - theirs(input_ids=idx[:1]).logits).abs().max())
    flops = flops_per_token(cfg, s.seq_len)
    out: dict[str, Any] = dict(versions=hf_version(), max_abs_logit_difference=logits_gap, rounds=s.peer_rounds)
    tokens = s.batch * s.seq_len
    models = {"aot": ours.train(), "hf": theirs.train()}
    groups = [
        [forward_pass(model, idx, dtype), training_step(model, make_optimizer(model), idx, dtype)]
        for model in models.values()
    ]  # A/B interleaved, the order alternating, so drifting load hits both
    timings = interleaved_timings(groups, device, s.peer_rounds, s.warmup, s.repeat)
    times = {  # per model and kind, the median of each round
        name: {kind: [statistics.median(round_) for round_ in rounds] for kind, rounds in zip(("forward", "train"), t)}
        for name, t in zip(models, timings)
    }
    for name, model in models.items():
        forward_s, train_s = (statistics.median(times[name][k]) for k in ("forward", "train"))
        out[name] = dict(
            params=num_params(model),
            forward_seconds=forward_s,
            forward_tokens_per_s=tokens / forward_s,
            train_seconds=train_s,
            train_tokens_per_s=tokens / train_s,
            train_mfu=mfu(flops.training(), tokens / train_s, peak),
        )
    for kind in ("train", "forward"):  # ours / HF speed within each round (both timed back to back), then median
        rounds = [hf / ours for ours, hf in zip(times["aot"][kind], times["hf"][kind])]
        out[f"{kind}_speed_ratio_rounds"] = rounds
        out[f"{kind}_speed_ratio"] = statistics.median(rounds)
    return out


def _rescale_mfu(results: dict[str, Any], peak: float) -> None:
    """Recompute every MFU against the final peak (the best matmul measurement of the run)."""
    results["peak"]["used"] = peak
    table = results["peak"].get("table")
    for section in ("models", "seq_scaling", "depth_scaling"):
        for row in results.get(section, []):
            row["train_mfu"] = row["train_flops_per_s"] / peak
            if table:  # a known GPU: MFU against the data-sheet peak too
                row["train_mfu_table"] = row["train_flops_per_s"] / table
            row["train_mfu_causal"] = row["flops_training_causal"] * row["train_tokens_per_s"] / peak
            if "forward_tokens_per_s" in row:
                row["forward_mfu"] = row["flops_forward"] * row["forward_tokens_per_s"] / peak
            if "category_flops_per_s" in row:
                row["category_mfu"] = {k: v / peak for k, v in row["category_flops_per_s"].items()}
    peer = results.get("peer", {})
    for name in ("aot", "hf"):
        if name in peer:
            flops = peer[name]["train_mfu"] * results["peak"]["measured_start"]["peak"]
            peer[name]["train_mfu"] = flops / peak


def _settings_dict(s: BenchSettings) -> dict[str, Any]:
    return {k: list(v) if isinstance(v, tuple) else v for k, v in asdict(s).items()}


__all__ = ["BLOCKS", "BenchSettings", "bench_blocks", "block_config", "matched_depth", "run_suite"]  # noqa: F822
