"""What keeps corpus-sized work out of a distributed language-model run: a large corpus that is not prepared is
refused under torchrun (one line naming `aot data prepare`), and the n-gram baselines read a bounded sample."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from aot.data import shards
from aot.data.shardset import TokenSplit
from aot.errors import AotError
from aot.eval.lm import ngram_baselines
from aot.tasks import lm as lm_task

FIXTURE = Path(__file__).resolve().parents[1] / "fixtures" / "sonnets.txt"


def test_a_large_unprepared_corpus_is_refused_under_torchrun_and_served_once_prepared(tmp_path, monkeypatch):
    monkeypatch.setenv("AOT_DATA", str(tmp_path / "data"))
    cfg = lm_task.LMDataConfig(corpus=str(FIXTURE))
    lm_task.refuse_in_run_preparation(cfg)  # one process: prepared in the run, as always
    monkeypatch.setenv("WORLD_SIZE", "2")
    lm_task.refuse_in_run_preparation(cfg)  # small: still prepared in the run
    monkeypatch.setattr(shards, "INLINE_BYTES", 10)  # now the fixture counts as large
    with pytest.raises(AotError, match=r"is not prepared, .*`aot data prepare .* --tokenizer bytes --out DIR`"):
        lm_task.refuse_in_run_preparation(cfg)
    monkeypatch.setenv("WORLD_SIZE", "1")
    shards.prepare_lm_data(str(FIXTURE), "bytes")
    monkeypatch.setenv("WORLD_SIZE", "2")
    lm_task.refuse_in_run_preparation(cfg)  # prepared: served from the cache


def test_baselines_use_the_whole_split_when_small_and_a_bounded_sample_when_large(monkeypatch):
    rng = np.random.default_rng(0)
    parts = [rng.integers(0, 50, 3000).astype(np.uint16) for _ in range(4)]
    data = shards.LMData(
        tokenizer=type("T", (), {"vocab_size": 50})(),  # type: ignore[arg-type]
        splits={"train": TokenSplit(parts[:2]), "val": TokenSplit(parts[2:3]), "test": TokenSplit(parts[3:])},
        split_bytes={},
        key="k",
        folder=Path("."),
    )
    token_bytes = np.ones(50, dtype=np.int64)
    exact = lm_task.lm_baselines(data, token_bytes)
    whole = ngram_baselines(np.concatenate(parts[:2]), parts[2], 50, token_bytes)
    assert exact["val"] == whole  # small: the whole splits, no sampling note
    monkeypatch.setattr(lm_task, "BASELINE_TRAIN_TOKENS", 1280)
    monkeypatch.setattr(lm_task, "BASELINE_HELD_OUT_TOKENS", 640)
    sampled = lm_task.lm_baselines(data, token_bytes)
    assert sampled["val"]["bigram"]["sampled_tokens"] == {"train": 1280, "val": 640}
    assert abs(sampled["val"]["unigram"]["loss"] - whole["unigram"]["loss"]) < 0.1  # uniform tokens: close


def test_the_end_of_run_baselines_do_not_grow_with_the_corpus(monkeypatch):
    """A billion-token training split (one array seen 1,000 times: no memory): what the baselines read after the
    last step is the bounded sample, 32 M training and 4 M held-out tokens, never the split."""
    seen: list[tuple[int, int]] = []

    def recording(train, held_out, vocab_size, token_bytes):  # the counting stands in for the fit
        seen.append((len(train), len(held_out)))
        return {"unigram": {"loss": 1.0}, "bigram": {"loss": 1.0}}

    monkeypatch.setattr(lm_task, "ngram_baselines", recording)
    part = np.arange(1_000_000, dtype=np.uint16)
    data = shards.LMData(
        tokenizer=type("T", (), {"vocab_size": 65536})(),  # type: ignore[arg-type]
        splits={"train": TokenSplit([part] * 1000), "val": TokenSplit([part] * 20), "test": TokenSplit([part] * 20)},
        split_bytes={},
        key="k",
        folder=Path("."),
    )
    baselines = lm_task.lm_baselines(data, np.ones(65536, dtype=np.int64))
    assert seen == [(32_000_000, 4_000_000)] * 2  # val and test
    assert baselines["val"]["bigram"]["sampled_tokens"] == {"train": 32_000_000, "val": 4_000_000}
