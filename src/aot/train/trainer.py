"""One training loop for every task: it takes a model, a batch source and a loss function.

- batch source: ``get(step, start, stop)`` returns rows ``[start, stop)`` of the global batch of ``step`` (a
  tuple of tensors); ``tokens_per_sample()`` (optional) says how many tokens one row holds, for tokens/s.
  The data position is the step, so resuming is exact and the global batch is the same for any number of
  processes: process r of W takes rows ``[r·B/W, (r+1)·B/W)``, in micro-batches.
- loss function: ``loss_fn(model, batch) -> scalar tensor`` (the mean over the micro-batch).

The loop: AdamW (decay / no-decay groups) or Lion, linear warm-up + cosine (:func:`aot.train.schedule.lr_at`),
gradient accumulation and clipping, bf16 autocast on CPU and GPU, optional ``torch.compile``, periodic
evaluation, a progress bar (loss, tokens/s, MFU), ``metrics.jsonl`` (+ TensorBoard when installed), and atomic
checkpoints (:mod:`aot.train.checkpoint`) that ``resume`` continues exactly.
"""

from __future__ import annotations

import functools
import json
import os
import sys
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager, nullcontext
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, ClassVar, Protocol

import torch
from torch import nn

from aot.bench.machine_cache import deferred_writes
from aot.bench.mfu import bounded_mfu
from aot.bench.peaks import REFRESH_COMMAND, peak_flops
from aot.errors import AotError, ConfigError
from aot.run_folder import METRICS_FILE, follow_lock, write_text_atomic
from aot.train.checkpoint import (
    check_fingerprint,
    checkpoint_candidates,
    keep_checkpoint,
    load_checkpoint,
    save_checkpoint,
)
from aot.train.distributed import (
    STRATEGIES,
    DistEnv,
    all_reduce_max,
    all_reduce_mean,
    broadcast_from_main,
    compiles_per_block,
    current_env,
    first_error,
    is_sharded,
    set_gradient_sync,
    unwrap,
    wrap_model,
)
from aot.train.optim import OPTIMIZERS, build_optimizer
from aot.train.prefetch import Prefetcher
from aot.train.resume import plan_branch, plan_run
from aot.train.schedule import SCHEDULES, lr_at
from aot.validation import SEED, Limit, above, at_least, check_fields, from_dict, one_of, within

PRECISIONS = ("auto", "bf16", "fp32")


@dataclass
class TrainConfig:
    """Settings of the loop. ``batch_size`` is the global batch (all processes, all micro-steps together).

    micro_batch_size: rows per forward/backward on one process; ``None`` = the whole per-process share.
    schedule: ``cosine`` (warm-up, cosine decay) or ``wsd`` (warm-up, stable, 1-sqrt cooldown over the last
        ``decay_fraction`` of the steps; :mod:`aot.train.schedule`).
    min_lr_ratio: the schedule ends at ``lr * min_lr_ratio``.
    keep_checkpoints: steps whose checkpoint is kept as ``checkpoint-step{N}/`` in the run folder (e.g. the stable
        phase of a WSD run, to start cooldown branches from: ``aot train TASK --branch-from RUN/checkpoint-stepN``).
    eval_every / checkpoint_every: in optimizer steps; 0 = only at the end. log_every: metrics.jsonl rows.
    checkpoint_minutes: also checkpoint when this many minutes of wall time have passed since the last one
        (0 = only by steps), so a killed long run loses at most that much work.
    strategy: ``auto`` (DDP when several processes), ``ddp`` or ``fsdp``.
    precision: ``auto`` (the default: bf16 autocast where it is faster — measured once per machine and shape on a
        CPU, :mod:`aot.bench.precision`; where supported on a GPU — else fp32), ``bf16`` or ``fp32``. A resumed
        run keeps the precision its checkpoint was trained with.
    seed: the run's only seed: model initialisation, data order and dropout (``--seed`` sets it).
    skip_nonfinite: a step whose loss or gradients hold NaN/Inf is skipped (and counted) instead of stopping.
    deterministic: deterministic kernels only (``torch.use_deterministic_algorithms``, cuBLAS's fixed workspace,
        cuDNN without autotuning): on a GPU, two runs of one config, and a resumed run and the uninterrupted one,
        then agree bit for bit on the same GPU model and software, at some cost in speed. Off, a GPU's atomic
        additions (embedding and attention backward) differ in their last bits from run to run. On a CPU every run
        is deterministic already.
    """

    steps: int = 1000
    batch_size: int = 16
    micro_batch_size: int | None = None
    lr: float = 1e-3
    schedule: str = "cosine"
    decay_fraction: float = 0.2
    min_lr_ratio: float = 0.1
    warmup_steps: int = 50
    weight_decay: float = 0.1
    beta1: float = 0.9
    beta2: float = 0.95
    optimizer: str = "adamw"
    grad_clip: float = 1.0
    precision: str = "auto"
    compile: bool = False
    eval_every: int = 0
    log_every: int = 10
    checkpoint_every: int = 0
    checkpoint_minutes: float = 5.0
    keep_checkpoints: tuple[int, ...] = ()
    strategy: str = "auto"
    seed: int = 0
    skip_nonfinite: bool = False
    progress: bool = True
    deterministic: bool = False

    LIMITS: ClassVar[dict[str, Limit]] = {
        "steps": at_least(1),
        "batch_size": at_least(1),
        "micro_batch_size": at_least(1),
        "lr": above(0),
        "schedule": one_of(*SCHEDULES),
        "decay_fraction": within(0, 1, low_open=True),
        "min_lr_ratio": within(0, 1),
        "warmup_steps": at_least(0),
        "weight_decay": at_least(0),
        "beta1": within(0, 1, high_open=True),
        "beta2": within(0, 1, high_open=True),
        "optimizer": one_of(*OPTIMIZERS),
        "grad_clip": at_least(0),
        "precision": one_of(*PRECISIONS),
        "eval_every": at_least(0),
        "log_every": at_least(1),
        "checkpoint_every": at_least(0),
        "checkpoint_minutes": at_least(0),
        "keep_checkpoints": at_least(1),
        "strategy": one_of(*STRATEGIES),
        "seed": SEED,
    }

    def __post_init__(self) -> None:
        check_fields(self, "train")

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> TrainConfig:
        return from_dict(cls, data, "train")

    def to_dict(self) -> dict[str, Any]:
        import dataclasses

        return dataclasses.asdict(self)


