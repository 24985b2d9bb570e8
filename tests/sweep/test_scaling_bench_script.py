"""benchmarks/scaling/run.py plans issue 27's grid: the lr rule between the two swept sizes, the sweep's extension
while the best lr is at an edge, and the order its drivers take jobs in (a stopped sitting leaves the most useful
grid). Planning only: nothing trains."""

from __future__ import annotations

import json
import math
from pathlib import Path
from types import ModuleType

import numpy as np
import pytest
from test_lm_bench_script import load_script

SCRIPT = Path(__file__).resolve().parents[2] / "benchmarks" / "scaling" / "run.py"


@pytest.fixture(scope="module")
def study() -> ModuleType:
    return load_script("bench_scaling_run", SCRIPT)


def sweep_rows(study, family: str, size: int, losses: dict[float, float]) -> list[dict]:
    return [{"kind": "sweep", "family": family, "size": size, "lr": lr, "val_loss": v} for lr, v in losses.items()]


def test_the_sweep_goes_on_while_the_best_lr_is_at_an_edge(study):
    rows = sweep_rows(study, "gpt2", 0, {1e-3: 2.3, 3e-3: 2.1, 1e-2: 2.0})
    assert study.sweep_lrs(rows, "gpt2", 0) == [1e-3, 3e-3, 1e-2, 3e-2]  # best at the top: one more step up
    assert study.swept_lr(rows, "gpt2", 0) is None  # the sweep is not finished
    rows += sweep_rows(study, "gpt2", 0, {3e-2: 2.05})
    assert study.sweep_lrs(rows, "gpt2", 0) == [1e-3, 3e-3, 1e-2, 3e-2]
    # the vertex of the parabola through (log lr, loss) at 3e-3, 1e-2, 3e-2, computed directly
    assert study.swept_lr(rows, "gpt2", 0) == pytest.approx(vertex({3e-3: 2.1, 1e-2: 2.0, 3e-2: 2.05}), rel=1e-9)


def vertex(losses: dict[float, float]) -> float:
    """The lr at the vertex of the parabola through (log lr, loss), fitted directly."""
    a, b, _ = np.polyfit([math.log(lr) for lr in losses], list(losses.values()), 2)
    return math.exp(-b / (2 * a))


def test_every_size_takes_the_log_linear_lr_between_the_swept_sizes(study):
    family = study.FAMILIES["gpt2"]
    small, third = {1e-3: 2.3, 3e-3: 2.0, 1e-2: 2.2}, {1e-3: 2.0, 3e-3: 1.9, 1e-2: 2.05}
    rows = sweep_rows(study, "gpt2", 0, small) + sweep_rows(study, "gpt2", 2, third)
    lr0, lr2 = vertex(small), vertex(third)
    assert study.swept_lr(rows, "gpt2", 0) == pytest.approx(lr0, rel=1e-9)
    assert study.swept_lr(rows, "gpt2", 2) == pytest.approx(lr2, rel=1e-9)
    n0, n1, n2, n3 = (math.log(study.non_embedding(family, w)) for w in family.widths)
    for size, n in ((1, n1), (3, n3)):  # between the swept sizes, and beyond them (extrapolated)
        t = (n - n0) / (n2 - n0)
        expected = math.exp((1 - t) * math.log(lr0) + t * math.log(lr2))
        assert study.lr_rule(rows, family, size) == pytest.approx(expected, rel=1e-9)
    assert study.lr_rule(rows[:-1], family, 1) is None  # one lr of the third size missing: the rule waits


def test_the_drivers_take_the_three_main_families_size_by_size_and_the_tied_family_last(study):
    def job(kind: str, family: str, size: int, seed: int = 0):
        return study.Job(kind, family, size, 64, 250, 1e-3, seed, Path(f"{family}-{size}-{seed}-{kind}"), [])

    jobs = [
        job("main", "aot-mssa-tied", 0),
        job("main", "gpt2", 3),  # the largest size
        job("main", "aot-mssa", 2),
        job("main", "gpt2", 0, seed=1),  # a second seed
        job("cosine", "gpt2", 0),
        job("main", "aot-mssa", 0),
        job("branch", "gpt2", 1),
        job("main", "gpt2", 1),
        job("sweep", "aot-mhsa", 2),
    ]
    ordered = [(j.kind, j.family, j.size, j.seed) for j in sorted(jobs, key=study.priority)]
    assert ordered == [
        ("sweep", "aot-mhsa", 2, 0),
        ("main", "aot-mssa", 0, 0),
        ("branch", "gpt2", 1, 0),  # a branch keeps its place after its main run when both are listed (stable)
        ("main", "gpt2", 1, 0),
        ("cosine", "gpt2", 0, 0),
        ("main", "aot-mssa", 2, 0),
        ("main", "gpt2", 0, 1),
        ("main", "gpt2", 3, 0),
        ("main", "aot-mssa-tied", 0, 0),
    ]


