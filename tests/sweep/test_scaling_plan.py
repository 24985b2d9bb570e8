"""aot.sweep.scaling.plan plans issue 27's scaling study from a sweep file: the lr rule between the two swept sizes,
the sweep's extension while the best lr is at an edge, the order trials start in, the cooldown branches and their
parents' checkpoints; benchmarks/scaling/cpu.yaml plans what benchmarks/scaling/run.py (now gone) planned, and its
store's rows are what run.py recorded. benchmarks/scaling/render.py renders the committed store into the committed
tables. Planning only, but for one tiny study trained end to end."""

from __future__ import annotations

import hashlib
import json
import math
import pickle
import subprocess
from dataclasses import replace
from pathlib import Path
from types import ModuleType
from typing import Any

import numpy as np
import pytest
import yaml
from test_lm_bench_script import load_script

from aot.errors import ConfigError
from aot.sweep.scaling.lr_rule import log_linear_lr, stable_checkpoint, sweep_lrs, swept_lr
from aot.sweep.scaling.plan import ScalingStudy, ScalingTrial
from aot.sweep.store import read_store

REPO = Path(__file__).resolve().parents[2]
HERE = REPO / "benchmarks" / "scaling"
FIXTURES = REPO / "tests" / "fixtures"
CPU, GPU_A, GPU_B = HERE / "cpu.yaml", HERE / "gpu-a.yaml", HERE / "gpu-b.yaml"


@pytest.fixture(scope="module")
def study() -> ScalingStudy:
    return ScalingStudy.from_file(CPU)


@pytest.fixture(scope="module")
def render() -> ModuleType:
    return load_script("bench_scaling_render", HERE / "render.py")


@pytest.fixture(scope="module")
def committed() -> dict[str, Any]:
    return read_store(HERE / "results.json")


def sweep_rows(family: str, size: int, losses: dict[float, float]) -> list[dict]:
    return [{"kind": "sweep", "family": family, "size": size, "lr": lr, "val_loss": v} for lr, v in losses.items()]


def vertex(losses: dict[float, float]) -> float:
    """The lr at the vertex of the parabola through (log lr, loss), fitted directly."""
    a, b, _ = np.polyfit([math.log(lr) for lr in losses], list(losses.values()), 2)
    return math.exp(-b / (2 * a))


# -- the rules ---------------------------------------------------------------------------------------------------


def test_the_sweep_goes_on_while_the_best_lr_is_at_an_edge(study):
    first, ladder = study.lr.first, study.lr.ladder
    losses = {1e-3: 2.3, 3e-3: 2.1, 1e-2: 2.0}
    assert sweep_lrs(losses, first, ladder) == [1e-3, 3e-3, 1e-2, 3e-2]  # best at the top: one more step up
    assert swept_lr(losses, first, ladder) is None  # the sweep is not finished
    losses[3e-2] = 2.05
    assert sweep_lrs(losses, first, ladder) == [1e-3, 3e-3, 1e-2, 3e-2]
    # the vertex of the parabola through (log lr, loss) at 3e-3, 1e-2, 3e-2, computed directly
    assert swept_lr(losses, first, ladder) == pytest.approx(vertex({3e-3: 2.1, 1e-2: 2.0, 3e-2: 2.05}), rel=1e-9)
    low = {1e-3: 1.9, 3e-3: 2.0, 1e-2: 2.2}
    assert sweep_lrs(low, first, ladder) == [3e-4, 1e-3, 3e-3, 1e-2]  # best at the bottom: one step down
    rows = sweep_rows("gpt2", 0, losses)
    assert [t.lr for t in study.sweep_trials(rows) if t.family == "gpt2" and t.size == 0] == [1e-3, 3e-3, 1e-2, 3e-2]


