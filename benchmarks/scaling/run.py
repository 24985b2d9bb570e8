"""The scaling study: GPT-2, AoT-MHSA, AoT-MSSA (learned W_O) and tied AoT-MSSA at several sizes and
token budgets, on Shakespeare bytes, each run recorded in benchmarks/scaling/results.json as it lands.

Method (see benchmarks/scaling/README.md for the reasons and the CPU plan):

- each family keeps its best shape from benchmarks/lm (depth fixed: GPT-2 6, AoT-MHSA 8, AoT-MSSA 16, tied
  AoT-MSSA 18 layers; rotary positions; init std 0.05) and grows in width; head_dim 32 (n_head = width / 32);
- the recipe of benchmarks/lm (context 256, batch 16 = 4,096 tokens a step, AdamW (0.9, 0.95), weight decay 0.1,
  40 warm-up steps, clip 1.0) with the WSD schedule (``train.schedule=wsd``, cooldown over the last 20 %, to 0.1 lr);
  fp32 on every machine (so that a rerun elsewhere computes the same thing);
- the lr: a sweep over 1e-3 / 3e-3 / 1e-2 at 1 M tokens at two sizes per family (the smallest and the third),
  extended by factors of 3 while the best is at an edge; the best lr of a swept size is the vertex of the parabola
  through (log lr, val loss) at the best tried lr and its neighbours (clipped to them),
  and every size takes the log-linear interpolation in log N between the two (extrapolated beyond) — a measured
  rule, not μP;
- one WSD run per (family, size) to its largest budget, keeping the stable-phase checkpoints where each smaller
  budget's cooldown starts, and one cooldown branch per smaller budget (``--branch-from``): a branch is exactly
  the run of that budget (tests/train/test_wsd_branch.py), at 20 % of its cost;
- the final val / test loss over the whole split (every window) with its standard error.

    OMP_NUM_THREADS=1 PYTHONPATH=src python benchmarks/scaling/run.py --plan      # the jobs and their cost
    OMP_NUM_THREADS=1 PYTHONPATH=src python benchmarks/scaling/run.py             # run what is not finished
    OMP_NUM_THREADS=1 PYTHONPATH=src python benchmarks/scaling/run.py --only sweep --max-minutes 60
    ... run.py --shard 0/2 & ... run.py --shard 1/2 &                             # two drivers, two cores
    ... run.py & ... run.py &                                   # or two unsharded: each skips the other's job
    OMP_NUM_THREADS=1 PYTHONPATH=src python benchmarks/scaling/run.py --render    # schedule.md and fit/ (the laws)
    bash benchmarks/scaling/gpu.sh                      # on a GPU: the ≈ 8 and 24 M sizes (--large --only large)
    python benchmarks/scaling/run.py --merge GPU/results.json                      # then add those rows here

Every job is a run folder under runs/scaling/ (resumable: a killed job continues from its checkpoint), skipped when
its results.json is finished; the results file is rewritten after each job.
"""

from __future__ import annotations

import argparse
import functools
import json
import math
import os
import subprocess
import sys
import time
import zlib
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from aot.bench.flops import training_flops_per_sample
from aot.config import ModelConfig
from aot.run_folder import folder_busy, read_results, write_text_atomic
from aot.runinfo import machine_info, replace_marked_block
from aot.sweep.render import table
from aot.sweep.scaling.holdout import hold_out_largest, hold_out_markdown
from aot.sweep.scaling.matched import matched_gaps, matched_markdown
from aot.sweep.scaling.render import with_interval
from aot.sweep.scaling.runs import ScalingRun
from aot.sweep.scaling.schedule_check import schedule_markdown, schedule_pairs, schedule_summary, verdict

HERE = Path(__file__).resolve().parent
GUIDE = HERE.parents[1] / "docs" / "guide" / "language.md"  # its "Does the gap close with scale?"
RESULTS = HERE / "results.json"
RUNS = Path("runs/scaling")
TOKENS_PER_STEP = 16 * 256
DECAY_FRACTION = 0.2
HEAD_DIM = 32
SWEEP_LRS = (1e-3, 3e-3, 1e-2)  # the first three; the sweep goes on along LR_LADDER while the best is at an edge
LR_LADDER = (3e-4, 1e-3, 3e-3, 1e-2, 3e-2, 1e-1)
SWEEP_STEPS = 250  # 1.02 M tokens
TRAIN_BYTES = 4_554_000  # Shakespeare's train split (90 % of 5.06 M bytes): epochs = tokens / this


@dataclass(frozen=True)
class Family:
    name: str
    label: str
    preset: str
    n_layer: int
    widths: tuple[int, ...]  # the CPU grid
    large: tuple[int, ...] = ()  # the GPU sizes (`--large`): size indices len(widths), len(widths) + 1, ...

    def width(self, size: int) -> int:
        """The width of size index ``size``: the CPU grid's, then the large sizes'."""
        return (self.widths + self.large)[size]

    def sizes(self, large: bool) -> range:
        """The size indices of the CPU grid, and with ``large`` of the GPU sizes after it."""
        return range(len(self.widths) + (len(self.large) if large else 0))

    def is_large(self, size: int) -> bool:
        return size >= len(self.widths)

    @property
    def largest_gpu_size(self) -> int:
        """The size index of the largest GPU size (where its lr is swept)."""
        return len(self.widths) + len(self.large) - 1