def test_the_readme_block_is_the_fits_numbers(study, tmp_path):
    """--render's README block quotes fit/results.json (the exponents, the frontier gap at the largest run, the
    paper points beside the paper's gaps) and the schedule check's verdict: nothing typed by hand."""
    from aot.cli import main
    from aot.report.paper_numbers import lm_gap
    from aot.sweep.scaling.render import with_interval
    from aot.sweep.scaling.schedule_check import schedule_summary

    runs = Path(__file__).resolve().parents[1] / "fixtures" / "scaling" / "runs.json"
    points = ["--at", "gpt2-base=gpt2,85000000,295000000000", "--at", "aot-mssa-l-base=aot-mssa,62600000,295000000000"]
    argv = ["scaling", "fit", str(runs), "--reference", "gpt2", "--starts", "2", "--bootstrap", "4", *points]
    assert main([*argv, "--boot-starts", "1", "--out", str(tmp_path / "fit")]) == 0
    fit = json.loads((tmp_path / "fit" / "results.json").read_text())
    block = study.readme_summary(fit, schedule_summary([], []), 40)
    lines = block.splitlines()
    mssa = next(line for line in lines if line.startswith("| AoT-MSSA, learned W_O |"))
    largest = next(m for m in fit["gap"]["at"] if m["where"] == "largest run")
    assert with_interval(fit["families"]["aot-mssa"]["law"]["alpha"]) in mssa
    assert mssa.endswith(with_interval(largest["families"]["aot-mssa"], "+.1f", 100, " %") + " |")
    paper = next(line for line in lines if line.startswith("| AoT-MSSA-L Base |"))
    assert with_interval(fit["points"][1]["gap"], "+.1f", 100, " %") in paper
    assert paper.endswith(f"{100 * lm_gap('AoT-MSSA-L Base'):+.1f} % |")
    assert lines[0].startswith("40 runs recorded") and "the check has not been made" in lines[-1]
    assert not any("one E for every family" in line for line in lines)
    assert main([*argv, "--boot-starts", "1", "--shared-e", "--out", str(tmp_path / "shared")]) == 0
    shared = json.loads((tmp_path / "shared" / "results.json").read_text())
    line = next(
        x for x in study.readme_summary(fit, schedule_summary([], []), 40, shared=shared).splitlines() if "one E" in x
    )
    assert f"E = {with_interval(shared['families']['gpt2']['law']['E'])};" in line
    assert f"AoT-MSSA, learned W_O {with_interval(shared['families']['aot-mssa']['law']['alpha'])}" in line
    assert f"aot-mssa at 6.26e+07: {with_interval(shared['points'][1]['gap'], '+.1f', 100, ' %')}." in line


def test_the_token_shift_runs_are_the_1m_token_run_of_aot_mssa_with_the_shift_and_their_table_quotes_the_rows(study):
    family = study.FAMILIES["aot-mssa"]
    rows = sweep_rows(study, "aot-mssa", 0, {1e-3: 2.3, 3e-3: 2.2, 1e-2: 2.25})
    rows += sweep_rows(study, "aot-mssa", 2, {1e-3: 2.2, 3e-3: 2.1, 1e-2: 2.15})
    jobs = study.remedy_jobs(rows)
    assert [(j.token_shift, j.size, j.seed) for j in jobs] == list(study.REMEDY)
    first = jobs[0]
    assert first.steps == study.SWEEP_STEPS and first.lr == pytest.approx(study.lr_rule(rows, family, 0))
    assert "model.token_shift=scalar" in first.argv and "train.schedule=wsd" in first.argv
    assert study.priority(first)[0] == 1.7  # after the two smallest sizes' seed-0 runs and the cosine check

    def result(family: str, kind: str, val: float, params: int, shift: str = "none") -> dict:
        return {"family": family, "size": 0, "seed": 0, "steps": study.SWEEP_STEPS, "kind": kind, "val_loss": val,
                "val_loss_se": 0.004, "non_embedding_params": params, "token_shift": shift}  # fmt: skip

    results = [result("gpt2", "branch", 2.0, 300_000), result("aot-mhsa", "branch", 2.1, 301_000)]
    results += [result("aot-mssa", "branch", 2.2, 302_000), result("aot-mssa", "remedy", 2.05, 302_016, "scalar")]
    line = next(x for x in study.remedy_markdown(results).splitlines() if x.startswith("| 0.30 M"))
    cells = [c.strip() for c in line.strip("|").split("|")]
    assert cells[1:] == ["0", "2.0000 ± 0.0040", "2.1000 ± 0.0040 (+5.0 %)", "2.2000 ± 0.0040 (+10.0 %)",
                         "2.0500 ± 0.0040 (+2.5 %), +16 params", "—"]  # fmt: skip


