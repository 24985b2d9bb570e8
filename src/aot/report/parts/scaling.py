"""Part ``scaling``: does the gap to GPT-2 close with scale? The scaling laws of the recorded study
(benchmarks/scaling/results.json, issue 27, or ``--data scaling-runs=FILE``) fitted with ``aot scaling fit``: (E, A,
α, B, β) per family with bootstrap intervals, the compute frontiers, the gap to GPT-2 along compute, and the laws
read at the paper's model sizes and token budget beside the paper's gaps; then the same fit with one E shared by
every family (``--shared-e``: E belongs to the data), and the law-free gaps at matched size and budget.

The part trains nothing: it fits the runs already recorded (the CPU-hours of benchmarks/scaling/cpu.yaml), at
every preset (the bootstrap grows with the preset). Without the file, or without enough finished GPT-2 runs, it
says so and lists the command. A family whose runs cannot determine a law yet (fewer than five finished runs, or one
size or budget only) is left out of the fit and named.
"""

from __future__ import annotations

import functools
import hashlib
import json
from pathlib import Path
from typing import Any

from aot.errors import AotError
from aot.report.document import Block, Paragraph, Table
from aot.report.paper_numbers import LM_BASELINE, LM_MODELS, LM_RECIPE, lm_gap
from aot.report.part import (
    Context,
    Part,
    Plan,
    Step,
    checkout_record,
    differences_blocks,
    existing_figures,
    figure_blocks,
    read_step_results,
)
from aot.sweep.scaling import ScalingRun, by_family, read_scaling_runs
from aot.sweep.scaling.holdout import hold_out_largest, hold_out_table
from aot.sweep.scaling.matched import matched_gaps, matched_table
from aot.sweep.scaling.render import GAP_HEADER, LAW_HEADER, gap_rows, law_rows, with_interval
from aot.sweep.scaling.schedule_check import SCHEDULE_HEADER, schedule_pairs, schedule_rows, schedule_summary, verdict
from aot.sweep.scaling.study import FitSettings, check_family

RUNS = checkout_record("scaling", "results.json")  # None when installed from a wheel: --data scaling-runs=FILE
#: the study's own runs: its WSD runs and their cooldown branches (its lr sweep and cosine check are other kinds)
KINDS = ("main", "branch")
REFERENCE = "gpt2"
#: the command that runs the recorded study
STUDY_COMMAND = "aot sweep --file benchmarks/scaling/cpu.yaml --out benchmarks/scaling"
#: each paper model -> the study's family (benchmarks/scaling/cpu.yaml's families) whose law is read at its size
PAPER_FAMILIES = {
    "GPT-2 Base": "gpt2",
    "AoT-MHSA-L Base": "aot-mhsa",
    "AoT-MSSA-L Base": "aot-mssa",
    "AoT-MSSA-L Medium": "aot-mssa",
}
#: the step fitting every family with one E (:mod:`aot.sweep.scaling.shared`)
SHARED_STEP = "fit-shared-e"
SETTINGS = {
    "tiny": FitSettings(starts=2, bootstrap=4, boot_starts=1),
    "quick": FitSettings(starts=8, bootstrap=50, boot_starts=1),
    "full": FitSettings(starts=32, bootstrap=200, boot_starts=2),
    "paper": FitSettings(starts=64, bootstrap=1000, boot_starts=2),
}


@functools.cache
def paper_params(preset: str) -> int:
    """Non-embedding parameters of a paper-size preset, counted on the meta device (no memory)."""
    import torch

    from aot.models import build_model, preset_config

    with torch.device("meta"):
        return int(build_model(preset_config(preset)).num_params(non_embedding=True))


def paper_tokens() -> int:
    """The paper's token budget: its steps × tokens per step (nanoGPT's recipe)."""
    return int(LM_RECIPE["steps"] * LM_RECIPE["tokens_per_step"])


def kind_filter(path: Path) -> dict[str, list[str]]:
    """The study's runs only (``kind`` in :data:`KINDS`) when the file's rows say their kind; else every run."""
    try:
        rows = json.loads(path.read_text(encoding="utf-8")).get("runs")
        first = rows[0] if isinstance(rows, list) and rows else {}
    except (OSError, UnicodeDecodeError, ValueError, AttributeError):
        first = {}
    return {"kind": list(KINDS)} if isinstance(first, dict) and "kind" in first else {}


