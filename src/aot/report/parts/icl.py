"""Part ``icl``: in-context regression (Garg et al. 2022, the paper's protocol) — GPT-2, Llama, AoT-MHSA and AoT-MSSA
trained with ``aot train icl`` at matched parameters, then evaluated together with ``aot eval icl`` on one set of
held-out prompts beside least squares, averaging, 3-nearest neighbours and the zero predictor: Garg's figure and
a table of the error at k = 2, d and 2d in-context examples.

CPU presets: d = 5 (11 points per prompt) with Garg's curriculum scaled down (``quick``: width 64, 1000 steps;
``full``: the ``cpu-quick`` training recipe, width 128, 2000 steps, and causal linear attention too); ``paper`` is
Garg's recipe (d = 20, 41 points, 500k steps) and adds Mamba.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from aot.report.document import Block, Paragraph, Table
from aot.report.paper_numbers import ICL_PROTOCOL
from aot.report.part import Context, Part, Plan, Step, differences_blocks, figure_blocks, fmt_count, read_step_results

# (label, CPU model preset, paper-size model preset)
MODELS: tuple[tuple[str, str, str], ...] = (
    ("GPT-2", "gpt2-icl-cpu", "gpt2-icl"),
    ("Llama", "llama-icl-cpu", "llama-icl"),
    ("AoT-MHSA", "aot-mhsa-icl-cpu", "aot-mhsa-icl"),
    ("AoT-MSSA", "aot-mssa-icl-cpu", "aot-mssa-icl"),
)
FULL_EXTRA: tuple[tuple[str, str, str], ...] = (("linear-attn", "linear-attn-icl-cpu", "linear-attn-icl"),)
# Mamba's sequential scan is slow on a CPU (404 s for 1000 steps at width 64, 8× GPT-2's): paper preset only
PAPER_EXTRA: tuple[tuple[str, str, str], ...] = (("Mamba", "mamba-icl-cpu", "mamba-icl"),)
TINY_MODELS = ("GPT-2", "AoT-MSSA")
TRAIN: dict[str, list[str]] = {
    "tiny": ["--steps", "4", "--set", "model.n_embd=16", "--set", "model.n_layer=1", "--set", "train.eval_every=2",
             "--set", "eval.final_prompts=64", "--set", "eval.periodic_prompts=32"],
    # benchmarks/icl's recipe: ~0.10M parameters each at width 64, the curriculum every 100 steps
    "quick": ["--steps", "1000", "--set", "model.n_embd=64", "--set", "data.curriculum_interval=100",
              "--set", "train.eval_every=250"],
    "full": ["--recipe", "cpu-quick", "--set", "train.checkpoint_every=500"],  # width 128, 2000 steps
    "paper": ["--recipe", "garg"],
}  # fmt: skip
PROMPTS = {"tiny": 64, "quick": 1000, "full": 1000, "paper": 1000}


def _slug(label: str) -> str:
    return label.lower().replace(" ", "-")


def plan(ctx: Context) -> Plan:
    models = [m for m in MODELS if ctx.preset != "tiny" or m[0] in TINY_MODELS]
    if ctx.preset in ("full", "paper"):
        models += FULL_EXTRA
    if ctx.preset == "paper":
        models += PAPER_EXTRA
    paper = ctx.preset == "paper"
    steps = [
        Step(
            _slug(label),
            ["train", "icl", "--model", big if paper else cpu, *TRAIN[ctx.preset], "--set", "train.progress=false"],
            resumable=ctx.preset in ("full", "paper"),
        )
        for label, cpu, big in models
    ]
    runs = [str(step.out_dir(ctx.part_dir)) for step in steps]
    labels = ",".join(label for label, _, _ in models)
    steps.append(Step("eval", ["eval", "icl", *runs, "--labels", labels, "--prompts", str(PROMPTS[ctx.preset])]))
    missing = []
    if paper and not ctx.cuda_devices:
        missing.append("no CUDA GPU here: Garg's recipe (500k steps of 64 prompts, d = 20) is a GPU job")
    return Plan(steps, {"models": [label for label, _, _ in models]}, missing=missing)


def collect(part_dir: Path, plan: Plan) -> dict[str, Any]:
    ev = read_step_results(part_dir, plan, "eval")
    d = ev["data"]["n_dims"]
    ks = {"k=2": 2, "k=d": d, "k=2d": 2 * d}
    curves = []
    for name, curve in ev["curves"].items():
        row: dict[str, Any] = {"name": name, "kind": curve["kind"]}
        row["at"] = {label: curve["mean"][k] for label, k in ks.items() if k < len(curve["mean"])}
        inside = [(label, k) for label, k in ks.items() if k < len(curve["mean"])]
        row["band_at"] = {label: [curve["low"][k], curve["high"][k]] for label, k in inside}
        if curve["kind"] == "model":
            row["params"] = curve["model"]["params"]
            row["block"] = curve["model"]["block"]
            row["n_layer"] = curve["model"]["n_layer"]
            row["steps"] = curve["train"].get("steps")
            row["train_seconds"] = curve["train"].get("train_seconds")
        curves.append(row)
    return {
        "machine": ev["machine"],
        "data": ev["data"],
        "n_prompts": ev["n_prompts"],
        "error": ev["error"],
        "ks": ks,
        "curves": curves,
        "figures": {"eval/icl.png": "Garg's figure: error against in-context examples, every model and baseline "
                    "(5-95 % bootstrap bands shaded; dotted line at k = d)"},
    }  # fmt: skip


def render(results: dict[str, Any], part_dir: Path) -> list[Block]:
    d, ks = results["data"]["n_dims"], results["ks"]
    rows = []
    for c in results["curves"]:
        model = c["kind"] == "model"
        rows.append(
            [
                c["name"],
                f"{c['block']} × {c['n_layer']}" if model else "baseline",
                fmt_count(c["params"]) if model else "—",
                str(c["steps"]) if model and c.get("steps") is not None else "—",
                *[f"{c['at'][label]:.3f}" if label in c["at"] else "—" for label in ks],
            ]
        )
    table = Table(
        f"{results['data']['task'].capitalize()} regression, d = {d}, {results['n_prompts']:,} held-out prompts: "
        f"squared error / {'k (non-zeros)' if results['data']['task'] == 'sparse' else 'd'} at k in-context "
        "examples (the zero predictor scores about 1; bands in results.json and the figure)",
        ["model", "block × layers", "params", "steps", *[f"k = {k}" for k in ks.values()]],
        rows,
    )
    models = [c for c in results["curves"] if c["kind"] == "model"]
    steps = models[0].get("steps") if models else None
    differences = [
        f"The paper follows Garg et al.: d = {ICL_PROTOCOL['x_dim']}, up to {ICL_PROTOCOL['max_points']} in-context "
        f"examples, 500k steps of 64 prompts, models of about 9M-22M parameters; here d = {d} "
        f"({results['data']['n_points']} points), {steps} steps, "
        f"{fmt_count(min(c['params'] for c in models))}-{fmt_count(max(c['params'] for c in models))} parameters.",
        "The paper shows curves only (AoT 'comparable' to GPT-2 and Llama), no table: compare the shapes, and whether "
        "a model falls below the zero predictor and towards least squares as k grows.",
        "One seed per model; at this budget some models stay at the zero predictor (they have not learned to regress "
        "in context yet), which says more about the budget than the architecture.",
    ]
    return [
        Paragraph(
            "Prompts x_1, y_1, …, x_n, y_n with y = w·x for a fresh w per prompt; the model predicts each y_k from "
            "the k examples before it. Error: " + results["error"] + "."
        ),
        table,
        *figure_blocks(results, part_dir),
        *differences_blocks(differences),
    ]


PART = Part(
    name="icl",
    title="In-context learning of linear regression",
    paper_items=("icl",),
    plan=plan,
    collect=collect,
    render=render,
)
