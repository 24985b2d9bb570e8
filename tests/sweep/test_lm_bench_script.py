"""benchmarks/lm/run.py plans its grid (positions x lr sweep x seeds) through the sweep engine (aot.sweep), picks
each model's best lr, reads gaps against GPT-2 on the same footing and draws quality per compute from the FLOP
count of aot.bench.flops; headline.py renders results.json the way the store declares — checked here without
training anything."""

from __future__ import annotations

import argparse
import importlib.util
import json
import sys
from pathlib import Path
from types import ModuleType

import pytest

from aot.bench.flops import flops_per_token
from aot.errors import AotError
from aot.models import preset_config
from aot.sweep import read_store
from aot.sweep.figures import quality_curves
from aot.sweep.reference import reference_summary

LM_BENCH = Path(__file__).resolve().parents[2] / "benchmarks" / "lm"


def load_script(name: str, path: Path) -> ModuleType:
    spec = importlib.util.spec_from_file_location(name, path)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module  # its dataclasses look their module up
    spec.loader.exec_module(module)
    return module


@pytest.fixture(scope="module")
def bench() -> ModuleType:
    return load_script("bench_lm_run", LM_BENCH / "run.py")


def args(**changes) -> argparse.Namespace:  # type: ignore[no-untyped-def]
    base = dict(
        tag="grid",
        tokenizers=["bytes"],
        models=["gpt2-cpu", "crate-l-cpu"],
        positions=["learned", "rope"],
        lrs=[1e-3, 3e-3, 1e-2],
        lr_from=None,
        seeds=[0, 1, 2],
        steps=250,
        set=[],
    )
    return argparse.Namespace(**{**base, **changes})


def row(run, val_loss: float) -> dict:  # type: ignore[no-untyped-def]
    built = run.build()
    model = built.model_config()
    return {
        "key": run.key,
        "tag": run.tag,
        "tokenizer": run.tokenizer,
        "model": run.model,
        "overrides": run.overrides,
        "position": run.position,
        "lr": built.train.lr,  # as recorded: the lr the run trained with (the preset's when run.lr is None)
        "seed": run.seed,
        "extra": list(run.extra),
        "val_loss": val_loss,
        "val_nats_per_byte": val_loss,  # bytes: one token is one byte
        "bigram_val_loss": 2.5,
        "tokens": run.steps * 16 * 256,
        "n_layer": model.n_layer,
        "n_embd": model.n_embd,
        "run_dir": str(run.folder("runs/bench-lm")),
    }


def test_plan_sweeps_first_then_seeds_at_the_winner(bench):
    store: dict = {"runs": []}
    plan = bench.make_plan(args(), store)
    # 2 models x 2 positions x 3 lrs at seed 0; seeds 1, 2 wait for the sweep
    assert len(plan.runs) == 12 and len(plan.pending) == 8
    assert {(r.model, r.position, r.lr, r.seed) for r in plan.runs} == {
        (m, p, lr, 0) for m in ("gpt2-cpu", "crate-l-cpu") for p in ("learned", "rope") for lr in (1e-3, 3e-3, 1e-2)
    }
    rope = next(r for r in plan.runs if r.position == "rope" and r.lr == 3e-3)
    assert rope.overrides == ["model.position=rope", "train.lr=0.003"]
    assert rope.build().model_config().position == "rope" and rope.build().train.lr == 3e-3
    # a half-done sweep releases nothing
    losses = {1e-3: 2.6, 3e-3: 2.4, 1e-2: 2.5}
    gpt2_learned = [r for r in plan.runs if r.model == "gpt2-cpu" and r.position == "learned"]
    store["runs"] = [row(r, losses[r.lr]) for r in gpt2_learned[:2]]
    assert len(bench.make_plan(args(), store).pending) == 8
    store["runs"] = [row(r, losses[r.lr]) for r in gpt2_learned]
    plan = bench.make_plan(args(), store)
    released = [r for r in plan.runs if r.seed != 0]
    assert [(r.model, r.position, r.lr, r.seed) for r in released] == [
        ("gpt2-cpu", "learned", 3e-3, 1),
        ("gpt2-cpu", "learned", 3e-3, 2),
    ]
    assert released[0].overrides == ["model.position=learned", "train.lr=0.003", "train.seed=1"]
    # later rows take the winner with --lr-from
    later = bench.make_plan(
        args(tag="explore", lrs=None, lr_from="grid", models=["gpt2-cpu"], positions=["learned"], seeds=[0]), store
    )
    assert [(r.tag, r.lr) for r in later.runs] == [("explore", 3e-3)]
    with pytest.raises(SystemExit, match="no lr sweep"):
        bench.make_plan(args(lrs=None, lr_from="grid", models=["crate-l-cpu"], seeds=[0]), store)