def test_every_size_takes_the_log_linear_lr_between_the_swept_sizes(study):
    family = study.family("gpt2")
    small, third = {1e-3: 2.3, 3e-3: 2.0, 1e-2: 2.2}, {1e-3: 2.0, 3e-3: 1.9, 1e-2: 2.05}
    rows = sweep_rows("gpt2", 0, small) + sweep_rows("gpt2", 2, third)
    lr0, lr2 = vertex(small), vertex(third)
    assert swept_lr(small, study.lr.first, study.lr.ladder) == pytest.approx(lr0, rel=1e-9)
    n0, n1, n2, n3 = (math.log(study.non_embedding(family, s)) for s in family.sizes)
    for size, n in ((1, n1), (3, n3)):  # between the swept sizes, and beyond them (extrapolated)
        t = (n - n0) / (n2 - n0)
        expected = math.exp((1 - t) * math.log(lr0) + t * math.log(lr2))
        assert study.lr_at(rows, family, size) == pytest.approx(expected, rel=1e-9)
    assert study.lr_at(rows[:-1], family, 1) is None  # one lr of the third size missing: the rule waits
    assert log_linear_lr([(100, 1e-2), (1000, 1e-3)], 10_000) == pytest.approx(1e-4, rel=1e-12)


def test_trials_start_sweeps_first_then_the_three_main_families_size_by_size_and_the_tied_family_last(study):
    def trial(kind: str, family: str, size: int, seed: int = 0) -> ScalingTrial:
        return ScalingTrial(study, kind, family, size, seed, 250, 1e-3)

    trials = [
        trial("main", "aot-mssa-tied", 0),
        trial("main", "gpt2", 3),  # the largest size
        trial("main", "aot-mssa", 2),
        trial("main", "gpt2", 0, seed=1),  # a second seed
        trial("cosine", "gpt2", 0),
        trial("main", "aot-mssa", 0),
        trial("branch", "gpt2", 1),
        trial("main", "gpt2", 1),
        trial("sweep", "aot-mhsa", 2),
        trial("remedy", "aot-mssa", 0),
        trial("cosine", "aot-mssa", 0, seed=1),
    ]
    ordered = [(t.kind, t.family, t.size, t.seed) for t in sorted(trials, key=study.priority)]
    assert ordered == [
        ("sweep", "aot-mhsa", 2, 0),
        ("main", "aot-mssa", 0, 0),
        ("branch", "gpt2", 1, 0),  # a branch keeps its place after its main run when both are listed (stable)
        ("main", "gpt2", 1, 0),
        ("cosine", "gpt2", 0, 0),
        ("remedy", "aot-mssa", 0, 0),  # after the cosine check at the sweep seed
        ("main", "aot-mssa", 2, 0),
        ("main", "gpt2", 0, 1),
        ("cosine", "aot-mssa", 0, 1),  # a second seed's cosine run waits with the second seeds
        ("main", "gpt2", 3, 0),
        ("main", "aot-mssa-tied", 0, 0),
    ]


# -- cpu.yaml against run.py ----------------------------------------------------------------------------------------

#: the store states of tests/fixtures/scaling/run_py_plans.json, as filters of the committed rows
STATES = {
    "empty": lambda r: False,
    "half-sweep": lambda r: (
        r["kind"] == "sweep"
        and not (r["family"] == "gpt2" and r["lr"] == 0.03)
        and not (r["family"] == "aot-mhsa" and r["size"] == 2 and r["lr"] == 0.01)
    ),
    "sweeps-only": lambda r: r["kind"] == "sweep",
    "mains-recorded": lambda r: r["kind"] in ("sweep", "main"),
    "committed": lambda r: True,
}


def run_py_plans() -> dict[str, Any]:
    return json.loads((FIXTURES / "scaling" / "run_py_plans.json").read_text())


def as_recorded(command: str) -> str:
    """A command line as the records (written before 2026-12-05) spell it: --recipe was --preset then."""
    return command.replace("--recipe ", "--preset ")


def argv_sha(trial: ScalingTrial, runs: Path) -> str:
    command = as_recorded(" ".join(a.replace(str(runs), "RUNS") for a in trial.argv(runs)))
    return hashlib.sha256(command.encode()).hexdigest()[:16]


