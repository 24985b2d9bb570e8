"""Can an attention-only subspace model recall? Multi-query associative recall (MQAR; Zoology, Arora et al. 2023) for
every block at 2 layers (Zoology's setting: one head, learned positions): GPT-2, AoT-MHSA, AoT-MSSA (learned W_O and
tied), CRATE, Llama, causal linear attention, Mamba and AoT-MSSA with a token shift, at widths 64-256, sequence
lengths 64-256 with 4-64 key-value pairs; each at its best lr from a short sweep (the seed-0 winner on the
validation accuracy), then a second seed at that lr.

    PYTHONPATH=src python benchmarks/recall/run.py --quick --plan     # the quick grid's runs and estimated CPU time
    OMP_NUM_THREADS=1 PYTHONPATH=src python benchmarks/recall/run.py --quick --lock /tmp/aot-cpu.lock
    OMP_NUM_THREADS=1 PYTHONPATH=src python benchmarks/recall/run.py --lock /tmp/aot-cpu.lock   # the study
    PYTHONPATH=src python benchmarks/recall/run.py --render           # table.md and the figures from results.json
    OMP_NUM_THREADS=1 PYTHONPATH=src python benchmarks/recall/run.py --cost   # seconds per step of every block

Grids. The study (tag ``main``): widths 64, 128, 256; (sequence length, pairs) (64, 4/8/16), (128, 8/16/32),
(256, 16/32/64); V = 256; 2000 steps of 64 sequences; lrs 1e-3, 3e-3, 1e-2 at seed 0, seed 1 at the winner.
``--quick`` (tag ``quick``): widths 64, 128; 64 tokens with 4, 8, 16 pairs; V = 64; 600 steps; lr 3e-3, seed 0;
every block but Mamba (mambapy's scan costs 1.2 s a step on one CPU thread at width 64, 35x AoT-MSSA's: cost.json;
a quick grid with it would take hours). ``--blocks``, ``--widths``, ``--lrs``, ``--seeds``, ``--steps``, ``--vocab``
and ``--set`` (for every run, e.g. ``model.position=rope``) change a grid.

Every run is `aot train recall` from preset cpu-quick (`aot.tasks.run_task`; the sets of a point are
`aot.tasks.recall.study_sets`), planned, skipped when finished and recorded by the sweep engine (`aot.sweep`), so
the same command resumes a killed grid. benchmarks/recall/results.json holds every run (block, layers, width,
sequence length, pairs, vocabulary, lr, seed, val and test accuracy, the command); table.md and the figures
(accuracy_vs_width-TAG.png: test accuracy against width per block, one panel per length and pairs;
accuracy_vs_pairs-TAG.png: against pairs, one panel per width) are rewritten after each run (the table) or grid (the
figures) and by ``--render``.
``--plan`` prints the runs with an estimate from cost.json (written by ``--cost``) and trains nothing.
"""

from __future__ import annotations

import argparse
import json
import re
import sys
import tempfile
import time
from collections import Counter
from dataclasses import dataclass, replace
from pathlib import Path

from aot.report.parts.recall import QUICK, STUDY, RecallGrid, draw_accuracy, summary_points
from aot.run_folder import write_text_atomic
from aot.runinfo import machine_info, replace_marked_block
from aot.sweep import Execution, Plan, Summary, SweepSpec, plan_sweep, read_store, run_key, sweep_winners
from aot.sweep.grid import folder_name
from aot.sweep.training import build_run, train
from aot.tasks import TaskRun, get_task
from aot.tasks.recall import RECALL_BLOCKS, study_sets

HERE = Path(__file__).resolve().parent
GUIDE = HERE.parents[1] / "docs" / "guide" / "language.md"  # its "Can AoT recall?" quotes the summary
RESULTS, COST = HERE / "results.json", HERE / "cost.json"
PRESET = "cpu-quick"
#: how results.json is read: a config is tag / block / width / length / pairs / vocabulary / steps; summaries show the
#: test accuracy (the sweep ranks by the validation accuracy, aot.sweep.metrics)
SPEC = SweepSpec(
    task="recall",
    preset=PRESET,
    group=("tag", "model", "n_embd", "seq_len", "n_pairs", "vocab_size", "steps", "extra"),
    shown="test_accuracy",
)


