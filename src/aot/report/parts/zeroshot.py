"""Part ``zeroshot``: the lm part's trained models evaluated with ``aot eval lm`` on the paper's zero-shot protocols
(LAMBADA, CBT-CN / CBT-NE, PTB / WikiText perplexity), beside the paper's zero-shot table.

The real sets are not bundled and cannot be downloaded here: ``aot reproduce --data lambada=FILE`` (and ``cbt-cn``,
``cbt-ne``, ``ptb``, ``wikitext``) adds them. On the CPU presets the Austen-built stand-ins (``aot data fetch
austen``) are evaluated when fetched; with neither, the part is listed as not run with that one-line fix.

The part reads the lm part's run folders (``REPORT/lm/STEP``), so it depends on that part: the hash of the lm
part's ``results.json`` is in this part's plan files (``upstream.json``), and its key changes whenever the lm runs
do; when the lm part failed or has not run, the part says so in one line.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from aot.data.corpora import is_fetched
from aot.report.document import Block, Table
from aot.report.paper_numbers import LM_MODELS, LM_RECIPE, ZERO_SHOT
from aot.report.part import (
    Context,
    Part,
    Plan,
    Step,
    differences_blocks,
    figure_blocks,
    fmt_count,
    read_step_results,
    upstream,
)
from aot.report.parts import lm

# the real sets, by their `aot eval lm --task` names (also the names of `aot reproduce --data NAME=FILE`)
REAL_SETS = ("lambada", "cbt-cn", "cbt-ne", "ptb", "wikitext")
# the paper's columns: (key in paper_numbers.ZERO_SHOT, header, our sets that measure it in order of preference,
# the metric of `aot eval lm`'s results.json, its unit)
COLUMNS: tuple[tuple[str, str, tuple[str, ...], str], ...] = (
    ("lambada_loss", "LAMBADA loss", ("lambada", "austen-lambada"), "loss"),
    ("ptb_loss", "PTB loss", ("ptb",), "nats_per_token"),
    ("wikitext_loss", "WikiText loss", ("wikitext", "austen-ppl"), "nats_per_token"),
    ("lambada_acc", "LAMBADA acc", ("lambada", "austen-lambada"), "acc_whole_word"),
    ("cbt_cn_acc", "CBT-CN acc", ("cbt-cn", "austen-cbt-cn"), "accuracy"),
    ("cbt_ne_acc", "CBT-NE acc", ("cbt-ne", "austen-cbt-ne"), "accuracy"),
)
NO_DATA = (
    "no zero-shot data here: the Austen-built sets need `aot data fetch austen` (Debian r-cran-janeaustenr and "
    "pip install 'aot[austen]'), or give the real sets: --data lambada=FILE (and cbt-cn, cbt-ne, ptb, wikitext)"
)


def lm_context(ctx: Context) -> Context:
    """The lm part's context in the same report folder (its plan names the run folders this part reads)."""
    return Context(ctx.preset, ctx.part_dir.parent / "lm", dict(ctx.data), ctx.cuda_devices)


def lm_run_folders(ctx: Context, lm_results: dict[str, Any] | None) -> dict[str, Path]:
    """paper model name → the lm part's run folder: its finished runs, else the runs its plan would write."""
    lm_ctx = lm_context(ctx)
    if lm_results is not None:
        return {r["paper_model"]: lm_ctx.part_dir / r["step"] for r in lm_results["runs"]}
    lm_plan = lm.plan(lm_ctx)
    return {name: step.out_dir(lm_ctx.part_dir) for name, step in zip(lm_plan.settings["models"], lm_plan.steps)}