def test_default_plan_keeps_the_recorded_keys(bench):
    """The comparison's command (no axes) plans exactly the runs results.json holds for tag main."""
    store = read_store(LM_BENCH / "results.json")
    plan = bench.make_plan(
        args(tag="main", tokenizers=bench.TOKENIZERS, models=bench.MODELS, positions=None, lrs=None, seeds=[0]), store
    )
    recorded = {r["key"] for r in store["runs"] if r["tag"] == "main"}
    assert recorded <= {r.key for r in plan.runs} and not plan.pending
    assert store["sweep"] == bench.SPEC.to_dict()  # the store says how run.py reads it (headline.py reads it so)
    assert {r.model for r in plan.runs if r.key not in recorded} <= {"crate-res-l-cpu"}  # added after the rows


def test_rows_at_the_preset_lr_join_a_sweep(bench):
    """A main row (lr 1e-3 from the preset: no train.lr override, so its key predates the lr axis) is the 1e-3
    point of a sweep in tag main."""
    store = read_store(LM_BENCH / "results.json")
    sweep = args(tag="main", models=["gpt2-cpu"], positions=None, lrs=[1e-3, 3e-3], seeds=[0, 1])
    plan = bench.make_plan(sweep, store)
    main_row = next(r for r in store["runs"] if r["tag"] == "main" and r["model"] == "gpt2-cpu")
    assert main_row["key"] == plan.runs[0].key and plan.runs[0].lr == 1e-3
    assert len(plan.pending) == 1  # 3e-3 not run yet
    (run_3e3,) = [r for r in plan.runs if r.lr == 3e-3]
    store["runs"].append(row(run_3e3, main_row["val_loss"] - 0.1))
    (seed1,) = [r for r in bench.make_plan(sweep, store).runs if r.seed == 1]
    assert seed1.lr == 3e-3


