"""The sweep engine (aot.sweep): the grid and its plan, the best-lr rule, skipping what finished, the results
store and the tables — on tiny fake stores, no training — and one `aot sweep` end to end on a minuscule model."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from aot.cli import main
from aot.errors import AotError, ConfigError
from aot.sweep import execute
from aot.sweep.grid import Plan, grid_configs, parse_axes, plan_sweep, split_values
from aot.sweep.metrics import TASK_METRICS, Metric
from aot.sweep.reference import gap, matched_reference, reference_summary
from aot.sweep.render import spread, summary_markdown
from aot.sweep.selection import Axes, best_lr, best_row, seed_summary, sweep_winners
from aot.sweep.spec import Reference, SweepSpec
from aot.sweep.store import read_store, record_rows, store_spec

FIXTURE = Path(__file__).resolve().parents[1] / "fixtures" / "sonnets.txt"
LOSS = Metric("loss", "min")
AXES = Axes(group=("model",))


def row(model: str, lr: float, seed: int, loss: float, **extra) -> dict:  # type: ignore[no-untyped-def]
    return {"key": f"{model}-{lr:g}-{seed}", "model": model, "lr": lr, "seed": seed, "loss": loss, **extra}


# -- grid and plan ------------------------------------------------------------------------------------------


def test_grid_is_every_combination_of_the_set_values():
    axes = parse_axes(["train.lr=1e-3,3e-3", "model.n_layer=2,4", "data.tokenizer=bytes"])
    assert axes == {"train.lr": ["1e-3", "3e-3"], "model.n_layer": ["2", "4"], "data.tokenizer": ["bytes"]}
    assert grid_configs({k: v for k, v in axes.items() if k != "train.lr"}) == [
        ("model.n_layer=2", "data.tokenizer=bytes"),
        ("model.n_layer=4", "data.tokenizer=bytes"),
    ]
    assert split_values("[1,2],3,'a,b'") == ["[1,2]", "3", "'a,b'"]  # a YAML list or a quoted comma is one value


@pytest.mark.parametrize(
    ("assignment", "message"),
    [
        ("train.lr=", "empty value"),
        ("train.lr=1e-3,", "empty value"),
        ("lr=1e-3", "section.field=value"),
        ("train.lr", "section.field=value"),
    ],
)
def test_bad_grid_assignments_are_one_line_errors(assignment, message):
    with pytest.raises(ConfigError, match=message):
        parse_axes([assignment])
    with pytest.raises(ConfigError, match="twice"):
        parse_axes(["train.lr=1", "train.lr=2"])


def test_plan_sweeps_every_lr_at_the_first_seed_then_the_other_seeds_at_the_winner():
    def plan(winners: dict[str, float]) -> Plan:
        return plan_sweep(
            [("a", [1e-3, 3e-3]), ("b", [1e-3])],
            [0, 1, 2],
            winners.get,
            lambda config, lr, seed: (config, lr, seed),
        )

    waiting = plan({})
    assert waiting.runs == [("a", 1e-3, 0), ("a", 3e-3, 0), ("b", 1e-3, 0), ("b", 1e-3, 1), ("b", 1e-3, 2)]
    assert waiting.pending == [("a", None, 1), ("a", None, 2)]  # a's sweep has no winner yet
    released = plan({"a": 3e-3})
    assert {r for r in released.runs if r[0] == "a" and r[2] > 0} == {("a", 3e-3, 1), ("a", 3e-3, 2)}
    assert not released.pending
    with pytest.raises(ConfigError, match="seed"):
        plan_sweep([("a", [1e-3])], [], {}.get, lambda *a: a)


# -- the best-lr rule --------------------------------------------------------------------------------------


def test_best_lr_is_the_lowest_metric_and_ties_go_to_the_smaller_lr():
    rows = [{"lr": 1e-3, "loss": 2.6}, {"lr": 3e-3, "loss": 2.4}, {"lr": 1e-2, "loss": 2.5}]
    assert best_lr(rows, LOSS) == 3e-3
    assert best_lr([{"lr": 1e-2, "loss": 2.4}, {"lr": 1e-3, "loss": 2.4}], LOSS) == 1e-3
    assert best_lr([], LOSS) is None
    accuracy = Metric("top1", "max")
    assert best_row([{"lr": 1e-3, "top1": 0.8}, {"lr": 3e-3, "top1": 0.9}], accuracy) == {"lr": 3e-3, "top1": 0.9}


def test_the_best_lr_is_the_seed0_sweep_winner_not_the_best_mean():
    """An lr given extra seeds by hand (3e-3: mean 2.35) cannot displace the sweep's winner at seed 0 (1e-3)."""
    rows = [
        row("m", 1e-3, 0, 2.40),
        row("m", 3e-3, 0, 2.45),
        row("m", 1e-3, 1, 2.50),
        row("m", 3e-3, 1, 2.25),
        row("m", 3e-3, 2, 2.35),
    ]
    (s,) = seed_summary(rows, AXES, LOSS)
    assert (s.lr, s.lrs_tried, s.seeds) == (1e-3, [1e-3, 3e-3], [0, 1])
    assert (s.mean, s.min, s.max) == (pytest.approx(2.45), 2.40, 2.50)
    assert s.config == {"model": "m"} and s.get("model") == "m" and s.get("key") == "m-0.001-0"
    # without a run at the sweep seed, the best mean decides
    (late,) = seed_summary([r for r in rows if r["seed"] > 0], AXES, LOSS)
    assert late.lr == 3e-3
    # the sweep seed can be another one
    (other,) = seed_summary(rows, AXES, LOSS, sweep_seed=1)
    assert other.lr == 3e-3