@pytest.mark.parametrize("state", list(STATES))
def test_cpu_yaml_plans_the_trials_run_py_planned(study, committed, state, tmp_path, monkeypatch):
    """For each state of the store (and of the kept checkpoints), cpu.yaml's plan can start exactly the jobs that
    run.py's driver could (finished or startable: same keys in the same order, same steps, seeds, parents and
    command lines, the same lrs to 1e-12), and keeps the rest waiting."""
    fixture = run_py_plans()
    scenario = fixture["scenarios"][state]
    jobs = [dict(zip(fixture["fields"], job, strict=True)) for job in scenario["jobs"]]
    monkeypatch.chdir(tmp_path)  # run.py's runs/scaling, and cpu.yaml's, are relative to the working directory
    runs = Path(study.runs)
    for folder in scenario["dirs"]:
        (runs / folder).mkdir(parents=True)
    rows = [r for r in committed["runs"] if STATES[state](r)]
    plan = study.plan({"runs": rows})
    recorded = {r["key"] for r in rows}

    def seen(t: ScalingTrial) -> dict[str, Any]:
        parent = t.parent(runs)
        return {"key": t.key, "kind": t.kind, "family": t.family, "size": t.size, "steps": t.steps, "seed": t.seed,
                "parent": None if parent is None else str(parent.relative_to(runs)), "token_shift": t.token_shift,
                "done": t.key in recorded, "argv_sha256": argv_sha(t, runs)}  # fmt: skip

    can_start = [j for j in jobs if j["done"] or j["startable"]]
    assert [seen(t) for t in plan.runs] == [{k: j[k] for k in seen(plan.runs[0])} for j in can_start]
    for trial, job in zip(plan.runs, can_start, strict=True):
        assert trial.lr == pytest.approx(job["lr"], rel=1e-12)
    waiting = {j["key"] for j in jobs if not (j["done"] or j["startable"])}
    pending = {t.key for t in plan.pending}
    assert waiting <= pending
    assert all(t.lr is None for t in plan.pending if t.key not in waiting)  # the rest wait for the lr rule
    waits_for_lr = {f"{t.family} d{study.width(study.family(t.family), t.size)}" for t in plan.pending if t.lr is None}
    assert waits_for_lr == {line.split(":")[0] for line in scenario["waiting"]}


def test_the_committed_store_is_planned_all_done(study, committed):
    plan = study.plan(committed)
    keys = [r["key"] for r in committed["runs"]]
    assert plan.pending == [] and len(plan.runs) == len(keys) == 111
    assert sorted(t.key for t in plan.runs) == sorted(keys)
    assert all(r["run_dir"] == f"runs/scaling/{r['key']}" for r in committed["runs"])


def fake_results(row: dict[str, Any]) -> dict[str, Any]:
    """A finished run's results.json holding what ``row`` recorded of it."""
    return {
        "model": {"non_embedding_params": row["non_embedding_params"], "params": row["params"]},
        "val": {"loss": row["val_loss"], "loss_se": row["val_loss_se"], "windows": row["val_windows"]},
        "test": {"loss": row["test_loss"], "loss_se": row["test_loss_se"]},
        "train": {"precision": {"precision": row["precision"]}, "train_seconds": row["train_seconds"]},
        "machine": {"processor": row["cpu"], "date": row["date"]},
    }


def test_the_row_of_each_recorded_run_is_what_run_py_recorded(study, committed, tmp_path, monkeypatch):
    """Each committed row, rebuilt from its numbers by the study's row_of, is the row run.py wrote: the same fields
    in the same order (the older rows lack device and token_shift) and the same values, its command line too."""
    monkeypatch.chdir(tmp_path)
    sweeps = [r for r in committed["runs"] if r["kind"] == "sweep"]
    trials = {t.key: t for t in study.plan({"runs": sweeps}).pending + study.plan({"runs": sweeps}).runs}
    execution = study.execution(tmp_path / "out")
    for row in committed["runs"]:
        trial = trials[row["key"]]
        if row["kind"] == "branch" and row["branched_from"] is None:  # trained from scratch (its parent was gone)
            trial = replace(trial, branch_of=None)
        mine = {"key": trial.key, **execution.row_of(trial, fake_results(row), trial.folder(execution.runs))}
        mine["command"] = as_recorded(mine["command"])
        assert list(mine) == ["key", *ROW_FIELDS]
        assert {k: mine[k] for k in row} == row, row["key"]


ROW_FIELDS = [
    "kind", "family", "size", "n_layer", "n_embd", "non_embedding_params", "params", "steps", "tokens", "epochs", "lr",
    "seed", "training_flops", "val_loss", "val_loss_se", "val_windows", "test_loss", "test_loss_se", "precision",
    "train_seconds", "cpu", "device", "date", "token_shift", "branched_from", "run_dir", "command",
]  # fmt: skip