def test_seed_summary_and_quality_curves_use_the_flop_counter(bench, tmp_path):
    plan = bench.make_plan(args(models=["aot-mssa-l-cpu"], positions=["rope"], seeds=[0, 1]), {"runs": []})
    store: dict = {"runs": []}
    for run, loss in zip(plan.runs, (2.7, 2.5, 2.9)):
        store["runs"].append(row(run, loss))
    winner = bench.make_plan(args(models=["aot-mssa-l-cpu"], positions=["rope"], seeds=[0, 1]), store)
    seed1 = next(r for r in winner.runs if r.seed == 1)
    store["runs"].append(row(seed1, 2.6))
    for r, run in zip(store["runs"], [*plan.runs, seed1]):
        r.update(
            tokens_per_second=1000.0,
            train_flops_per_token=run.training_flops_per_token(),
            evals=[{"tokens": 4096, "val_loss": r["val_loss"] + 1}, {"tokens": 8192, "val_loss": r["val_loss"]}],
        )
    (summary,) = bench.SPEC.summaries(store["runs"])
    assert summary.lr == 3e-3 and summary.seeds == [0, 1]
    assert summary.mean == pytest.approx(2.55) and (summary.min, summary.max) == (2.5, 2.6)
    (curve,) = quality_curves([summary])
    cfg = preset_config("aot-mssa-l-cpu", vocab_size=256, block_size=256, position="rope")
    per_token = flops_per_token(cfg, 256).training_causal()
    assert curve["flops"] == [4096 * per_token, 8192 * per_token]
    assert curve["seconds"] == pytest.approx([4.096, 8.192])
    assert curve["values"] == pytest.approx([3.55, 2.55])
    assert curve["label"] == "grid bytes aot-mssa-l-cpu rope 36×256 (lr 0.003, 2 seeds)"
    store["machine"] = {"platform": "x", "cpu_count": 2, "torch_threads": 2, "torch": "t", "date": "d"}
    for r in store["runs"]:
        r.update(n_layer=36, non_embedding_params=1, tokens=8192, test_loss=2.0)
        r.update(train_seconds=1.0)
    text = bench.markdown(store)
    assert (
        "| grid | bytes | aot-mssa-l-cpu | rope | — | 0.001 0.003 0.01 | 0.003 | 2 | 2.5500 (2.5000-2.6000) |" in text
    )
    pytest.importorskip("matplotlib")
    png = bench.draw_figure(store, ["grid"], tmp_path / "q.png")
    assert png.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    with pytest.raises(AotError, match="no runs with periodic evaluations"):
        bench.draw_figure(store, ["other"], tmp_path / "none.png")


def test_plan_prints_done_runs_and_the_time_still_needed(bench, capsys, tmp_path):
    store = read_store(LM_BENCH / "results.json")
    store["runs"] = [r for r in store["runs"] if r["model"] != "crate-res-l-cpu"]  # as if its row were still to run
    plan = bench.make_plan(
        args(
            tag="main",
            tokenizers=["bytes"],
            models=["gpt2-cpu", "crate-res-l-cpu"],
            positions=None,
            lrs=None,
            seeds=[0],
        ),
        store,
    )
    total = bench.print_plan(plan, store, str(tmp_path))
    lines = capsys.readouterr().out.splitlines()
    assert [line.split()[0] for line in lines[1:-1]] == ["done", "run"]  # gpt2's main row is recorded
    (todo,) = [r for r in plan.runs if r.model == "crate-res-l-cpu"]
    assert total == pytest.approx(todo.tokens() * todo.training_flops_per_token() / bench.flops_per_second(store))
    assert todo.tokens() == 250 * 16 * 256


def test_recording_a_run_keeps_rows_another_lane_wrote_meanwhile(bench, tmp_path):
    """Two lanes of run.py each hold the store they loaded at start: recording a run re-reads results.json first,
    so neither drops the other's rows; a run whose folder holds a finished results.json is recorded without
    training, and table.md is rewritten."""
    mine = bench.Run("lanes", "bytes", "gpt2-cpu", 250, "rope", 3e-3)
    theirs = bench.Run("lanes", "bytes", "crate-l-cpu", 250, "rope", 3e-3)
    results_path = tmp_path / "results.json"
    their_row = {
        **row(theirs, 2.9),
        **dict(non_embedding_params=4_750_000, tokens=1_024_000, test_loss=2.95, tokens_per_second=2000.0),
        **dict(train_seconds=512.0),
    }
    results_path.write_text(json.dumps({"runs": [their_row], "machine": {}}))
    out = mine.folder(tmp_path / "runs")
    out.mkdir(parents=True)
    result = {
        "task": "lm",
        "config": {"train": {"lr": 3e-3}},
        "seed": 0,
        "model": {"block": "transformer", "n_layer": 6, "n_embd": 256, "non_embedding_params": 4_740_000},
        "train": {
            "tokens": 1_024_000,
            "tokens_per_second": 3000.0,
            "train_seconds": 341.0,
            "wall_seconds": 350.0,
            "evals": [{"tokens": 409_600, "val_loss": 2.6}],
        },
        "val": {"loss": 2.4, "nats_per_byte": 2.4},
        "test": {"loss": 2.45, "nats_per_byte": 2.45},
        "baselines": {"val": {"bigram": {"loss": 2.529}}},
        "machine": {"date": "2026-12-01"},
    }
    (out / "results.json").write_text(json.dumps(result))
    lane = args(tag="lanes", models=["gpt2-cpu"], positions=["rope"], lrs=[3e-3], seeds=[0])
    bench.run_grid(argparse.Namespace(**vars(lane), runs=str(tmp_path / "runs"), lock=None), results_path)
    store = read_store(results_path)
    assert {r["model"]: r["val_loss"] for r in store["runs"]} == {"crate-l-cpu": 2.9, "gpt2-cpu": 2.4}
    assert store["sweep"] == bench.SPEC.to_dict()
    assert "| lanes | bytes | gpt2-cpu |" in (tmp_path / "table.md").read_text()


