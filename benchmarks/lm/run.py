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

This script holds the benchmark's axes, models, tags and tables only; the grid, the plan, skipping what finished,
the best-lr rule and the results store are the package's sweep engine (`aot.sweep`, the code behind `aot sweep`),
and every run goes through `aot.tasks.run_task` (the code behind `aot train lm`) with preset cpu-bench. A killed run
continues from its checkpoint and a finished one (a whole results.json in its folder) is skipped, so the same
command resumes a grid. Results are recorded in benchmarks/lm/results.json (keyed by tag / tokenizer / model /
overrides; its ``sweep`` entry says how to read it); benchmarks/lm/table.md (every run, then the summary over
seeds) and, with ``--figure``, benchmarks/lm/quality_per_compute-TAG.png (val loss against training FLOPs and
against training seconds) are rewritten. ``--plan`` prints the runs with an estimated CPU time and trains nothing.
"""

from __future__ import annotations

import argparse
import dataclasses
import functools
import json
import statistics
import sys
from dataclasses import dataclass, replace
from pathlib import Path

from aot.bench.flops import flops_per_token
from aot.run_folder import write_text_atomic
from aot.sweep import Execution, Plan, Reference, Summary, SweepSpec, plan_sweep, read_store, run_key, sweep_winners
from aot.sweep.figures import draw_quality_per_compute
from aot.sweep.reference import gap, reference_summary
from aot.sweep.render import lr_list, row_line, table
from aot.sweep.selection import seed_summary
from aot.sweep.training import build_run
from aot.tasks import TaskRun, get_task

HERE = Path(__file__).resolve().parent
RESULTS = HERE / "results.json"
MODELS = ["gpt2-cpu", "aot-mhsa-l-cpu", "aot-mssa-l-cpu", "crate-l-cpu", "crate-res-l-cpu"]
ALL_MODELS = [*MODELS, "aot-mssa-tied-l-cpu", "llama-l-cpu", "crate-alpha-l-cpu"]
TOKENIZERS = ["bytes", "bpe-4096"]
PRESET = "cpu-bench"
#: how a gap is read: against GPT-2 trained on the same footing (tokenizer, positions, budget), with the contender's
#: recipe overrides but its own shape and block options (a token shift), in the contender's tag first, at GPT-2's
#: best lr
REFERENCE = Reference(
    field="model",
    value="gpt2-cpu",
    match=("tokenizer", "position", "tokens"),
    overrides="extra",
    own=("model.n_layer=", "model.n_embd=", "model.n_head=", "model.head_dim=", "model.token_shift="),
    prefer=("tag",),
)
#: how results.json is read (written into it, so headline.py and the report read it the same way): a config is
#: tag / tokenizer / model / position / other overrides; summaries show val loss (nats/token)
SPEC = SweepSpec(
    task="lm",
    preset=PRESET,
    group=("tag", "tokenizer", "model", "position", "extra"),
    shown="val_loss",
    reference=REFERENCE,
)


@functools.cache
def preset_lr() -> float:
    """cpu-bench's lr: rows at this lr carry no train.lr override (so the main rows keep their keys)."""
    return float(build_run("lm", PRESET).train.lr)


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
    task = "lm"

    @property
    def overrides(self) -> list[str]:
        """The ``--set`` assignments that differ from cpu-bench + the model preset (recorded in each row)."""
        sets = []
        if self.position is not None:
            sets.append(f"model.position={self.position}")
        if self.lr is not None and self.lr != preset_lr():
            sets.append(f"train.lr={self.lr:g}")
        if self.seed != 0:
            sets.append(f"train.seed={self.seed}")
        return [*sets, *self.extra]

    @property
    def sets(self) -> list[str]:
        return [f"train.steps={self.steps}", "train.progress=false", *self.overrides]

    @property
    def key(self) -> str:
        return run_key(self.tag, self.tokenizer, self.model, self.sets)

    def folder(self, runs: str | Path) -> Path:
        return Path(runs) / f"{self.tag}-{self.tokenizer}-{self.model}-{self.key}"

    def build(self) -> TaskRun:
        return build_run("lm", PRESET, self.sets, self.model, flags={"data": {"tokenizer": self.tokenizer}})

    def describe(self) -> str:
        return f"{self.tag} {self.tokenizer} {self.model} {' '.join(self.overrides)}"

    def training_flops_per_token(self) -> float:
        """Model FLOPs of one training token (forward + backward, causal attention only), the count the trainer's
        MFU uses (``aot.bench.flops.flops_per_token``; tested against torch's flop counter in
        tests/bench/test_bench.py)."""
        cfg = self.build().model_config(vocab_size=vocab_size(self.tokenizer))
        return flops_per_token(cfg, cfg.block_size).training_causal()

    def tokens(self) -> int:
        run = self.build()
        return int(run.train.steps * run.train.batch_size * run.model_config().block_size)


