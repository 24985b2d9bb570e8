"""aot.analysis.recall_attention: the key / value / self / previous-token scores against a plain loop over the queries
(random patterns, MQAR sequences with random filler) and on a hand-made pattern; the hand-set 2-layer induction
AoT-MHSA (tests/recall_constructions.py) lands on the value and stops landing there without its previous-token head;
blocks without attention patterns get None; `aot analyze` on a tiny `aot train recall` run, and
benchmarks/recall/inside.py on it beside an unfinished run."""

from __future__ import annotations

import json
import runpy
from pathlib import Path

import numpy as np
import pytest
import torch

from aot.analysis.recall_attention import SCORES, answer_positions, recall_attention_scores, recall_head_scores
from aot.cli import main
from aot.config import ModelConfig
from aot.data.mqar import IGNORE, MQARConfig, draw
from aot.errors import AotError
from aot.models import build_model
from recall_constructions import induction_mhsa, instances

BENCH = Path(__file__).resolve().parents[2] / "benchmarks" / "recall"


def causal_patterns(batch: int, heads: int, length: int, seed: int) -> torch.Tensor:
    """Random attention patterns (B, H, T, T) float64: a softmax of Gaussian scores under a causal mask."""
    scores = torch.randn(batch, heads, length, length, generator=torch.Generator().manual_seed(seed)) * 2
    mask = torch.ones(length, length, dtype=torch.bool).tril()
    return scores.double().masked_fill(~mask, float("-inf")).softmax(-1)


def scores_by_loop(pattern: torch.Tensor, tokens: torch.Tensor, targets: torch.Tensor, n_pairs: int) -> dict:
    """The five scores, one query (and one position, and one pair) at a time."""
    B, H, T, _ = pattern.shape
    sums = {name: [0.0] * H for name in SCORES}
    queries = positions = 0
    for b in range(B):
        row = tokens[b].tolist()
        for i in range(n_pairs):  # the value of pair i sits at 2i + 1, its key at 2i
            for h in range(H):
                sums["value_to_key"][h] += float(pattern[b, h, 2 * i + 1, 2 * i])
        for t in range(T):
            if t >= 1:
                positions += 1
                for h in range(H):
                    sums["previous_token"][h] += float(pattern[b, h, t, t - 1])
            if int(targets[b, t]) == IGNORE:
                continue
            (p,) = [2 * i for i in range(n_pairs) if row[2 * i] == row[t]]
            assert row[p + 1] == int(targets[b, t])
            queries += 1
            for h in range(H):
                sums["key"][h] += float(pattern[b, h, t, p])
                sums["value"][h] += float(pattern[b, h, t, p + 1])
                sums["self"][h] += float(pattern[b, h, t, t])
    counts = {"previous_token": positions, "value_to_key": B * n_pairs}
    return {
        name: torch.tensor(values, dtype=torch.float64) / counts.get(name, queries) for name, values in sums.items()
    }


def test_the_scores_equal_a_loop_over_the_queries_on_random_patterns() -> None:
    cfg = MQARConfig(vocab_size=16, seq_len=24, n_pairs=4, random_fill=True, placement="uniform")
    seqs = draw(cfg, 6, np.random.default_rng(0))
    keys = seqs.tokens[:, 0:8:2]
    filler = seqs.tokens[:, 8:]
    decoys = sum(int(torch.isin(filler[b], keys[b]).sum()) for b in range(6)) - int((seqs.targets != IGNORE).sum())
    assert decoys > 0  # filler repeats keys outside the pairs part: only the pairs part may count as the match
    pattern = causal_patterns(6, 3, 24, seed=1)
    got = recall_attention_scores(pattern, seqs.tokens, seqs.targets, cfg.n_pairs)
    expected = scores_by_loop(pattern, seqs.tokens, seqs.targets, cfg.n_pairs)
    for name in SCORES:
        torch.testing.assert_close(got[name], expected[name], rtol=1e-12, atol=1e-12)
    assert not torch.allclose(got["key"], got["value"])