def test_a_half_done_sweep_has_no_winner():
    rows = [row("m", 1e-3, 0, 2.4), row("n", 1e-3, 0, 2.4), row("n", 3e-3, 0, 2.3), row("n", 1e-2, 1, 1.0)]
    assert sweep_winners(rows, AXES, LOSS, [1e-3, 3e-3]) == {("n",): 3e-3}
    assert sweep_winners(rows, AXES, LOSS) == {("m",): 1e-3, ("n",): 3e-3}


def test_every_task_declares_the_metric_its_sweeps_rank_by():
    assert {k: (m.metric.field, m.metric.goal) for k, m in TASK_METRICS.items()} == {
        "lm": ("val_nats_per_byte", "min"),
        "vision": ("val_top1", "max"),
        "icl": ("error_at_2d", "min"),
        "recall": ("val_accuracy", "max"),
    }


def test_each_task_row_keeps_its_numbers_from_results_json():
    machine = {"date": "2026-12-01 10:00 UTC"}
    model = {"block": "aot-mssa", "n_layer": 2, "n_embd": 16, "params": 9, "norm": "none", "residual_scale": "none"}
    train = {"epochs": 1.0, "images_per_second": 50.0, "train_seconds": 3.0, "wall_seconds": 4.0, "steps": 5}
    vision = {"model": model, "train": train, "machine": machine, "val": {"top1": 0.8},
              "test": {"top1": 0.7, "top5": 0.9, "loss": 1.1}}  # fmt: skip
    row = TASK_METRICS["vision"].row(vision)
    assert (row["val_top1"], row["test_top5"], row["n_embd"], row["wall_seconds"]) == (0.8, 0.9, 16, 4.0)
    icl = {"model": model, "train": {**train, "final_train_loss": 3.0}, "machine": machine,
           "eval": {"k=d/2": 0.8, "k=d": 0.5, "k=2d": 0.2}}  # fmt: skip
    row = TASK_METRICS["icl"].row(icl)
    assert (row["error_at_half_d"], row["error_at_d"], row["error_at_2d"], row["steps"]) == (0.8, 0.5, 0.2, 5)
    assert row["date"] == machine["date"]


# -- the store ---------------------------------------------------------------------------------------------


def test_store_round_trip_keeps_rows_another_lane_wrote_and_replaces_by_key(tmp_path):
    path = tmp_path / "results.json"
    spec = SweepSpec("lm", "cpu-quick", ("model",), reference=Reference("model", "a", match=("tokens",)))
    record_rows(path, [row("a", 1e-3, 0, 2.5)], spec)
    record_rows(path, [row("b", 1e-3, 0, 2.7)])  # another lane, started from the same file
    store = record_rows(path, [row("a", 1e-3, 0, 2.4)])  # a rerun of the first
    assert [(r["model"], r["loss"]) for r in store["runs"]] == [("b", 2.7), ("a", 2.4)]
    again = read_store(path)
    assert again == store and store_spec(again) == spec and "date" in again["machine"]
    # written in one step, no scratch left; the lock file that serialises writers stays (empty)
    assert sorted(p.name for p in tmp_path.iterdir()) == [".results.json.lock", "results.json"]