# fields that may change between a run and its resumption (and between a run and its cooldown branches)
RESUMABLE_CHANGES = (
    "eval_every",
    "log_every",
    "checkpoint_every",
    "checkpoint_minutes",
    "progress",
    "compile",
    "micro_batch_size",
    "skip_nonfinite",
    "keep_checkpoints",
    "deterministic",
)


UNIT_ABBREVIATIONS = {"tokens": "tok", "images": "img"}  # the progress line's rate: tok_s, img_s
#: steps after a (re)start that the rate and MFU leave out: torch.compile's compilation, cuDNN / cuBLAS autotuning and
#: the allocator's first rounds land there (nanoGPT skips 5, nanochat 10); their time still counts in train_seconds
WARMUP_STEPS = 5


class StepClock:
    """Training time measured in laps between the points where the host waits for the device anyway (logging,
    evaluation, checkpoints, the end of the warm-up): wall time after a synchronisation, so the work a GPU had queued
    is counted in the lap it belongs to (timing each step on the host would only time the kernel launches)."""

    def __init__(self) -> None:
        self.start = time.perf_counter()

    def lap(self) -> float:
        now = time.perf_counter()
        seconds, self.start = now - self.start, now
        return seconds


@contextmanager
def deterministic_kernels(on: bool) -> Iterator[None]:
    """Within: only deterministic kernels when ``on`` (``train.deterministic``); the process's settings are restored
    after. cuBLAS reads ``CUBLAS_WORKSPACE_CONFIG`` when it starts, so it is set here, before the first matmul."""
    if not on:
        yield
        return
    os.environ.setdefault("CUBLAS_WORKSPACE_CONFIG", ":4096:8")
    before = (torch.are_deterministic_algorithms_enabled(), torch.backends.cudnn.deterministic)
    benchmark = torch.backends.cudnn.benchmark
    torch.use_deterministic_algorithms(True)
    torch.backends.cudnn.deterministic, torch.backends.cudnn.benchmark = True, False
    try:
        yield
    finally:
        torch.use_deterministic_algorithms(before[0])
        torch.backends.cudnn.deterministic, torch.backends.cudnn.benchmark = before[1], benchmark


def synchronize(device: torch.device) -> None:
    """Wait for ``device``'s queued work (CUDA); nothing elsewhere."""
    if device.type == "cuda":
        torch.cuda.synchronize(device)


class BatchSource(Protocol):
    def get(self, step: int, start: int = 0, stop: int | None = None) -> tuple[torch.Tensor, ...]: ...


LossFn = Callable[[nn.Module, tuple[torch.Tensor, ...]], torch.Tensor]
EvalFn = Callable[[nn.Module], dict[str, float]]