def read_runs(path: Path) -> list[ScalingRun]:
    """The study's runs in ``path`` (one-line errors for a file ``aot scaling fit`` cannot read)."""
    return read_scaling_runs(path, where=kind_filter(path))


def check_runs_file(value: str) -> None:
    """``--data scaling-runs=FILE``: a runs file ``aot scaling fit`` reads, checked before any part starts."""
    read_runs(Path(value))


def fittable(runs: list[ScalingRun], source: str) -> tuple[list[str], list[str]]:
    """The families whose runs determine a law, and a line for each that cannot yet."""
    families = by_family(runs)
    ready, waiting = [], []
    for name, mine in families.items():
        try:
            check_family(name, mine, source)
            ready.append(name)
        except AotError:
            sizes, budgets = len({r.params for r in mine}), len({r.tokens for r in mine})
            waiting.append(f"{name} ({len(mine)} finished runs at {sizes} size(s) and {budgets} budget(s))")
    return ready, waiting


def plan(ctx: Context) -> Plan:
    given = ctx.data.get("scaling-runs") or RUNS
    path = Path(given) if given else Path("SCALING_RUNS")
    s = SETTINGS[ctx.preset]
    options = ["--reference", REFERENCE, "--starts", str(s.starts), "--bootstrap", str(s.bootstrap)]
    options += ["--boot-starts", str(s.boot_starts), "--seed", str(s.seed)]
    settings: dict[str, Any] = {"runs": str(path), "fit": options}
    if not given:
        why = "this install holds no recorded scaling study (a checkout's benchmarks/scaling/results.json): give "
        why += "--data scaling-runs=FILE"
        return Plan([Step("fit", ["scaling", "fit", str(path), *options])], settings, missing=[why])
    if not path.is_file():
        why = f"no scaling study recorded at {path}: run {STUDY_COMMAND} or give --data scaling-runs=FILE"
        return Plan([Step("fit", ["scaling", "fit", str(path), *options])], settings, missing=[why])
    where = [f"{field}={','.join(values)}" for field, values in kind_filter(path).items()]
    try:
        ready, waiting = fittable(read_runs(path), repr(str(path)))
    except AotError as exc:
        return Plan([Step("fit", ["scaling", "fit", str(path), *options])], settings, missing=[str(exc)])
    if waiting and ready:
        where.append(f"family={','.join(ready)}")
    points = [  # labelled by the paper model's preset (no spaces: the command is printed as it runs)
        f"{m.preset}={PAPER_FAMILIES[m.name]},{paper_params(m.preset)},{paper_tokens()}"
        for m in LM_MODELS
        if PAPER_FAMILIES[m.name] in ready
    ]
    argv = ["scaling", "fit", str(path), *(a for w in where for a in ("--where", w)), *options]
    argv += [a for p in points for a in ("--at", p)]
    settings.update(sha256=hashlib.sha256(path.read_bytes()).hexdigest(), families=ready, waiting=waiting)
    missing = []
    if REFERENCE not in ready:
        missing.append(
            f"{path} cannot determine GPT-2's law yet ({'; '.join(waiting) or 'no gpt2 runs'}): finish the study "
            f"({STUDY_COMMAND})"
        )
    steps = [Step("fit", argv)]
    if len(ready) > 1:  # one E for every family: the same fit for one family
        steps.append(Step(SHARED_STEP, [*argv, "--shared-e"]))
    return Plan(steps, settings, missing=missing)


def schedule_check(path: Path) -> dict[str, Any] | None:
    """The WSD-against-cosine check of the study's rows (:mod:`aot.sweep.scaling.schedule_check`); None for a runs
    file whose rows do not say their kind."""
    if not kind_filter(path):
        return None
    rows = json.loads(path.read_text(encoding="utf-8"))["runs"]
    return schedule_summary(schedule_pairs(rows), rows)


