"""`aot train recall` (MQAR): the loss and the accuracies count the answers only (checked against a loop over them),
the model's vocabulary and context come from the data, a run writes its val / test scores, the sweep ranks it by
val accuracy, a model of another task or an option of another block is refused in one line, and (slow) the
cpu-quick recipe learns the task."""

from __future__ import annotations

import math

import pytest
import torch

from aot.cli import main
from aot.data.mqar import IGNORE, MQARConfig, held_out
from aot.errors import ConfigError
from aot.sweep.metrics import task_metrics
from aot.tasks import get_task, run_task
from aot.tasks.recall import chance_loss, recall_loss, recall_scores

QUIET = ["train.progress=false", "train.eval_every=0", "train.precision=fp32"]
TINY = [*QUIET, "model.n_layer=1", "model.n_embd=32", "eval.val_sequences=8", "eval.test_sequences=8"]
TINY += ["train.batch_size=8", "data.seq_len=16", "data.n_pairs=2", "data.vocab_size=32", "train.steps=3"]


class TableModel(torch.nn.Module):
    """Logits that depend on the token and its position only: a fixed random table, so right and wrong answers mix."""

    def __init__(self, vocab: int, length: int) -> None:
        super().__init__()
        self.table = torch.randn(length, vocab, vocab, generator=torch.Generator().manual_seed(0)) * 3

    def forward(self, tokens: torch.Tensor) -> tuple[torch.Tensor, None]:
        return self.table[torch.arange(tokens.shape[1]), tokens], None


def test_loss_and_accuracies_count_the_answers_only() -> None:
    cfg = MQARConfig(vocab_size=16, seq_len=20, n_pairs=3, n_queries=2)
    seqs = held_out(cfg, "test", 30)
    model = TableModel(16, 20)
    losses, right, perfect = [], 0, 0
    for tokens, targets in zip(seqs.tokens, seqs.targets):
        logits = model(tokens[None])[0][0]
        hits = []
        for t in range(20):
            if targets[t] == IGNORE:
                continue
            losses.append(-torch.log_softmax(logits[t], dim=-1)[targets[t]].item())
            hits.append(int(logits[t].argmax()) == int(targets[t]))
        right += sum(hits)
        perfect += all(hits)
    scores = recall_scores(model, seqs, batch_size=7, device=torch.device("cpu"))
    assert scores["queries"] == len(losses) == 60 and scores["sequences"] == 30
    assert scores["loss"] == pytest.approx(sum(losses) / 60, rel=1e-5)
    assert scores["accuracy"] == right / 60 and scores["sequence_accuracy"] == perfect / 30
    assert 0 < right < 60  # the table gets some answers right, not all
    assert float(recall_loss(model, (seqs.tokens, seqs.targets))) == pytest.approx(sum(losses) / 60, rel=1e-5)
    assert recall_scores(model, seqs, 4, torch.device("cpu"), limit=10)["sequences"] == 10


def test_the_model_takes_its_vocabulary_and_context_from_the_data() -> None:
    task = get_task("recall")
    run = task.build_run("cpu-quick", sets=["data.vocab_size=100", "data.seq_len=48", "model.block_size=512"])
    model = task.build_model(run, task.load_data(run, True))
    assert (model.cfg.vocab_size, model.cfg.block_size, model.cfg.n_layer) == (100, 48, 2)
    assert run.task == "lm" and chance_loss(run.data) == pytest.approx(math.log(50))


def test_a_tiny_run_writes_val_and_test_scores_and_a_sweep_row(tmp_path) -> None:
    task = get_task("recall")
    run = task.build_run("cpu-quick", sets=TINY)
    results = run_task(task, run, tmp_path, "cpu")
    for split in ("val", "test"):
        assert results[split]["sequences"] == 8 and results[split]["queries"] == 16
        assert 0 <= results[split]["accuracy"] <= 1 and math.isfinite(results[split]["loss"])
    assert results["train"]["sequences"] == 3 * 8 and results["data"]["queries"] == 2
    metrics = task_metrics("recall")
    row = metrics.row(results)
    assert row[metrics.metric.field] == results["val"]["accuracy"] and metrics.metric.goal == "max"
    assert (row["seq_len"], row["n_pairs"], row["vocab_size"], row["block"]) == (16, 2, 32, "aot-mhsa")
    assert "test accuracy" in task.summary(results, tmp_path)


def test_an_mssa_with_a_token_shift_trains_and_other_blocks_refuse_the_option(tmp_path) -> None:
    task = get_task("recall")
    sets = [*TINY, "model.preset=aot-mssa-l-cpu", "model.token_shift=channel"]
    results = run_task(task, task.build_run("cpu-quick", sets=sets), tmp_path, "cpu")
    assert results["model"]["block"] == "aot-mssa" and results["model"]["token_shift"] == "channel"
    with pytest.raises(
        ConfigError, match="token_shift='channel' is an option of block 'aot-mssa'; block='aot-mhsa' has none"
    ):
        task.build_run("cpu-quick", sets=["model.token_shift=channel"])


def test_a_model_of_another_task_or_an_impossible_setting_is_one_line(capsys) -> None:
    assert main(["train", "recall", "--model", "aot-mhsa-icl-cpu", "--dump-config"]) == 2
    err = capsys.readouterr().err
    assert "model preset 'aot-mhsa-icl-cpu' is for task 'icl' and this run trains 'lm' models" in err
    assert len(err.strip().splitlines()) == 1
    assert main(["train", "recall", "--pairs", "40", "--dump-config"]) == 2
    err = capsys.readouterr().err
    assert "data.seq_len=64 leaves 0 query slots after 40 pairs" in err or "data.n_pairs=40 needs" in err
    assert main(["train", "recall", "--pairs", "16", "--seq-len", "128", "--dump-config"]) == 0
    assert "n_pairs: 16" in capsys.readouterr().out


@pytest.mark.slow
def test_the_quick_recipe_learns_recall_with_aot_mhsa(tmp_path) -> None:
    """AoT-MHSA 2 x 64 at cpu-quick's recipe, 4 pairs in 32 tokens: past 0.9 test accuracy in 700 steps (~15 s)."""
    task = get_task("recall")
    sets = [*QUIET, "train.steps=700", "data.seq_len=32", "data.n_pairs=4", "eval.test_sequences=200"]
    results = run_task(task, task.build_run("cpu-quick", sets=sets), tmp_path, "cpu")
    assert results["test"]["accuracy"] > 0.9
