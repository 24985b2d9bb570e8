"""`aot train lm` and `aot data` end to end on a small local corpus, and their one-line errors."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from aot.cli import main
from aot.models import AotModel

FIXTURE = Path(__file__).resolve().parents[1] / "fixtures" / "sonnets.txt"
TINY = [
    "--set",
    "model.n_layer=2",
    "--set",
    "model.n_embd=32",
    "--set",
    "model.n_head=4",
    "--set",
    "model.block_size=32",
    "--set",
    "eval.final_windows=8",
    "--set",
    "train.progress=false",
]


@pytest.fixture(autouse=True)
def data_root(tmp_path, monkeypatch):
    monkeypatch.setenv("AOT_DATA", str(tmp_path / "data"))


def test_train_lm_writes_results_figure_and_checkpoint(tmp_path, capsys):
    out = tmp_path / "run"
    argv = [
        "train",
        "lm",
        "--corpus",
        str(FIXTURE),
        "--model",
        "aot-mssa-l-cpu",
        "--steps",
        "6",
        "--out",
        str(out),
        "--set",
        "train.eval_every=3",
        *TINY,
    ]
    assert main(argv) == 0
    results = json.loads((out / "results.json").read_text())
    assert results["train"]["steps"] == 6 and results["model"]["block"] == "aot-mssa"
    for split in ("val", "test"):
        assert results[split]["loss"] > 0 and results[split]["bits_per_byte"] > 0
    assert {"unigram", "bigram"} <= set(results["baselines"]["val"])
    assert len(results["train"]["evals"]) == 2
    assert (out / "loss_curve.png").stat().st_size > 0 and (out / "metrics.jsonl").is_file()
    model = AotModel.from_pretrained(out / "checkpoint")
    assert model.cfg.n_layer == 2
    assert "val loss" in capsys.readouterr().out
    # resuming a finished run trains nothing more and reports the same model
    assert main([*argv, "--resume"]) == 0
    assert json.loads((out / "results.json").read_text())["val"] == results["val"]


def test_train_lm_resume_with_another_config_is_one_line(tmp_path, capsys):
    out = tmp_path / "run"
    base = ["train", "lm", "--corpus", str(FIXTURE), "--steps", "2", "--out", str(out), *TINY]
    assert main(base) == 0
    capsys.readouterr()
    assert main([*base, "--set", "model.n_layer=3", "--resume"]) == 2
    err = capsys.readouterr().err.strip()
    assert err.startswith("aot: error: checkpoint") and "model.n_layer=2 there, 3 here" in err and "\n" not in err


@pytest.mark.parametrize(
    ("argv", "message"),
    [
        (["--corpus", "nope"], "unknown corpus 'nope'"),
        (["--corpus", "austen"], "run `aot data fetch austen`"),
        (["--corpus", "shakespeare", "--no-fetch"], "run `aot data fetch shakespeare`"),
        (["--tokenizer", "wordpiece"], "unknown tokenizer"),
        (["--model", "gpt3-huge"], "unknown preset"),
        (["--set", "train.lr"], "section.field=value"),
        (["--set", "train.lrr=1"], "did you mean 'lr'"),
        (["--recipe", "fast"], "unknown lm recipe"),
    ],
)
def test_bad_input_is_one_line(tmp_path, capsys, argv, message):
    corpus = [] if "--corpus" in argv else ["--corpus", str(FIXTURE)]
    assert main(["train", "lm", *corpus, *argv, "--out", str(tmp_path / "x"), *TINY]) == 2
    err = capsys.readouterr().err.strip()
    assert err.startswith("aot: error:") and message in err and "\n" not in err


def test_dump_config_applies_overrides(capsys):
    assert main(["train", "lm", "--lr", "0.5", "--set", "model.n_layer=9", "--dump-config"]) == 0
    text = capsys.readouterr().out
    assert "lr: 0.5" in text and "n_layer: 9" in text


def test_set_reads_numbers_yaml_would_leave_as_strings():
    from aot.layering import parse_set

    parsed = parse_set(["train.lr=3e-3", "model.norm=rmsnorm", "train.compile=true", "eval.final_windows=null"])
    assert parsed == {
        "train": {"lr": 0.003, "compile": True},
        "model": {"norm": "rmsnorm"},
        "eval": {"final_windows": None},
    }


def test_data_info_lists_corpora_and_tokenizes_a_file(capsys):
    assert main(["data", "info"]) == 0
    assert "not fetched (aot data fetch shakespeare)" in capsys.readouterr().out
    assert main(["data", "info", str(FIXTURE), "--json"]) == 0
    info = json.loads(capsys.readouterr().out)
    assert sum(info["bytes"].values()) == len(FIXTURE.read_bytes())
    assert info["baselines_val"]["bigram"]["loss"] < info["baselines_val"]["unigram"]["loss"]


def test_default_corpus_is_fetched_when_missing(tmp_path, monkeypatch, capsys):
    from aot.data import corpora

    fetched = []

    def fake_fetch(scratch):
        fetched.append(scratch)
        return FIXTURE.read_text()

    original = corpora.CORPORA["shakespeare"]
    monkeypatch.setitem(
        corpora.CORPORA, "shakespeare", corpora.Corpus("shakespeare", "", original.fetch_command, fake_fetch)
    )
    out = tmp_path / "run"
    assert main(["train", "lm", "--steps", "2", "--out", str(out), *TINY]) == 0
    assert len(fetched) == 1 and corpora.is_fetched("shakespeare")
    assert json.loads((out / "results.json").read_text())["config"]["data"]["corpus"] == "shakespeare"
    assert "fetching shakespeare" in capsys.readouterr().out


def test_a_model_preset_on_a_recipe_says_what_it_replaces(capsys):
    """`--model P` swaps the recipe's model for preset P as it is; the recipe's own model settings (cpu-quick's
    rotary positions and init 0.05) are dropped, and one line on stderr names them and how to keep them."""
    assert main(["train", "lm", "--recipe", "cpu-quick", "--model", "aot-mssa-l-cpu", "--dump-config"]) == 0
    captured = capsys.readouterr()
    lines = [line for line in captured.err.splitlines() if "replaces" in line]
    assert len(lines) == 1 and "position=rope" in lines[0] and "init_std=0.05" in lines[0]
    assert "--set model.position=rope" in lines[0]
    assert "aot-mssa-l-cpu" in captured.out and "rope" not in captured.out.split("model:", 1)[1].split("train:")[0]
    assert main(["train", "lm", "--recipe", "cpu-quick", "--dump-config"]) == 0  # no swap: nothing said
    assert "replaces" not in capsys.readouterr().err


def test_a_training_run_says_what_model_preset_replaced_when_it_starts(tmp_path, capsys):
    argv = ["train", "lm", "--recipe", "cpu-quick", "--corpus", str(FIXTURE), "--model", "aot-mssa-l-cpu", *TINY]
    argv += ["--steps", "2"]
    assert main([*argv, "--out", str(tmp_path / "run")]) == 0
    err = capsys.readouterr().err
    assert len([line for line in err.splitlines() if "replaces recipe cpu-quick" in line]) == 1