def test_the_migrated_store_keeps_every_row_and_adds_its_key_and_the_sweep(study, committed, tmp_path):
    """results.json gained each row's key (its folder under runs/scaling) and a sweep entry; every other field,
    and what `aot scaling fit` reads of it, is as committed before (git's HEAD:benchmarks/scaling/results.json)."""
    from aot.sweep.scaling import read_scaling_runs

    try:
        before = subprocess.run(["git", "show", "HEAD:benchmarks/scaling/results.json"], cwd=REPO, check=True,
                                capture_output=True, text=True).stdout  # fmt: skip
    except (OSError, subprocess.CalledProcessError):
        pytest.skip("git or the repository's history is not available")
    old = json.loads(before)
    assert old["what"] == committed["what"] and old["machine"] == committed["machine"]
    assert [{k: v for k, v in r.items() if k != "key"} for r in old["runs"]] == [
        {k: v for k, v in r.items() if k != "key"} for r in committed["runs"]
    ]
    assert all(r["key"] == r["run_dir"].removeprefix("runs/scaling/") for r in committed["runs"])
    assert committed["sweep"] == study.spec().to_dict() and committed["sweep"]["kind"] == "scaling"
    (tmp_path / "old.json").write_text(before)
    where = {"kind": ["main", "branch"]}
    assert read_scaling_runs(HERE / "results.json", where=where) == read_scaling_runs(
        tmp_path / "old.json", where=where
    )


# -- the file ---------------------------------------------------------------------------------------------------------


def cpu_mapping() -> dict[str, Any]:
    return yaml.safe_load(CPU.read_text())


@pytest.mark.parametrize(
    ("change", "expected"),
    [
        (lambda d: d.update(budget=3), "cpu.yaml: the study: unknown field 'budget'; known fields: kind, runs,"),
        (lambda d: d.pop("lr"), "cpu.yaml: the study: missing field 'lr'; known fields: kind, runs,"),
        (lambda d: d["families"]["gpt2"].update(depth=6), "families.gpt2: unknown field 'depth'; known fields: label"),
        (lambda d: d["lr"].pop("ladder"), "cpu.yaml: lr: missing field 'ladder'"),
        (lambda d: d["seeds"][1].update(steps="many"), "seeds[1].steps: must be a non-empty list, not 'many'"),
        (lambda d: d["families"]["gpt2"].update(model="gpt3-cpu"), "families.gpt2.model: unknown preset 'gpt3-cpu'"),
        (lambda d: d["remedy"].update(family="crate"), "cpu.yaml: no family 'crate'; the file's families: gpt2,"),
        (lambda d: d["cosine"][0].update(size=7), "cosine[0].size: size 7 is not one of gpt2's 4 sizes"),
        (lambda d: d.update(kind="grid"), "cpu.yaml: kind: must be 'scaling'"),
        (lambda d: d["budgets"].update(tokens_per_param=[5]), "budgets: give one of steps or tokens_per_param"),
    ],
)
def test_a_bad_field_is_one_line_naming_it_and_the_file(change, expected):
    data = cpu_mapping()
    change(data)
    with pytest.raises(ConfigError) as info:
        ScalingStudy.from_dict(data, "cpu.yaml")
    assert expected in str(info.value) and "\n" not in str(info.value)


def test_a_bad_recipe_setting_is_one_line_before_anything_trains():
    data = cpu_mapping()
    data["sets"]["recipe"].append("train.warmup=3")
    study = ScalingStudy.from_dict(data, "cpu.yaml")
    with pytest.raises(ConfigError) as info:
        study.check()
    message = str(info.value)
    assert message.startswith("cpu.yaml: the run of gpt2 at size 0: unknown field 'warmup'") and "\n" not in message


def test_a_study_and_its_trials_survive_pickling(study):
    """A launcher pickles the study and each trial into its cluster job."""
    gpu = ScalingStudy.from_file(GPU_A)
    assert gpu.launcher["gpus"] == 1 and gpu.launcher["time"] == "12:00:00"
    for one in (study, gpu):
        again = pickle.loads(pickle.dumps(one))
        assert again == one and again.launcher == one.launcher
        trial = one.plan({"runs": []}).runs[-1]
        copy = pickle.loads(pickle.dumps(trial))
        assert copy == trial and copy.argv(Path("r")) == trial.argv(Path("r")) and copy.key == trial.key