def test_gap_reference_is_gpt2_at_the_same_lr_else_the_same_seed_else_main(bench):
    def r(model, val, position="rope", lr=None, seed=0, tag="grid"):  # type: ignore[no-untyped-def]
        return row(bench.Run(tag, "bytes", model, 250, position, lr, seed), val)

    store = {
        "runs": [
            r("gpt2-cpu", 2.0, lr=1e-3),
            r("gpt2-cpu", 1.9, lr=3e-3),
            r("gpt2-cpu", 1.95, lr=3e-3, seed=1),
            r("gpt2-cpu", 2.5, position=None, tag="main"),
        ]
    }
    assert bench.reference_loss(store, r("aot-mhsa-l-cpu", 2.2, lr=1e-3)) == 2.0  # same lr
    assert bench.reference_loss(store, r("aot-mhsa-l-cpu", 2.1, lr=1e-3, seed=1)) == 1.95  # same seed, GPT-2's best lr
    assert bench.reference_loss(store, r("aot-mhsa-l-cpu", 2.1, position="learned", lr=1e-2)) == 2.5  # main


def test_a_shape_override_is_measured_against_gpt2_of_the_same_positions_and_budget(bench):
    """rope-wide's contenders change their own shape: their GPT-2 is the rope GPT-2 of another tag at its best
    lr, never the learned-position main run; a longer budget is never compared with a shorter one."""
    wide = ("model.n_layer=8", "model.n_embd=384")

    def r(model, val, tag="rope", lr=1e-3, seed=0, steps=250, extra=()):  # type: ignore[no-untyped-def]
        return row(bench.Run(tag, "bytes", model, steps, "rope", lr, seed, tuple(extra)), val)

    store = {
        "runs": [
            r("gpt2-cpu", 2.0, lr=1e-3),
            r("gpt2-cpu", 1.9, lr=3e-3),
            r("gpt2-cpu", 1.92, lr=3e-3, seed=1),
            r("gpt2-cpu", 1.6, tag="rope-4x", lr=3e-3, steps=1000),
            row(bench.Run("main", "bytes", "gpt2-cpu", 250), 2.5),
        ]
    }
    contender = r("aot-mhsa-l-cpu", 2.0, tag="rope-wide", extra=wide)
    assert bench.reference_loss(store, contender) == 1.9
    assert bench.reference_loss(store, r("aot-mhsa-l-cpu", 2.0, tag="rope-wide", seed=1, extra=wide)) == 1.92
    assert bench.reference_loss(store, r("aot-mssa-l-cpu", 1.8, tag="rope-4x", steps=1000)) == 1.6
    # a recipe override (the init) is GPT-2's too: with GPT-2 at that init recorded, it is the reference
    init = ("model.init_std=0.05",)
    store_init = {"runs": [*store["runs"], r("gpt2-cpu", 1.85, tag="recipe", lr=3e-3, extra=init)]}
    assert bench.reference_loss(store_init, r("aot-mhsa-l-cpu", 1.9, tag="recipe", extra=wide + init)) == 1.85
    summary = bench.SPEC.summaries([*store["runs"], contender])
    wide_row = next(s for s in summary if s.get("tag") == "rope-wide")
    ref = reference_summary(summary, wide_row, bench.REFERENCE)
    assert ref is not None and ref.mean == pytest.approx((1.9 + 1.92) / 2)