def test_a_truncated_store_is_an_error_never_an_empty_store(tmp_path):
    path = tmp_path / "results.json"
    record_rows(path, [row("a", 1e-3, 0, 2.5)])
    whole = path.read_text()
    path.write_text(whole[: len(whole) // 2])
    with pytest.raises(AotError, match="cannot be read") as err:
        record_rows(path, [row("b", 1e-3, 0, 2.7)])
    assert "\n" not in str(err.value)
    assert path.read_text() == whole[: len(whole) // 2]  # left for the user to restore
    assert read_store(tmp_path / "missing.json") == {"runs": []}


def test_a_store_of_the_earlier_mapping_format_reads_as_keyed_rows(tmp_path):
    path = tmp_path / "results.json"
    path.write_text(json.dumps({"machine": {}, "runs": {"main/linear/gpt2": {"eval": {"k=2d": 0.9}}}}))
    assert read_store(path)["runs"] == [{"key": "main/linear/gpt2", "eval": {"k=2d": 0.9}}]


# -- skipping what finished ----------------------------------------------------------------------------------


class FakeTrial:
    task = "lm"

    def __init__(self, key: str) -> None:
        self.key = key

    def folder(self, runs: Path) -> Path:
        return runs / self.key

    def build(self) -> None:
        return None

    def describe(self) -> str:
        return self.key


def finished(loss: float) -> dict:
    return {"task": "lm", "train": {"steps": 1}, "loss": loss}


def test_only_a_whole_results_json_counts_as_finished(tmp_path, monkeypatch):
    trained: list[Path] = []

    def fake_train(task, run, out, device, branch_from=None):  # type: ignore[no-untyped-def]
        trained.append(Path(out))
        Path(out).mkdir(parents=True, exist_ok=True)
        (Path(out) / "results.json").write_text(json.dumps(finished(2.0)))
        return finished(2.0)

    monkeypatch.setattr(execute, "train", fake_train)
    runs, store = tmp_path / "runs", tmp_path / "results.json"
    row_of = lambda trial, results, folder: {"loss": results["loss"]}  # noqa: E731
    (runs / "done").mkdir(parents=True)
    (runs / "done" / "results.json").write_text(json.dumps(finished(1.5)))
    (runs / "cut").mkdir(parents=True)
    (runs / "cut" / "results.json").write_text(json.dumps(finished(1.5))[:20])  # killed while writing
    (runs / "odd").mkdir(parents=True)
    (runs / "odd" / "results.json").write_text("[1, 2]")  # JSON, but not a finished run's
    execution = execute.Execution(runs, store, row_of, log=lambda _: None)
    status = {k: execution.run_trial(FakeTrial(k))[0] for k in ("done", "cut", "odd")}
    assert status == {"done": "finished", "cut": "trained", "odd": "trained"}
    assert trained == [runs / "cut", runs / "odd"]
    # a run the store records whose folder is gone (trained elsewhere) is kept as recorded
    assert execution.run_trial(FakeTrial("elsewhere"))[0] == "trained"
    (runs / "elsewhere" / "results.json").unlink()
    assert execution.run_trial(FakeTrial("elsewhere"))[0] == "recorded"
    strict = execute.Execution(runs, store, row_of, log=lambda _: None, keep_recorded=False)
    assert strict.run_trial(FakeTrial("elsewhere"))[0] == "trained"  # a caller that needs the folder retrains
    assert {r["key"]: r["loss"] for r in read_store(store)["runs"]} == {
        "done": 1.5,
        "cut": 2.0,
        "odd": 2.0,
        "elsewhere": 2.0,
    }


# -- rendering and references --------------------------------------------------------------------------------


def test_summary_table_lists_each_config_at_its_best_lr_best_first():
    rows = [row("a", 1e-3, 0, 2.5), row("a", 3e-3, 0, 2.3), row("a", 3e-3, 1, 2.4), row("b", 1e-3, 0, 2.2)]
    summaries = seed_summary(rows, AXES, LOSS)
    assert [spread(s) for s in summaries] == ["2.3500 (2.3000-2.4000, 2 seeds)", "2.2000 (1 seed)"]
    text = summary_markdown(summaries, LOSS, "Sweep of lm", "note")
    assert text.splitlines() == [
        "# Sweep of lm",
        "",
        "note",
        "",
        "| config | lrs tried | best lr | seeds | loss: mean (min-max) |",
        "|---|---|---|---|---|",
        "| b | 0.001 | 0.001 | 0 | 2.2000 (1 seed) |",
        "| a | 0.001 0.003 | 0.003 | 0 1 | 2.3500 (2.3000-2.4000, 2 seeds) |",
    ]


def test_the_reference_shares_the_recipe_but_not_the_contenders_shape():
    ref = Reference("model", "gpt2", match=("tokens",), own=("model.n_layer=",), prefer=("tag",))
    axes = Axes(group=("tag", "model", "extra"))

    def s(tag, model, extra, loss, tokens=100):  # type: ignore[no-untyped-def]
        return seed_summary([{"key": "k", "tag": tag, "model": model, "extra": extra, "lr": 1e-3, "seed": 0,
                              "loss": loss, "tokens": tokens}], axes, LOSS)[0]  # fmt: skip

    plain, init = s("a", "gpt2", [], 2.0), s("b", "gpt2", ["model.init=1"], 1.9)
    longer = s("a", "gpt2", [], 1.5, tokens=400)
    wide_init = s("b", "aot", ["model.n_layer=8", "model.init=1"], 2.1)
    assert reference_summary([plain, init, longer], wide_init, ref) is init  # the recipe, not the shape
    assert reference_summary([plain, longer], wide_init, ref) is plain  # no GPT-2 at that init: the plain one
    assert reference_summary([longer], wide_init, ref) is None  # another budget never compares
    assert matched_reference([plain, s("b", "gpt2", [], 2.1)], s("b", "aot", [], 3.0), ref).mean == 2.1  # own tag
    assert gap(2.2, 2.0) == pytest.approx(0.1) and gap(2.2, None) is None


# -- `aot sweep` end to end ----------------------------------------------------------------------------------

TINY = [
    f"data.corpus={FIXTURE}",
    "model.n_layer=1",
    "model.n_embd=16",
    "model.n_head=2",
    "model.block_size=16",
    "train.steps=3",
    "train.batch_size=4",
    "train.warmup_steps=1",
    "train.precision=fp32",
    "train.eval_every=3",
    "train.progress=false",
    "eval.periodic_windows=2",
    "eval.final_windows=4",
    "eval.batch_size=2",
]


def sweep_argv(out: Path, *sets: str) -> list[str]:
    argv = ["sweep", "lm", "--recipe", "cpu-quick", "--device", "cpu", "--out", str(out)]
    for item in [*TINY, *sets]:
        argv += ["--set", item]
    return argv


def test_aot_sweep_trains_the_grid_records_it_and_resumes(tmp_path, monkeypatch, capsys):
    monkeypatch.setenv("AOT_DATA", str(tmp_path / "data"))
    out = tmp_path / "sweep"
    assert main(sweep_argv(out, "train.lr=1e-3,3e-3")) == 0
    printed = capsys.readouterr().out
    assert printed.count("(trained in") == 2 and "[2/2]" in printed
    store = json.loads((out / "results.json").read_text())
    rows = store["runs"]
    assert sorted(r["lr"] for r in rows) == [1e-3, 3e-3] and {r["seed"] for r in rows} == {0}
    assert store["sweep"]["task"] == "lm" and store["sweep"]["preset"] == "cpu-quick"
    for r in rows:
        results = json.loads((Path(r["run_dir"]) / "results.json").read_text())
        assert r["val_nats_per_byte"] == results["val"]["nats_per_byte"] and r["config"] == "—"
    best = min(rows, key=lambda r: r["val_nats_per_byte"])
    table = (out / "table.md").read_text()
    assert f"| — | 0.001 0.003 | {best['lr']:g} | 0 | {best['val_nats_per_byte']:.4f} (1 seed) |" in table
    assert table in printed
    # the same command again trains nothing: every run is finished
    assert main(sweep_argv(out, "train.lr=1e-3,3e-3")) == 0
    again = capsys.readouterr().out
    assert "(trained in" not in again and again.count("(finished before)") == 2


@pytest.mark.parametrize(
    ("sets", "message"),
    [
        (["train.bogus=1"], "bogus"),
        (["model.n_layerz=1,2"], "n_layerz"),
        (["train.lr="], "empty value"),
        (["train.seed=1,2"], "--seeds"),
    ],
)
def test_aot_sweep_bad_input_is_one_line(tmp_path, capsys, sets, message):
    assert main(sweep_argv(tmp_path / "out", *sets)) == 2
    err = capsys.readouterr().err.strip()
    assert err.startswith("aot: error:") and message in err and "\n" not in err
    assert not (tmp_path / "out").exists()  # nothing written before the grid is checked


def test_aot_sweep_into_a_file_is_one_line(tmp_path, capsys):
    (tmp_path / "file").write_text("x")
    assert main(sweep_argv(tmp_path / "file", "train.lr=1e-3")) == 2
    err = capsys.readouterr().err.strip()
    assert err.startswith("aot: error: --out") and "\n" not in err


def test_aot_sweep_help_says_how_grid_seeds_best_lr_and_resume_work(capsys):
    with pytest.raises(SystemExit):
        main(["sweep", "--help"])
    text = " ".join(capsys.readouterr().out.split())
    for phrase in ("every combination", "first of --seeds", "the other seeds train at the winner", "Resume.",
                   "truncated"):  # fmt: skip
        assert phrase in text