@dataclass
class TrainResult:
    """What :meth:`Trainer.fit` returns. ``seen`` counts what the batch rows held: ``batch rows ×
    tokens_per_sample()`` — tokens for a language model, images for a classifier (one per row), prompts for
    in-context regression — and ``seen_per_second`` is its rate over the training time."""

    step: int
    seen: int
    train_seconds: float
    seen_per_second: float
    last_loss: float
    losses: list[tuple[int, float]] = field(default_factory=list)  # (step, mean loss), the whole run (rank 0)
    evals: list[dict[str, Any]] = field(default_factory=list)
    peak_flops: float = 0.0
    peak_raised: bool = False  # the achieved rate exceeded the peak, which was raised to it (MFU 1)
    mfu: float = 0.0
    skipped_steps: int = 0  # steps skipped for a non-finite loss or gradient (train.skip_nonfinite)
    precision: dict[str, Any] = field(default_factory=dict)  # the precision used and why (train.precision: auto)
    branched_from: dict[str, Any] | None = None  # a cooldown branch: the checkpoint it started from and its step


def split_batch(batch: int, world: int, micro: int | None) -> tuple[int, int, int, str]:
    """``(rows per process, micro-batch, accumulation steps, note)`` for a global batch of ``batch`` rows over
    ``world`` processes, with micro-batches of at most ``micro`` rows (``None``: the whole share at once). The
    global batch is the recipe and never changes; the micro-batch is the largest one up to ``micro`` that divides
    each process's share (the paper's 480 rows at micro 12: 5 steps of 12 on 8 GPUs, 3 of 10 on 16, 16 of 10 on 3),
    and ``note`` says so when it is smaller than asked. Only a world size that does not divide the batch has no
    split: one line naming the sizes that do."""
    if batch % world:
        near = [w for w in range(max(1, world - 8), world + 9) if batch % w == 0]
        raise ConfigError(
            f"train.batch_size={batch} rows cannot be shared evenly by {world} processes; run on a number of "
            f"processes that divides it ({', '.join(map(str, near))}, ...) or choose a batch_size divisible by {world}"
        )
    per_process = batch // world
    wanted = min(micro or per_process, per_process)
    chosen = max(d for d in range(1, wanted + 1) if per_process % d == 0)
    note = ""
    if micro is not None and chosen != micro:
        note = (
            f"micro-batches of {chosen} rows, not train.micro_batch_size={micro}: each of the {world} processes "
            f"takes {per_process} of the {batch} rows, in {per_process // chosen} equal micro-batches"
        )
    return per_process, chosen, per_process // chosen, note


