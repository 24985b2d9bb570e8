"""The ``scaling`` part of `aot reproduce`: its plan says plainly when no study is recorded (or none finished),
fits only the families the runs determine, reads the laws at the paper's sizes and budget, and its section's
numbers are the fit's (``aot scaling fit``'s results.json) beside the paper's gaps."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from aot.cli import main
from aot.report.document import Table
from aot.report.paper_numbers import LM_RECIPE, lm_gap
from aot.report.part import Context
from aot.report.parts import scaling
from aot.sweep.scaling.render import with_interval

RUNS = Path(__file__).resolve().parents[1] / "fixtures" / "scaling" / "runs.json"


def context(tmp_path: Path, runs: Path | None, preset: str = "full") -> Context:
    data = {} if runs is None else {"scaling-runs": str(runs)}
    return Context(preset=preset, part_dir=tmp_path / "scaling", data=data)


def test_without_a_recorded_study_the_part_says_so_and_lists_the_command(tmp_path):
    plan = scaling.plan(context(tmp_path, tmp_path / "none.json"))
    assert plan.missing == [
        f"no scaling study recorded at {tmp_path / 'none.json'}: run aot sweep --file benchmarks/scaling/cpu.yaml "
        "--out benchmarks/scaling or give --data scaling-runs=FILE"
    ]
    assert plan.steps[0].argv[:3] == ["scaling", "fit", str(tmp_path / "none.json")]


def test_a_study_with_only_its_lr_sweep_finished_is_not_fitted_yet(tmp_path):
    rows = [{**r, "kind": "sweep"} for r in json.loads(RUNS.read_text())["runs"]]
    path = tmp_path / "results.json"
    path.write_text(json.dumps({"runs": rows}))
    assert scaling.plan(context(tmp_path, path)).missing == [
        f"{str(path)!r} has no run with kind in main, branch yet: nothing to fit"
    ]


def test_the_plan_fits_the_ready_families_and_reads_them_at_the_papers_sizes(tmp_path):
    rows = json.loads(RUNS.read_text())["runs"]
    rows += [{**rows[0], "family": "aot-mhsa"}, {**rows[1], "family": "aot-mhsa"}]  # 2 runs: not a law yet
    path = tmp_path / "results.json"
    path.write_text(json.dumps({"runs": rows}))
    plan = scaling.plan(context(tmp_path, path))
    assert plan.missing == [] and plan.settings["families"] == ["gpt2", "aot-mssa"]
    assert plan.settings["waiting"] == ["aot-mhsa (2 finished runs at 1 size(s) and 2 budget(s))"]
    argv = plan.steps[0].argv
    assert argv[argv.index("--where") + 1 : argv.index("--where") + 4] == [
        "kind=main,branch",
        "--where",
        "family=gpt2,aot-mssa",
    ]
    points = [argv[i + 1] for i, a in enumerate(argv) if a == "--at"]
    tokens = LM_RECIPE["steps"] * LM_RECIPE["tokens_per_step"]
    assert points == [
        f"gpt2-base=gpt2,{scaling.paper_params('gpt2-base')},{tokens}",
        f"aot-mssa-l-base=aot-mssa,{scaling.paper_params('aot-mssa-l-base')},{tokens}",
        f"aot-mssa-l-medium=aot-mssa,{scaling.paper_params('aot-mssa-l-medium')},{tokens}",
    ]  # no AoT-MHSA: its family is not fitted
    assert 80e6 < scaling.paper_params("gpt2-base") < 90e6  # GPT-2 small: 124M with its 38.6M + 0.8M embeddings
    assert plan.settings["sha256"]


@pytest.fixture(scope="module")
def part_dir(tmp_path_factory):  # type: ignore[no-untyped-def]
    """The part's two steps (the fit, the shared-E fit) at the tiny preset on the synthetic runs, run in this
    process (several seconds)."""
    folder = tmp_path_factory.mktemp("report") / "scaling"
    plan = scaling.plan(Context(preset="tiny", part_dir=folder, data={"scaling-runs": str(RUNS)}))
    assert [step.name for step in plan.steps] == ["fit", "fit-shared-e"]
    assert plan.steps[1].argv == [*plan.steps[0].argv, "--shared-e"]
    for step in plan.steps:
        assert main(step.options(folder)) == 0
    (folder / "results.json").write_text(json.dumps(scaling.collect(folder, plan)))
    return folder


def test_the_section_shows_the_fits_numbers_beside_the_papers_gaps(part_dir):
    fit = json.loads((part_dir / "fit" / "results.json").read_text())
    results = json.loads((part_dir / "results.json").read_text())
    tables = [b for b in scaling.render(results, part_dir) if isinstance(b, Table)]
    laws, gaps, points, shared_laws, shared_points, held, matched = tables
    # the hold-out check: the fixture's runs follow their law (0.3 % noise), so the largest size is predicted
    assert [r[0] for r in held.rows] == ["gpt2"] * 3 + ["aot-mssa"] * 3 and {r[2] for r in held.rows} == {"20.00 M"}
    assert all(abs(float(r[7].rstrip(" %"))) < 3 for r in held.rows)
    shared = json.loads((part_dir / "fit-shared-e" / "results.json").read_text())
    e_column = shared_laws.header.index("E [95 %]")
    assert {r[e_column] for r in shared_laws.rows} == {with_interval(shared["families"]["gpt2"]["law"]["E"])}
    assert shared_points.rows[1][5] == with_interval(shared["points"][1]["gap"], "+.1f", 100, " %")
    row = dict(zip(laws.header, laws.rows[1]))
    assert row["family"] == "aot-mssa" and row["α [95 %]"] == with_interval(fit["families"]["aot-mssa"]["law"]["alpha"])
    assert len(gaps.rows) == 3 and gaps.rows[1][:3] == [
        "largest run",
        f"{fit['frontier']['recorded_max']:.3g}",
        "aot-mssa",
    ]
    by_model = {r[0]: dict(zip(points.header, r)) for r in points.rows}
    assert list(by_model) == ["GPT-2 Base", "AoT-MSSA-L Base", "AoT-MSSA-L Medium"]
    base = by_model["AoT-MSSA-L Base"]
    assert base["paper: gap"] == f"{100 * lm_gap('AoT-MSSA-L Base'):+.1f} %"
    assert base["gap to GPT-2 [95 %]"] == with_interval(fit["points"][1]["gap"], "+.1f", 100, " %")
    assert set(results["figures"]) == {"fit/frontier.png", "fit/gap.png", "fit/matched.png"}
    # the law-free gaps at matched size and budget: every aot-mssa run against the gpt2 run of its (N, D)
    loss = {
        (r["family"], r["non_embedding_params"], r["tokens"]): r["val_loss"]
        for r in json.loads(RUNS.read_text())["runs"]
    }
    assert matched.header[:3] == ["family", "N", "gpt2 read at"] and len(matched.rows) == 4
    first = dict(zip(matched.header, matched.rows[0]))
    gap = loss[("aot-mssa", 300000, 2000000)] / loss[("gpt2", 300000, 2000000)] - 1
    assert first["N"] == "0.30 M" and first["2 M tokens"] == f"{100 * gap:+.1f} %"


def test_the_section_shows_the_wsd_against_cosine_check_when_the_study_has_one(part_dir):
    from aot.sweep.scaling.schedule_check import SCHEDULE_HEADER, schedule_pairs, schedule_summary

    results = json.loads((part_dir / "results.json").read_text())
    assert results["schedule_check"]["pairs"] == []  # the synthetic runs have no cosine rows
    point = {"family": "gpt2", "n_embd": 64, "non_embedding_params": 300_000, "steps": 500, "tokens": 2_048_000}
    runs = (("branch", 0, 1.75), ("branch", 1, 1.76), ("cosine", 0, 1.74), ("cosine", 1, 1.77))
    rows = [{**point, "kind": k, "seed": s, "val_loss": v, "val_loss_se": 0.004} for k, s, v in runs]
    check = schedule_summary(schedule_pairs(rows), rows)
    tables = [b for b in scaling.render({**results, "schedule_check": check}, part_dir) if isinstance(b, Table)]
    table = next(t for t in tables if t.header == SCHEDULE_HEADER)
    assert [r[8] for r in table.rows] == ["+0.0100 ± 0.0057", "-0.0100 ± 0.0057"]
    assert "within the seed noise (0.0300)" in table.caption