@dataclass(frozen=True)
class Run:
    """One training run of the study: ``block`` at ``width`` on MQAR (``seq_len`` tokens, ``pairs`` pairs, vocabulary
    ``vocab``) for ``steps`` steps at ``lr`` (None: waiting for its sweep) and ``seed``."""

    tag: str
    block: str
    width: int
    seq_len: int
    pairs: int
    vocab: int
    steps: int
    lr: float | None = None
    seed: int = 0
    extra: tuple[str, ...] = ()  # --set assignments of every run of the grid
    task = "recall"

    @property
    def sets(self) -> list[str]:
        assert self.lr is not None, "a run waiting for its sweep has no lr yet"
        point = study_sets(self.block, self.width, self.seq_len, self.pairs, self.vocab)
        return [*point, f"train.steps={self.steps}", f"train.lr={self.lr:g}", f"train.seed={self.seed}", *self.extra]

    @property
    def key(self) -> str:
        point = (self.block, self.width, self.seq_len, self.pairs, self.vocab, self.steps)
        return run_key(self.tag, *point, self.lr, self.seed, *self.extra)

    def folder(self, runs: str | Path) -> Path:
        slug = re.sub(r"[^a-z0-9]+", "-", self.block.lower()).strip("-")
        text = f"{self.tag}-{slug}-w{self.width}-T{self.seq_len}-p{self.pairs}-lr{self.lr:g}-s{self.seed}"
        return Path(runs) / folder_name(text, self.key)

    def build(self) -> TaskRun:
        return build_run("recall", PRESET, [*self.sets, "train.progress=false"])

    def describe(self) -> str:
        lr = "best" if self.lr is None else f"{self.lr:g}"
        return f"{self.tag} {self.block} w{self.width} T{self.seq_len} pairs {self.pairs} lr {lr} seed {self.seed}"

    def command(self, runs: str | Path) -> str:
        """The `aot train recall` command of this run (recorded in its row)."""
        sets = " ".join(f"--set {s}" for s in self.sets)
        return f"aot train recall --recipe {PRESET} {sets} --out {self.folder(runs)} --resume"

    def group(self) -> tuple[object, ...]:
        """The values of :data:`SPEC`'s group fields, as a row of this run has them."""
        return (self.tag, self.block, self.width, self.seq_len, self.pairs, self.vocab, self.steps, self.extra)


def grid_of(args: argparse.Namespace) -> RecallGrid:
    """The grid the arguments ask for: --quick or the study, with the command line's changes."""
    grid = QUICK if args.quick else STUDY
    changes = {name: tuple(getattr(args, name)) for name in ("blocks", "widths", "lrs", "seeds") if getattr(args, name)}
    changes.update({name: getattr(args, name) for name in ("steps", "vocab", "tag") if getattr(args, name)})
    if args.set:
        changes["extra"] = tuple(args.set)
    unknown = [b for b in changes.get("blocks", ()) if b not in RECALL_BLOCKS]  # type: ignore[attr-defined]
    if unknown:
        raise SystemExit(f"run.py: error: unknown block {unknown[0]!r}; use one of {', '.join(RECALL_BLOCKS)}")
    return replace(grid, **changes)  # type: ignore[arg-type]


def make_plan(grid: RecallGrid, store: dict) -> Plan[Run]:
    """Every run of ``grid``: each point's lr sweep at the first seed, then the other seeds at the winner (``pending``
    until the sweep is recorded)."""
    rows = [r for r in store["runs"] if r["tag"] == grid.tag]
    winners = sweep_winners(rows, SPEC.axes, SPEC.metric, list(grid.lrs), grid.seeds[0])
    bases = [
        Run(grid.tag, block, width, seq_len, pairs, grid.vocab, grid.steps, None, grid.seeds[0], grid.extra)
        for block, width, seq_len, pairs in grid.points()
    ]
    return plan_sweep(
        [(base, list(grid.lrs)) for base in bases],
        grid.seeds,
        lambda base: winners.get(base.group()),
        lambda base, lr, seed: replace(base, lr=lr, seed=seed),
    )