DEFAULT_BUDGETS = (250, 500, 1000)  # 1, 2, 4 M tokens
SMALL_BUDGETS = (250, 500, 1000, 2000)  # + 8 M tokens for the two smallest sizes (>= 13 tokens per parameter)

FAMILIES = {
    f.name: f
    for f in (
        # large: ≈ 8 M and ≈ 24 M non-embedding parameters (GPT-2 8.9 / 23.9 M, AoT-MHSA and AoT-MSSA 8.4 / 25.7 M,
        # tied AoT-MSSA 7.4 / 23.9 M), a GPU job (benchmarks/scaling/gpu.sh)
        Family("gpt2", "GPT-2", "gpt2-cpu", 6, (64, 96, 128, 192), (352, 576)),
        Family("aot-mhsa", "AoT-MHSA", "aot-mhsa-l-cpu", 8, (96, 128, 192, 256), (512, 896)),
        Family("aot-mssa", "AoT-MSSA, learned W_O", "aot-mssa-l-cpu", 16, (96, 128, 192, 256), (512, 896)),
        Family("aot-mssa-tied", "AoT-MSSA, tied", "aot-mssa-tied-l-cpu", 18, (128, 192, 256, 384), (640, 1152)),
    )
}
SWEPT_SIZES = (0, 2)  # indices into a family's widths: the CPU grid's lr rule runs through these two


def swept_sizes(family: Family, large: bool) -> tuple[int, ...]:
    """The sizes whose lr is swept: SWEPT_SIZES, and with ``large`` the largest GPU size too."""
    return SWEPT_SIZES + ((family.largest_gpu_size,) if large and family.large else ())


def lr_anchors(family: Family, size: int) -> tuple[int, int]:
    """The two swept sizes whose lrs the rule joins for ``size``: SWEPT_SIZES on the CPU grid (so that a recorded
    run keeps the lr it was trained at when the GPU sizes are swept); for a GPU size, the CPU grid's larger swept
    size and the largest GPU size (a 10× step in N, not an extrapolation from 1 M parameters)."""
    if family.is_large(size):
        return SWEPT_SIZES[-1], family.largest_gpu_size
    return SWEPT_SIZES[0], SWEPT_SIZES[-1]


def budgets(family: Family, size: int) -> tuple[int, ...]:
    return SMALL_BUDGETS if size < 2 else DEFAULT_BUDGETS


def model_sets(family: Family, width: int) -> list[str]:
    return [
        f"model.n_layer={family.n_layer}",
        f"model.n_embd={width}",
        f"model.n_head={width // HEAD_DIM}",
        "model.position=rope",
        "model.init_std=0.05",
    ]


def common_sets(steps: int, lr: float, seed: int, schedule: str = "wsd") -> list[str]:
    shape = [f"train.decay_fraction={DECAY_FRACTION}"] if schedule == "wsd" else []
    return [
        f"train.steps={steps}",
        f"train.lr={lr:g}",
        f"train.seed={seed}",
        f"train.schedule={schedule}",
        *shape,
        "train.precision=fp32",
        "train.eval_every=0",
        "train.checkpoint_minutes=5",
        "train.progress=false",
    ]


@dataclass
class Job:
    kind: str  # sweep | main | branch | cosine | remedy
    family: str
    size: int
    width: int
    steps: int
    lr: float
    seed: int
    folder: Path
    argv: list[str]
    parent: Path | None = None
    token_shift: str = "none"

    @property
    def tokens(self) -> int:
        return self.steps * TOKENS_PER_STEP


def stable_checkpoint(steps: int) -> int:
    """Where a ``steps``-step WSD run's cooldown starts: a longer run's checkpoint there is that run's state."""
    return round(steps * (1 - DECAY_FRACTION))


def sweep_lrs(rows: list[dict[str, Any]], family: str, size: int) -> list[float]:
    """The lrs a swept size needs: SWEEP_LRS, then one more step along LR_LADDER on the side of the best while the
    best finished lr is the highest (or lowest) tried, so that the best has a tried neighbour on each side."""
    lrs = list(SWEEP_LRS)
    got = sweep_losses(rows, family, size)
    while all(lr in got for lr in lrs):
        best = min(lrs, key=lambda lr: got[lr])
        i = LR_LADDER.index(best)
        if best == max(lrs) and i + 1 < len(LR_LADDER):
            lrs.append(LR_LADDER[i + 1])
        elif best == min(lrs) and i > 0:
            lrs.insert(0, LR_LADDER[i - 1])
        else:
            break
    return lrs


def sweep_losses(rows: list[dict[str, Any]], family: str, size: int) -> dict[float, float]:
    return {
        r["lr"]: r["val_loss"] for r in rows if r["kind"] == "sweep" and r["family"] == family and r["size"] == size
    }