class Trainer:
    """See the module docstring. ``model`` is the user's model (not wrapped); the trainer wraps it for DDP or
    FSDP when it runs in several processes (``torch.distributed`` initialised)."""

    def __init__(
        self,
        model: nn.Module,
        batches: BatchSource,
        loss_fn: LossFn,
        cfg: TrainConfig,
        out_dir: str | Path,
        *,
        device: torch.device | str = "cpu",
        evaluate: EvalFn | None = None,
        fingerprint: dict[str, Any] | None = None,
        model_config: dict[str, Any] | None = None,
        flops_per_sample: float | None = None,
        run_config: dict[str, Any] | None = None,
        prefetch: bool | None = None,
        notices: tuple[str, ...] | list[str] = (),
    ) -> None:
        self.cfg = cfg
        self.device = torch.device(device)
        self.out_dir = Path(out_dir)
        self.batches = batches
        self.loss_fn = loss_fn
        self.evaluate = evaluate
        self.model_config = model_config
        self.run_config = run_config  # the task's whole config, kept in every checkpoint (a branch starts from it)
        self.notices = list(notices)  # lines for the user, said when training starts
        self.branched_from: dict[str, Any] | None = None
        self.flops_per_sample = flops_per_sample
        train_fields = {k: v for k, v in cfg.to_dict().items() if k not in RESUMABLE_CHANGES}
        if cfg.schedule == "cosine":  # a cosine run's fingerprint stays what it was before WSD: old runs resume
            train_fields.pop("schedule")
            train_fields.pop("decay_fraction")
        self.fingerprint = {**(fingerprint or {}), **{f"train.{k}": v for k, v in train_fields.items()}}
        self.env: DistEnv = current_env()
        self.per_process, self.micro, self.n_micro = self._batch_split()
        set_rows = getattr(batches, "set_rows", None)
        if callable(set_rows):  # a source that prepares rows ahead (image workers) learns which rows this process takes
            set_rows([(start, start + self.micro) for start in self._micro_starts()])
        # the next step's batches are made while this one runs (on CUDA by default: on a CPU the thread would take
        # a core from the step itself); ``prefetch`` forces it either way
        ahead = self.device.type == "cuda" if prefetch is None else prefetch
        self.prefetcher = Prefetcher(self._step_batches, self.device, ahead)
        if self.device.type == "cuda":  # fp32 matmuls on TF32 tensor cores (the fp32 vision recipes), as nanoGPT does
            torch.backends.cuda.matmul.allow_tf32 = True
            torch.backends.cudnn.allow_tf32 = True
        per_block = cfg.compile and compiles_per_block(model, cfg.strategy)
        bf16 = cfg.precision == "bf16"
        self.model = wrap_model(model.to(self.device), cfg.strategy, self.device, bf16, compile_blocks=per_block)
        self.optimizer = build_optimizer(
            unwrap(self.model), cfg.optimizer, cfg.lr, cfg.weight_decay, (cfg.beta1, cfg.beta2)
        )
        whole = cfg.compile and not per_block  # FSDP compiled its blocks one by one
        self.forward_model: nn.Module = torch.compile(self.model) if whole else self.model  # type: ignore[assignment]
        tokens = getattr(batches, "tokens_per_sample", None)
        self.unit = str(getattr(batches, "unit", "tokens"))  # what the rows count in the progress line and metrics
        self.tokens_per_sample = int(tokens()) if callable(tokens) else 1
        self.step = 0
        self.tokens_seen = 0
        self.train_seconds = 0.0
        self.skipped_steps = 0
        self._last_save = time.monotonic()
        self.precision = "fp32" if cfg.precision == "auto" else cfg.precision  # `auto` is resolved by fit()
        self.precision_choice: dict[str, Any] = {"precision": self.precision, "reason": "not resolved yet"}
        self.peak, self.peak_raised = 0.0, False  # FLOP/s per process that MFU divides by (set by fit())

    def _batch_split(self) -> tuple[int, int, int]:
        per_process, micro, n_micro, note = split_batch(
            self.cfg.batch_size, self.env.world_size, self.cfg.micro_batch_size
        )
        if note and self.env.is_main:
            print(f"aot: {note}", file=sys.stderr, flush=True)
        return per_process, micro, n_micro

    def autocast(self):  # type: ignore[no-untyped-def]
        if self.precision == "bf16":
            return torch.autocast(device_type=self.device.type, dtype=torch.bfloat16)
        return nullcontext()

    @property
    def dtype(self) -> torch.dtype:
        return torch.bfloat16 if self.precision == "bf16" else torch.float32

    def _resolve_precision(self, checkpoint_state: dict[str, Any] | None) -> None:
        """Set ``self.precision`` (bf16 or fp32) and ``self.precision_choice`` (precision, reason, timings).
        ``auto``: a resumed run keeps its checkpoint's choice; a new run measures (:mod:`aot.bench.precision`)
        on the main process, and every process takes its answer."""
        if self.cfg.precision != "auto":
            choice = {"precision": self.cfg.precision, "reason": f"{self.cfg.precision}: set by train.precision"}
        elif checkpoint_state is not None and "precision" in checkpoint_state:
            choice = dict(checkpoint_state["precision"])
            choice["reason"] = f"{choice['precision']}: kept from the checkpoint ({choice['reason']})"
        elif self.model_config is None:
            choice = {"precision": "fp32", "reason": "fp32: auto needs the model config to measure; none given"}
        else:
            from aot.bench.precision import choose_precision
            from aot.config import ModelConfig

            measured = None
            if self.env.is_main:
                seq_len = self.tokens_per_sample if self.tokens_per_sample > 1 else 1
                cfg = ModelConfig.from_dict(self.model_config)
                measured = choose_precision(cfg, self.micro, seq_len, self.device).to_dict()
            choice = broadcast_from_main(measured)  # type: ignore[assignment]
        self.precision, self.precision_choice = str(choice["precision"]), choice

    # -- the loop -------------------------------------------------------------------------------------
    def fit(
        self,
        resume: bool | str = False,
        stop_at: int | None = None,
        force: bool = False,
        branch_from: str | Path | None = None,
    ) -> TrainResult:
        """Train to ``cfg.steps`` (or stop early after step ``stop_at``, with a checkpoint, as a killed run
        would leave one). ``resume``: ``False``/``"no"`` starts a new run (refused when ``out_dir`` holds one,
        unless ``force`` moves it aside), ``True``/``"yes"`` continues from the last good checkpoint (an error
        when there is none), ``"auto"`` resumes when it can (see :mod:`aot.train.resume`).

        ``branch_from``: a checkpoint folder of another run (``RUN/checkpoint-step1000``, kept by
        ``train.keep_checkpoints``) that a run which starts (rather than resumes) starts from instead of step 0:
        a cooldown branch (:func:`aot.train.resume.plan_branch` says what it must share with its parent). The
        parent's ``metrics.jsonl`` rows up to that step are copied, so the branch's folder reads as a whole run.

        What the run measures about the machine (the precision ``auto`` picks, the CPU's matmul peak) is measured
        once the folder, the fingerprint and the checkpoint are checked, and enters the machine's cache
        (:mod:`aot.bench.machine_cache`) only when the run has trained to its end: a refused or failed run
        leaves the cache as it was."""
        with deferred_writes(), deterministic_kernels(self.cfg.deterministic):
            return self._fit(resume, stop_at, force, branch_from)

    def _fit(self, resume: bool | str, stop_at: int | None, force: bool, branch_from: str | Path | None) -> TrainResult:
        cfg, main = self.cfg, self.env.is_main
        branch = None
        if branch_from is not None:  # checked before --force moves anything aside
            branch = plan_branch(Path(branch_from), self.out_dir, self.fingerprint, cfg.to_dict(), self.env)
        plan = plan_run(self.out_dir, resume, force, self.env)
        on_main(lambda: follow_lock(self.out_dir))  # --force made the folder anew: its lock follows
        if plan.checkpoint is not None:
            assert plan.state is not None
            check_fingerprint(plan.state.get("fingerprint", {}), self.fingerprint, plan.checkpoint)
            self.branched_from = plan.state.get("branched_from")
        elif branch is not None:
            assert branch.checkpoint is not None and branch.state is not None
            plan = branch
            self.branched_from = {"checkpoint": str(branch.checkpoint.resolve()), "step": int(branch.state["step"])}
            if main:
                copy_metrics(branch.checkpoint.parent, self.out_dir, int(branch.state["step"]))
        if main:  # what the resume plan and the run's config decided, once the run is sure to start
            for note in [*plan.notes, *self.notices]:
                print(f"aot: {note}", file=sys.stderr, flush=True)
        torch.manual_seed(cfg.seed + self.env.rank)  # dropout streams differ per process
        loss_sum, loss_count = torch.zeros((), device=self.device), 0
        if plan.checkpoint is not None:
            state = load_checkpoint(plan.checkpoint, self.model, self.optimizer, verified=plan.state)
            self.step, self.tokens_seen = int(state["step"]), int(state["tokens"])
            self.train_seconds = float(state["train_seconds"])
            self.skipped_steps = int(state.get("skipped_steps", 0))
            pending = state.get("pending_loss", [0.0, 0])  # the log interval the checkpoint fell into
            loss_sum = torch.tensor(float(pending[0]), dtype=torch.float32, device=self.device)
            loss_count = int(pending[1])
        # the precision (measured for "auto"), then the data-sheet peak on a known GPU or this machine's quiet
        # matmul peak: once everything above is checked, and with the generators forked, so they never shift
        # the dropout streams
        cuda = [torch.cuda.current_device()] if self.device.type == "cuda" else []
        with torch.random.fork_rng(devices=cuda):
            self._resolve_precision(plan.state)
            tf32 = self.device.type == "cuda" and self.dtype == torch.float32  # TF32 is on for fp32 on CUDA
            self.peak = peak_flops(self.device, self.dtype, tf32) if main and self.flops_per_sample else 0.0
        if main:
            print(f"aot: precision {self.precision_choice['reason']}", file=sys.stderr, flush=True)
        metrics = MetricsLog(self.out_dir, main, truncate_after=self.step)
        result = TrainResult(step=self.step, seen=self.tokens_seen, train_seconds=0, seen_per_second=0, last_loss=0)
        result.precision = self.precision_choice
        result.branched_from = self.branched_from
        bar = _progress(cfg.steps, self.step, enabled=cfg.progress and main)
        interval_start, interval_tokens, interval_seconds = time.perf_counter(), 0, 0.0
        interval_wait = self.prefetcher.wait_seconds
        end = cfg.steps if stop_at is None else min(stop_at, cfg.steps)
        warm_until = self.step + WARMUP_STEPS  # compilation and the first steps' allocations: not in the rate
        clock = StepClock()
        self._last_save = time.monotonic()
        self._first_bad = torch.zeros((), dtype=torch.long, device=self.device)
        while self.step < end:
            loss, finite = self.train_step()
            step_tokens = cfg.batch_size * self.tokens_per_sample
            self.tokens_seen += step_tokens
            interval_tokens += step_tokens
            if finite:
                loss_sum, loss_count = loss_sum + loss, loss_count + 1
            self.step += 1
            due = self._due_now(end)
            # the host reads the device only here: on logging, evaluation and checkpoint steps (and the last)
            save_due = self._sync_health() if any(due.values()) else False
            if any(due.values()) or self.step == warm_until:
                synchronize(self.device)  # the queued work is done: the lap counts it
                stretch = clock.lap()
                self.train_seconds += stretch
                interval_seconds += stretch
                if self.step == warm_until and not due["log"] and self.step < end:
                    # the log row after this measures steady steps only: rate, MFU and the data wait alike
                    interval_tokens, interval_seconds = 0, 0.0
                    interval_wait = self.prefetcher.wait_seconds
            if due["log"]:
                summed = all_reduce_mean(loss_sum / max(loss_count, 1))
                mean_loss = float(summed) if loss_count else float("nan")
                rate = interval_tokens / max(interval_seconds, 1e-9)
                utilisation = self._mfu(interval_tokens / self.tokens_per_sample / max(interval_seconds, 1e-9))
                row = dict(
                    step=self.step,
                    tokens=self.tokens_seen,
                    loss=mean_loss,
                    lr=self.optimizer.param_groups[0]["lr"],
                    tokens_per_s=rate,
                    mfu=utilisation,
                    train_seconds=self.train_seconds,
                    wall=time.perf_counter() - interval_start,
                    data_wait_s=self.prefetcher.wait_seconds - interval_wait,  # waiting for batches this interval
                )
                interval_wait = self.prefetcher.wait_seconds
                if self.unit != "tokens":  # what a row holds, when not tokens: e.g. images_per_s for a classifier
                    row[f"{self.unit}_per_s"] = rate
                if self.skipped_steps:
                    row["skipped_steps"] = self.skipped_steps
                if self.step <= warm_until:  # this interval held the first steps (compilation): a slow rate
                    row["warmup"] = True
                metrics.write(row)
                result.mfu = utilisation
                waited = row["data_wait_s"] / max(interval_seconds, 1e-9)  # of this interval's training time
                rate_name = f"{UNIT_ABBREVIATIONS.get(self.unit, self.unit)}_s"
                postfix = {"loss": f"{mean_loss:.4f}", rate_name: f"{rate:,.0f}", "mfu": f"{100 * utilisation:.1f}%"}
                if waited >= 0.01:  # the loop waited for data: say how much of the interval
                    postfix["data_wait"] = f"{100 * waited:.0f}%"
                bar.set_postfix(postfix)
                loss_sum, loss_count = torch.zeros((), device=self.device), 0
                interval_tokens, interval_seconds = 0, 0.0
            bar.update(1)
            if due["eval"]:
                scores = {"step": self.step, "tokens": self.tokens_seen, **self.run_eval()}
                metrics.write({"eval": True, **scores})
                if main:
                    bar.write(
                        " ".join(f"{k}={v:.4g}" if isinstance(v, float) else f"{k}={v}" for k, v in scores.items())
                    )
            kept = due["keep"]
            if due["checkpoint"] or save_due or kept:
                self.save(pending_loss=(float(loss_sum), loss_count))
            if kept:
                on_main(functools.partial(keep_checkpoint, self.out_dir, self.step))
            if any(due.values()):
                clock.lap()  # logging, evaluation and checkpoints are not training time
        bar.close()
        metrics.close()
        self.prefetcher.close()
        # the whole run, also when it was resumed: the curve and the evaluations come from metrics.jsonl
        rows = read_metrics(self.out_dir) if main else []
        result.losses = [(int(r["step"]), float(r["loss"])) for r in rows if not r.get("eval")]
        result.evals = [{k: v for k, v in r.items() if k != "eval"} for r in rows if r.get("eval")]
        result.step, result.seen, result.train_seconds = self.step, self.tokens_seen, self.train_seconds
        result.peak_flops, result.peak_raised = self.peak, self.peak_raised
        result.seen_per_second = self.tokens_seen / max(self.train_seconds, 1e-9)
        result.last_loss = result.losses[-1][1] if result.losses else float("nan")
        result.skipped_steps = self.skipped_steps
        return result

    def train_step(self) -> tuple[torch.Tensor, bool]:
        """One optimizer step over the global batch of ``self.step``. Returns this process's mean loss and whether
        the step was taken.

        The host does not wait for the device here (a GPU step is not serialised): whether the loss and gradients
        were finite is kept on the device (the first bad step's number) and read on the next logging, evaluation or
        checkpoint step (:meth:`_sync_health`), before anything is logged or saved, so a run with a non-finite
        step still stops with its step number and its last good checkpoint. With ``skip_nonfinite`` the step must
        know before it updates the weights, so every step waits for one all-reduce of the flag (if it is set, the
        step is skipped and counted)."""
        cfg = self.cfg
        lr = lr_at(
            self.step, cfg.lr, cfg.warmup_steps, cfg.steps, cfg.lr * cfg.min_lr_ratio, cfg.schedule, cfg.decay_fraction
        )
        for group in self.optimizer.param_groups:
            group["lr"] = lr
        self.model.train()
        total = torch.zeros((), device=self.device)
        for micro_step, batch in enumerate(self.prefetcher.get(self.step)):
            set_gradient_sync(self.model, micro_step == self.n_micro - 1)
            with self.autocast():
                loss = self.loss_fn(self.forward_model, batch) / self.n_micro
            loss.backward()
            total += loss.detach()
        params = [p for p in self.model.parameters() if p.grad is not None]
        if cfg.grad_clip > 0:
            norm = torch.nn.utils.clip_grad_norm_(params, cfg.grad_clip)
        else:
            norm = torch.nn.utils.get_total_norm([p.grad for p in params])  # type: ignore[misc]
        norm = norm.full_tensor() if hasattr(norm, "full_tensor") else norm  # FSDP: a DTensor
        finite = torch.isfinite(total) & torch.isfinite(norm.to(total.device))
        if cfg.skip_nonfinite:
            if bool(all_reduce_max((~finite).float().reshape(1)).item()):
                self.optimizer.zero_grad(set_to_none=True)
                self.skipped_steps += 1
                if self.env.is_main:
                    print(
                        f"aot: skipped step {self.step + 1}: non-finite loss or gradients", file=sys.stderr, flush=True
                    )
                return total, False
        else:
            unseen = (self._first_bad == 0) & ~finite
            self._first_bad = torch.where(unseen, self.step + 1, self._first_bad)
        self.optimizer.step()
        self.optimizer.zero_grad(set_to_none=True)
        return total, True

    def _due_now(self, end: int) -> dict[str, bool]:
        """What the step just taken does besides training: log a row, evaluate, checkpoint (by steps or as the
        last), keep its checkpoint. A time-based checkpoint is decided by :meth:`_sync_health`."""
        cfg, step = self.cfg, self.step
        last = step == end
        return {
            "log": step % cfg.log_every == 0 or last,
            "eval": self.evaluate is not None and (bool(cfg.eval_every and step % cfg.eval_every == 0) or last),
            "checkpoint": bool(cfg.checkpoint_every and step % cfg.checkpoint_every == 0) or last,
            "keep": step in cfg.keep_checkpoints,
        }

    def _sync_health(self) -> bool:
        """Read, in one all-reduce, whether any process saw a non-finite loss or gradient since the last read (then
        stop with the first such step and the last good checkpoint kept) and whether a checkpoint is due by time
        (``checkpoint_minutes``: due on any process is due on all, so that they save together)."""
        cfg = self.cfg
        due = bool(cfg.checkpoint_minutes) and time.monotonic() - self._last_save >= 60 * cfg.checkpoint_minutes
        first = self._first_bad.float()
        flags = torch.stack(
            [
                (first > 0).float(),
                torch.tensor(float(due), device=first.device),
                torch.where(first > 0, -first, torch.full_like(first, -float("inf"))),
            ]
        )
        bad, save_due, negative_step = all_reduce_max(flags).tolist()
        if bad:
            self.optimizer.zero_grad(set_to_none=True)
            kept = [p.name for p in checkpoint_candidates(self.out_dir)]
            where = f"the last good checkpoint ({', '.join(kept)}) is kept" if kept else "no checkpoint was written"
            raise AotError(
                f"non-finite loss or gradients (NaN/Inf) at step {int(-negative_step)}; the run stopped and {where}; "
                "lower the learning rate, or set train.skip_nonfinite=true to skip such batches"
            )
        return bool(save_due)

    def _step_batches(self, step: int) -> list[tuple[torch.Tensor, ...]]:
        """This process's micro-batches of ``step`` on the host (a pure function of the step)."""
        return [tuple(self.batches.get(step, start, start + self.micro)) for start in self._micro_starts()]

    def _micro_starts(self) -> list[int]:
        """The first row of each of this process's micro-batches in a step's global batch."""
        first_row = self.env.rank * self.per_process
        return [first_row + m * self.micro for m in range(self.n_micro)]

    @torch.no_grad()
    def run_eval(self) -> dict[str, float]:
        assert self.evaluate is not None
        self.model.eval()
        with self.autocast():
            scores = self.evaluate(self.forward_model)
        self.model.train()
        return scores

    def _mfu(self, samples_per_second: float) -> float:
        """MFU against ``self.peak`` (per process) — never above 1: a rate above the peak raises the peak to it,
        once said in one line (:func:`aot.bench.mfu.bounded_mfu`)."""
        if not self.flops_per_sample or not self.peak:
            return 0.0
        world = self.env.world_size
        utilisation, used = bounded_mfu(self.flops_per_sample, samples_per_second, self.peak * world)
        if used > self.peak * world:
            if not self.peak_raised and self.env.is_main:
                print(
                    f"aot: note: this run trains at {used / 1e9:.3g} GFLOP/s, above the peak it divides by "
                    f"({self.peak * world / 1e9:.3g} GFLOP/s, measured under load?); the peak is raised to the "
                    f"achieved rate, so MFU reads 1; refresh it on a quiet machine: `{REFRESH_COMMAND}`",
                    file=sys.stderr,
                    flush=True,
                )
            self.peak, self.peak_raised = used / world, True
        return utilisation

    def save(self, pending_loss: tuple[float, int] = (0.0, 0)) -> None:
        """A checkpoint of this step; ``pending_loss`` is the (sum, count) of the log interval in progress, so
        a resumed run writes the same metrics rows as an uninterrupted one."""
        state = dict(
            step=self.step,
            tokens=self.tokens_seen,
            train_seconds=self.train_seconds,
            data_position={"step": self.step},
            fingerprint=self.fingerprint,
            train_config=self.cfg.to_dict(),
            skipped_steps=self.skipped_steps,
            pending_loss=list(pending_loss),
            precision=self.precision_choice,
        )
        if self.run_config is not None:
            state["run_config"] = self.run_config
        if self.branched_from is not None:
            state["branched_from"] = self.branched_from
        sharded = is_sharded(self.model)  # FSDP saves through torch.distributed.checkpoint, also in a group of one
        save_checkpoint(self.out_dir, self.model, self.optimizer, state, self.model_config, sharded=sharded)
        self._last_save = time.monotonic()