def estimate_seconds(run: Run, cost: dict) -> float | None:
    """Training seconds of ``run`` from cost.json's seconds per step at 64 tokens (scaled by length: a lower bound for
    the attention blocks, whose T x T part grows faster), or None without a measurement for its block and width."""
    per_step = cost.get("seconds_per_step", {}).get(run.block, {}).get(str(run.width))
    return None if per_step is None else per_step * run.steps * run.seq_len / cost["seq_len"]


def print_plan(plan: Plan[Run], store: dict, runs_dir: str) -> float:
    """One line per run (done / to run / waits for the sweep) and the estimated CPU seconds still to spend."""
    cost = json.loads(COST.read_text()) if COST.is_file() else {}
    recorded = {r["key"] for r in store["runs"]}
    total, unknown = 0.0, 0
    for status, runs in (("run", plan.runs), ("after sweep", plan.pending)):
        for run in runs:
            done = run.key in recorded or (run.lr is not None and (run.folder(runs_dir) / "results.json").is_file())
            seconds = estimate_seconds(run, cost)
            unknown += seconds is None and not done
            total += 0.0 if done or seconds is None else seconds
            guess = "    ?    " if seconds is None else f"~{seconds / 60:5.1f} min"
            print(f"{'done' if done else status:12s} {run.describe():70s} {guess}")
    note = f" (+{unknown} runs without a measurement in cost.json)" if unknown else ""
    print(f"{len(plan.runs) + len(plan.pending)} runs; still to run ~{total / 3600:.1f} h of training{note}")
    return total


def summary_row(run: Run, result: dict, folder: Path) -> dict:
    """A results.json row: the run's point, then the numbers `get_task("recall").store_row` keeps."""
    return {
        "tag": run.tag,
        "model": run.block,
        "lr": float(result["config"]["train"]["lr"]),
        "seed": int(result["seed"]),
        "extra": list(run.extra),
        **get_task("recall").store_row(result),
        "command": run.command(folder.parent),
        "run_dir": str(folder),
    }


def markdown(store: dict) -> str:
    """table.md: per tag, every point at its best lr (mean and min-max of the test accuracy over seeds)."""
    summaries = SPEC.summaries(store["runs"])
    lines = []
    for tag in sorted({s.config["tag"] for s in summaries}):
        lines += [
            f"### {tag}: MQAR test accuracy (per query) at each point's best lr, mean (min-max) over seeds",
            "",
            "| block | width | tokens | pairs | V | params | lr | seeds | test accuracy | per sequence |",
            "|---|---|---|---|---|---|---|---|---|---|",
        ]
        for s in (s for s in summaries if s.config["tag"] == tag):
            per_sequence = sum(r["test_sequence_accuracy"] for r in s.rows) / len(s.rows)
            lines.append(
                f"| {s.config['model']} | {s.config['n_embd']} | {s.config['seq_len']} | {s.config['n_pairs']} | "
                f"{s.config['vocab_size']} | {s.get('params'):,} | {s.lr:g} | {len(s.seeds)} | "
                f"{s.mean:.3f} ({s.min:.3f}-{s.max:.3f}) | {per_sequence:.3f} |"
            )
        lines.append("")
    return "\n".join(lines)


def seed_counts(summaries: list[Summary], variants: list[Summary]) -> str:
    """Which seeds the cells of the grid and of its variants' rows have: "seeds 0 and 1 in 29 of the grid's 48 cells,
    seed 0 alone in 19, and in the variants' cells seed 0 alone"."""

    def seeds(key: tuple[int, ...]) -> str:
        return f"seeds {' and '.join(map(str, key))}" if len(key) > 1 else f"seed {key[0]} alone"

    counts = Counter(tuple(sorted(s.seeds)) for s in summaries)
    if len(counts) == 1:
        text = f"{seeds(next(iter(counts)))} in every cell of the grid"
    else:
        (first, n), *rest = counts.most_common()
        text = f"{seeds(first)} in {n} of the grid's {len(summaries)} cells, " + ", ".join(
            f"{seeds(key)} in {m}" for key, m in rest
        )
    other = Counter(tuple(sorted(s.seeds)) for s in variants)
    if len(other) == 1:
        text += f", and in the variants' cells {seeds(next(iter(other)))}"
    elif other:
        text += ", and in the variants' cells " + ", ".join(f"{seeds(key)} in {m}" for key, m in other.most_common())
    return text