def sweep_jobs(rows: list[dict[str, Any]], large: bool = False) -> list[Job]:
    jobs = []
    for family in FAMILIES.values():
        for size in swept_sizes(family, large):
            width = family.width(size)
            for lr in sweep_lrs(rows, family.name, size):
                folder = RUNS / "sweep" / f"{family.name}-d{width}-lr{lr:g}"
                argv = scratch_argv(family, width, SWEEP_STEPS, lr, 0, folder) + device_argv(family, size)
                jobs.append(Job("sweep", family.name, size, width, SWEEP_STEPS, lr, 0, folder, argv))
    return sorted(jobs, key=lambda j: j.size)  # the cheap smallest size of every family first


#: where the GPU sizes train (benchmarks/scaling/gpu.sh); the CPU grid's runs take `aot train`'s default (auto)
LARGE_DEVICE = "cuda"


def device_argv(family: Family, size: int) -> list[str]:
    return ["--device", LARGE_DEVICE] if family.is_large(size) else []


def base_argv(family: Family) -> list[str]:
    return ["train", "lm", "--preset", "cpu-bench", "--model", family.preset, "--corpus", "shakespeare",
            "--tokenizer", "bytes", "--resume", "auto"]  # fmt: skip


def sets(items: list[str]) -> list[str]:
    return [a for item in items for a in ("--set", item)]


def scratch_argv(
    family: Family, width: int, steps: int, lr: float, seed: int, folder: Path, schedule: str = "wsd",
    model: Sequence[str] = (), train: Sequence[str] = (),
) -> list[str]:  # fmt: skip
    """`aot train lm` of ``family`` at ``width`` from scratch: its shape (and ``model`` overrides), the study's
    recipe for ``steps`` at ``lr`` and ``seed`` (and ``train`` overrides), into ``folder``."""
    items = [*model_sets(family, width), *model, *common_sets(steps, lr, seed, schedule), *train]
    return [*base_argv(family), *sets(items), "--out", str(folder)]


def swept_lr(rows: list[dict[str, Any]], family: str, size: int) -> float | None:
    """The best lr at a swept size: the vertex of the parabola through (log lr, val loss) of the best tried lr and
    its two neighbours (or the two beside it, at the end of LR_LADDER), clipped to them; None until the sweep
    (:func:`sweep_lrs`) has finished."""
    got = sweep_losses(rows, family, size)
    lrs = sweep_lrs(rows, family, size)
    if not all(lr in got for lr in lrs):
        return None
    i = lrs.index(min(lrs, key=lambda lr: got[lr]))
    i = min(max(i, 1), len(lrs) - 2)
    xs = [math.log(lr) for lr in lrs[i - 1 : i + 2]]
    ys = [got[lr] for lr in lrs[i - 1 : i + 2]]
    (x0, x1, x2), (y0, y1, y2) = xs, ys
    denom = (x0 - x1) * (x0 - x2) * (x1 - x2)
    a = (x2 * (y1 - y0) + x1 * (y0 - y2) + x0 * (y2 - y1)) / denom
    b = (x2 * x2 * (y0 - y1) + x1 * x1 * (y2 - y0) + x0 * x0 * (y1 - y2)) / denom
    best = xs[ys.index(min(ys))] if a <= 0 else -b / (2 * a)
    return math.exp(min(max(best, xs[0]), xs[-1]))


def lr_rule(rows: list[dict[str, Any]], family: Family, size: int) -> float | None:
    """log lr linear in log N through the two swept sizes of :func:`lr_anchors` (N: non-embedding parameters)."""
    points = []
    for s in lr_anchors(family, size):
        lr = swept_lr(rows, family.name, s)
        if lr is None:
            return None
        points.append((math.log(non_embedding(family, family.width(s))), math.log(lr)))
    (n0, l0), (n1, l1) = points
    n = math.log(non_embedding(family, family.width(size)))
    return math.exp(l0 + (l1 - l0) * (n - n0) / (n1 - n0))


def model_config(family: Family, width: int) -> ModelConfig:
    from aot.models import preset_config

    return preset_config(family.preset, n_layer=family.n_layer, n_embd=width, n_head=width // HEAD_DIM,
                         position="rope", init_std=0.05, block_size=256, vocab_size=256)  # fmt: skip


@functools.cache  # the lr rule asks for it on every pass of the driver's loop: build each size once
def non_embedding(family: Family, width: int) -> int:
    from aot.models import build_model

    return int(build_model(model_config(family, width)).num_params(non_embedding=True))


def seed_budgets(family: Family, size: int) -> list[tuple[int, tuple[int, ...]]]:
    """Seed 0 at every size and budget; a second seed at three corners of the grid: the smallest size up to 4 M
    tokens and the largest at 1 M (the fourth corner, the largest size at 4 M, is the costliest run of all); the GPU
    sizes one seed."""
    plan = [(0, budgets(family, size))]
    if family.is_large(size):
        return plan
    if size == 0:
        plan.append((1, DEFAULT_BUDGETS))
    if size == len(family.widths) - 1:
        plan.append((1, (SWEEP_STEPS,)))
    return plan