def test_the_scores_of_a_hand_made_pattern() -> None:
    # Zoology's example (aot.data.mqar): the query of key 4 at 6 answers 7 (at 3), the query of key 2 at 12 answers 8
    tokens = torch.tensor([[2, 8, 4, 7, 0, 0, 4, 0, 0, 0, 0, 0, 2, 0, 0, 0]])
    targets = torch.full_like(tokens, IGNORE)
    targets[0, 6], targets[0, 12] = 7, 8
    pattern = torch.zeros(1, 1, 16, 16, dtype=torch.float64)
    pattern[0, 0, 0, 0] = 1.0
    for t in range(1, 16):
        pattern[0, 0, t, t - 1] = 1.0  # every position on its predecessor ...
    pattern[0, 0, 6] = 0.0
    pattern[0, 0, 6, 3] = 1.0  # ... but the first query on its value
    pattern[0, 0, 12] = 0.0
    pattern[0, 0, 12, 0], pattern[0, 0, 12, 12] = 0.5, 0.5  # and the second on its key and itself
    got = {k: float(v) for k, v in recall_attention_scores(pattern, tokens, targets, n_pairs=2).items()}
    expected = {"key": 0.25, "value": 0.5, "self": 0.25, "previous_token": 13 / 15, "value_to_key": 1.0}
    assert got == pytest.approx(expected, abs=1e-12)


def test_sequences_that_are_not_mqar_of_that_many_pairs_are_one_line() -> None:
    tokens = torch.tensor([[2, 8, 4, 7, 0, 0, 4, 0]])
    targets = torch.full_like(tokens, IGNORE)
    targets[0, 6] = 7
    assert answer_positions(tokens, targets, 2)[2].tolist() == [2]
    with pytest.raises(AotError, match="not MQAR sequences of 1 pairs: the query at row 0, position 6") as exc:
        answer_positions(tokens, targets, 1)  # key 4 is in the second pair
    assert "\n" not in str(exc.value)


def instance_batch() -> tuple[torch.Tensor, torch.Tensor]:
    """Every 2-pair instance of tests/recall_constructions.py as MQAR tokens and targets (144, 8)."""
    tokens = torch.tensor([seq for seq, _ in instances()])
    targets = torch.full_like(tokens, IGNORE)
    for row, (_, asked) in enumerate(instances()):
        for t, value in asked.items():
            targets[row, t] = value
    return tokens, targets


def test_the_hand_set_induction_model_lands_on_the_value_and_not_without_its_previous_token_head() -> None:
    model = induction_mhsa()
    tokens, targets = instance_batch()
    scores = recall_head_scores(model, tokens, targets, n_pairs=2, batch_size=50)
    assert all(scores[name].shape == (2, 1) for name in SCORES)  # type: ignore[union-attr]
    value, previous, key = scores["value"], scores["previous_token"], scores["key"]
    assert value is not None and previous is not None and key is not None
    assert previous[0, 0] > 0.99  # layer 0: a previous-token head
    assert scores["value_to_key"] is not None and scores["value_to_key"][0, 0] > 0.99  # ... moving each key forward
    assert value[1, 0] > 0.99 and key[1, 0] < 0.01  # layer 1: on the value after the key, not on the key
    assert value[0, 0] < 0.3  # layer 0 reaches the value only when it is the query's predecessor (1 query in 4)
    with torch.no_grad():
        model.backbone.blocks[0].attn.out_proj.weight.zero_()  # no previous-token step: nothing to match
    knocked = recall_head_scores(model, tokens, targets, n_pairs=2)["value"]
    assert knocked is not None and knocked[1, 0] < 0.3


@pytest.mark.parametrize("block", ["linear-attn", "mamba"])
def test_blocks_without_attention_patterns_get_none(block: str) -> None:
    if block == "mamba":
        pytest.importorskip("mambapy")
    cfg = ModelConfig(block=block, n_layer=1, n_embd=16, n_head=2, vocab_size=8, block_size=8, task="lm")
    tokens, targets = instance_batch()
    assert recall_head_scores(build_model(cfg).eval(), tokens, targets, n_pairs=2) == dict.fromkeys(SCORES)


# -- aot analyze on a recall run, and benchmarks/recall/inside.py -----------------------------------------------


