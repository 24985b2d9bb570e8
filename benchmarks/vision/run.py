"""Image classification at matched parameters (~0.8M, d = 128, patch 7 on 28x28): AoT-MSSA-V, AoT-MHSA-V, ViT
and CRATE on Fashion-MNIST (and MNIST), equal epochs, several seeds; plus the ablations behind the AoT presets.

    OMP_NUM_THREADS=1 PYTHONPATH=src python benchmarks/vision/run.py ablation --lock /tmp/aot-cpu.lock
    OMP_NUM_THREADS=1 PYTHONPATH=src python benchmarks/vision/run.py main --lock /tmp/aot-cpu.lock
    OMP_NUM_THREADS=1 PYTHONPATH=src python benchmarks/vision/run.py main --data mnist --seeds 0 --lock ...
    PYTHONPATH=src python benchmarks/vision/run.py report   # rewrite table.md, accuracy.png and the guide's table

Every run goes through `aot.tasks.run_task` (the code behind `aot train vision`) by the sweep engine `aot.sweep`
(the code behind `aot sweep`): finished runs (a whole results.json in their folder) are skipped when the script
runs again, so an interrupted sweep resumes. Rows are recorded in benchmarks/vision/results.json (keyed by tag /
data / preset / overrides / seed / resolved model; written atomically). This script holds the models, the
ablations and the tables.
One torch thread: on this shared 2-core machine two threads ran 3-10x slower per step than one (spin-waiting).
"""

from __future__ import annotations

import argparse
import dataclasses
import functools
import json
import statistics
import sys
from dataclasses import dataclass
from pathlib import Path

from aot.blockspec import block_specs
from aot.config import ModelConfig
from aot.run_folder import write_text_atomic
from aot.runinfo import replace_marked_block
from aot.sweep import Execution, Plan, SweepSpec, read_store, run_key
from aot.sweep.training import build_run
from aot.tasks import TaskRun, get_task
from aot.tasks.vision import VISION_RECIPE_RENAMES

HERE = Path(__file__).resolve().parent
README = HERE.parents[1] / "docs" / "guide" / "vision.md"  # the vision guide (the name is kept for the tests)
README_MARKER = "vision:table"  # the guide's table, rendered by readme_table() from results.json
RESULTS = HERE / "results.json"
SPEC = SweepSpec(task="vision")  # the rows' presets vary: each row names its own
MODELS = ["aot-mssa", "aot-mhsa", "transformer", "crate"]  # training presets of `aot train vision`
NAMES = {"aot-mssa": "AoT-MSSA-V", "aot-mhsa": "AoT-MHSA-V", "transformer": "ViT", "crate": "CRATE"}
# What makes AoT-MSSA-V train: each row changes one choice of the model (150 steps x 128 = 0.35 epochs, seed 0).
# Written before the result was known; the winner became the preset (see README.md).
DEEP = ["model.n_layer=24", "model.n_embd=128"]
NO_NORM = [*DEEP, "model.norm=none", "model.residual_scale=none"]
ABLATIONS: dict[str, tuple[str, list[str]]] = {
    "mssa 24x128, no norm, no eta (the paper's text)": ("aot-mssa", NO_NORM),
    "mssa 24x128, LayerNorm, no eta": ("aot-mssa", [*DEEP, "model.norm=layernorm", "model.residual_scale=none"]),
    "mssa 24x128, no norm, eta per channel 0.1": (
        "aot-mssa",
        [*DEEP, "model.norm=none", "model.residual_scale=channel", "model.residual_scale_init=0.1"],
    ),
    "mssa 24x128, LayerNorm, eta per channel 0.1": (
        "aot-mssa",
        [*DEEP, "model.norm=layernorm", "model.residual_scale=channel", "model.residual_scale_init=0.1"],
    ),
    "mssa 6x256, LayerNorm, eta per channel 0.1": (
        "aot-mssa",
        [
            "model.norm=layernorm",
            "model.residual_scale=channel",
            "model.residual_scale_init=0.1",
            "model.n_layer=6",
            "model.n_embd=256",
        ],
    ),
    "mssa 6x256, LayerNorm, eta per channel 0.1, no positions": (
        "aot-mssa",
        [
            "model.norm=layernorm",
            "model.residual_scale=channel",
            "model.residual_scale_init=0.1",
            "model.n_layer=6",
            "model.n_embd=256",
            "model.position=none",
        ],
    ),
    "mhsa 12x128, LayerNorm, no eta": ("aot-mhsa", ["model.norm=layernorm", "model.residual_scale=none"]),
    "mhsa 12x128, LayerNorm, eta per channel 0.1": (
        "aot-mhsa",
        ["model.norm=layernorm", "model.residual_scale=channel", "model.residual_scale_init=0.1"],
    ),
}