def vocab_size(tokenizer: str) -> int:
    """The vocabulary of ``bytes`` (256) or ``bpe-N`` (N), known before the data is tokenized."""
    if tokenizer == "bytes":
        return 256
    if tokenizer.startswith("bpe-") and tokenizer[4:].isdigit():
        return int(tokenizer[4:])
    raise SystemExit(f"run.py: error: tokenizer {tokenizer!r} is not bytes or bpe-N")


def group_key(run: Run) -> tuple[str, str, str | None, tuple[str, ...]]:
    """Runs that compete in one lr sweep: same tokenizer, model, position and extra overrides."""
    return (run.tokenizer, run.model, run.position, run.extra)


def winners_of(store: dict, tag: str, lrs: list[float] | None, seed: int) -> dict[tuple, float]:
    """:func:`aot.sweep.sweep_winners` of ``tag``'s rows, keyed by :func:`group_key`."""
    rows = [r for r in store["runs"] if r["tag"] == tag]
    return {key[1:]: lr for key, lr in sweep_winners(rows, SPEC.axes, SPEC.metric, lrs, seed).items()}


def make_plan(args: argparse.Namespace, store: dict) -> Plan[Run]:
    """Every run the arguments ask for: the sweep (first seed, each lr), then the other seeds at the winner
    (``pending`` until the whole sweep of their group is recorded)."""
    lrs: list[float | None] = list(args.lrs) if args.lrs else [None]
    positions: list[str | None] = list(args.positions) if args.positions else [None]
    first = args.seeds[0]
    if args.lr_from:
        winners = winners_of(store, args.lr_from, None, first)
    else:
        winners = winners_of(store, args.tag, [preset_lr() if lr is None else lr for lr in lrs], first)
    bases = [
        Run(args.tag, tokenizer, model, args.steps, position, None, first, tuple(args.set))
        for tokenizer in args.tokenizers
        for model in args.models
        for position in positions
    ]

    def sweep_of(base: Run) -> list[float | None]:
        if not args.lr_from:
            return lrs
        if group_key(base) not in winners:
            raise SystemExit(f"run.py: error: tag {args.lr_from!r} has no lr sweep for {group_key(base)}")
        return [winners[group_key(base)]]

    return plan_sweep(
        [(base, sweep_of(base)) for base in bases],
        args.seeds,
        lambda base: winners.get(group_key(base)),
        lambda base, lr, seed: replace(base, lr=lr, seed=seed),
    )


def flops_per_second(store: dict) -> float:
    """Training FLOP/s the recorded runs achieved (median over rows; model FLOPs as in the MFU): the rate the
    plan uses to estimate CPU time."""
    rates = [
        r["tokens_per_second"] * r["train_flops_per_token"] for r in store["runs"] if r.get("train_flops_per_token")
    ]
    return statistics.median(rates) if rates else 5e9


def print_plan(plan: Plan[Run], store: dict, runs_dir: str) -> float:
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
            lr = "best" if run.lr is None and status != "run" else f"{run.lr or preset_lr():g}"
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
    store = read_store(RESULTS)
    if args.plan:
        print_plan(make_plan(args, store), store, args.runs)
        return 0
    if args.render:
        write_text_atomic(HERE / "table.md", markdown(store))
    else:
        store = run_grid(args, RESULTS)
    if args.figure:
        print(f"wrote {draw_figure(store, [args.tag], HERE / f'quality_per_compute-{args.tag}.png')}")
    return 0


def run_grid(args: argparse.Namespace, results_path: Path) -> dict:
    """Train what the plan asks for and has not finished (:meth:`aot.sweep.Execution.run_plan`), recording each row into
    ``results_path`` and rewriting table.md beside it."""

    def recorded(store: dict, row: dict, status: str) -> None:
        if status == "recorded":
            return
        write_text_atomic(results_path.with_name("table.md"), markdown(store))
        print(json.dumps({k: row[k] for k in ("tag", "tokenizer", "model", "overrides", "val_loss")}), flush=True)

    log = lambda line: print(line, flush=True)  # noqa: E731
    execution = Execution(Path(args.runs), results_path, summary_row, SPEC, "cpu", args.lock, log)
    return execution.run_plan(lambda store: make_plan(args, store), on_record=recorded)


def summary_row(run: Run, result: dict, folder: Path) -> dict:
    """A results.json row: the run's axes, then the numbers `get_task("lm").store_row` keeps."""
    return {
        "tag": run.tag,
        "tokenizer": run.tokenizer,
        "model": run.model,
        "overrides": run.overrides,
        "position": run.position,
        "lr": float(result["config"]["train"]["lr"]),
        "seed": int(result["seed"]),
        "extra": list(run.extra),
        **get_task("lm").store_row(result),
        "train_flops_per_token": run.training_flops_per_token(),
        "run_dir": str(folder),
    }


def row_summary(row: dict) -> Summary:
    """A single run read as a summary of one seed (so a run's gap is found as a summary's is)."""
    (summary,) = seed_summary([row], SPEC.axes, SPEC.metric, SPEC.shown)
    return summary


