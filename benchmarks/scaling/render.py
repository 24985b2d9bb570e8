"""Render issue 27's scaling study from its store, benchmarks/scaling/results.json (the runs of cpu.yaml, trained by
`aot sweep --file benchmarks/scaling/cpu.yaml --out benchmarks/scaling`): schedule.md (WSD branches against cosine
runs), benchmarks/lm/token_shift.md (issue 29's remedy), fit/ and fit-shared-e/ (`aot scaling fit`: the laws, the
`scaling` part of `aot reproduce`) and the <!-- scaling:summary --> blocks of this folder's README and
docs/guide/language.md. It trains nothing.

    OMP_NUM_THREADS=1 PYTHONPATH=src python benchmarks/scaling/render.py
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from collections import Counter
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from aot.run_folder import write_text_atomic
from aot.runinfo import replace_marked_block
from aot.sweep.render import table
from aot.sweep.scaling.holdout import hold_out_largest, hold_out_markdown
from aot.sweep.scaling.matched import matched_gaps, matched_markdown
from aot.sweep.scaling.plan import ScalingStudy
from aot.sweep.scaling.render import with_interval
from aot.sweep.scaling.runs import ScalingRun
from aot.sweep.scaling.schedule_check import schedule_markdown, schedule_pairs, schedule_summary, verdict
from aot.sweep.store import read_store

HERE = Path(__file__).resolve().parent
GUIDE = HERE.parents[1] / "docs" / "guide" / "language.md"  # its "Does the gap close with scale?"
RESULTS = HERE / "results.json"
STUDY = ScalingStudy.from_file(HERE / "cpu.yaml")
LABELS = {family.name: family.label for family in STUDY.families}
COMMAND = "`python benchmarks/scaling/render.py`"


def read_rows() -> list[dict[str, Any]]:
    return list(read_store(RESULTS)["runs"])


def render() -> int:
    """schedule.md (the WSD-against-cosine check), token_shift.md, fit/ (``aot scaling fit`` of the study's main
    and branch rows, the families whose runs determine a law, read at the paper's sizes: the ``scaling`` part of
    `aot reproduce`), fit-shared-e/ (the same with one E for every family) and the README blocks."""
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
    """benchmarks/lm/token_shift.md: issue 29's remedy in language modelling. At each (size, seed) of the study's
    remedy runs, the WSD runs of that budget of GPT-2, AoT-MHSA and AoT-MSSA (the study's cooldown branches, or
    main runs of that budget) beside AoT-MSSA with each token shift: val nats per byte ± SE, the gap to GPT-2 and
    the parameters the shift adds."""
    remedy = STUDY.remedy
    assert remedy is not None
    family = STUDY.family(remedy.family)

    def find(name: str, size: int, seed: int, kind: tuple[str, ...], shift: str = "none") -> dict | None:
        steps = STUDY.steps(family, size, remedy.budget)[0]
        return next((r for r in rows if r["family"] == name and r["size"] == size and r["seed"] == seed
                     and r["steps"] == steps and r["kind"] in kind and r.get("token_shift", "none") == shift),
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
    for size, seed in sorted({(r.size, r.seed) for r in remedy.runs}):
        gpt2 = find("gpt2", size, seed, study)
        mssa = find(family.name, size, seed, study)
        out.append(
            [
                f"{STUDY.non_embedding(family, size) / 1e6:.2f} M (MSSA d{STUDY.width(family, size)})",
                str(seed),
                cell(gpt2, None),
                cell(find("aot-mhsa", size, seed, study), gpt2),
                cell(mssa, gpt2),
                *(
                    cell(find(family.name, size, seed, ("remedy",), shift), gpt2, mssa)
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
        f"{COMMAND} from benchmarks/scaling/results.json (kind `remedy`).",
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
    frontier gap at the largest run, the laws read at the paper's sizes beside the paper's gaps, ``matched`` (the
    law-free gaps at matched size and budget, :func:`matched_block`) and the WSD-against-cosine verdict, all from
    fit/results.json and results.json (nothing typed by hand)."""
    from aot.report.parts.scaling import point_rows

    largest = next((m for m in fit.get("gap", {}).get("at", []) if m["where"] == "largest run"), None)
    rows = []
    for name, fam in fit["families"].items():
        gap = largest["families"].get(name) if largest else None
        rows.append(
            [
                LABELS.get(name, name),
                runs_cell(fit, name, fam),
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
        f"{fit['machine'].get('date')}. {COMMAND} rewrites this block.",
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


def runs_cell(fit: dict[str, Any], name: str, fam: dict[str, Any]) -> str:
    """A family's fitted runs: how many, on how many of its sizes × budgets, and how many repeat a point with another
    seed ("18: 14 of 4 sizes × 4 budgets, 4 seed repeats")."""
    points = Counter((r["params"], r["tokens"]) for r in fit["runs"] if r["family"] == name)
    repeats = sum(points.values()) - len(points)
    text = f"{fam['runs']}: {len(points)} of {len(fam['sizes'])} sizes × {len(fam['budgets'])} budgets"
    return text + (f", {repeats} seed repeat{'s' if repeats != 1 else ''}" if repeats else "")


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


if __name__ == "__main__":
    raise SystemExit(render())
