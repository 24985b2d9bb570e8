"""LM evaluation (loss, perplexity, bits per byte) and the n-gram baselines against direct computations."""

from __future__ import annotations

import itertools
import math
import statistics

import numpy as np
import torch
import torch.nn.functional as F

from aot.eval.lm import evaluate_lm, ngram_baselines
from aot.models import build_model, preset_config


def test_evaluate_lm_matches_a_direct_computation():
    torch.manual_seed(0)
    model = build_model(preset_config("gpt2-cpu", n_layer=1, n_embd=16, n_head=2, block_size=8, vocab_size=11)).double()
    tokens = np.random.default_rng(0).integers(0, 11, size=50).astype(np.uint16)
    token_bytes = np.arange(1, 12)  # token i stands for i + 1 bytes
    scores = evaluate_lm(model.eval(), tokens, 8, token_bytes, batch_size=2)
    nats, n_bytes, count = 0.0, 0, 0
    for start in range(0, 48, 8):  # 6 non-overlapping windows of 8 predictions: tokens 1..48
        window = torch.from_numpy(tokens[start : start + 9].astype(np.int64))
        logits = model(window[None, :-1])[0][0]
        nats += sum(-torch.log_softmax(logits[t], -1)[window[t + 1]].item() for t in range(8))
        n_bytes += int(token_bytes[tokens[start + 1 : start + 9]].sum())
        count += 8
    assert scores["tokens"] == count
    assert math.isclose(scores["loss"], nats / count, rel_tol=1e-9)
    assert math.isclose(scores["perplexity"], math.exp(nats / count), rel_tol=1e-9)
    assert math.isclose(scores["nats_per_byte"], nats / n_bytes, rel_tol=1e-9)
    assert math.isclose(scores["bits_per_byte"], nats / n_bytes / math.log(2), rel_tol=1e-9)


def test_full_split_standard_errors_against_a_direct_computation():
    """Every window of a 61-token split (7 windows of 8; the last 4 tokens are a tail no window holds), scored 3 at a
    time; loss_se = stdev / sqrt(n) of the per-window losses and the ratio estimator's SE for nats per byte, computed
    here with the statistics module, window by window."""
    torch.manual_seed(1)
    model = build_model(preset_config("gpt2-cpu", n_layer=1, n_embd=16, n_head=2, block_size=8, vocab_size=11)).double()
    tokens = np.random.default_rng(1).integers(0, 11, size=61).astype(np.uint16)
    token_bytes = np.array([1, 1, 2, 3, 1, 4, 1, 2, 1, 1, 3])
    calls: list[int] = []
    forward = model.forward

    def counted(idx, *args, **kwargs):  # type: ignore[no-untyped-def]
        calls.append(len(idx))
        return forward(idx, *args, **kwargs)

    model.forward = counted  # type: ignore[method-assign]
    scores = evaluate_lm(model.eval(), tokens, 8, token_bytes, batch_size=3)
    assert calls == [3, 3, 1]  # streamed: never more than a batch of windows at once
    losses, nats, n_bytes = [], [], []
    for start in range(0, 56, 8):
        window = torch.from_numpy(tokens[start : start + 9].astype(np.int64))
        logits = forward(window[None, :-1])[0][0]
        window_nats = sum(-torch.log_softmax(logits[t], -1)[window[t + 1]].item() for t in range(8))
        losses.append(window_nats / 8)
        nats.append(window_nats)
        n_bytes.append(float(token_bytes[tokens[start + 1 : start + 9]].sum()))
    n = len(losses)
    assert (scores["windows"], scores["split_windows"], scores["full_split"], scores["tokens"]) == (7, 7, True, 56)
    assert math.isclose(scores["loss"], statistics.fmean(losses), rel_tol=1e-9)
    assert math.isclose(scores["loss_se"], statistics.stdev(losses) / math.sqrt(n), rel_tol=1e-9)
    ratio = sum(nats) / sum(n_bytes)
    assert math.isclose(scores["nats_per_byte"], ratio, rel_tol=1e-9)
    residuals = [y - ratio * x for y, x in zip(nats, n_bytes, strict=True)]
    expected = math.sqrt(sum(r * r for r in residuals) / (n * (n - 1))) / statistics.fmean(n_bytes)
    assert math.isclose(scores["nats_per_byte_se"], expected, rel_tol=1e-9)
    sampled = evaluate_lm(model.eval(), tokens, 8, token_bytes, batch_size=3, max_windows=3)
    assert (sampled["windows"], sampled["split_windows"], sampled["full_split"]) == (3, 7, False)
    single = evaluate_lm(model.eval(), tokens, 8, token_bytes, max_windows=1)
    assert single["loss_se"] == 0.0 and single["nats_per_byte_se"] == 0.0


def test_ngram_baselines_match_counting():
    train = np.array([0, 1, 0, 1, 2, 0, 1, 1])
    held = np.array([0, 1, 2, 2])
    vocab = 3
    ones = np.ones(vocab, dtype=np.int64)
    scores = ngram_baselines(train, held, vocab, ones)
    counts = np.bincount(train, minlength=vocab)
    unigram = (counts + 1) / (len(train) + vocab)  # add-one
    expected_unigram = -np.mean(np.log(unigram[held[1:]]))
    assert math.isclose(scores["unigram"]["loss"], expected_unigram, rel_tol=1e-12)
    pairs = {}
    for a, b in itertools.pairwise(train):
        pairs[(a, b)] = pairs.get((a, b), 0) + 1
    context = np.bincount(train[:-1], minlength=vocab)

    def bigram(lam: float) -> float:
        probs = [
            lam * pairs.get((a, b), 0) / max(context[a], 1) + (1 - lam) * unigram[b]
            for a, b in itertools.pairwise(held)
        ]
        return float(-np.mean(np.log(probs)))

    best = min(bigram(lam) for lam in (0.5, 0.7, 0.8, 0.9, 0.95, 0.99))
    assert math.isclose(scores["bigram"]["loss"], best, rel_tol=1e-12)
    assert scores["bigram"]["loss"] < scores["unigram"]["loss"]


def test_cross_entropy_reduction_is_per_token():
    """evaluate_lm's batch sum equals the mean times the count (guards the reduction it relies on)."""
    logits, targets = torch.randn(4, 5, dtype=torch.float64), torch.tensor([0, 1, 2, 3])
    assert torch.isclose(F.cross_entropy(logits, targets, reduction="sum"), 4 * F.cross_entropy(logits, targets))