def test_every_headline_command_plans_exactly_the_recorded_runs_behind_its_row(bench):
    """benchmarks/lm/headline.py prints a command per row; given to run.py, it must plan the very runs (same
    keys) whose seeds the row averages, so a reader re-running it skips them all and reproduces the row."""
    headline = load_script("bench_lm_headline", LM_BENCH / "headline.py")
    store = read_store(LM_BENCH / "results.json")
    rows = headline.headline_rows(store)
    assert rows, "results.json has no headline rows"
    for r in rows:
        argv = r["command"].split()[2:]  # after "python benchmarks/lm/run.py"
        plan = bench.make_plan(bench.build_parser().parse_args(argv), store)
        assert not plan.pending, r["command"]
        s = r["summary"]
        recorded = {
            x["key"]
            for x in store["runs"]
            if {k: x[k] for k in s.config} == s.config and (x["seed"] == 0 or x["lr"] == s.lr)
        }
        assert {run.key for run in plan.runs} == recorded, r["command"]


def test_recorded_table_and_headline_blocks_are_rendered_from_results_json(bench):
    """table.md, the headline block of the language guide and benchmarks/lm/README.md and the gap-along block are
    exactly what the scripts render from results.json (a changed rule or a new row shows here until they are
    re-rendered)."""
    from aot.runinfo import replace_marked_block

    headline = load_script("bench_lm_headline_blocks", LM_BENCH / "headline.py")
    store = read_store(LM_BENCH / "results.json")
    assert (LM_BENCH / "table.md").read_text() == bench.markdown(store)
    for path, commands in ((headline.GUIDE, False), (LM_BENCH / "README.md", True)):
        text = path.read_text()
        rendered = replace_marked_block(text, headline.BLOCK, headline.markdown(store, commands), path.name)
        if commands:
            rendered = replace_marked_block(rendered, headline.ALONG_BLOCK, headline.along_markdown(store), path.name)
            full = headline.full_split_markdown(store)
            rendered = replace_marked_block(rendered, headline.FULL_BLOCK, full, path.name)
        assert rendered == text, path