def plan(ctx: Context) -> Plan:
    lm_part = upstream(ctx, "lm")
    needs = [] if lm_part.usable(ctx.preset) else [lm_part.problem("zeroshot", ctx.preset)]
    missing: list[str] = []
    folders = lm_run_folders(ctx, lm_part.results if lm_part.usable(ctx.preset) else None)
    given = [name for name in REAL_SETS if name in ctx.data]
    if ctx.preset == "paper":  # the paper's sets, nothing else
        tasks = list(REAL_SETS)
        absent = [name for name in REAL_SETS if name not in ctx.data]
        if absent:
            missing.append(
                "the paper's zero-shot sets are not bundled and cannot be downloaded here: pass "
                + " ".join(f"--data {name}=FILE" for name in absent)
            )
        data = [f"{name}={ctx.data.get(name, name.upper() + '_FILE')}" for name in REAL_SETS]
        options = ["--device", "auto", "--batch-size", "32"]
    else:
        austen = is_fetched("austen")
        tasks = [*given, *(["austen"] if austen else [])]
        if not tasks:
            missing.append(NO_DATA)
            tasks = ["austen"]
        data = [f"{name}={ctx.data[name]}" for name in given]
        options = []
    argv = ["eval", "lm", *map(str, folders.values()), "--task", ",".join(tasks)]
    argv += [arg for item in data for arg in ("--data", item)] + options
    settings = {"tasks": tasks, "models": list(folders)}
    files = {"upstream.json": json.dumps({"lm": lm_part.fingerprint}) + "\n"}
    return Plan([Step("eval", argv)], settings, files, missing, needs)


def collect(part_dir: Path, plan: Plan) -> dict[str, Any]:
    ev = read_step_results(part_dir, plan, "eval")
    lm_runs = {r["step"]: r for r in json.loads((part_dir.parent / "lm" / "results.json").read_text())["runs"]}
    sets = list(ev["sets"])
    columns = {key: next((s for s in candidates if s in sets), None) for key, _, candidates, _ in COLUMNS}
    runs = []
    for folder, row in ev["runs"].items():
        trained = lm_runs.get(folder, {})
        runs.append(
            {
                "paper_model": trained.get("paper_model", folder),
                "step": folder,
                "block": row["block"],
                "n_layer": row["n_layer"],
                "block_size": row["block_size"],
                "tokenizer": row["tokenizer"],
                "non_embedding_params": row["non_embedding_params"],
                "training_tokens": trained.get("tokens"),
                "corpus": trained.get("corpus"),
                "scores": {name: row[name] for name in sets},
            }
        )
    results = {
        "machine": ev["machine"],
        "sets": {name: {k: ev["sets"][name][k] for k in ("what", "items", "sha256")} for name in sets},
        "columns": columns,
        "runs": runs,
        "figures": {"accuracy.png": "Zero-shot accuracies: ours (solid) beside the paper's (hatched), chance dotted"},
    }
    plot_accuracies(results, part_dir / "accuracy.png")
    return results


def our_value(run: dict[str, Any], columns: dict[str, str | None], key: str) -> float | None:
    """The number of ours that stands in the paper's column ``key`` (None when no set of ours measures it)."""
    name = columns.get(key)
    metric = next(m for k, _, _, m in COLUMNS if k == key)
    return None if name is None else float(run["scores"][name][metric])