def matched(path: Path, reference: str | None) -> dict[str, Any] | None:
    """The law-free gaps to ``reference`` at matched size and budget (:mod:`aot.sweep.scaling.matched`) of every
    family of the study's runs, fitted or not, as a table (header, rows); None without a reference."""
    if reference is None:
        return None
    gaps = matched_gaps(read_runs(path), reference)
    header, rows = matched_table(gaps, reference)
    return {"header": header, "rows": rows}


def held_out(path: Path) -> dict[str, Any]:
    """Each family's law fitted without its largest size, read at that size's runs
    (:mod:`aot.sweep.scaling.holdout`), as a table (header, rows)."""
    header, rows = hold_out_table(hold_out_largest(read_runs(path)))
    return {"header": header, "rows": rows}


def shared_e(part_dir: Path, plan: Plan) -> dict[str, Any] | None:
    """The laws and points of the shared-E fit (None where the plan has no such step)."""
    if not any(step.name == SHARED_STEP for step in plan.steps):
        return None
    fit = read_step_results(part_dir, plan, SHARED_STEP)
    return {k: fit.get(k) for k in ("settings", "families", "points")}


def collect(part_dir: Path, plan: Plan) -> dict[str, Any]:
    fit = read_step_results(part_dir, plan, "fit")
    keep = ("source", "reference", "level", "settings", "families", "points", "gap", "machine")
    return {
        **{k: fit.get(k) for k in keep},
        "recorded_max": fit["frontier"]["recorded_max"],
        "runs": len(fit["runs"]),
        "waiting": plan.settings.get("waiting", []),
        "schedule_check": schedule_check(Path(plan.settings["runs"])),
        "matched": matched(Path(plan.settings["runs"]), fit.get("reference")),
        "shared_e": shared_e(part_dir, plan),
        "held_out": held_out(Path(plan.settings["runs"])),
        "figures": existing_figures(
            part_dir,
            {
                "fit/frontier.png": "Val loss against training FLOPs: each family's runs, its fitted law along each "
                "recorded size and its compute frontier (95 % band; dashed: extrapolated)",
                "fit/gap.png": "The gap to GPT-2 on the compute frontiers, with its 95 % band; beyond the largest run "
                "an extrapolation",
                "fit/matched.png": "The gap to GPT-2 at matched size and budget against N, read off the runs without a "
                "law (GPT-2 interpolated in log N between its sizes; filled: two seeds)",
            },
        ),
    }


def point_rows(results: dict[str, Any]) -> list[list[str]]:
    """A row per paper model: the family's law at the paper's size and budget, the gap to GPT-2 Base there and the
    paper's gap."""
    by_preset = {m.preset: m.name for m in LM_MODELS}
    rows = []
    for p in results["points"]:
        name = by_preset[p["label"]]
        paper = "—" if name == LM_BASELINE else f"{100 * lm_gap(name):+.1f} %"
        gap = "—" if p["gap"] is None else with_interval(p["gap"], "+.1f", 100, " %")
        rows.append(
            [name, p["family"], f"{p['params']:.3g}", f"{p['tokens']:.3g}", with_interval(p["loss"]), gap, paper]
        )
    return rows