def test_a_branch_starts_from_its_main_runs_kept_checkpoint_once_it_exists(study, tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    rows = sweep_rows("gpt2", 0, {1e-3: 2.3, 3e-3: 2.0, 1e-2: 2.2}) + sweep_rows(
        "gpt2", 2, {1e-3: 2.0, 3e-3: 1.9, 1e-2: 2.05}
    )
    plan = study.plan({"runs": rows})
    runs = Path(study.runs)
    mains = {t.key: t for t in plan.runs if t.kind == "main"}
    branches = [t for t in plan.pending if t.kind == "branch" and t.family == "gpt2"]
    assert len(branches) == 3 * 2 + 2 * 2 + 2  # seed 0: 3 at sizes 0-1, 2 at sizes 2-3; seed 1 at size 0: 2
    for branch in branches:
        main = mains[branch.branch_of]
        step = stable_checkpoint(branch.steps, 0.2)
        assert step in main.keep and f"train.keep_checkpoints=[{','.join(map(str, main.keep))}]" in main.argv(runs)
        assert branch.parent(runs) == runs / main.key / f"checkpoint-step{step}"
        assert main.seed == branch.seed and main.steps > branch.steps and main.lr == branch.lr
    first = branches[0]
    assert (
        first.key == "main/gpt2-d64-s0-250" and first.parent(runs) == runs / "main/gpt2-d64-s0-2000/checkpoint-step200"
    )
    first.parent(runs).mkdir(parents=True)
    ready = next(t for t in study.plan({"runs": rows}).runs if t.key == first.key)
    argv = ready.argv(runs)
    assert argv[:4] == ["train", "lm", "--branch-from", str(first.parent(runs))]
    assert argv[argv.index("--set") + 1] == "train.steps=250" and argv[-1] == str(runs / first.key)
    parent = mains[first.branch_of].build().to_dict()  # a branch's config: its parent's, at its own length
    parent["train"].update(steps=250, keep_checkpoints=())
    assert ready.build().to_dict() == parent


def test_a_branch_whose_recorded_parent_folder_is_gone_runs_from_scratch_and_a_recorded_run_is_not_redone(
    study, tmp_path, monkeypatch
):
    """On a fresh machine runs/ is empty but results.json holds the rows: a recorded main run is not retrained, and
    its unfinished branches become the from-scratch WSD runs of their budgets (the same runs:
    tests/train/test_wsd_branch.py), not trials that wait forever for a checkpoint that is gone."""
    monkeypatch.chdir(tmp_path)
    rows = sweep_rows("gpt2", 0, {1e-3: 2.3, 3e-3: 2.0, 1e-2: 2.2}) + sweep_rows(
        "gpt2", 2, {1e-3: 2.0, 3e-3: 1.9, 1e-2: 2.05}
    )
    plan = study.plan({"runs": rows})
    runs = Path(study.runs)
    branch = next(t for t in plan.pending if t.key == "main/gpt2-d64-s0-250")
    assert "--branch-from" in branch.argv(runs)  # parent not recorded: wait for it
    rows.append({"key": branch.branch_of, "kind": "main", "family": "gpt2", "size": 0})
    plan = study.plan({"runs": rows})
    orphan = next(t for t in plan.runs if t.key == branch.key)
    argv = orphan.argv(runs)
    assert orphan.parent(runs) is None and "--branch-from" not in argv
    assert {"train.steps=250", "train.schedule=wsd", f"train.lr={branch.lr:g}"} <= set(argv)
    assert argv[argv.index("--out") + 1] == str(runs / branch.key)
    assert any(t.key == branch.branch_of for t in plan.runs)  # listed, and recorded: the executor skips it


# -- the GPU designs ----------------------------------------------------------------------------------------------


def test_gpu_a_has_every_family_at_3_10_and_30_m_parameters_with_80_tokens_per_parameter_and_branches():
    study = ScalingStudy.from_file(GPU_A)
    study.check()
    plan = study.plan({"runs": []})
    runs = Path(study.runs)
    assert [t.kind for t in plan.runs] == ["sweep"] * 4 * 2 * 3  # 4 families, 2 swept sizes, 3 lrs
    for sweep in plan.runs:  # at 20 tokens per parameter
        facts = study.facts(study.family(sweep.family), sweep.size)
        assert sweep.size in (0, 2) and sweep.steps == round(20 * facts.non_embedding / facts.tokens_per_step)
    for family in study.families:
        for size, target in zip(family.sizes, (3e6, 10e6, 30e6), strict=True):
            facts = study.facts(family, size)
            assert abs(facts.non_embedding / target - 1) < 0.10, (family.name, size, facts.non_embedding)
            assert facts.config.block_size == 1024 and facts.tokens_per_step == 32 * 1024
            assert (facts.config.vocab_size, facts.config.vocab_multiple) == (50257, 64)  # GPT-2's BPE
            steps = [round(tpp * facts.non_embedding / facts.tokens_per_step) for tpp in (5, 20, 80)]
            assert study.steps(family, size, study.budgets) == tuple(steps)
            chains = [t for t in plan.pending if t.family == family.name and t.size == size]
            seeds = {t.seed for t in chains}
            assert seeds == ({0, 1} if size == 1 else {0})
            main = next(t for t in chains if t.kind == "main" and t.seed == 0)
            assert main.steps == steps[2] and main.keep == tuple(stable_checkpoint(s, 0.2) for s in steps[:2])
            assert sorted(t.steps for t in chains if t.kind == "branch" and t.seed == 0) == steps[:2]
    argv = plan.runs[0].argv(runs)
    assert argv[6:10] == ["--data", "data/openwebtext-gpt2", "--tokenizer", "gpt2"] and argv[-2:] == [
        "--device",
        "cuda",
    ]
    assert "train.precision=bf16" in argv and "train.batch_size=32" in argv
    # 10 M takes the log-linear rule between the sweeps at 3 M and 30 M
    rows = [{"kind": "sweep", "family": "gpt2", "size": s, "lr": lr, "val_loss": loss}
            for s, losses in ((0, (2.0, 1.9, 2.1)), (2, (1.8, 1.85, 2.0)))
            for lr, loss in zip((1e-3, 3e-3, 1e-2), losses, strict=True)]  # fmt: skip
    rows += [{"kind": "sweep", "family": "gpt2", "size": 2, "lr": 3e-4, "val_loss": 1.83}]
    gpt2 = study.family("gpt2")
    n = [study.non_embedding(gpt2, s) for s in gpt2.sizes]
    best = [
        swept_lr({r["lr"]: r["val_loss"] for r in rows if r["size"] == s}, study.lr.first, study.lr.ladder)
        for s in (0, 2)
    ]
    assert study.lr_at(rows, gpt2, 1) == pytest.approx(
        log_linear_lr([(n[0], best[0]), (n[2], best[1])], n[1]), rel=1e-12
    )


def test_gpu_b_trains_the_papers_four_models_once_at_20_tokens_per_parameter_at_the_papers_lr():
    study = ScalingStudy.from_file(GPU_B)
    study.check()
    plan = study.plan({"runs": []})
    assert plan.pending == [] and [t.kind for t in plan.runs] == ["main"] * 4
    assert [t.family for t in plan.runs] == ["gpt2-base", "aot-mhsa-l-base", "aot-mssa-l-base", "aot-mssa-l-medium"]
    for trial in plan.runs:
        run = trial.build()
        facts = study.facts(study.family(trial.family), 0)
        assert run.model["preset"] == trial.family and trial.lr == 6e-4 and trial.seed == 0
        assert trial.steps == round(20 * facts.non_embedding / (480 * 1024))
        assert run.train.schedule == "cosine" and run.train.batch_size == 480 and run.train.keep_checkpoints == ()
    assert plan.runs[0].steps == 3461 and plan.runs[0].key == "main/gpt2-base-d768-s0-3461"


# -- training end to end: a main run, then its branch from the kept checkpoint -----------------------------------


def test_a_tiny_study_trains_its_main_run_then_branches_from_the_kept_checkpoint(tmp_path):
    data = {
        "kind": "scaling", "runs": str(tmp_path / "runs"), "recipe": "cpu-quick",
        "data": {"corpus": str(FIXTURES / "sonnets.txt"), "tokenizer": "bytes"},
        "sets": {"model": ["model.block_size=16"],
                 "recipe": ["train.batch_size=4", "train.warmup_steps=2", "train.precision=fp32", "train.eval_every=0",
                            "train.progress=false", "eval.final_windows=4", "eval.batch_size=2"]},
        "head_dim": 8,
        "families": {"mssa": {"label": "AoT-MSSA", "model": "aot-mssa-l-cpu", "n_layer": 1, "widths": [16]}},
        "budgets": {"steps": [8, 12]}, "seeds": [{"seed": 0}], "lr": {"value": 2e-3},
    }  # fmt: skip
    study = ScalingStudy.from_dict(data, "tiny.yaml")
    study.check()
    first = study.plan({"runs": []})
    assert [t.key for t in first.runs] == ["main/mssa-d16-s0-12"] and [t.key for t in first.pending] == [
        "main/mssa-d16-s0-8"
    ]
    execution = study.execution(tmp_path / "out", "cpu", log=lambda line: None)
    store = execution.run_plan(study.plan)
    rows = {r["key"]: r for r in store["runs"]}
    branch, main = rows["main/mssa-d16-s0-8"], rows["main/mssa-d16-s0-12"]
    kept = tmp_path / "runs" / "main" / "mssa-d16-s0-12" / "checkpoint-step6"
    assert kept.is_dir() and branch["branched_from"] == str(kept) and main["branched_from"] is None
    results = json.loads((tmp_path / "runs" / "main" / "mssa-d16-s0-8" / "results.json").read_text())
    assert results["train"]["branched_from"]["step"] == 6 and results["train"]["steps"] == 8
    assert branch["tokens"] == 8 * 4 * 16 and branch["command"].startswith("aot train lm --branch-from ")
    table = study.markdown(store)
    assert "| main | main/mssa-d16-s0-12 |" in table and "| branch | main/mssa-d16-s0-8 |" in table
    assert store["sweep"]["kind"] == "scaling" and "2 of 2 runs recorded" in table


# -- rendering ----------------------------------------------------------------------------------------------------


def test_the_readme_block_is_the_fits_numbers(render, tmp_path):
    """render.py's README block quotes fit/results.json (the exponents, the frontier gap at the largest run, the
    paper points beside the paper's gaps) and the schedule check's verdict: nothing typed by hand."""
    from aot.cli import main
    from aot.report.paper_numbers import lm_gap
    from aot.sweep.scaling.render import with_interval
    from aot.sweep.scaling.schedule_check import schedule_summary

    runs = FIXTURES / "scaling" / "runs.json"
    points = ["--at", "gpt2-base=gpt2,85000000,295000000000", "--at", "aot-mssa-l-base=aot-mssa,62600000,295000000000"]
    argv = ["scaling", "fit", str(runs), "--reference", "gpt2", "--starts", "2", "--bootstrap", "4", *points]
    assert main([*argv, "--boot-starts", "1", "--out", str(tmp_path / "fit")]) == 0
    fit = json.loads((tmp_path / "fit" / "results.json").read_text())
    block = render.readme_summary(fit, schedule_summary([], []), 40)
    lines = block.splitlines()
    mssa = next(line for line in lines if line.startswith("| AoT-MSSA, learned W_O |"))
    largest = next(m for m in fit["gap"]["at"] if m["where"] == "largest run")
    assert with_interval(fit["families"]["aot-mssa"]["law"]["alpha"]) in mssa
    assert mssa.endswith(with_interval(largest["families"]["aot-mssa"], "+.1f", 100, " %") + " |")
    paper = next(line for line in lines if line.startswith("| AoT-MSSA-L Base |"))
    assert with_interval(fit["points"][1]["gap"], "+.1f", 100, " %") in paper
    assert paper.endswith(f"{100 * lm_gap('AoT-MSSA-L Base'):+.1f} % |")
    assert lines[0].startswith("40 runs recorded") and "the check has not been made" in lines[-1]
    assert "`python benchmarks/scaling/render.py` rewrites this block" in lines[0]
    assert not any("one E for every family" in line for line in lines)
    assert main([*argv, "--boot-starts", "1", "--shared-e", "--out", str(tmp_path / "shared")]) == 0
    shared = json.loads((tmp_path / "shared" / "results.json").read_text())
    line = next(
        x for x in render.readme_summary(fit, schedule_summary([], []), 40, shared=shared).splitlines() if "one E" in x
    )
    assert f"E = {with_interval(shared['families']['gpt2']['law']['E'])};" in line
    assert f"AoT-MSSA, learned W_O {with_interval(shared['families']['aot-mssa']['law']['alpha'])}" in line
    assert f"aot-mssa at 6.26e+07: {with_interval(shared['points'][1]['gap'], '+.1f', 100, ' %')}." in line


def test_the_token_shift_runs_are_the_1m_token_run_of_aot_mssa_with_the_shift_and_their_table_quotes_the_rows(
    study, render
):
    family = study.family("aot-mssa")
    rows = sweep_rows("aot-mssa", 0, {1e-3: 2.3, 3e-3: 2.2, 1e-2: 2.25})
    rows += sweep_rows("aot-mssa", 2, {1e-3: 2.2, 3e-3: 2.1, 1e-2: 2.15})
    trials = study.remedy_trials(rows)
    assert [(t.token_shift, t.size, t.seed) for t in trials] == [
        ("scalar", 0, 0), ("channel", 0, 0), ("channel", 0, 1), ("channel", 2, 0)
    ]  # fmt: skip
    first = trials[0]
    argv = first.argv(Path("runs"))
    assert first.steps == 250 and first.lr == pytest.approx(study.lr_at(rows, family, 0))
    assert "model.token_shift=scalar" in argv and "train.schedule=wsd" in argv
    assert first.key == "remedy/aot-mssa-shift-scalar-d96-s0-250" and study.priority(first)[0] == 1.7

    def result(family: str, kind: str, val: float, params: int, shift: str = "none") -> dict:
        return {"family": family, "size": 0, "seed": 0, "steps": 250, "kind": kind, "val_loss": val,
                "val_loss_se": 0.004, "non_embedding_params": params, "token_shift": shift}  # fmt: skip

    results = [result("gpt2", "branch", 2.0, 300_000), result("aot-mhsa", "branch", 2.1, 301_000)]
    results += [result("aot-mssa", "branch", 2.2, 302_000), result("aot-mssa", "remedy", 2.05, 302_016, "scalar")]
    line = next(x for x in render.remedy_markdown(results).splitlines() if x.startswith("| 0.30 M"))
    cells = [c.strip() for c in line.strip("|").split("|")]
    assert cells[1:] == ["0", "2.0000 ± 0.0040", "2.1000 ± 0.0040 (+5.0 %)", "2.2000 ± 0.0040 (+10.0 %)",
                         "2.0500 ± 0.0040 (+2.5 %), +16 params", "—"]  # fmt: skip


def test_the_render_steps_run_at_once_and_a_failing_one_fails_the_render(render, monkeypatch):
    """render.py's fits run in their own processes together; the render stops with the first failure's exit code,
    whichever process it came from."""
    monkeypatch.setenv("PYTHONPATH", str(REPO / "src"))
    assert render.run_steps_at_once([["--help"], ["--help"]]) == 0
    assert render.run_steps_at_once([["--help"], ["no-such-command"]]) != 0


def test_the_committed_fit_blocks_and_tables_are_rendered_from_the_committed_results(render, committed):
    """fit/ was fitted from the committed results.json (its sha256), and schedule.md, benchmarks/lm/token_shift.md
    and the <!-- scaling:summary --> blocks of its README and the language guide are what render.py writes from
    them: rows that land without a render fail here."""
    from aot.report.part import Context
    from aot.report.parts import scaling
    from aot.runinfo import replace_marked_block
    from aot.sweep.scaling.schedule_check import schedule_markdown, schedule_pairs, schedule_summary

    rows = committed["runs"]
    fit = json.loads((HERE / "fit" / "results.json").read_text())
    shared = json.loads((HERE / "fit-shared-e" / "results.json").read_text())
    for fitted in (fit, shared):
        assert fitted["source"]["sha256"] == hashlib.sha256(render.RESULTS.read_bytes()).hexdigest()
    assert shared["settings"]["shared_e"] is True and sorted(shared["families"]) == sorted(fit["families"])
    check = schedule_summary(schedule_pairs(rows), rows)
    assert (HERE / "schedule.md").read_text().endswith(schedule_markdown(check))
    assert (REPO / "benchmarks" / "lm" / "token_shift.md").read_text() == render.remedy_markdown(rows)
    plan = scaling.plan(Context(preset="full", part_dir=HERE, data={"scaling-runs": str(render.RESULTS)}))
    waiting = plan.settings.get("waiting", [])
    held_out = render.holdout_block(rows)
    assert "| AoT-MSSA, learned W_O |" in held_out
    block = render.readme_summary(fit, check, len(rows), waiting, render.matched_block(rows), shared, held_out)
    for readme in (HERE / "README.md", render.GUIDE):
        text = readme.read_text()
        assert replace_marked_block(text, "scaling:summary", block, readme.name) == text, readme