def plot_accuracies(results: dict[str, Any], path: Path) -> Path:
    """Grouped bars: the accuracy columns per model, ours beside the paper's."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    keys = [(k, header) for k, header, _, metric in COLUMNS if metric != "nats_per_token" and metric != "loss"]
    runs = results["runs"]
    fig, ax = plt.subplots(figsize=(8.5, 3.8))
    width = 0.8 / (2 * len(runs))
    for i, run in enumerate(runs):
        ours = [our_value(run, results["columns"], k) or 0.0 for k, _ in keys]
        paper = [ZERO_SHOT.get(run["paper_model"], {}).get(k, 0.0) for k, _ in keys]
        xs = [j + (2 * i) * width for j in range(len(keys))]
        bars = ax.bar(xs, ours, width, label=f"{run['paper_model']} (ours)")
        ax.bar([x + width for x in xs], paper, width, color=bars[0].get_facecolor(), alpha=0.45, hatch="//",
               label=f"{run['paper_model']} (paper)")  # fmt: skip
    cbt = [s for s in results["columns"].values() if s and "cbt" in s]
    if cbt:
        chance = runs[0]["scores"][cbt[0]].get("chance")
        if chance:
            ax.axhline(chance, color="grey", ls=":", lw=1, label="CBT chance")
    ax.set_xticks([j + (len(runs) - 0.5) * width for j in range(len(keys))], [header for _, header in keys])
    ax.set_ylabel("accuracy")
    ax.set_ylim(0, 1)
    ax.legend(fontsize=7, loc="upper left", bbox_to_anchor=(1.01, 1.0))
    ax.grid(alpha=0.3, axis="y")
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)
    return path


def render(results: dict[str, Any], part_dir: Path) -> list[Block]:
    columns = results["columns"]
    paper_params = {m.name: m.params for m in LM_MODELS}
    rows = []
    for run in results["runs"]:
        ours = [our_value(run, columns, key) for key, _, _, _ in COLUMNS]
        rows.append(
            [run["paper_model"], "ours", fmt_count(run["non_embedding_params"]),
             *["—" if v is None else f"{v:.3f}" for v in ours]]
        )  # fmt: skip
        paper = ZERO_SHOT.get(run["paper_model"])
        rows.append(
            [run["paper_model"], "paper", paper_params.get(run["paper_model"], "—"),
             *["—" if paper is None else f"{paper[key]:.2f}" for key, _, _, _ in COLUMNS]]
        )  # fmt: skip
    used = "; ".join(
        f"{header} ← {columns[key]} ({results['sets'][columns[key]]['items']:,} "
        f"{'words' if metric == 'nats_per_token' else 'items'})"
        for key, header, _, metric in COLUMNS
        if columns[key]
    )
    first = results["runs"][0]
    table = Table(
        "Zero-shot: ours (the lm part's models) beside the paper's table. Ours: losses in nats (LAMBADA per target "
        f"word, perplexity sets per token of the {first['tokenizer']} tokenizer), accuracies as fractions (LAMBADA: "
        "whole word, "
        "greedy)",
        ["paper's model", "source", "non-emb. params", *[header for _, header, _, _ in COLUMNS]],
        rows,
    )
    austen = any(name.startswith("austen-") for name in results["sets"])
    differences = [
        f"Our sets: {used}."
        + (
            " The austen-* sets are built from Jane Austen's novels in the real sets' formats (the models never saw "
            "her text); they are stand-ins, not LAMBADA / CBT / WikiText, and PTB has none."
            if austen
            else ""
        ),
        f"Scale: {fmt_count(min(r['non_embedding_params'] for r in results['runs']))}-"
        f"{fmt_count(max(r['non_embedding_params'] for r in results['runs']))} non-embedding parameters trained on "
        f"{fmt_count(first['training_tokens'] or 0)} tokens of {first['corpus']} with the {first['tokenizer']} "
        f"tokenizer, against 102M-182M parameters and {LM_RECIPE['steps'] * LM_RECIPE['tokens_per_step'] / 1e9:.0f}B "
        "OpenWebText tokens: the values do not compare, at most the order of the models does.",
        f"Context {first['block_size']} tokens (the paper: {LM_RECIPE['context']}): CBT's 20 context sentences are "
        "mostly cut away (left truncation) and LAMBADA keeps its last sentence or two. Losses are per "
        f"{first['tokenizer']} token, the paper's per GPT-2 BPE token or word (its unit is not stated). One seed.",
    ]
    return [
        table,
        *figure_blocks(results, part_dir),
        *differences_blocks(differences),
    ]


PART = Part(
    name="zeroshot",
    title="Zero-shot language tasks",
    paper_items=("zero-shot",),
    plan=plan,
    collect=collect,
    render=render,
    data=REAL_SETS,
)