def test_a_branch_whose_recorded_parent_folder_is_gone_runs_from_scratch_and_a_recorded_run_is_not_redone(study):
    """On a fresh machine runs/ is empty but results.json holds the rows: a recorded main run is not retrained, and
    its unfinished branches become the from-scratch WSD runs of their budgets (the same runs:
    tests/train/test_wsd_branch.py), not jobs that wait forever for a checkpoint that is gone."""
    rows = sweep_rows(study, "gpt2", 0, {1e-3: 2.3, 3e-3: 2.0, 1e-2: 2.2})
    rows += sweep_rows(study, "gpt2", 2, {1e-3: 2.0, 3e-3: 1.9, 1e-2: 2.05})
    jobs, _ = study.main_jobs(rows)
    main = next(j for j in jobs if j.kind == "main" and j.family == "gpt2" and j.size == 0 and j.seed == 0)
    branch = next(j for j in jobs if j.kind == "branch" and j.family == "gpt2" and j.size == 0 and j.seed == 0)
    assert branch.parent is not None and "--branch-from" in branch.argv  # parent not recorded: wait for it
    rows.append({"kind": "main", "family": "gpt2", "size": 0, "run_dir": str(main.folder)})
    assert not main.folder.exists()
    jobs, _ = study.main_jobs(rows)
    orphan = next(j for j in jobs if j.folder == branch.folder)
    assert orphan.parent is None and "--branch-from" not in orphan.argv
    assert f"train.steps={branch.steps}" in orphan.argv and "train.schedule=wsd" in orphan.argv
    assert f"train.lr={branch.lr:g}" in orphan.argv
    assert orphan.argv[orphan.argv.index("--out") + 1] == str(branch.folder)
    assert study.done(main, rows) and not study.done(orphan, rows)


def test_the_gpu_sizes_take_the_lr_between_the_third_size_and_the_largest_gpu_size_and_run_on_cuda(study):
    """--large adds each family's GPU sizes after its CPU grid: their lr is log-linear in log N between the CPU
    grid's larger swept size and the largest GPU size (swept on the GPU), the CPU grid's rule (and so the lr its
    recorded runs trained at) does not move when the GPU sweep lands, and every GPU job, branches too, asks for
    cuda while no CPU job names a device."""
    family = study.FAMILIES["gpt2"]
    cpu, top = len(family.widths), len(family.widths) + len(family.large) - 1
    small, third, largest = {1e-3: 2.3, 3e-3: 2.0, 1e-2: 2.2}, {1e-3: 2.0, 3e-3: 1.9, 1e-2: 2.05}, {
        1e-3: 1.8, 3e-3: 1.85, 1e-2: 2.0}  # fmt: skip
    rows = sweep_rows(study, "gpt2", 0, small) + sweep_rows(study, "gpt2", 2, third)
    assert [j.size for j in study.sweep_jobs(rows, large=True) if j.family == "gpt2"][-3:] == [top] * 3
    assert study.lr_rule(rows, family, cpu) is None  # the GPU sizes wait for the GPU sweep
    cpu_rule = study.lr_rule(rows, family, 3)
    largest_lr = {3e-4: 1.83, **largest}  # the best (1e-3) at the low edge: the sweep went on to 3e-4
    rows += sweep_rows(study, "gpt2", top, largest_lr)
    assert study.sweep_lrs(rows, "gpt2", top) == [3e-4, 1e-3, 3e-3, 1e-2]
    assert study.lr_rule(rows, family, 3) == cpu_rule
    n2, n4, n5 = (math.log(study.non_embedding(family, family.width(s))) for s in (2, cpu, top))
    lr2, lr5 = study.swept_lr(rows, "gpt2", 2), study.swept_lr(rows, "gpt2", top)
    t = (n4 - n2) / (n5 - n2)
    assert study.lr_rule(rows, family, cpu) == pytest.approx(math.exp((1 - t) * math.log(lr2) + t * math.log(lr5)))
    jobs, _ = study.main_jobs(rows, large=True)
    gpu = [j for j in jobs if j.family == "gpt2" and j.size >= cpu]
    assert {(j.kind, j.size, j.steps) for j in gpu} == {(k, s, n) for s in (cpu, top) for k, n in
                                                        (("main", 1000), ("branch", 250), ("branch", 500))}  # fmt: skip
    assert all(j.argv[-2:] == ["--device", "cuda"] and j.seed == 0 for j in gpu)
    assert not any("--device" in j.argv for j in jobs if j.size < len(study.FAMILIES[j.family].widths))
    assert [j.folder for j in study.main_jobs(rows)[0]] == [j.folder for j in jobs if j not in gpu]
    cpu_main = next(j for j in jobs if j.kind == "main" and j.size == 3)
    order = sorted([gpu[0], study.sweep_jobs(rows, large=True)[-1], cpu_main], key=study.priority)
    assert [(j.kind, j.size >= cpu) for j in order] == [("main", False), ("sweep", True), ("main", True)]