class MetricsLog:
    """``metrics.jsonl`` (one JSON object per line, appended, never truncated) and, when ``tensorboard`` is
    installed, TensorBoard events. On resume, rows after the checkpoint's step are dropped (the file is rewritten
    atomically) so the file matches an uninterrupted run; a partial last row (a kill mid-write) is dropped too."""

    def __init__(self, out_dir: Path, enabled: bool, truncate_after: int) -> None:
        self.enabled = enabled
        self.path = out_dir / METRICS_FILE
        self.writer = None
        if not enabled:
            return
        if self.path.is_file():
            lines = self.path.read_bytes().decode("utf-8", errors="replace").splitlines()
            kept = [line for line in lines if (row := _parse_row(line)) is not None and row["step"] <= truncate_after]
            if kept != lines:
                write_text_atomic(self.path, "".join(line + "\n" for line in kept))
        try:
            from torch.utils.tensorboard import SummaryWriter

            self.writer = SummaryWriter(str(out_dir / "tensorboard"))
        except Exception:  # tensorboard not installed
            self.writer = None

    def write(self, row: dict[str, Any]) -> None:
        if not self.enabled:
            return
        with open(self.path, "a") as handle:
            handle.write(json.dumps(row) + "\n")
        if self.writer is not None:
            prefix = "eval" if row.get("eval") else "train"
            for key, value in row.items():
                if isinstance(value, float):
                    self.writer.add_scalar(f"{prefix}/{key}", value, row["step"])

    def close(self) -> None:
        if self.writer is not None:
            self.writer.close()