# ModelConfig's fields when the first rows were recorded. A field added later enters a run's key only when it is
# set away from its default, so the recorded runs keep their keys (and are not trained again) when ModelConfig grows.
RECORDED_MODEL_FIELDS = frozenset(
    {
        "activation",
        "attn_scale",
        "bias",
        "block",
        "block_size",
        "causal",
        "dropout",
        "final_norm",
        "head_dim",
        "image_size",
        "in_chans",
        "init_std",
        "ista_lambda",
        "ista_step",
        "linear_attn_normalize",
        "mamba_d_conv",
        "mamba_d_state",
        "mamba_expand",
        "mlp_ratio",
        "n_dims",
        "n_embd",
        "n_head",
        "n_layer",
        "n_points",
        "norm",
        "num_classes",
        "patch_size",
        "position",
        "residual_scale",
        "residual_scale_init",
        "rope_theta",
        "task",
        "tied_output",
        "vocab_size",
    }
)


# What ModelConfig.to_dict wrote when the first rows were recorded and writes no more: every block's options (now
# written only for their block) and attn_scale (now score_scale). The key is computed on that form, so recorded runs
# keep their keys.
RECORDED_OPTION_DEFAULTS = {
    "ista_lambda": 0.1,
    "ista_step": 0.1,
    "linear_attn_normalize": True,
    "mamba_d_conv": 4,
    "mamba_d_state": 16,
    "mamba_expand": 2,
}
RECORDED_NAMES = {"score_scale": "attn_scale"}


def model_identity(model: dict) -> dict:
    """The resolved model as it enters a run's key: every recorded field, and later fields that are not at their
    default, in the form the first rows were recorded in."""
    model = {RECORDED_NAMES.get(k, k): v for k, v in model.items()}
    model = {**RECORDED_OPTION_DEFAULTS, **model}
    defaults = {f.name: f.default for f in dataclasses.fields(ModelConfig)}
    defaults.update({k: v for spec in block_specs() for k, v in spec.options.defaults().items()})
    return {k: v for k, v in model.items() if k in RECORDED_MODEL_FIELDS or v != defaults.get(k)}


@dataclass(frozen=True)
class Run:
    """One training run: a training preset of `aot train vision` with these overrides and seed on ``data``."""

    tag: str
    label: str
    data: str
    preset: str
    sets: tuple[str, ...]
    seed: int
    task = "vision"

    def build(self) -> TaskRun:
        flags = {"data": {"dataset": self.data}, "train": {"seed": self.seed}}
        # rows, keys and folders keep the recipe names results.json was recorded under (aot-mssa, transformer, ...):
        # the run is built from the recipe's current name (fashion-mssa, fashion-vit, ...)
        recipe = VISION_RECIPE_RENAMES.get(self.preset, self.preset)
        return build_run("vision", recipe, list(self.sets), flags=flags)

    @functools.cached_property
    def key(self) -> str:
        model = model_identity(self.build().model_config().to_dict())  # the resolved model, not just its preset name
        return run_key(self.tag, self.data, self.preset, list(self.sets), self.seed, model)

    def folder(self, runs: Path) -> Path:
        return runs / f"{self.tag}-{self.data}-{self.preset}-s{self.seed}-{self.key}"

    def describe(self) -> str:
        return f"{self.tag} {self.data} {self.label} seed {self.seed}"