def reference_loss(store: dict, row: dict) -> float | None:
    """GPT-2's val loss that ``row``'s gap is measured against: GPT-2 with the same overrides in the same tag
    (the same lr and seed) where that run exists; else GPT-2 with the same tokenizer, position scheme, token
    budget and seed at its best lr (:func:`aot.sweep.reference.reference_summary`); else GPT-2 of the main
    comparison."""
    gpt2 = [r for r in store["runs"] if r["model"] == REFERENCE.value and r["tokenizer"] == row["tokenizer"]]
    same = [r for r in gpt2 if r["tag"] == row["tag"] and r["overrides"] == row["overrides"]]
    if same:
        return float(same[0]["val_loss"])
    by_seed = dataclasses.replace(REFERENCE, match=(*REFERENCE.match, "seed"))
    match = reference_summary([row_summary(r) for r in gpt2], row_summary(row), by_seed)
    if match is not None:
        return match.mean
    main = [r for r in gpt2 if r["tag"] == "main" and not r["overrides"]]
    return float(main[0]["val_loss"]) if main else None


RUN_COLUMNS = ["tag", "tokenizer", "model", "layers", "non-emb. params", "tokens", "val loss", "test loss",
               "gap to GPT-2", "nats/byte (val)", "tokens/s", "train s", "overrides"]  # fmt: skip
SUMMARY_COLUMNS = ["tag", "tokenizer", "model", "position", "other overrides", "lrs tried", "best lr", "seeds",
                   "val mean (min-max)", "gap to GPT-2", "bigram"]  # fmt: skip


def gap_text(value: float, reference: float | None) -> str:
    """``+4.1 %`` (relative to ``reference``), or ``—`` without one."""
    relative = gap(value, reference)
    return "—" if relative is None else f"{100 * relative:+.1f} %"


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
    ]
    runs = sorted(store["runs"], key=lambda r: (r["tag"] != "main", r["tag"], r["tokenizer"], r["model"]))
    lines += table(
        RUN_COLUMNS,
        [
            [
                r["tag"],
                r["tokenizer"],
                r["model"],
                r["n_layer"],
                f"{r['non_embedding_params'] / 1e6:.2f}M",
                f"{r['tokens'] / 1e6:.2f}M",
                f"{r['val_loss']:.4f}",
                f"{r['test_loss']:.4f}",
                gap_text(r["val_loss"], reference_loss(store, r)),
                f"{r['val_nats_per_byte']:.3f}",
                f"{r['tokens_per_second']:,.0f}",
                f"{r['train_seconds']:.0f}",
                " ".join(r["overrides"]) or "—",
            ]
            for r in runs
        ],
    )
    bigrams = {r["tokenizer"]: r["bigram_val_loss"] for r in store["runs"]}
    lines += ["", "Interpolated bigram on val (fitted on train), nats/token: "]
    lines[-1] += ", ".join(f"{tok} {loss:.3f}" for tok, loss in sorted(bigrams.items()))
    summaries = SPEC.summaries(store["runs"])
    shown = [s for s in summaries if len(s.lrs_tried) > 1 or len(s.seeds) > 1]
    if shown:
        lines += [
            "",
            "## Each model at its best lr, over seeds",
            "",
            "Best lr: the lowest mean val loss among the lrs tried. Spread: min-max over the seeds. A gap is a gap "
            "only when it exceeds both spreads.",
            "",
            row_line(SUMMARY_COLUMNS),
            "|---|---|---|---|---|---|---|---|---|---|---|",
        ]
        for s in sorted(
            shown, key=lambda s: (s.get("tag"), s.get("tokenizer"), str(s.get("position")), s.get("model"))
        ):
            ref = reference_summary(shown, s, REFERENCE)
            c = s.config
            lines.append(
                row_line(
                    [
                        c["tag"],
                        c["tokenizer"],
                        c["model"],
                        c["position"] or "default",
                        " ".join(c["extra"]) or "—",
                        lr_list(s.lrs_tried),
                        f"{s.lr:g}",
                        len(s.seeds),
                        f"{s.mean:.4f} ({s.min:.4f}-{s.max:.4f})",
                        gap_text(s.mean, None if ref is None else ref.mean),
                        f"{s.get('bigram_val_loss'):.3f}",
                    ]
                )
            )
    return "\n".join(lines) + "\n"


def draw_figure(store: dict, tags: list[str], path: Path) -> Path:
    """quality_per_compute: every config of ``tags`` at its best lr (bytes solid, BPE dashed)."""
    summaries = [s for s in SPEC.summaries(store["runs"]) if s.get("tag") in tags]
    title = f"Quality per compute, tag{'s' if len(tags) > 1 else ''} {', '.join(tags)}"
    y_label = "val loss (nats / token, 16 windows)"
    return draw_quality_per_compute(summaries, path, title, y_label, solid={"tokenizer": "bytes"})


if __name__ == "__main__":
    sys.exit(main())