def _progress(total: int, initial: int, enabled: bool):  # type: ignore[no-untyped-def]
    from tqdm.auto import tqdm

    return tqdm(total=total, initial=initial, disable=not enabled, dynamic_ncols=True, unit="step", leave=False)


def _parse_row(line: str) -> dict[str, Any] | None:
    """One metrics row, or None for a partial or damaged line."""
    try:
        row = json.loads(line)
    except ValueError:
        return None
    return row if isinstance(row, dict) and isinstance(row.get("step"), int) else None


def copy_metrics(parent: Path, out_dir: Path, step: int) -> None:
    """A branch's ``metrics.jsonl`` starts as its parent run's rows up to ``step`` (none when the parent has none)."""
    rows = [json.dumps(row) + "\n" for row in read_metrics(parent) if row["step"] <= step]
    if rows:
        write_text_atomic(out_dir / METRICS_FILE, "".join(rows))


def read_metrics(out_dir: str | Path) -> list[dict[str, Any]]:
    """The rows of ``metrics.jsonl`` (a partial or damaged line is skipped)."""
    path = Path(out_dir) / METRICS_FILE
    if not path.is_file():
        return []
    rows = (_parse_row(line) for line in path.read_bytes().decode("utf-8", errors="replace").splitlines())
    return [row for row in rows if row is not None]


def on_main(action: Callable[[], Any]) -> Any:
    """Run ``action`` on the main process only (e.g. taking a folder's lock); its one-line :class:`AotError` stops
    every process with the same line instead of leaving the others waiting. Returns what it returned (None on the
    other processes)."""
    result, error = None, ""
    if current_env().is_main:
        try:
            result = action()
        except AotError as exc:
            error = str(exc)
    error = first_error(error)
    if error:
        raise AotError(error)
    return result