def plan_runs(args: argparse.Namespace) -> list[Run]:
    """The runs of ``args.mode``: every model at every seed (main), or the chosen ablation rows (seed 0)."""
    jobs: list[tuple[str, str, list[str], int]]
    if args.mode == "main":
        jobs = [(m, m, [], seed) for seed in args.seeds for m in args.models]
        steps = [f"train.steps={args.steps}"] if args.steps else []
    elif args.mode == "ablation":
        rows = list(ABLATIONS.items())
        wanted = range(len(rows)) if args.rows is None else args.rows
        jobs = [(rows[i][0], rows[i][1][0], rows[i][1][1], 0) for i in wanted]
        steps = [f"train.steps={args.steps or 150}"]
    else:
        return []
    return [
        Run(args.mode, label, args.data, preset, (*sets, "train.progress=false", *steps), seed)
        for label, preset, sets, seed in jobs
    ]


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("mode", choices=["main", "ablation", "report"])
    parser.add_argument("--data", default="fashion-mnist", help="image set (default fashion-mnist)")
    parser.add_argument("--models", nargs="+", default=MODELS)
    parser.add_argument("--seeds", nargs="+", type=int, default=[0, 1])
    parser.add_argument("--steps", type=int, help="optimizer steps (default: the preset's; ablation: 150)")
    parser.add_argument("--rows", nargs="+", type=int, help="ablation: only these rows (0-based, in ABLATIONS order)")
    parser.add_argument("--runs", default="runs/bench-vision", help="folder for the individual runs")
    parser.add_argument("--lock", metavar="FILE", help="hold this flock(1)-style lock around each run")
    args = parser.parse_args(argv)
    runs = plan_runs(args)
    if runs:
        # keep_recorded=False, as before: a run whose folder is gone trains again
        log = lambda line: print(line, flush=True)  # noqa: E731
        execution = Execution(Path(args.runs), RESULTS, summary_row, SPEC, "cpu", args.lock, log, keep_recorded=False)
        execution.run_plan(lambda store: Plan(runs), on_record=lambda store, row, status: print(json.dumps(row)))
    report()
    return 0


def summary_row(run: Run, result: dict, folder: Path) -> dict:
    """A results.json row: the run's tag, label, data, preset, overrides and seed, the numbers
    `get_task("vision").store_row` keeps, and its folder."""
    return {
        "tag": run.tag,
        "label": run.label,
        "data": result["data"]["name"],
        "preset": run.preset,
        "overrides": [s for s in run.sets if not s.startswith("train.progress")],
        "seed": run.seed,
        **get_task("vision").store_row(result),
        "run_dir": str(folder),
    }


def _mean_spread(values: list[float]) -> str:
    if len(values) == 1:
        return f"{100 * values[0]:.2f}"
    return f"{100 * statistics.mean(values):.2f} ± {100 * statistics.stdev(values):.2f}"


def report() -> None:
    if not RESULTS.is_file():
        return
    store = read_store(RESULTS)
    write_text_atomic(HERE / "table.md", markdown(store))
    plot(store)
    README.write_text(replace_marked_block(README.read_text(), README_MARKER, readme_table(store), README))


def readme_table(store: dict) -> str:
    """The vision guide's table: test top-1 % (mean ± sd over seeds) of every model shape of the main runs, one column
    per data set and budget (Fashion-MNIST first, longest budget first)."""
    rows = [r for r in store["runs"] if r["tag"] == "main"]
    columns = sorted(
        {(r["data"], round(r["epochs"])) for r in rows}, key=lambda c: (c[0] != "fashion-mnist", c[0], -c[1])
    )
    current = {}  # each preset's shape in its latest run: older shapes are labelled as earlier presets
    for r in sorted(rows, key=lambda r: r["date"]):
        current[r["preset"]] = (r["n_layer"], r["n_embd"])
    shapes = sorted(
        {(r["preset"], r["n_layer"], r["n_embd"]) for r in rows},
        key=lambda shape: (MODELS.index(shape[0]) if shape[0] in MODELS else 99, shape[1:] != current[shape[0]]),
    )
    data_names = {"fashion-mnist": "Fashion-MNIST", "mnist": "MNIST"}
    header = [f"{data_names.get(d, d)}, {e} epoch{'s' if e > 1 else ''}" for d, e in columns]
    lines = [
        "| model | layers × width | params | " + " | ".join(header) + " |",
        "|---|---|---|" + "---|" * len(columns),
    ]
    for preset, n_layer, n_embd in shapes:
        mine = [r for r in rows if (r["preset"], r["n_layer"], r["n_embd"]) == (preset, n_layer, n_embd)]
        name = NAMES.get(preset, preset)
        if (n_layer, n_embd) != current[preset]:
            name += f" (an earlier preset, {n_layer} × {n_embd})"
        cells = []
        for data, epochs in columns:
            runs = [r for r in mine if (r["data"], round(r["epochs"])) == (data, epochs)]
            cells.append(_mean_spread([r["test_top1"] for r in runs]) if runs else "—")
        params = statistics.mean(r["params"] for r in mine) / 1e6
        lines.append(f"| {name} | {n_layer} × {n_embd} | {params:.2f}M | " + " | ".join(cells) + " |")
    return "\n".join(lines)