COSINE_CHECK = (("gpt2", 0), ("aot-mssa", 0))  # (family, size) where WSD branches meet cosine runs


def cosine_jobs(rows: list[dict[str, Any]]) -> list[Job]:
    """The check that a cooldown branch is as good as a from-scratch cosine run of its budget (Hägele et al. 2024
    find WSD with a 20 % 1-sqrt cooldown matches cosine): cosine runs at 2 and 4 M tokens, seeds 0 and 1, at the
    smallest size of two families, beside the WSD rows of the same size, budgets and seeds."""
    jobs = []
    for name, size in COSINE_CHECK:
        family = FAMILIES[name]
        lr = lr_rule(rows, family, size)
        if lr is None:
            continue
        width = family.widths[size]
        for seed in (0, 1):
            for steps in (500, 1000):
                folder = RUNS / "cosine" / f"{family.name}-d{width}-s{seed}-{steps}"
                argv = scratch_argv(family, width, steps, lr, seed, folder, "cosine")
                jobs.append(Job("cosine", family.name, size, width, steps, lr, seed, folder, argv))
    return jobs


#: issue 29's remedy in language modelling: AoT-MSSA (W_O) with a token shift (``model.token_shift``), (shift, size,
#: seed), each a from-scratch WSD run of SWEEP_STEPS (1 M tokens) at the family's lr rule: the same run as the
#: family's 1 M-token cooldown branch at that size and seed (tests/train/test_wsd_branch.py), the shift aside
SHIFTS = ("scalar", "channel")
REMEDY = (("scalar", 0, 0), ("channel", 0, 0), ("channel", 0, 1), ("channel", 2, 0))


def remedy_jobs(rows: list[dict[str, Any]]) -> list[Job]:
    family = FAMILIES["aot-mssa"]
    jobs = []
    for shift, size, seed in REMEDY:
        lr = lr_rule(rows, family, size)
        if lr is None:
            continue
        width = family.widths[size]
        folder = RUNS / "remedy" / f"{family.name}-shift-{shift}-d{width}-s{seed}-{SWEEP_STEPS}"
        argv = scratch_argv(family, width, SWEEP_STEPS, lr, seed, folder, model=[f"model.token_shift={shift}"])
        jobs.append(Job("remedy", family.name, size, width, SWEEP_STEPS, lr, seed, folder, argv, token_shift=shift))
    return jobs


def main_jobs(rows: list[dict[str, Any]], large: bool = False) -> tuple[list[Job], list[str]]:
    """The WSD runs and their branches for every size whose lr the rule gives (with ``large``, the GPU sizes too);
    the reasons the rest wait."""
    jobs: list[Job] = []
    waiting = []
    recorded = {r.get("run_dir") for r in rows}
    for family in FAMILIES.values():
        for size in family.sizes(large):
            width, device = family.width(size), device_argv(family, size)
            lr = lr_rule(rows, family, size)
            if lr is None:
                waiting.append(f"{family.name} d{width}: waits for its lr sweep")
                continue
            for seed, steps in seed_budgets(family, size):
                name = f"{family.name}-d{width}-s{seed}"
                parent = RUNS / "main" / f"{name}-{steps[-1]}"
                keep = ",".join(str(stable_checkpoint(s)) for s in steps[:-1])
                kept_sets = [f"train.keep_checkpoints=[{keep}]"]
                argv = scratch_argv(family, width, steps[-1], lr, seed, parent, train=kept_sets) + device
                jobs.append(Job("main", family.name, size, width, steps[-1], lr, seed, parent, argv))
                for short in steps[:-1]:
                    folder = RUNS / "main" / f"{name}-{short}"
                    kept = parent / f"checkpoint-step{stable_checkpoint(short)}"
                    if str(parent) in recorded and not kept.is_dir():
                        # the parent landed but its folder is gone (a fresh machine: runs/ is not in git): the
                        # from-scratch run of this budget is the same run (tests/train/test_wsd_branch.py), at 5x a
                        # branch's cost, not the parent's full retraining
                        argv = scratch_argv(family, width, short, lr, seed, folder) + device
                        jobs.append(Job("branch", family.name, size, width, short, lr, seed, folder, argv))
                        continue
                    argv = ["train", "lm", "--branch-from", str(kept), "--set", f"train.steps={short}",
                            "--resume", "auto", "--out", str(folder), *device]  # fmt: skip
                    jobs.append(Job("branch", family.name, size, width, short, lr, seed, folder, argv, parent=kept))
    return jobs, waiting


FAMILY_ORDER = tuple(FAMILIES)


