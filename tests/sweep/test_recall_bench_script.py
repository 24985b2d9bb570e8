"""benchmarks/recall/run.py plans the recall study through the sweep engine (aot.sweep): the grids' runs, the lr sweep
then the second seed at the winner, every point a valid `aot train recall` config of its block, and a tiny grid run
end to end (trained, recorded, skipped when run again, rendered into table.md and the figures);
benchmarks/recall/hits.py decomposes two tiny LM runs' gap."""

from __future__ import annotations

import json
import runpy
from dataclasses import replace
from pathlib import Path
from types import SimpleNamespace

import pytest

from aot.cli import main as aot_main
from aot.report.parts.recall import QUICK, STUDY, RecallGrid
from aot.sweep import read_store
from aot.tasks.recall import RECALL_BLOCKS

BENCH = Path(__file__).resolve().parents[2] / "benchmarks" / "recall"
FIXTURE = Path(__file__).resolve().parents[1] / "fixtures" / "sonnets.txt"


def load_script(name: str) -> SimpleNamespace:
    """A script of benchmarks/recall, run as a module that is not ``__main__``: its functions and classes."""
    return SimpleNamespace(**runpy.run_path(str(BENCH / f"{name}.py"), run_name=f"bench_recall_{name}"))


@pytest.fixture(scope="module")
def bench() -> SimpleNamespace:
    return load_script("run")


def test_the_grids_plan_every_point_and_the_quick_one_leaves_mamba_out(bench) -> None:
    quick = bench.make_plan(QUICK, {"runs": []})
    assert len(quick.runs) == 8 * 2 * 3 and not quick.pending  # one lr, one seed
    assert {r.block for r in quick.runs} == set(RECALL_BLOCKS) - {"Mamba"}
    study = bench.make_plan(STUDY, {"runs": []})
    points = 9 * 3 * 9
    assert len(study.runs) == 3 * points and len(study.pending) == points  # the sweep, then seed 1 waits
    assert all(r.seq_len >= 4 * r.pairs for r in study.runs)  # every (length, pairs) leaves a slot per query


def test_seed_one_trains_at_the_lr_that_won_seed_zero(bench) -> None:
    grid = replace(STUDY, blocks=("AoT-MHSA",), widths=(64,), settings=((64, 4),))
    rows = []
    for run, accuracy in zip(bench.make_plan(grid, {"runs": []}).runs, (0.4, 0.9, 0.7)):
        group = dict(zip(bench.SPEC.group, run.group()))
        rows.append({"key": run.key, **group, "lr": run.lr, "seed": run.seed, "val_accuracy": accuracy})
    plan = bench.make_plan(grid, {"runs": rows})
    assert not plan.pending and [(r.lr, r.seed) for r in plan.runs][-1] == (3e-3, 1)


def test_every_point_is_a_valid_config_of_its_block(bench) -> None:
    expected = {
        "GPT-2": ("transformer", None), "AoT-MHSA": ("aot-mhsa", None), "AoT-MSSA (W_O)": ("aot-mssa", False),
        "AoT-MSSA (tied)": ("aot-mssa", True), "CRATE": ("crate", False), "Llama": ("llama", None),
        "linear attention": ("linear-attn", None), "Mamba": ("mamba", None),
        "AoT-MSSA (W_O) + token shift": ("aot-mssa", False),
    }  # fmt: skip
    for block, (name, tied) in expected.items():
        run = bench.Run("t", block, 128, 256, 64, 256, 10, 1e-3, 1).build()
        cfg = run.recall_model_config()
        assert (cfg.block, cfg.n_layer, cfg.n_embd, cfg.n_head) == (name, 2, 128, 1)
        assert (cfg.vocab_size, cfg.block_size, run.data.n_pairs, run.train.seed) == (256, 256, 64, 1)
        assert tied is None or cfg.tied_output is tied
        assert cfg.option("token_shift") == ("channel" if "token shift" in block else "none")