def markdown(store: dict) -> str:
    machine = store["machine"]
    lines = [
        "# Image classification: AoT-V against ViT and CRATE at matched parameters",
        "",
        f"Machine: {machine.get('processor') or machine['platform']}, {machine['cpu_count']} CPUs, torch "
        f"{machine['torch']}, one torch thread; written {machine['date']}. Reproduce with the commands in "
        "`benchmarks/vision/run.py`. Images/s and seconds come from a 2-core machine shared with other jobs (heavy "
        "runs serialised by flock, light ones not): read them as ±30 %, and compare models by the ratio; accuracies "
        "do not depend on it.",
        "",
        "## Main comparison (mean ± standard deviation over seeds)",
        "",
        "| data | model | block | layers x width | norm | eta | params | epochs | seeds | test top-1 % | "
        "test top-5 % | images/s | train s |",
        "|---|---|---|---|---|---|---|---|---|---|---|---|---|",
    ]
    main_rows = [r for r in store["runs"] if r["tag"] == "main"]
    groups: dict[tuple, list[dict]] = {}
    for r in main_rows:
        groups.setdefault((r["data"], r["preset"], r["n_layer"], r["n_embd"], tuple(r["overrides"])), []).append(r)
    for (data, preset, *_), rows in sorted(groups.items()):
        r0 = rows[0]
        lines.append(
            f"| {data} | {preset} | {r0['block']} | {r0['n_layer']} x {r0['n_embd']} | {r0['norm']} | "
            f"{r0['residual_scale']} | {r0['params'] / 1e6:.3f}M | {r0['epochs']:.1f} | {len(rows)} | "
            f"{_mean_spread([r['test_top1'] for r in rows])} | {_mean_spread([r['test_top5'] for r in rows])} | "
            f"{statistics.mean(r['images_per_second'] for r in rows):,.0f} | "
            f"{statistics.mean(r['train_seconds'] for r in rows):.0f} |"
        )
    ablation = [r for r in store["runs"] if r["tag"] == "ablation"]
    if ablation:
        lines += [
            "",
            "## Ablations: what makes AoT-MSSA-V train (one seed, 150 steps x 128 = 0.35 epochs)",
            "",
            "| data | choice | params | val top-1 % | test top-1 % | test loss | images/s | train s |",
            "|---|---|---|---|---|---|---|---|",
        ]
        for r in ablation:
            lines.append(
                f"| {r['data']} | {r['label']} | {r['params'] / 1e6:.3f}M | {100 * r['val_top1']:.2f} | "
                f"{100 * r['test_top1']:.2f} | {r['test_loss']:.3f} | {r['images_per_second']:,.0f} | "
                f"{r['train_seconds']:.0f} |"
            )
    return "\n".join(lines) + "\n"


def plot(store: dict) -> None:
    """Test top-1 of each model (a dot per seed, a bar for the mean), one panel per data set and budget (epochs)."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    main_rows = [r for r in store["runs"] if r["tag"] == "main"]
    panels = sorted({(r["data"], round(r["epochs"])) for r in main_rows})
    if not panels:
        return
    fig, axes = plt.subplots(1, len(panels), figsize=(4.5 * len(panels), 3.6), squeeze=False)
    for ax, (data, epochs) in zip(axes[0], panels):
        rows = [r for r in main_rows if (r["data"], round(r["epochs"])) == (data, epochs)]
        shapes = sorted(
            {(r["preset"], r["n_layer"], r["n_embd"]) for r in rows},
            key=lambda shape: (MODELS.index(shape[0]) if shape[0] in MODELS else 99, shape[1]),
        )
        for i, shape in enumerate(shapes):
            accs = [100 * r["test_top1"] for r in rows if (r["preset"], r["n_layer"], r["n_embd"]) == shape]
            ax.bar(i, statistics.mean(accs), color=f"C{i}", alpha=0.6)
            ax.plot([i] * len(accs), accs, "ko", ms=3)
        labels = [f"{preset}\n{n_layer}x{n_embd}" for preset, n_layer, n_embd in shapes]
        ax.set_xticks(range(len(shapes)), labels, fontsize=8)
        low = min(100 * r["test_top1"] for r in rows)
        ax.set_ylim(max(0, low - 5), 100)
        ax.set_ylabel("test top-1 (%)")
        ax.set_title(f"{data}, {epochs} epoch{'s' if epochs > 1 else ''}, ~0.8M params", fontsize=10)
    fig.tight_layout()
    fig.savefig(HERE / "accuracy.png", dpi=120)
    plt.close(fig)


if __name__ == "__main__":
    sys.exit(main())