def test_init_probe_measures_attention_against_closed_forms_and_renders_its_json():
    """init_probe.py: a uniform causal pattern has sharpness 0 and a one-hot one 1; the mass on the query's own
    token is the share of same-token keys under a uniform pattern; init_probe.md is its JSON's table."""
    import torch

    probe = load_script("bench_lm_init_probe", LM_BENCH / "init_probe.py")
    T = 40
    uniform = torch.tril(torch.ones(T, T, dtype=torch.float64))
    uniform = (uniform / uniform.sum(-1, keepdim=True)).view(1, 1, T, T)
    one_hot = torch.eye(T, dtype=torch.float64).view(1, 1, T, T)
    assert probe.attention_sharpness(uniform) == pytest.approx(0.0, abs=1e-12)
    assert probe.attention_sharpness(one_hot) == pytest.approx(1.0, abs=1e-12)
    tokens = torch.tensor([[0, 1] * (T // 2)])  # alternating: at query t, ceil((t+1)/2) of the t+1 keys match
    expected = sum(((t + 2) // 2) / (t + 1) for t in range(probe.MIN_KEYS - 1, T)) / (T - probe.MIN_KEYS + 1)
    assert probe.same_token_mass(uniform, tokens) == pytest.approx(expected, rel=1e-12)
    assert probe.same_token_mass(one_hot, tokens) == pytest.approx(1.0)
    store = json.loads((LM_BENCH / "init_probe.json").read_text())
    assert probe.markdown(store) == (LM_BENCH / "init_probe.md").read_text()


def test_gap_along_the_longer_runs_is_each_contender_against_its_own_gpt2_at_each_evaluation(bench):
    """headline.along_rows: a contender with an init recipe is read against GPT-2 at that init (not the default
    GPT-2), seeds are averaged at each evaluation, and a token count GPT-2 did not evaluate gets no column."""
    headline = load_script("bench_lm_headline_along", LM_BENCH / "headline.py")
    init, wide = ("model.init_std=0.05",), ("model.n_layer=8", "model.n_embd=384", "model.n_head=6")

    def r(model, evals, lr=3e-3, seed=0, extra=()):  # type: ignore[no-untyped-def]
        run = bench.Run("rope-4x", "bytes", model, 1000, "rope", lr, seed, tuple(extra))
        return {**row(run, evals[-1][1]), "evals": [{"tokens": t, "val_loss": v} for t, v in evals]}

    store = {
        "sweep": bench.SPEC.to_dict(),
        "runs": [
            r("gpt2-cpu", [(1, 3.0), (2, 2.0)]),  # default init: not the contender's reference
            r("gpt2-cpu", [(1, 2.0), (2, 1.6), (3, 1.5)], extra=init),
            r("aot-mhsa-l-cpu", [(1, 2.2), (2, 1.7), (4, 1.6)], lr=1e-3, extra=wide + init),
            r("aot-mhsa-l-cpu", [(1, 2.4), (2, 1.9), (4, 1.6)], lr=1e-3, seed=1, extra=wide + init),
        ],
    }
    (along,) = headline.along_rows(store)
    assert along["shape"] == "8 × 384"
    assert along["gaps"] == pytest.approx({1: 0.15, 2: 0.125})  # (2.3 - 2.0) / 2.0, (1.8 - 1.6) / 1.6
    text = headline.along_markdown(store)
    assert "| bytes | AoT-MHSA | 8 × 384 | model.init_std=0.05 | +15.0 % | +12.5 % |\n" in text + "\n"


def test_the_report_takes_its_cpu_lrs_from_the_recorded_rotary_sweep(bench, tmp_path):
    """`aot reproduce`'s lm part trains each CPU model at its seed-0 sweep winner in results.json's tag rope (the
    package holds no recorded lr); without that record it lists its steps as not runnable here, in one line."""
    from aot.report.part import Context
    from aot.report.parts import lm as lm_part

    store = read_store(LM_BENCH / "results.json")
    winners = {
        s.get("model"): s.lr
        for s in bench.SPEC.summaries(store["runs"])
        if (s.get("tag"), s.get("tokenizer"), s.get("position"), s.get("extra")) == ("rope", "bytes", "rope", [])
    }
    plan = lm_part.plan(Context("quick", tmp_path))
    assert not plan.missing
    for (preset, _), step in zip(lm_part.CPU_MODELS["quick"].values(), plan.steps, strict=True):
        assert step.argv[step.argv.index("--lr") + 1] == f"{winners[preset]:g}"
    (line,) = lm_part.plan(Context("quick", tmp_path, data={"lm-sweep": str(tmp_path / "none.json")})).missing
    assert "no lr sweep recorded" in line and "\n" not in line


def test_the_full_split_column_is_each_row_retrained_at_its_best_lr_against_gpt2_retrained_the_same_way(bench):
    """headline.headline_rows: a row's full-split cell is the tag-full-split run of the same tokenizer, model and
    overrides at the row's best lr (another lr is not that row re-scored), with its SE over windows, and its gap is
    to GPT-2 of the same recipe in that tag, not to the 128-window GPT-2."""
    headline = load_script("bench_lm_headline_full", LM_BENCH / "headline.py")
    init = ("model.init_std=0.05",)

    def r(model, val, tag="tied-recipe", lr=3e-3, se=None, extra=init):  # type: ignore[no-untyped-def]
        run = bench.Run(tag, "bytes", model, 250, "rope", lr, 0, tuple(extra))
        return {**row(run, val), "val_loss_se": se}

    store = {
        "sweep": bench.SPEC.to_dict(),
        "runs": [
            r("gpt2-cpu", 1.80),
            r("aot-mssa-l-cpu", 2.00),
            r("aot-mhsa-l-cpu", 1.90, lr=1e-3),
            r("gpt2-cpu", 1.85, tag="full-split", se=0.004),
            r("aot-mssa-l-cpu", 2.035, tag="full-split", se=0.005),
            r("aot-mhsa-l-cpu", 1.95, tag="full-split", lr=3e-3, se=0.005),  # not MHSA's best lr (1e-3)
            r("gpt2-cpu", 1.90, tag="full-split", se=0.004, extra=()),  # default init: not the contenders' GPT-2
            r("aot-mssa-l-cpu", 1.961, tag="full-split", se=0.005, extra=(*init, "model.token_shift=channel")),
        ],
    }
    rows = {x["summary"].get("model"): x for x in headline.headline_rows(store)}
    assert rows["aot-mssa-l-cpu"]["full_gap"] == pytest.approx(2.035 / 1.85 - 1)  # not 2.035 / 1.80
    assert rows["aot-mhsa-l-cpu"]["full"] is None
    line = next(x for x in headline.markdown(store, False).splitlines() if "| AoT-MSSA" in x)
    assert "| 2.035 ± 0.005 (1 seed), +10.0 % |" in line
    assert "| +0.600 | — | — |" in next(x for x in headline.markdown(store).splitlines() if "| AoT-MHSA" in x)
    full = headline.full_split_markdown(store).splitlines()  # the tag on its own, MHSA at 3e-3 included
    assert len(full) == 2 + 5 and "| 3e-3 | 2.035 ± 0.005 (1 seed) | +10.0 % |" in full[5]
    # a block option of the contender's own (a token shift) is not GPT-2's recipe: its GPT-2 is the init-0.05 one
    assert "| model.init_std=0.05 model.token_shift=channel |" in full[6] and full[6].endswith("| +6.0 % |")


def test_rescore_scores_a_run_as_its_own_final_evaluation_did_and_finds_the_run_it_retrained(bench, tmp_path):
    """benchmarks/lm/rescore.py: scored on every window, a run's model gives the val loss the run recorded (the
    same windows, context and precision), and on fewer windows the sample; the original of a full-split row is
    the earlier tag's run of the same tokenizer, model, overrides, lr and seed — not another seed or lr."""
    from aot.cli import main as aot_main

    rescore = load_script("bench_lm_rescore", LM_BENCH / "rescore.py")
    corpus = Path(__file__).resolve().parents[1] / "fixtures" / "sonnets.txt"
    out = tmp_path / "run"
    argv = ["train", "lm", "--corpus", str(corpus), "--model", "gpt2-cpu", "--steps", "2", "--device", "cpu"]
    argv += ["--set", "model.n_layer=1", "--set", "model.n_embd=16", "--set", "model.n_head=2"]
    argv += ["--set", "model.block_size=16", "--set", "train.progress=false", "--out", str(out)]
    assert aot_main(argv) == 0
    recorded = json.loads((out / "results.json").read_text())["val"]
    full = rescore.sampled_loss(out, recorded["split_windows"])
    assert full["full_split"] and full["loss"] == pytest.approx(recorded["loss"], rel=1e-12)
    assert rescore.sampled_loss(out, 4)["windows"] == 4

    def r(tag, lr=3e-3, seed=0):  # type: ignore[no-untyped-def]
        return row(bench.Run(tag, "bytes", "gpt2-cpu", 250, "rope", lr, seed, ("model.init_std=0.05",)), 1.8)

    store = {"runs": [r("tied-recipe", lr=1e-3), r("tied-recipe", seed=1), r("tied-recipe"), r("full-split")]}
    assert rescore.original(store, store["runs"][3]) is store["runs"][2]