def readme_table(store: dict, tag: str) -> str:
    """The <!-- recall:summary --> block (docs/guide/language.md, this README): a row per block, a column per
    (width, length, pairs) of ``tag``,
    each cell the test accuracy per query at the point's best lr (mean over its seeds), and the chance level of
    guessing among the sequence's values (1 / pairs)."""
    from aot.sweep.render import table

    every = SPEC.summaries(store["runs"])
    summaries = [s for s in every if s.config["tag"] == tag]
    if not summaries:
        return f"No `{tag}` run is recorded yet (benchmarks/recall/results.json)."
    points = sorted({(s.config["n_embd"], s.config["seq_len"], s.config["n_pairs"]) for s in summaries})

    def label(s: Summary) -> str:  # a variant grid (tag TAG-...) of some blocks: its rows say how it differs
        return (
            s.config["model"]
            if s.config["tag"] == tag
            else f"{s.config['model']}, {s.config['steps']} steps, lr {s.lr:g}"
        )

    variants = [s for s in every if s.config["tag"].startswith(f"{tag}-")]
    cells = {(label(s), s.config["n_embd"], s.config["seq_len"], s.config["n_pairs"]): s for s in summaries + variants}
    rows = []
    order = list(RECALL_BLOCKS)  # the blocks in the study's order, each variant after the plain grid
    labels = sorted({label(s): s for s in summaries + variants}.items(),
                    key=lambda item: (item[1].config["tag"] != tag, order.index(item[1].config["model"])))  # fmt: skip
    for block, _ in labels:
        row = [block]
        for point in points:
            found = cells.get((block, *point))
            row.append("—" if found is None else f"{found.mean:.2f}")
        rows.append(row)
    rows.append(["chance (1 / pairs)", *(f"{1 / pairs:.2f}" for _, _, pairs in points)])
    vocab = summaries[0].config["vocab_size"]
    steps = summaries[0].config["steps"]
    lrs = sorted({s.lr for s in summaries})
    head = (
        f"MQAR test accuracy per query, tag `{tag}` (and its variants `{tag}-*`): 2 layers, one head, V = {vocab}, "
        f"{steps} steps of 64 sequences, each cell at the best of the lrs tried at its point "
        f"({', '.join(f'{lr:g}' for lr in lrs)}; table.md gives each), the mean over its seeds "
        f"({seed_counts(summaries, variants)}); the 2-core machines of these sessions (results.json last written on "
        f"{store.get('machine', {}).get('processor', '?')}). Written by `python benchmarks/recall/run.py --render` "
        "from benchmarks/recall/results.json."
    )
    header = ["block", *(f"d {w}, T {t}, {k} pairs" for w, t, k in points)]
    return "\n".join([head, "", *table(header, rows)])


def render(store: dict, folder: Path = HERE, tags: list[str] | None = None) -> list[Path]:
    """Rewrite ``folder``/table.md, per tag the two accuracy figures, and (for the recorded store) the
    <!-- recall:summary --> blocks of the README and the language guide from the study (tag main) or, until it
    has runs, the quick grid."""
    write_text_atomic(folder / "table.md", markdown(store))
    if folder == HERE:
        tag = "main" if any(r["tag"] == "main" for r in store["runs"]) else "quick"
        for readme in (HERE / "README.md", GUIDE):
            text = replace_marked_block(readme.read_text(), "recall:summary", readme_table(store, tag), readme)
            write_text_atomic(readme, text)
    points = summary_points(SPEC.summaries(store["runs"]))
    written = [folder / "table.md"]
    for tag in tags or sorted({p["tag"] for p in points}):
        mine = [p for p in points if p["tag"] == tag]
        written.append(draw_accuracy(mine, "n_embd", folder / f"accuracy_vs_width-{tag}.png"))
        written.append(draw_accuracy(mine, "n_pairs", folder / f"accuracy_vs_pairs-{tag}.png"))
    return written