def test_merge_adds_only_the_runs_this_results_file_lacks(study):
    ours = [{"run_dir": "runs/scaling/main/a", "val_loss": 2.0}]
    theirs = [{"run_dir": "runs/scaling/main/a", "val_loss": 9.0}, {"run_dir": "runs/scaling/main/b", "val_loss": 1.9}]
    assert study.merged_rows(ours, theirs) == [theirs[1]]


@pytest.mark.skipif(__import__("torch").cuda.is_available(), reason="checks the refusal on a machine without CUDA")
def test_gpu_sh_refuses_in_one_line_where_there_is_no_cuda(tmp_path):
    import subprocess
    import sys

    script = SCRIPT.parent / "gpu.sh"
    done = subprocess.run(["bash", str(script)], capture_output=True, text=True, env={"PYTHON": sys.executable,
                          "PATH": "/usr/bin:/bin", "HOME": str(tmp_path)}, timeout=120)  # fmt: skip
    assert done.returncode == 2
    assert done.stderr.strip().splitlines() == [
        "gpu.sh: no CUDA device here; the GPU sizes are a GPU job (run.py alone trains the CPU grid)"
    ]


def test_the_render_steps_run_at_once_and_a_failing_one_fails_the_render(study, monkeypatch):
    """--render's fits run in their own processes together; the render stops with the first failure's exit code,
    whichever process it came from."""
    monkeypatch.setenv("PYTHONPATH", str(SCRIPT.parents[2] / "src"))
    assert study.run_steps_at_once([["--help"], ["--help"]]) == 0
    assert study.run_steps_at_once([["--help"], ["no-such-command"]]) != 0


def test_the_committed_fit_blocks_and_tables_are_rendered_from_the_committed_results(study):
    """fit/ was fitted from the committed results.json (its sha256), and schedule.md, benchmarks/lm/token_shift.md
    and the <!-- scaling:summary --> blocks of its README and the language guide are what --render writes from them:
    rows that land without --render fail here."""
    import hashlib

    from aot.report.part import Context
    from aot.report.parts import scaling
    from aot.runinfo import replace_marked_block
    from aot.sweep.scaling.schedule_check import schedule_markdown, schedule_pairs, schedule_summary

    here = SCRIPT.parent
    rows = study.read_rows()
    fit = json.loads((here / "fit" / "results.json").read_text())
    shared = json.loads((here / "fit-shared-e" / "results.json").read_text())
    for fitted in (fit, shared):
        assert fitted["source"]["sha256"] == hashlib.sha256(study.RESULTS.read_bytes()).hexdigest()
    assert shared["settings"]["shared_e"] is True and sorted(shared["families"]) == sorted(fit["families"])
    check = schedule_summary(schedule_pairs(rows), rows)
    assert (here / "schedule.md").read_text().endswith(schedule_markdown(check))
    assert (here.parents[1] / "benchmarks" / "lm" / "token_shift.md").read_text() == study.remedy_markdown(rows)
    plan = scaling.plan(Context(preset="full", part_dir=here, data={"scaling-runs": str(study.RESULTS)}))
    waiting = plan.settings.get("waiting", [])
    held_out = study.holdout_block(rows)
    assert "| AoT-MSSA, learned W_O |" in held_out
    block = study.readme_summary(fit, check, len(rows), waiting, study.matched_block(rows), shared, held_out)
    for readme in (here / "README.md", study.GUIDE):
        text = readme.read_text()
        assert replace_marked_block(text, "scaling:summary", block, readme.name) == text, readme