def test_a_tiny_grid_trains_records_skips_and_renders(bench, tmp_path: Path) -> None:
    small = ("eval.val_sequences=8", "eval.test_sequences=8")
    grid = RecallGrid("tiny", ("AoT-MSSA (W_O)",), (16, 32), ((16, 2),), 16, 2, (1e-3, 3e-3), (0,), small)
    store_path = tmp_path / "results.json"
    store = bench.run_grid(grid, tmp_path / "runs", store_path)
    assert len(store["runs"]) == 4 and store["sweep"]["task"] == "recall"
    row = store["runs"][0]
    assert row["command"].startswith("aot train recall --recipe cpu-quick --set model.preset=aot-mssa-l-cpu")
    assert (row["n_embd"], row["seq_len"], row["n_pairs"], row["steps"]) == (16, 16, 2, 2)
    assert Path(row["run_dir"], "results.json").is_file()
    before = store_path.read_text()
    assert bench.run_grid(grid, tmp_path / "runs", store_path) == read_store(store_path)  # nothing trains again
    assert json.loads(store_path.read_text())["runs"] == json.loads(before)["runs"]
    written = bench.render(read_store(store_path), tmp_path)
    assert all(path.stat().st_size > 1000 for path in written if path.suffix == ".png")
    table = (tmp_path / "table.md").read_text()
    assert table.count("| AoT-MSSA (W_O) |") == 2 and "test accuracy" in table  # one row per width at its best lr
    block = bench.readme_table(read_store(store_path), "tiny").splitlines()  # the README's recall:summary block
    best = {s.config["n_embd"]: s for s in bench.SPEC.summaries(read_store(store_path)["runs"])}
    assert block[2] == "| block | d 16, T 16, 2 pairs | d 32, T 16, 2 pairs |"
    assert block[4] == f"| AoT-MSSA (W_O) | {best[16].mean:.2f} | {best[32].mean:.2f} |"
    assert block[5] == "| chance (1 / pairs) | 0.50 | 0.50 |"
    assert bench.readme_table(read_store(store_path), "main").startswith("No `main` run is recorded yet")


def test_hits_script_decomposes_the_gap_of_two_tiny_lm_runs(tmp_path: Path) -> None:
    hits = load_script("hits")
    runs = []
    for model in ("gpt2-cpu", "aot-mssa-l-cpu"):
        out = tmp_path / model
        argv = ["train", "lm", "--corpus", str(FIXTURE), "--model", model, "--steps", "2", "--device", "cpu"]
        argv += ["--set", "model.n_layer=1", "--set", "model.n_embd=16", "--set", "model.n_head=2"]
        argv += ["--set", "model.block_size=16", "--set", "train.progress=false", "--set", "eval.final_windows=2"]
        assert aot_main([*argv, "--out", str(out)]) == 0
        runs.append(str(out))
    out = tmp_path / "hits.json"
    assert (
        hits.main([*runs, "--reference", runs[0], "--labels", "GPT-2,MSSA", "--windows", "8", "--out", str(out)]) == 0
    )
    record = json.loads(out.read_text())
    assert [r["label"] for r in record["runs"]] == ["GPT-2", "MSSA"] and record["runs"][0]["hits"] > 0
    (gap,) = record["gaps"]
    mssa, gpt2 = record["runs"][1], record["runs"][0]
    assert gap["delta_all"] == pytest.approx(mssa["loss"] - gpt2["loss"])
    assert "share of the gap on hits" in out.with_suffix(".md").read_text()
    assert 0 <= mssa["unpredicted_hits"] <= mssa["hits"] and record["unpredicted_below"] == 0.1
    assert gap["delta_unpredicted_hits"] == pytest.approx(mssa["unpredicted_hit_loss"] - gpt2["unpredicted_hit_loss"])
    with pytest.raises(SystemExit, match="--reference"):
        hits.main([*runs, "--reference", str(tmp_path / "other"), "--out", str(out)])


def test_the_readmes_recall_block_is_the_recorded_grid(bench) -> None:
    """The <!-- recall:summary --> blocks of docs/guide/language.md and benchmarks/recall/README.md are what --render
    writes from the committed results.json (a grid that lands without --render fails here)."""
    from aot.runinfo import replace_marked_block

    store = read_store(BENCH / "results.json")
    tag = "main" if any(r["tag"] == "main" for r in store["runs"]) else "quick"
    for path in (BENCH / "README.md", bench.GUIDE):
        text = path.read_text()
        assert replace_marked_block(text, "recall:summary", bench.readme_table(store, tag), path.name) == text, path