def run_grid(grid: RecallGrid, runs: Path, store_path: Path, device: str = "cpu", lock: str | None = None) -> dict:
    """Train what ``grid``'s plan asks for and has not finished (:meth:`aot.sweep.Execution.run_plan`), recording each
    row into ``store_path`` and rewriting table.md beside it after each run, the figures at the end. Returns the
    store."""

    def recorded(store: dict, row: dict, status: str) -> None:
        if status != "recorded":
            write_text_atomic(store_path.with_name("table.md"), markdown(store))
            print(json.dumps({k: row[k] for k in ("model", "n_embd", "seq_len", "n_pairs", "lr", "test_accuracy")}))

    log = lambda line: print(f"{time.strftime('%H:%M:%S')} {line}", flush=True)  # noqa: E731
    execution = Execution(runs, store_path, summary_row, SPEC, device, lock, log)
    store = execution.run_plan(lambda store: make_plan(grid, store), on_record=recorded)
    render(store, store_path.parent, [grid.tag])
    return store


def measure_cost(grid: RecallGrid, steps: int, device: str) -> dict:
    """Seconds per training step (batch 64, 64 tokens) of every block of ``grid`` at each of its widths: a short run
    of each through `aot train recall`, its training time over its steps."""
    per_step: dict[str, dict[str, float]] = {}
    with tempfile.TemporaryDirectory() as scratch:
        for block in grid.blocks:
            for width in grid.widths:
                sets = [*study_sets(block, width, 64, 8, grid.vocab), f"train.steps={steps}", "train.eval_every=0"]
                run = build_run("recall", PRESET, [*sets, "train.progress=false", "eval.test_sequences=100"])
                result = train("recall", run, Path(scratch) / f"{len(per_step)}-{width}", device)
                per_step.setdefault(block, {})[str(width)] = result["train"]["train_seconds"] / steps
                print(f"{block} w{width}: {per_step[block][str(width)]:.3f} s/step", flush=True)
    return {"machine": machine_info(), "seq_len": 64, "batch_size": 64, "steps": steps, "seconds_per_step": per_step}


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--quick", action="store_true", help="the quick grid (tag quick; ~1 CPU-hour at one thread)")
    parser.add_argument("--blocks", nargs="+", help=f"blocks (default: the grid's; all: {', '.join(RECALL_BLOCKS)})")
    parser.add_argument("--widths", nargs="+", type=int)
    parser.add_argument("--lrs", nargs="+", type=float, help="more than one is a sweep at the first seed")
    parser.add_argument("--seeds", nargs="+", type=int)
    parser.add_argument("--steps", type=int, help="optimizer steps of 64 sequences")
    parser.add_argument("--vocab", type=int, help="vocabulary size V")
    parser.add_argument("--set", action="append", default=[], help="override for every run, e.g. model.position=rope")
    parser.add_argument("--tag", help="group name in results.json (default: main, or quick)")
    parser.add_argument("--runs", default="runs/bench-recall", help="folder for the individual runs")
    parser.add_argument("--plan", action="store_true", help="print the runs and the estimated CPU time; train nothing")
    parser.add_argument("--render", action="store_true", help="rewrite table.md and the figures; train nothing")
    parser.add_argument("--cost", action="store_true", help="time every block of the grid (cost.json); record nothing")
    parser.add_argument("--cost-steps", type=int, default=30, help="steps of each --cost run (default 30)")
    parser.add_argument("--device", default="cpu")
    parser.add_argument("--lock", metavar="FILE", help="hold this flock(1)-style lock around each run")
    return parser


def main(argv: list[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    grid = grid_of(args)
    store = read_store(RESULTS)
    if args.plan:
        print_plan(make_plan(grid, store), store, args.runs)
        return 0
    if args.render:
        for path in render(store):
            print(f"wrote {path}")
        return 0
    if args.cost:
        record = measure_cost(grid, args.cost_steps, args.device)
        record["command"] = "python benchmarks/recall/run.py " + " ".join(argv if argv is not None else sys.argv[1:])
        write_text_atomic(COST, json.dumps(record, indent=2) + "\n")
        print(f"wrote {COST}")
        return 0

    run_grid(grid, Path(args.runs), RESULTS, args.device, args.lock)
    return 0


if __name__ == "__main__":
    sys.exit(main())
