"""AoT-MSSA (learned W_O and tied), AoT-MHSA, GPT-2 (`transformer`), CRATE (as in its code, and with the ISTA
step as a residual increment) and Llama at matched non-embedding parameters (~4.7M, d = 256) and the same token
budget on Shakespeare, bytes and BPE-4096: val / test loss, tokens/s, wall time, along the axes position scheme,
learning rate, seed and budget (``--steps``; periodic evaluations show the gap along the way).

    PYTHONPATH=src python benchmarks/lm/run.py --lock /tmp/aot-cpu.lock           # the comparison (tag main)
    PYTHONPATH=src python benchmarks/lm/run.py --plan --tag grid --positions learned rope \\
        --lrs 1e-3 3e-3 1e-2 --seeds 0 1 2                                          # what the grid would run
    PYTHONPATH=src python benchmarks/lm/run.py --lock /tmp/aot-cpu.lock --tag grid --positions learned rope \\
        --lrs 1e-3 3e-3 1e-2 --seeds 0 1 2                                          # run it (resumable)
    PYTHONPATH=src python benchmarks/lm/run.py --lock /tmp/aot-cpu.lock --tag explore --lr-from grid \\
        --models aot-mssa-l-cpu --set model.residual_scale=channel                  # later rows: each model's best lr

Axes. ``--positions`` trains every model with each position scheme (``learned`` absolute or ``rope``), so a gap
between blocks is never a gap between schemes. ``--lrs`` with more than one value is a sweep: every model
(per tokenizer and position) trains at each lr with the first seed, the lowest val loss wins, and the other
``--seeds`` train at that lr only; ``--lr-from TAG`` takes the winners of TAG's sweep instead. ``--seeds``: the
summary reports the mean and spread (min-max) over seeds at each model's best lr.

Every run goes through `aot.train.lm_task.train_lm` (the code behind `aot train lm`) with preset cpu-bench; a
killed run continues from its checkpoint and a finished one (its results.json exists) is skipped, so the same
command resumes a grid. Results are appended to benchmarks/lm/results.json (keyed by tag / tokenizer / model /
overrides); benchmarks/lm/table.md (every run, then the summary over seeds) and, with ``--figure``,
benchmarks/lm/quality_per_compute-TAG.png (val loss against training FLOPs and against training seconds) are
rewritten. ``--plan`` prints the runs with an estimated CPU time and trains nothing.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import statistics
import sys
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

from aot.bench.flops import flops_per_token
from aot.bench.lock import cpu_lock
from aot.run_folder import write_text_atomic
from aot.runinfo import machine_info
from aot.train.lm_task import build_run_config, train_lm

HERE = Path(__file__).resolve().parent
MODELS = ["gpt2-cpu", "aot-mhsa-l-cpu", "aot-mssa-l-cpu", "crate-l-cpu", "crate-res-l-cpu"]
ALL_MODELS = [*MODELS, "aot-mssa-tied-l-cpu", "llama-l-cpu", "crate-alpha-l-cpu"]
TOKENIZERS = ["bytes", "bpe-4096"]
PRESET = "cpu-bench"
PRESET_LR = 1e-3  # cpu-bench's lr: rows at this lr carry no train.lr override (so the main rows keep their keys)
REFERENCE = "gpt2-cpu"  # gaps are to this model
SHAPE_OVERRIDES = ("model.n_layer=", "model.n_embd=", "model.n_head=", "model.head_dim=")  # the contender's own


@dataclass(frozen=True)
class Run:
    """One training run of the benchmark: the cpu-bench preset with the model preset and these overrides."""

    tag: str
    tokenizer: str
    model: str
    steps: int
    position: str | None = None  # None: the model's own default (learned; rope for llama)
    lr: float | None = None  # None: the preset's
    seed: int = 0
    extra: tuple[str, ...] = ()

    @property
    def overrides(self) -> list[str]:
        """The ``--set`` assignments that differ from cpu-bench + the model preset (recorded in each row)."""
        sets = []
        if self.position is not None:
            sets.append(f"model.position={self.position}")
        if self.lr is not None and self.lr != PRESET_LR:
            sets.append(f"train.lr={self.lr:g}")
        if self.seed != 0:
            sets.append(f"train.seed={self.seed}")
        return [*sets, *self.extra]

    @property
    def sets(self) -> list[str]:
        return [f"train.steps={self.steps}", "train.progress=false", *self.overrides]

    @property
    def key(self) -> str:
        return hashlib.sha256(json.dumps([self.tag, self.tokenizer, self.model, self.sets]).encode()).hexdigest()[:10]

    def folder(self, runs: str | Path) -> Path:
        return run_folder(runs, self.tag, self.tokenizer, self.model, self.key)

    def config(self):  # type: ignore[no-untyped-def]
        return build_run_config(
            PRESET, flags={"data": {"tokenizer": self.tokenizer}}, sets=self.sets, model_preset=self.model
        )

    def training_flops_per_token(self) -> float:
        """Model FLOPs of one training token (forward + backward, causal attention only), the count the trainer's
        MFU uses (``aot.bench.flops.flops_per_token``; tested against torch's flop counter in tests/test_bench.py)."""
        cfg = self.config().model_config(vocab_size=vocab_size(self.tokenizer))
        return flops_per_token(cfg, cfg.block_size).training_causal()

    def tokens(self) -> int:
        train = self.config().train
        return int(train.steps * train.batch_size * self.config().model_config().block_size)


def run_folder(runs: str | Path, tag: str, tokenizer: str, model: str, key: str) -> Path:
    """Where a run of the benchmark lives (a results.json row names it by these fields and its key)."""
    return Path(runs) / f"{tag}-{tokenizer}-{model}-{key}"


def vocab_size(tokenizer: str) -> int:
    """The vocabulary of ``bytes`` (256) or ``bpe-N`` (N), known before the data is tokenized."""
    if tokenizer == "bytes":
        return 256
    if tokenizer.startswith("bpe-") and tokenizer[4:].isdigit():
        return int(tokenizer[4:])
    raise SystemExit(f"run.py: error: tokenizer {tokenizer!r} is not bytes or bpe-N")


@dataclass
class Plan:
    """The runs to do, in order; ``pending`` are the seeds that wait for a sweep to pick their lr."""

    runs: list[Run] = field(default_factory=list)
    pending: list[Run] = field(default_factory=list)


def group_key(run: Run) -> tuple[str, str, str | None, tuple[str, ...]]:
    """Runs that compete in one lr sweep: same tokenizer, model, position and extra overrides."""
    return (run.tokenizer, run.model, run.position, run.extra)


def best_lr(rows: list[dict[str, Any]]) -> float | None:
    """The lr of the row with the lowest val loss (ties: the smaller lr), or None without rows."""
    if not rows:
        return None
    best = min(rows, key=lambda r: (r["val_loss"], r["lr"]))
    return float(best["lr"])


def with_axes(row: dict) -> dict:
    """A results.json row with its axes (position, lr, seed, extra overrides) as fields; rows recorded before
    the axes existed carry them only in ``overrides``, which is read here."""
    sets = dict(item.split("=", 1) for item in row["overrides"] if "=" in item)
    axes = {
        "position": sets.get("model.position"),
        "lr": float(sets.get("train.lr", PRESET_LR)),
        "seed": int(sets.get("train.seed", 0)),
        "extra": [
            o for o in row["overrides"] if o.split("=", 1)[0] not in ("model.position", "train.lr", "train.seed")
        ],
    }
    return {**axes, **row}


def sweep_winners(store: dict, tag: str, lrs: list[float] | None = None, seed: int = 0) -> dict[tuple, float]:
    """For each sweep group of ``tag`` (tokenizer, model, position, extra overrides): the best lr among its
    rows at ``seed``. With ``lrs``, a group has a winner only once each of them is recorded (a half-done sweep
    has none) and only those compete."""
    groups: dict[tuple, list[dict]] = {}
    for r in map(with_axes, store["runs"]):
        if r["tag"] == tag and r["seed"] == seed:
            key = (r["tokenizer"], r["model"], r["position"], tuple(r["extra"]))
            groups.setdefault(key, []).append(r)
    winners = {}
    for key, rows in groups.items():
        if lrs is not None:
            rows = [r for r in rows if r["lr"] in lrs]
            if {r["lr"] for r in rows} != set(lrs):
                continue
        lr = best_lr(rows)
        if lr is not None:
            winners[key] = lr
    return winners


def make_plan(args: argparse.Namespace, store: dict) -> Plan:
    """Every run the arguments ask for: the sweep (first seed, each lr), then the other seeds at the winner
    (``pending`` until the whole sweep of their group is recorded)."""
    plan = Plan()
    lrs: list[float | None] = list(args.lrs) if args.lrs else [None]
    positions: list[str | None] = list(args.positions) if args.positions else [None]
    first, *others = args.seeds
    if args.lr_from:
        winners = sweep_winners(store, args.lr_from, seed=first)
    else:
        winners = sweep_winners(store, args.tag, [PRESET_LR if lr is None else lr for lr in lrs], first)
    for tokenizer in args.tokenizers:
        for model in args.models:
            for position in positions:
                base = Run(args.tag, tokenizer, model, args.steps, position, None, first, tuple(args.set))
                if args.lr_from:
                    lr = winners.get(group_key(base))
                    if lr is None:
                        raise SystemExit(f"run.py: error: tag {args.lr_from!r} has no lr sweep for {group_key(base)}")
                    sweep: list[float | None] = [lr]
                else:
                    sweep = lrs
                plan.runs += [replace(base, lr=lr) for lr in sweep]
                chosen = sweep[0] if len(sweep) == 1 else winners.get(group_key(base))
                for seed in others:
                    run = replace(base, lr=chosen, seed=seed)
                    (plan.runs if len(sweep) == 1 or chosen is not None else plan.pending).append(run)
    return plan


def flops_per_second(store: dict) -> float:
    """Training FLOP/s the recorded runs achieved (median over rows; model FLOPs as in the MFU): the rate the
    plan uses to estimate CPU time."""
    rates = [
        r["tokens_per_second"] * r["train_flops_per_token"]
        for r in store["runs"]
        if r.get("train_flops_per_token") and r.get("tokens_per_second")
    ]
    if not rates:  # rows recorded before the FLOPs column: recompute their count from the model preset
        for r in store["runs"]:
            run = Run(r["tag"], r["tokenizer"], r["model"], 1, extra=tuple(r["overrides"]))
            rates.append(r["tokens_per_second"] * run.training_flops_per_token())
    return statistics.median(rates) if rates else 5e9


def print_plan(plan: Plan, store: dict, runs_dir: str) -> float:
    """One line per run (done / to run / waits for the sweep) and the estimated CPU seconds still to spend."""
    rate = flops_per_second(store)
    recorded = {r["key"] for r in store["runs"]}
    total = 0.0
    print(f"rate {rate / 1e9:.1f} GFLOP/s (median of the recorded runs); estimates are training only (+~5 % eval)")
    for status, runs in (("run", plan.runs), ("after sweep", plan.pending)):
        for run in runs:
            done = run.key in recorded or (run.folder(runs_dir) / "results.json").is_file()
            seconds = run.tokens() * run.training_flops_per_token() / rate
            total += 0.0 if done else seconds
            lr = "best" if run.lr is None and status != "run" else f"{run.lr or PRESET_LR:g}"
            print(
                f"{'done' if done else status:12s} {run.tokenizer:9s} {run.model:20s} {run.position or '-':8s} "
                f"lr {lr:6s} seed {run.seed}  ~{seconds / 60:5.1f} min"
            )
    print(f"{len(plan.runs) + len(plan.pending)} runs; still to run ~{total / 3600:.1f} h of training on this machine")
    return total


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--models", nargs="+", default=MODELS, help=f"model presets (all: {' '.join(ALL_MODELS)})")
    parser.add_argument("--tokenizers", nargs="+", default=TOKENIZERS)
    parser.add_argument(
        "--positions", nargs="+", choices=["learned", "rope"], help="position axis (default: each model's own)"
    )
    parser.add_argument("--lrs", nargs="+", type=float, help="learning rates; more than one is a sweep (default: 1e-3)")
    parser.add_argument("--lr-from", metavar="TAG", help="use each model's best lr from TAG's sweep")
    parser.add_argument("--seeds", nargs="+", type=int, default=[0], help="seeds (init and data order; default 0)")
    parser.add_argument("--steps", type=int, default=250, help="optimizer steps (x 16 x 256 tokens; default 250)")
    parser.add_argument("--set", action="append", default=[], help="override, e.g. model.n_layer=12")
    parser.add_argument("--tag", default="main", help="group name in results.json (main = the comparison)")
    parser.add_argument("--runs", default="runs/bench-lm", help="folder for the individual runs")
    parser.add_argument("--plan", action="store_true", help="print the runs and the estimated CPU time; train nothing")
    parser.add_argument("--figure", action="store_true", help="also draw quality_per_compute-TAG.png for --tag")
    parser.add_argument("--render", action="store_true", help="rewrite table.md from results.json; train nothing")
    parser.add_argument(
        "--lock", metavar="FILE", help="hold this flock(1)-style lock around each run (e.g. /tmp/aot-cpu.lock)"
    )
    return parser


def main(argv: list[str] | None = None) -> int:
    parser = build_parser()
    args = parser.parse_args(argv)
    if args.lrs and args.lr_from:
        parser.error("give --lrs or --lr-from, not both")
    results_path = HERE / "results.json"
    store = json.loads(results_path.read_text()) if results_path.is_file() else {"runs": []}
    plan = make_plan(args, store)
    if args.plan:
        print_plan(plan, store, args.runs)
        return 0
    if args.render:
        write_text_atomic(results_path.with_name("table.md"), markdown(store))
    todo = [] if args.render else list(plan.runs)
    while todo:
        for run in todo:
            train_one(run, args, store, results_path)
        # a sweep just finished: its winners give the remaining seeds their lr
        plan = make_plan(args, store)
        todo = [run for run in plan.runs if not any(r["key"] == run.key for r in store["runs"])]
    if args.figure:
        print(f"wrote {draw_quality_per_compute(store, args.tag, HERE / f'quality_per_compute-{args.tag}.png')}")
    return 0


def train_one(run: Run, args: argparse.Namespace, store: dict, results_path: Path) -> None:
    """Train ``run`` unless done (its folder has results.json: the row is refreshed from it; or results.json
    records its key while the folder is gone: kept as it is), then record its row and rewrite table.md."""
    out = run.folder(args.runs)
    if not (out / "results.json").is_file():
        if any(r["key"] == run.key for r in store["runs"]):
            return
        print(f"== {run.tag} {run.tokenizer} {run.model} {' '.join(run.overrides)}", flush=True)
        with cpu_lock(args.lock):
            train_lm(run.config(), out, "cpu", resume="auto")  # a killed run continues from its checkpoint
    result = json.loads((out / "results.json").read_text())
    row = summary_row(run, result)
    # re-read just before writing: other lanes of this script may have recorded rows since this one started
    if results_path.is_file():
        store.update(json.loads(results_path.read_text()))
    store["runs"] = [r for r in store["runs"] if r["key"] != run.key] + [{"key": run.key, **row}]
    store["machine"] = machine_info()
    write_text_atomic(results_path, json.dumps(store, indent=2) + "\n")
    write_text_atomic(results_path.with_name("table.md"), markdown(store))
    print(json.dumps({k: row[k] for k in ("tag", "tokenizer", "model", "overrides", "val_loss")}), flush=True)


def summary_row(run: Run, result: dict) -> dict:
    cfg = result["config"]
    return {
        "tag": run.tag,
        "tokenizer": run.tokenizer,
        "model": run.model,
        "overrides": run.overrides,
        "position": run.position,
        "lr": float(cfg["train"]["lr"]),
        "seed": int(result["seed"]),
        "extra": list(run.extra),
        "block": result["model"]["block"],
        "n_layer": result["model"]["n_layer"],
        "non_embedding_params": result["model"]["non_embedding_params"],
        "tokens": result["train"]["tokens"],
        "train_flops_per_token": run.training_flops_per_token(),
        "val_loss": result["val"]["loss"],
        "test_loss": result["test"]["loss"],
        "val_nats_per_byte": result["val"]["nats_per_byte"],
        "test_nats_per_byte": result["test"]["nats_per_byte"],
        "tokens_per_second": result["train"]["tokens_per_second"],
        "train_seconds": result["train"]["train_seconds"],
        "wall_seconds": result["train"]["wall_seconds"],
        "bigram_val_loss": result["baselines"]["val"]["bigram"]["loss"],
        "evals": [{"tokens": e["tokens"], "val_loss": e["val_loss"]} for e in result["train"]["evals"]],
        "date": result["machine"]["date"],
    }


def seed_summary(store: dict) -> list[dict]:
    """Per (tag, tokenizer, model, position, extra overrides): the rows at the group's best lr, with the mean and
    min-max of val loss over their seeds. The best lr is the sweep's winner, as the plan picks it (the lowest val
    loss at seed 0; a group without a seed-0 row: the lowest mean), so an lr that got extra seeds by hand does not
    displace the one the protocol chose."""
    groups: dict[tuple, dict[float, list[dict]]] = {}
    for r in map(with_axes, store["runs"]):
        key = (r["tag"], r["tokenizer"], r["model"], r["position"], tuple(r["extra"]))
        groups.setdefault(key, {}).setdefault(r["lr"], []).append(r)
    rows = []
    for key, by_lr in groups.items():
        sweep = [r for rows_at_lr in by_lr.values() for r in rows_at_lr if r["seed"] == 0]
        if sweep:
            lr = min(sweep, key=lambda r: r["val_loss"])["lr"]
            best = by_lr[lr]
        else:
            lr, best = min(by_lr.items(), key=lambda item: statistics.fmean(r["val_loss"] for r in item[1]))
        losses = [r["val_loss"] for r in best]
        rows.append(
            {
                "tag": key[0],
                "tokenizer": key[1],
                "model": key[2],
                "position": key[3],
                "extra": list(key[4]),
                "lr": lr,
                "lrs_tried": sorted(by_lr),
                "seeds": sorted(r["seed"] for r in best),
                "val_mean": statistics.fmean(losses),
                "val_min": min(losses),
                "val_max": max(losses),
                "bigram": best[0]["bigram_val_loss"],
                "tokens": best[0]["tokens"],
            }
        )
    return rows


def model_shape(s: dict) -> tuple[int, int]:
    """(layers, width) of a summary row's model: its preset with the row's overrides."""
    cfg = Run(s["tag"], s["tokenizer"], s["model"], 250, s["position"], s["lr"], 0, tuple(s["extra"])).config()
    model = cfg.model_config()
    return model.n_layer, model.n_embd


def summary_runs(store: dict, s: dict, with_evals: bool = False) -> list[dict]:
    """The recorded runs behind seed-summary row ``s`` (its seeds at its lr); ``with_evals``: only those with
    periodic evaluations."""
    return [
        r
        for r in map(with_axes, store["runs"])
        if (r["tag"], r["tokenizer"], r["model"], r["position"], r["extra"], r["lr"])
        == (s["tag"], s["tokenizer"], s["model"], s["position"], s["extra"], s["lr"])
        and (r.get("evals") or not with_evals)
    ]


def mean_evals(rows: list[dict]) -> tuple[list[int], list[float]]:
    """(tokens, val loss averaged over ``rows``) at each periodic evaluation of runs that share a schedule."""
    tokens = [e["tokens"] for e in rows[0]["evals"]]
    return tokens, [statistics.fmean(r["evals"][i]["val_loss"] for r in rows) for i in range(len(tokens))]


def quality_curves(store: dict, tags: str | list[str]) -> list[dict]:
    """Val loss against training FLOPs and training seconds for each model (tokenizer, position, overrides) of
    ``tags`` at its best lr, averaged over seeds at each periodic evaluation. FLOPs = tokens × the row's training
    FLOPs per token; seconds = tokens / the run's mean tokens/s (the rate is constant along a run)."""
    tags = [tags] if isinstance(tags, str) else tags
    curves = []
    for s in seed_summary(store):
        if s["tag"] not in tags:
            continue
        rows = summary_runs(store, s, with_evals=True)
        if not rows:
            continue
        tokens, val = mean_evals(rows)
        seconds_per_token = statistics.fmean(1 / r["tokens_per_second"] for r in rows)
        layers, width = model_shape(s)
        curves.append(
            {
                "label": f"{s['model']} {layers}×{width} {s['position'] or ''} "
                f"({s['tokenizer']}, lr {s['lr']:g}, {len(rows)} seed{'s' if len(rows) > 1 else ''})",
                "tokenizer": s["tokenizer"],
                "flops": [t * rows[0]["train_flops_per_token"] for t in tokens],
                "seconds": [t * seconds_per_token for t in tokens],
                "val_loss": val,
            }
        )
    return curves


def draw_quality_per_compute(store: dict, tags: str | list[str], path: Path) -> Path:
    """One PNG: val loss against training FLOPs (left) and against training seconds (right), a line per model
    of ``tags``."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    names = [tags] if isinstance(tags, str) else tags
    curves = quality_curves(store, names)
    if not curves:
        raise SystemExit(f"run.py: error: tag {tags!r} has no runs with periodic evaluations to draw")
    fig, axes = plt.subplots(1, 2, figsize=(12, 4.5), sharey=True)
    for curve in curves:
        style = "-" if curve["tokenizer"] == "bytes" else "--"
        axes[0].plot(curve["flops"], curve["val_loss"], style, marker="o", ms=3, label=curve["label"])
        axes[1].plot(curve["seconds"], curve["val_loss"], style, marker="o", ms=3)
    axes[0].set_xscale("log")
    axes[0].set_xlabel("training FLOPs (model FLOPs, causal attention)")
    axes[1].set_xlabel("training seconds on this machine (shared CPU: ±30 %)")
    axes[0].set_ylabel("val loss (nats / token, 16 windows)")
    axes[0].legend(fontsize=6)
    fig.suptitle(f"Quality per compute, tag{'s' if len(names) > 1 else ''} {', '.join(names)}")
    fig.tight_layout()
    fig.savefig(path, dpi=120)
    plt.close(fig)
    return path


def recipe_overrides(extra: list[str]) -> list[str]:
    """The overrides of ``extra`` that change the recipe (init, step size...), not the shape (SHAPE_OVERRIDES)."""
    return [o for o in extra if not o.startswith(SHAPE_OVERRIDES)]


def matched_reference(candidates: list[dict], row: dict, tag: str) -> dict | None:
    """The GPT-2 entry a contender is measured against, among ``candidates`` (GPT-2 entries already matched on
    tokenizer, position scheme, token budget and, for single runs, seed): one with the contender's own extra
    overrides if any, else one with the same overrides but the shape (a shape override such as ``rope-wide``'s
    belongs to the contender, not to GPT-2; an init override is GPT-2's too), else one with none;
    the contender's own tag first; the lowest val loss of those (GPT-2 at its best lr)."""
    extra = list(row["extra"])
    recipe = recipe_overrides(extra)
    pools = (
        [c for c in candidates if c["extra"] == extra],
        [c for c in candidates if c["extra"] == recipe],
        [c for c in candidates if not c["extra"]],
    )
    for pool in pools:
        if pool:
            same_tag = [c for c in pool if c["tag"] == tag] or pool
            return min(same_tag, key=lambda c: c["val_mean"] if "val_mean" in c else c["val_loss"])
    return None


def reference_loss(store: dict, row: dict) -> float | None:
    """GPT-2's val loss that ``row``'s gap is measured against: GPT-2 with the same overrides in the same tag
    (the same lr and seed) where that run exists; else GPT-2 with the same tokenizer, position scheme, token
    budget and seed at its best lr (:func:`matched_reference`); else GPT-2 of the main comparison."""
    gpt2 = [with_axes(r) for r in store["runs"] if r["model"] == REFERENCE and r["tokenizer"] == row["tokenizer"]]
    same = [r for r in gpt2 if r["tag"] == row["tag"] and r["overrides"] == row["overrides"]]
    if same:
        return float(same[0]["val_loss"])
    axes = with_axes(row)
    peers = [
        r for r in gpt2 if (r["position"], r["tokens"], r["seed"]) == (axes["position"], row["tokens"], axes["seed"])
    ]
    match = matched_reference(peers, axes, row["tag"])
    if match is not None:
        return float(match["val_loss"])
    main = [r for r in gpt2 if r["tag"] == "main" and not r["overrides"]]
    return float(main[0]["val_loss"]) if main else None


def summary_reference_entry(summary: list[dict], s: dict) -> dict | None:
    """The GPT-2 seed-summary entry (at its best lr) that a seed-summary row ``s`` is measured against: same
    tokenizer, position scheme and token budget (:func:`matched_reference`), or None."""
    peers = [
        g
        for g in summary
        if g["model"] == REFERENCE
        and (g["tokenizer"], g["position"], g["tokens"]) == (s["tokenizer"], s["position"], s["tokens"])
    ]
    return matched_reference(peers, s, s["tag"])


def summary_reference(summary: list[dict], s: dict) -> float | None:
    """GPT-2's mean val loss that a seed-summary row ``s`` is measured against (:func:`summary_reference_entry`)."""
    match = summary_reference_entry(summary, s)
    return None if match is None else float(match["val_mean"])


def markdown(store: dict) -> str:
    machine = store["machine"]
    lines = [
        "# Language modelling on Shakespeare: AoT against GPT-2 at matched parameters",
        "",
        f"Machine: {machine['platform']}, {machine['cpu_count']} CPUs ({machine['torch_threads']} torch threads), "
        f"torch {machine['torch']}; written {machine['date']}. Reproduce: `PYTHONPATH=src python "
        "benchmarks/lm/run.py --lock /tmp/aot-cpu.lock` (rows tagged other than `main`: add "
        "`--tag TAG --tokenizers bytes --models ... --set ...` as in the row; `--plan` lists a command's runs). "
        "Tokens/s come from a 2-core machine shared with other jobs (heavy runs serialised by flock, light ones "
        "not): read them as ±30 %; losses at a fixed token budget do not depend on it.",
        "",
        "Context 256, batch 16, AdamW lr 1e-3 unless the row says otherwise (warm-up 40, cosine to lr/10), bf16 "
        "autocast, seed 0 unless the row says otherwise; val / test loss in nats/token on the last 10 % (val 5 %, "
        "test 5 %; 128 windows of 256 tokens each). Gap = val loss relative to GPT-2's with the same tokenizer "
        "and overrides where that run exists, else GPT-2's at its best lr with the same tokenizer, position "
        "scheme, token budget and seed (a shape override such as rope-wide's is the contender's: GPT-2 keeps "
        "its own shape), else the main GPT-2 run.",
        "",
        "| tag | tokenizer | model | layers | non-emb. params | tokens | val loss | test loss | gap to GPT-2 | "
        "nats/byte (val) | tokens/s | train s | overrides |",
        "|---|---|---|---|---|---|---|---|---|---|---|---|---|",
    ]
    for r in sorted(store["runs"], key=lambda r: (r["tag"] != "main", r["tag"], r["tokenizer"], r["model"])):
        ref = reference_loss(store, r)
        gap = f"{100 * (r['val_loss'] - ref) / ref:+.1f} %" if ref else "—"
        lines.append(
            f"| {r['tag']} | {r['tokenizer']} | {r['model']} | {r['n_layer']} | "
            f"{r['non_embedding_params'] / 1e6:.2f}M | "
            f"{r['tokens'] / 1e6:.2f}M | {r['val_loss']:.4f} | {r['test_loss']:.4f} | {gap} | "
            f"{r['val_nats_per_byte']:.3f} | {r['tokens_per_second']:,.0f} | {r['train_seconds']:.0f} | "
            f"{' '.join(r['overrides']) or '—'} |"
        )
    bigrams = {r["tokenizer"]: r["bigram_val_loss"] for r in store["runs"]}
    lines += ["", "Interpolated bigram on val (fitted on train), nats/token: "]
    lines[-1] += ", ".join(f"{tok} {loss:.3f}" for tok, loss in sorted(bigrams.items()))
    summary = [s for s in seed_summary(store) if len(s["lrs_tried"]) > 1 or len(s["seeds"]) > 1]
    if summary:
        lines += [
            "",
            "## Each model at its best lr, over seeds",
            "",
            "Best lr: the lowest mean val loss among the lrs tried. Spread: min-max over the seeds. A gap is a gap "
            "only when it exceeds both spreads.",
            "",
            "| tag | tokenizer | model | position | other overrides | lrs tried | best lr | seeds | "
            "val mean (min-max) | gap to GPT-2 | bigram |",
            "|---|---|---|---|---|---|---|---|---|---|---|",
        ]
        for s in sorted(summary, key=lambda s: (s["tag"], s["tokenizer"], str(s["position"]), s["model"])):
            ref = summary_reference(summary, s)
            gap = f"{100 * (s['val_mean'] - ref) / ref:+.1f} %" if ref else "—"
            lines.append(
                f"| {s['tag']} | {s['tokenizer']} | {s['model']} | {s['position'] or 'default'} | "
                f"{' '.join(s['extra']) or '—'} | {' '.join(f'{lr:g}' for lr in s['lrs_tried'])} | {s['lr']:g} | "
                f"{len(s['seeds'])} | "
                f"{s['val_mean']:.4f} ({s['val_min']:.4f}-{s['val_max']:.4f}) | {gap} | {s['bigram']:.3f} |"
            )
    return "\n".join(lines) + "\n"


if __name__ == "__main__":
    sys.exit(main())