def render(results: dict[str, Any], part_dir: Path) -> list[Block]:
    s = results["settings"]
    boot = next(iter(results["families"].values()))["bootstrap"]
    where = results["source"].get("where") or {}
    kept = "; ".join(f"{k} in {', '.join(v)}" for k, v in where.items())
    blocks: list[Block] = [
        Paragraph(
            f"{results['runs']} runs of `{results['source']['path']}`" + (f" ({kept})" if kept else "") + ", fitted "
            "per family as Hoffmann et al. 2022 (approach 3: Huber δ = 1e-3 on log L, L-BFGS from the "
            f"{s['starts']} best points of their initialisation grid); [95 %]: percentile intervals of "
            f"{boot['requested']} bootstrap refits over runs. N: non-embedding parameters; D: training tokens "
            "(bytes)."
        ),
        Table("L(N, D) = E + A / N^α + B / D^β per family", LAW_HEADER, law_rows(results)),
    ]
    if results.get("gap"):
        blocks.append(
            Table(
                "The gap to GPT-2 on the compute frontiers (L / L_GPT-2 − 1 at equal training FLOPs): at the smallest "
                "and the largest run's compute, and (extrapolated) at GPT-2 Base's paper budget",
                GAP_HEADER,
                gap_rows(results),
            )
        )
    if results["points"]:
        blocks.append(
            Table(
                "The laws read at the paper's model sizes (non-embedding parameters of its presets) and its token "
                "budget, beside the paper's gaps to GPT-2 Base: an extrapolation far beyond the runs",
                ["paper's model", "family", "N", "D", "predicted loss [95 %]", "gap to GPT-2 [95 %]", "paper: gap"],
                point_rows(results),
            )
        )
    shared = results.get("shared_e")
    if shared:
        blocks.append(
            Table(
                "With one E shared by every family (fitted jointly: E is the loss at unlimited size and data, a "
                "property of the corpus, tokenizer and context; each family keeps its A, α, B, β)",
                LAW_HEADER,
                law_rows(shared),
            )
        )
        if shared["points"]:
            blocks.append(
                Table(
                    "The shared-E laws read at the paper's sizes and budget",
                    ["paper's model", "family", "N", "D", "predicted loss [95 %]", "gap to GPT-2 [95 %]", "paper: gap"],
                    point_rows(shared),
                )
            )
    held = results.get("held_out")
    if held and held["rows"]:
        blocks.append(
            Table(
                "How far a law carries, checked on the runs: each family's law fitted without its largest size, read "
                "at that size's runs (error: predicted / measured − 1); the paper's sizes lie 30-300× further out",
                held["header"],
                held["rows"],
            )
        )
    table = results.get("matched")
    if table and table["rows"]:
        blocks.append(
            Table(
                "The gap to GPT-2 at matched size and budget, read off the runs without a law: each family's runs "
                "against GPT-2's at the same budget, interpolated in log N and log L between the two GPT-2 sizes "
                "around N (never extrapolated); one seed unless a cell says",
                table["header"],
                table["rows"],
            )
        )
    check = results.get("schedule_check")
    if check is not None:
        title = "WSD cooldown branches against cosine runs from scratch at the same budget (val loss ± its standard "
        title += "error over the full split; seed noise: the spread of the two seeds at that point). " + verdict(check)
        blocks.append(Table(title, SCHEDULE_HEADER, schedule_rows(check)) if check["pairs"] else Paragraph(title))
    blocks += figure_blocks(results, part_dir)
    if results["waiting"]:
        blocks.append(Paragraph("Not fitted yet (too few finished runs): " + "; ".join(results["waiting"]) + "."))
    largest = max(max(f["sizes"]) for f in results["families"].values())
    longest = max(max(f["budgets"]) for f in results["families"].values())
    scale = f"Scale: the runs reach {largest:.3g} non-embedding parameters and {longest:.3g} tokens"
    if results["points"]:
        n = min(p["params"] for p in results["points"]) / largest
        d = min(p["tokens"] for p in results["points"]) / longest
        scale += f"; the paper's models are {n:.0f}× larger or more and trained on {d:.3g}× the tokens: the laws "
        scale += "are read far beyond the runs, so read the intervals more than the values."
    differences = [
        "Data: bytes of the study's corpus (benchmarks/scaling: Shakespeare), not OpenWebText with GPT-2's BPE: the "
        "losses are in other units (nats per byte against nats per BPE token) and the task differs, so only the "
        "relative gaps compare, and those loosely; the paper's budget is read as that many of our tokens (bytes).",
        scale,
        "A small corpus: the largest budgets repeat it (benchmarks/scaling/README.md gives the epochs), and repeated "
        "data bends a scaling law; the fitted law assumes it does not.",
        "The paper trained each model once at one budget (no scaling study); its gaps are single runs.",
    ]
    return [*blocks, *differences_blocks(differences)]


PART = Part(
    name="scaling",
    title="Scaling: does the gap to GPT-2 close with scale?",
    paper_items=(),
    plan=plan,
    collect=collect,
    render=render,
    data=("scaling-runs",),
    data_checks={"scaling-runs": check_runs_file},
)