def priority(job: Job) -> tuple[float, int, int]:
    """The order the drivers take jobs in, so that wherever a sitting stops the grid done is the most useful one:
    the sweeps, then seed 0 of GPT-2, AoT-MHSA and AoT-MSSA size by size (all families at a size before the next
    size; the WSD-vs-cosine check at seed 0 and issue 29's token-shift runs after the two smallest sizes), then the
    second seeds, then the largest
    size of those three, then the tied family (the costliest and the furthest behind); the GPU sizes (`--large`)
    after the CPU grid: their sweeps, then the three families' runs, then the tied family's. A branch follows its
    parent (it cannot start before the parent's kept checkpoint exists)."""
    tied = job.family == "aot-mssa-tied"
    largest = job.size == len(FAMILIES[job.family].widths) - 1
    if FAMILIES[job.family].is_large(job.size):
        stage = 6.0 if job.kind == "sweep" else 7.0 if tied else 6.5
    elif tied:
        stage = 5.0
    elif job.kind == "sweep":
        stage = 0.0
    elif job.kind == "cosine":
        stage = 1.5 if job.seed == 0 else 3.0
    elif job.kind == "remedy":
        stage = 1.7
    elif largest:
        stage = 4.0
    elif job.seed == 1:
        stage = 3.0
    else:
        stage = 1.0 if job.size < 2 else 2.0
    return stage, job.size, FAMILY_ORDER.index(job.family)


def row_of(job: Job, results: dict[str, Any]) -> dict[str, Any]:
    cfg = model_config(FAMILIES[job.family], job.width)
    flops_per_sample = training_flops_per_sample(cfg, 256)
    samples = job.steps * 16
    return {
        "kind": job.kind,
        "family": job.family,
        "size": job.size,
        "n_layer": FAMILIES[job.family].n_layer,
        "n_embd": job.width,
        "non_embedding_params": results["model"]["non_embedding_params"],
        "params": results["model"]["params"],
        "steps": job.steps,
        "tokens": job.tokens,
        "epochs": job.tokens / TRAIN_BYTES,
        "lr": job.lr,
        "seed": job.seed,
        "training_flops": None if flops_per_sample is None else flops_per_sample * samples,
        "val_loss": results["val"]["loss"],
        "val_loss_se": results["val"].get("loss_se"),
        "val_windows": results["val"].get("windows"),
        "test_loss": results["test"]["loss"],
        "test_loss_se": results["test"].get("loss_se"),
        "precision": results["train"]["precision"]["precision"],
        "train_seconds": results["train"]["train_seconds"],
        "cpu": results["machine"].get("processor") or results["machine"].get("machine"),
        "device": results["machine"].get("gpu", "cuda") if "--device" in job.argv else "cpu",
        "date": results["machine"].get("date"),
        "token_shift": job.token_shift,
        "branched_from": None if job.parent is None else str(job.parent),
        "run_dir": str(job.folder),
        "command": "aot " + " ".join(job.argv),
    }


def read_rows() -> list[dict[str, Any]]:
    if not RESULTS.is_file():
        return []
    return list(json.loads(RESULTS.read_text())["runs"])


def write_rows(rows: list[dict[str, Any]]) -> None:
    doc = {
        "what": "issue 27's scaling study: every finished run (kind sweep | main | branch); val/test losses over the "
        "whole split with their standard error over windows; nats per byte of Shakespeare",
        "machine": machine_info(),
        "runs": sorted(rows, key=lambda r: (r["kind"], r["family"], r["size"], r["seed"], r["steps"], r["lr"])),
    }
    write_text_atomic(RESULTS, json.dumps(doc, indent=1) + "\n")


def collect(jobs: list[Job], rows: list[dict[str, Any]]) -> list[dict[str, Any]]:
    known = {r["run_dir"] for r in rows}
    for job in jobs:
        results = read_results(job.folder)
        if results is not None and str(job.folder) not in known:
            rows.append(row_of(job, results))
            known.add(str(job.folder))
    return rows


def done(job: Job, rows: list[dict[str, Any]]) -> bool:
    """Whether ``job`` has finished: recorded in results.json (even where its folder is gone, as on a fresh machine:
    runs/ is not in git) or a whole results.json in its folder."""
    return any(r.get("run_dir") == str(job.folder) for r in rows) or read_results(job.folder) is not None


def large_jobs(jobs: list[Job]) -> list[Job]:
    """The jobs of the GPU sizes (`--only large`)."""
    return [j for j in jobs if FAMILIES[j.family].is_large(j.size)]