@pytest.fixture(scope="module")
def recall_run(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A 3-step `aot train recall` run of a 2 x 16 AoT-MHSA: 2 pairs in 16 tokens, V = 16."""
    run = tmp_path_factory.mktemp("recall") / "run"
    sets = [
        "model.n_embd=16", "model.n_head=2", "data.vocab_size=16", "data.seq_len=16", "data.n_pairs=2",
        "train.steps=3", "train.batch_size=4", "train.eval_every=0", "train.progress=false",
        "eval.val_sequences=8", "eval.test_sequences=8",
    ]  # fmt: skip
    argv = ["train", "recall", "--recipe", "cpu-quick", "--device", "cpu", "--out", str(run)]
    assert main([*argv, *(arg for s in sets for arg in ("--set", s))]) == 0
    return run


def test_analyze_a_recall_run_writes_the_recall_section(recall_run: Path, tmp_path: Path, capsys) -> None:
    out = tmp_path / "inside"
    assert main(["analyze", str(recall_run), "--batches", "2", "--batch-size", "3", "--out", str(out)]) == 0
    results = json.loads((out / "results.json").read_text())
    recall, trained = results["recall"], json.loads((recall_run / "results.json").read_text())
    assert results["kind"] == "recall" and results["options"]["seq_len"] == 16
    assert (recall["n_pairs"], recall["seq_len"], recall["sequences"], recall["queries"]) == (2, 16, 6, 12)
    for name in SCORES:
        assert np.array(recall[name]).shape == (2, 2)
        assert np.all((np.array(recall[name]) >= 0) & (np.array(recall[name]) <= 1))
    assert recall["val_accuracy"] == trained["val"]["accuracy"]
    assert np.array(results["circuits"]["induction"]).shape == (2, 2) and len(results["denoising"]["layers"]) == 2
    for name in ("denoising", "circuits", "spectra", "geometry", "recall"):
        assert (out / f"{name}.png").stat().st_size > 1000
    assert "top value-position head" in capsys.readouterr().out


@pytest.mark.parametrize(
    ("data", "message"),
    [
        ("train", "--data train: a recall run has no fixed training set"),
        ("notes.txt", "a recall run is analysed on its own MQAR sequences, not on a text file"),
    ],
)
def test_analyze_a_recall_run_on_train_or_text_is_one_line(recall_run, tmp_path, capsys, data, message) -> None:
    (tmp_path / "notes.txt").write_text("some text\n")
    given = str(tmp_path / data) if data.endswith(".txt") else data
    assert main(["analyze", str(recall_run), "--data", given, "--out", str(tmp_path / "out")]) == 2
    err = capsys.readouterr().err
    assert err.startswith("aot: error: ") and message in err and err.count("\n") == 1
    assert not (tmp_path / "out" / "results.json").exists()


def test_inside_analyses_the_finished_runs_and_skips_the_rest(recall_run: Path, tmp_path: Path) -> None:
    runs = tmp_path / "runs"
    runs.mkdir()
    (runs / "done").symlink_to(recall_run, target_is_directory=True)
    (runs / "training").mkdir()  # a run still training: a truncated results.json
    (runs / "training" / "results.json").write_text((recall_run / "results.json").read_text()[:50])
    out = tmp_path / "record" / "inside.json"
    store = tmp_path / "results.json"  # the grid's rows name the run's folder relative to where the grid ran
    store.write_text(json.dumps({"runs": [{"model": "AoT-MHSA", "tag": "quick", "run_dir": "runs/grid/done"}]}))
    script = runpy.run_path(str(BENCH / "inside.py"), run_name="bench_recall_inside")
    argv = ["--runs", str(runs), "--out", str(out), "--sequences", "6", "--results", str(store)]
    assert script["main"](argv) == 0
    record = json.loads(out.read_text())
    assert [s["run_dir"] for s in record["skipped"]] == [str(runs / "training")]
    (row,) = record["runs"]
    point = ("label", "block", "width", "pairs", "seq_len")
    assert tuple(row[k] for k in point) == ("AoT-MHSA", "aot-mhsa", 16, 2, 16)
    assert row["test_accuracy"] == json.loads((recall_run / "results.json").read_text())["test"]["accuracy"]
    assert np.array(row["recall"]["value"]).shape == (2, 2)
    assert row["best"]["value"] == max(max(r) for r in row["recall"]["value"])
    assert np.array(row["repeated"]["induction"]).shape == (2, 2)
    table = out.with_suffix(".md").read_text()
    assert "| quick | AoT-MHSA | 16 | 16 | 2 |" in table and record["machine"]["date"] in table
    # a second sitting: the run recorded before whose folder is gone stays; the one analysed again is not doubled
    gone = {**row, "run_dir": "runs/grid/elsewhere", "label": "AoT-MSSA (tied)"}
    out.write_text(json.dumps({**record, "runs": [gone, row]}))
    assert script["main"](argv) == 0
    assert [r["run_dir"] for r in json.loads(out.read_text())["runs"]] == ["runs/grid/elsewhere", str(runs / "done")]