def merged_rows(rows: list[dict[str, Any]], theirs: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """The runs of ``theirs`` (another machine's results.json, e.g. gpu.sh's) whose run folder ``rows`` lacks."""
    known = {r["run_dir"] for r in rows}
    return [r for r in theirs if r["run_dir"] not in known]


def in_shard(job: Job, shard: str | None) -> bool:
    """Whether ``job`` is this driver's (``I/N``: crc32 of its folder name modulo N is I; None: every job). The hash
    is of the name, so a job stays in its shard as the plan grows; a branch waits until its parent's kept
    checkpoint exists, whichever shard trains the parent."""
    if shard is None:
        return True
    index, _, count = shard.partition("/")
    return zlib.crc32(job.folder.name.encode()) % int(count) == int(index)


def run_job(job: Job) -> bool:
    log = RUNS / "logs" / f"{job.folder.name}.log"
    log.parent.mkdir(parents=True, exist_ok=True)
    env = {**os.environ, "OMP_NUM_THREADS": "1"}
    start = time.time()
    with log.open("a") as handle:
        code = subprocess.call(
            [sys.executable, "-m", "aot.cli", *job.argv], stdout=handle, stderr=subprocess.STDOUT, env=env
        )
    print(f"  {job.folder.name}: exit {code} in {time.time() - start:.0f} s (log {log})", flush=True)
    return code == 0


def render() -> int:
    """schedule.md (the WSD-against-cosine check), fit/ (``aot scaling fit`` of the study's main and branch rows,
    the families whose runs determine a law, read at the paper's sizes: the ``scaling`` part of `aot reproduce`) and
    fit-shared-e/ (the same with one E for every family)."""
    from aot.report.part import Context
    from aot.report.parts import scaling

    rows = read_rows()
    check = schedule_summary(schedule_pairs(rows), rows)
    title = "# WSD cooldown branches against cosine runs from scratch (val nats per byte ± SE over the full split)"
    write_text_atomic(HERE / "schedule.md", f"{title}\n\n{schedule_markdown(check)}")
    print(f"Wrote {HERE / 'schedule.md'}: " + schedule_markdown(check).splitlines()[0])
    remedy = HERE.parents[1] / "benchmarks" / "lm" / "token_shift.md"
    write_text_atomic(remedy, remedy_markdown(rows))
    print(f"Wrote {remedy}")
    runs = os.path.relpath(RESULTS)  # recorded in fit/: a path inside the repository, not this machine's
    plan = scaling.plan(Context(preset="full", part_dir=HERE, data={"scaling-runs": runs}))
    if plan.missing:
        print("not fitted: " + "; ".join(plan.missing))
        return 0
    code = run_steps_at_once([step.options(HERE) for step in plan.steps])  # fit/ and fit-shared-e/ (one E)
    if code != 0:
        return code
    fit = json.loads((HERE / "fit" / "results.json").read_text())
    shared = HERE / scaling.SHARED_STEP / "results.json"
    shared_fit = json.loads(shared.read_text()) if shared.is_file() else None
    waiting = plan.settings.get("waiting", [])
    block = readme_summary(fit, check, len(rows), waiting, matched_block(rows), shared_fit, holdout_block(rows))
    for readme in (HERE / "README.md", GUIDE):
        write_text_atomic(readme, replace_marked_block(readme.read_text(), "scaling:summary", block, readme))
        print(f"Wrote the scaling:summary block of {readme}")
    return 0


def run_steps_at_once(commands: list[list[str]]) -> int:
    """Each ``aot`` command in its own process (one thread each), all at once: the two fits are independent and
    single-threaded at heart (200 bootstrap refits of L-BFGS on tiny tensors), so on two cores together they take
    the time of the slower one; the first non-zero exit code, or 0."""
    env = {**os.environ, "OMP_NUM_THREADS": "1"}
    running = []
    for options in commands:
        print("aot " + " ".join(options), flush=True)
        running.append(subprocess.Popen([sys.executable, "-m", "aot.cli", *options], env=env))
    codes = [process.wait() for process in running]
    return next((code for code in codes if code != 0), 0)


def remedy_markdown(rows: list[dict[str, Any]]) -> str:
    """benchmarks/lm/token_shift.md: issue 29's remedy in language modelling. At each (size, seed) of REMEDY, the 1 M
    token WSD runs of GPT-2, AoT-MHSA and AoT-MSSA (the study's cooldown branches, or main runs of that budget)
    beside AoT-MSSA with each token shift: val nats per byte ± SE, the gap to GPT-2 and the parameters the shift
    adds."""

    def find(family: str, size: int, seed: int, kind: tuple[str, ...], shift: str = "none") -> dict | None:
        return next((r for r in rows if r["family"] == family and r["size"] == size and r["seed"] == seed
                     and r["steps"] == SWEEP_STEPS and r["kind"] in kind and r.get("token_shift", "none") == shift),
                    None)  # fmt: skip

    def cell(row: dict | None, ref: dict | None, base: dict | None = None) -> str:
        if row is None:
            return "—"
        text = f"{row['val_loss']:.4f} ± {row['val_loss_se']:.4f}"
        if ref is not None:
            text += f" ({100 * (row['val_loss'] / ref['val_loss'] - 1):+.1f} %)"
        if base is not None:
            text += f", +{row['non_embedding_params'] - base['non_embedding_params']:,} params"
        return text

    study, out = ("main", "branch"), []
    for size, seed in sorted({(size, seed) for _, size, seed in REMEDY}):
        gpt2 = find("gpt2", size, seed, study)
        mssa = find("aot-mssa", size, seed, study)
        n = FAMILIES["aot-mssa"].widths[size]
        out.append(
            [
                f"{non_embedding(FAMILIES['aot-mssa'], n) / 1e6:.2f} M (MSSA d{n})",
                str(seed),
                cell(gpt2, None),
                cell(find("aot-mhsa", size, seed, study), gpt2),
                cell(mssa, gpt2),
                *(
                    cell(find("aot-mssa", size, seed, ("remedy",), shift), gpt2, mssa)
                    for shift in ("scalar", "channel")
                ),
            ]
        )
    header = ["N", "seed", "GPT-2", "AoT-MHSA", "AoT-MSSA (W_O)", "+ token shift, scalar", "+ token shift, channel"]
    lines = [
        "# AoT-MSSA with a token shift, in language modelling (issue 29's remedy)",
        "",
        "Val nats per byte of Shakespeare ± SE over the full split, after 1 M byte tokens (250 steps of the WSD recipe "
        "of benchmarks/scaling, each family at its lr rule; the token-shift runs at AoT-MSSA's lr), (gap to GPT-2). "
        "The MSSA / MHSA / GPT-2 cells are the scaling study's runs of that budget (cooldown branches: the same runs "
        "as from scratch). One seed per cell; seed 1 only where the study has it. Written by "
        "`python benchmarks/scaling/run.py --render` from benchmarks/scaling/results.json (kind `remedy`).",
        "",
        *table(header, out),
    ]
    return "\n".join(lines) + "\n"


MATCHED_INTRO = (
    "The gap to GPT-2 at matched size and budget, read off the runs without a law (every family's main runs and "
    "branches; GPT-2 at the same budget, interpolated in log N and log L between its two sizes around N, never "
    "extrapolated; one seed unless a cell says):"
)


def study_runs(rows: list[dict[str, Any]]) -> list[ScalingRun]:
    """The study's main runs and branches (what the laws are fitted to) as scaling runs of their val loss."""
    return [
        ScalingRun(r["family"], r["non_embedding_params"], r["tokens"], r["val_loss"], seed=r["seed"])
        for r in rows
        if r["kind"] in ("main", "branch")
    ]


LABELS = {name: family.label for name, family in FAMILIES.items()}


def matched_block(rows: list[dict[str, Any]]) -> str:
    """:func:`aot.sweep.scaling.matched.matched_markdown` of the study's main runs and branches against GPT-2."""
    return matched_markdown(matched_gaps(study_runs(rows), "gpt2"), "gpt2", LABELS)


HOLDOUT_INTRO = (
    "How far the laws carry, checked on the runs: each family's law fitted without its largest size (the fit's "
    "32 starts, no bootstrap), read at that size's runs (`aot.sweep.scaling.holdout`; error: predicted / measured − 1):"
)


def holdout_block(rows: list[dict[str, Any]]) -> str:
    """:func:`aot.sweep.scaling.holdout.hold_out_markdown` of the study's main runs and branches ("" where no
    family has three sizes)."""
    held = hold_out_largest(study_runs(rows))
    return hold_out_markdown(held, LABELS) if held else ""


def readme_summary(
    fit: dict[str, Any],
    check: dict[str, Any],
    recorded: int,
    waiting: Sequence[str] = (),
    matched: str = "",
    shared: dict[str, Any] | None = None,
    held_out: str = "",
) -> str:
    """The <!-- scaling:summary --> block of this README and docs/guide/language.md: the fitted exponents, the
    frontier gap at the largest run,
    the laws read at the paper's sizes beside the paper's gaps, ``matched`` (the law-free gaps at matched size and
    budget, :func:`matched_block`) and the WSD-against-cosine verdict, all from fit/results.json and results.json
    (nothing typed by hand)."""
    from aot.report.parts.scaling import point_rows

    largest = next((m for m in fit.get("gap", {}).get("at", []) if m["where"] == "largest run"), None)
    rows = []
    for name, fam in fit["families"].items():
        gap = largest["families"].get(name) if largest else None
        rows.append(
            [
                LABELS.get(name, name),
                f"{fam['runs']} ({len(fam['sizes'])} sizes × {len(fam['budgets'])} budgets)",
                with_interval(fam["law"]["alpha"]),
                with_interval(fam["law"]["beta"]),
                with_interval(fam["law"]["E"]),
                "—" if gap is None else with_interval(gap, "+.1f", 100, " %"),
            ]
        )
    boot = next(iter(fit["families"].values()))["bootstrap"]["requested"]
    flops = f"{largest['flops']:.2g}" if largest else "—"
    lines = [
        f"{recorded} runs recorded in benchmarks/scaling/results.json (fitted: the main WSD runs and their cooldown "
        f"branches, {len(fit['runs'])} runs); L(N, D) = E + A/N^α + B/D^β per family, [95 %] over {boot} bootstrap "
        f"refits; val nats per byte of Shakespeare; machine: {fit['machine'].get('processor')}, "
        f"{fit['machine'].get('date')}. `python benchmarks/scaling/run.py --render` rewrites this block.",
        "",
        *table(
            ["family", "runs", "α [95 %]", "β [95 %]", "E [95 %]", f"gap to GPT-2 on the frontier at {flops} FLOPs"],
            rows,
        ),
    ]
    if fit["points"]:
        header = ["paper's model", "family", "N", "D", "predicted loss [95 %]", "predicted gap [95 %]", "paper: gap"]
        lines += ["", "Read at the paper's sizes and budget (far beyond the runs: read the intervals):", ""]
        lines += table(header, point_rows(fit))
    if shared:
        lines += ["", shared_summary(shared)]
    if held_out:
        lines += ["", HOLDOUT_INTRO, "", held_out]
    if waiting:
        lines += ["", "Not fitted yet (too few finished sizes or budgets): " + "; ".join(waiting) + "."]
    if matched:
        lines += ["", MATCHED_INTRO, "", matched]
    lines += ["", verdict(check)]
    return "\n".join(lines)


def shared_summary(shared: dict[str, Any]) -> str:
    """A paragraph of fit-shared-e/results.json: the one E, each family's α, and the gaps read at the paper's sizes."""
    families = shared["families"]
    e = with_interval(next(iter(families.values()))["law"]["E"])
    alphas = ", ".join(
        f"{LABELS.get(name, name)} {with_interval(fam['law']['alpha'])}" for name, fam in families.items()
    )
    gaps = "; ".join(
        f"{p['family']} at {p['params']:.3g}: {with_interval(p['gap'], '+.1f', 100, ' %')}"
        for p in shared["points"]
        if p["gap"] is not None
    )
    return (
        f"With one E for every family (benchmarks/scaling/fit-shared-e/table.md, `aot scaling fit --shared-e`: E "
        f"belongs to the corpus, not the model): E = {e}; α: {alphas}"
        + (f"; the gaps read at the paper's sizes: {gaps}." if gaps else ".")
    )


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--plan", action="store_true", help="print the jobs (done / to do) and stop")
    parser.add_argument(
        "--only", choices=("sweep", "main", "large"), help="run only the lr sweeps, the main grid or the GPU sizes"
    )
    parser.add_argument(
        "--large",
        action="store_true",
        help="add the GPU sizes (≈ 8 and 24 M non-embedding parameters, on cuda; benchmarks/scaling/gpu.sh)",
    )
    parser.add_argument("--max-minutes", type=float, default=None, help="start no new job after this many minutes")
    parser.add_argument("--collect", action="store_true", help="record finished runs into results.json and stop")
    parser.add_argument(
        "--render", action="store_true", help="write schedule.md (WSD against cosine) and fit/ (the laws) and stop"
    )
    parser.add_argument(
        "--shard",
        metavar="I/N",
        help="run only the jobs whose folder name hashes to I modulo N (two drivers on two cores: 0/2 and 1/2)",
    )
    parser.add_argument(
        "--merge",
        metavar="RESULTS",
        help="add the runs of another machine's results.json (gpu.sh's) that this one lacks, and stop",
    )
    args = parser.parse_args(argv)
    if args.render:
        return render()
    if args.merge:
        rows = read_rows()
        new = merged_rows(rows, json.loads(Path(args.merge).read_text())["runs"])
        write_rows(rows + new)
        print(f"added {len(new)} runs from {args.merge} ({len(rows) + len(new)} in {RESULTS})")
        return 0
    start = time.time()
    rows = read_rows()
    large = args.large or args.only == "large"
    while True:
        sweeps = sweep_jobs(rows, large)
        mains, waiting = main_jobs(rows, large)
        mains += cosine_jobs(rows) + remedy_jobs(rows)
        if args.only == "large":
            sweeps, mains = large_jobs(sweeps), large_jobs(mains)
        jobs = (sweeps if args.only != "main" else []) + (mains if args.only != "sweep" else [])
        before = len(rows)
        rows = collect(sweeps + mains, rows)
        if len(rows) != before or not RESULTS.is_file():
            write_rows(rows)  # only when a run landed: --plan and an idle pass leave the file as it is
        jobs = sorted(jobs, key=priority)  # stable: a main run stays before its branches
        todo = [j for j in jobs if not done(j, rows) and (j.parent is None or j.parent.is_dir())]
        todo = [j for j in todo if not folder_busy(j.folder)]  # another driver is training it now
        todo = [j for j in todo if in_shard(j, args.shard)]
        if args.plan or args.collect:
            for job in sorted(sweeps + mains, key=priority):
                state = "done" if done(job, rows) else "to do"
                print(f"{state:6} {job.kind:6} {job.folder.name:32} {job.tokens / 1e6:5.1f} M tokens lr {job.lr:.2g}")
            for line in waiting:
                print("waits ", line)
            return 0
        if not todo:
            print("nothing left to run" + (f"; {len(waiting)} sizes wait for their lr sweep" if waiting else ""))
            return 0
        if args.max_minutes is not None and time.time() - start > 60 * args.max_minutes:
            print(f"stopping after {args.max_minutes:g} min; {len(todo)} jobs left")
            return 0
        job = todo[0]
        print(f"[{len(rows)} done, {len(todo)} to do] {job.kind} {job.folder.name}", flush=True)
        if not run_job(job):
            if folder_busy(job.folder):  # two drivers started it at once: the other one has it
                print(f"  {job.folder.name} is another driver's now; going on", flush=True)
                continue
            print(f"  failed: see {RUNS / 'logs' / (job.folder.name + '.log')}; stopping", flush=True)
            return 1


if __name__ == "__main__":
    raise SystemExit(main())
