"""The recall-hit decomposition (Zoology): hits against a direct loop on hand-made and random windows, the hit / other
losses against a loop over the scored tokens (and their mean against evaluate_lm's loss), and the share of a gap."""

from __future__ import annotations

import itertools

import numpy as np
import pytest
import torch

from aot.analysis.recall_hits import BigramTable, HitLosses, gap_share, hit_losses, recall_hits
from aot.eval.lm import evaluate_lm


def hits_by_loop(window: list[int]) -> list[bool]:
    """Target t (t = 1 … L−1) is a hit when (window[t−1], window[t]) is the pair at some (s−1, s), 1 ≤ s < t."""
    pairs = list(itertools.pairwise(window))  # pairs[t - 1] ends at position t
    return [any(pairs[s - 1] == pairs[t - 1] for s in range(1, t)) for t in range(1, len(window))]


def test_hits_on_a_hand_made_window() -> None:
    a, b, c, d = 1, 2, 3, 4
    window = [a, b, c, a, b, d, a, b, c, a]
    # targets:  b  c  a  b* d  a  b* c* a*   (a b at 3-4 repeats 0-1; a b at 6-7; b c at 7-8 repeats 1-2; c a at 8-9)
    expected = [False, False, False, True, False, False, True, True, True]
    assert hits_by_loop(window) == expected
    assert recall_hits(torch.tensor([window]))[0].tolist() == expected


def test_hits_on_random_windows_equal_the_loop() -> None:
    rng = np.random.default_rng(0)
    windows = torch.from_numpy(rng.integers(0, 5, size=(6, 30)))
    found = recall_hits(windows)
    assert found.shape == (6, 29)
    for row, window in zip(found.tolist(), windows.tolist()):
        assert row == hits_by_loop(window)
    assert 0 < found.float().mean() < 1


class TableModel(torch.nn.Module):
    """Logits from a fixed random table of (previous token, token): a bigram model, different per seed."""

    def __init__(self, vocab: int, seed: int) -> None:
        super().__init__()
        self.table = torch.randn(vocab, vocab, generator=torch.Generator().manual_seed(seed)) * 2

    def forward(self, idx: torch.Tensor) -> tuple[torch.Tensor, None]:
        return self.table[idx], None


def test_hit_and_other_losses_equal_a_loop_and_their_mean_is_evaluate_lms_loss() -> None:
    rng = np.random.default_rng(1)
    tokens = rng.integers(0, 6, size=200)
    model = TableModel(6, seed=0)
    got = hit_losses(model, tokens, block_size=12, batch_size=5)
    sums, counts = {True: 0.0, False: 0.0}, {True: 0, False: 0}
    for start in range(0, (len(tokens) - 1) // 12 * 12, 12):
        window = tokens[start : start + 13].tolist()
        logits = model(torch.tensor([window[:-1]]))[0][0]
        for t, hit in enumerate(hits_by_loop(window), start=1):
            sums[hit] += -torch.log_softmax(logits[t - 1], dim=-1)[window[t]].item()
            counts[hit] += 1
    assert (got.hits, got.others) == (counts[True], counts[False]) and got.hits >= 10
    assert got.hit_loss == pytest.approx(sums[True] / counts[True], rel=1e-6)
    assert got.other_loss == pytest.approx(sums[False] / counts[False], rel=1e-6)
    assert got.loss == pytest.approx(evaluate_lm(model, tokens, 12, np.ones(6), batch_size=3)["loss"], rel=1e-6)


def test_the_share_of_a_gap_is_the_hits_part_of_the_excess_nats() -> None:
    reference = HitLosses(hit_nats=10.0, hits=10, other_nats=90.0, others=30)  # hit loss 1.0, other 3.0, all 2.5
    contender = HitLosses(hit_nats=30.0, hits=10, other_nats=96.0, others=30)  # hit loss 3.0, other 3.2, all 3.15
    share = gap_share(contender, reference)
    assert share["delta_hits"] == pytest.approx(2.0) and share["delta_other"] == pytest.approx(0.2)
    assert share["delta_all"] == pytest.approx(0.65)
    assert share["hit_share_of_gap"] == pytest.approx(20.0 / 26.0)  # 20 of the 26 excess nats are on hits
    assert gap_share(reference, reference)["hit_share_of_gap"] is None
    with pytest.raises(ValueError, match="different tokens"):
        gap_share(contender, HitLosses(1.0, 11, 1.0, 29))


def test_the_bigram_table_is_the_training_splits_counts_and_splits_off_the_hits_it_does_not_predict() -> None:
    """p(y | x) against a direct count (0 for an unseen bigram, or an unseen x); the unpredicted hits are the hits
    whose bigram it gives p < below, with their loss against a loop; their share of a gap is their excess nats."""
    rng = np.random.default_rng(2)
    train = rng.integers(0, 6, size=300)
    table = BigramTable(train, 7)  # token 6 never occurs
    pairs = list(itertools.pairwise(train.tolist()))
    for x, y in [(0, 1), (3, 3), (5, 0), (6, 2), (2, 6)]:
        expected = pairs.count((x, y)) / max(sum(1 for a, _ in pairs if a == x), 1)
        assert table.probability(np.array([x]), np.array([y]))[0] == pytest.approx(expected, rel=1e-12)
    tokens = rng.integers(0, 6, size=200)
    model, below = TableModel(7, seed=0), 0.17
    got = hit_losses(model, tokens, block_size=12, batch_size=5, bigrams=table, below=below)
    nats, count = 0.0, 0
    for start in range(0, (len(tokens) - 1) // 12 * 12, 12):
        window = tokens[start : start + 13].tolist()
        logits = model(torch.tensor([window[:-1]]))[0][0]
        for t, hit in enumerate(hits_by_loop(window), start=1):
            p = table.probability(np.array([window[t - 1]]), np.array([window[t]]))[0]
            if hit and p < below:
                nats += -torch.log_softmax(logits[t - 1], dim=-1)[window[t]].item()
                count += 1
    assert 0 < got.unpredicted_hits == count < got.hits
    assert got.unpredicted_hit_loss == pytest.approx(nats / count, rel=1e-6)
    plain = hit_losses(model, tokens, block_size=12, batch_size=5)
    assert (plain.hit_nats, plain.hits, plain.unpredicted_hits) == (got.hit_nats, got.hits, 0)
    reference = HitLosses(10.0, 10, 90.0, 30, unpredicted_hit_nats=4.0, unpredicted_hits=4)
    contender = HitLosses(30.0, 10, 96.0, 30, unpredicted_hit_nats=16.0, unpredicted_hits=4)
    share = gap_share(contender, reference)
    assert share["delta_unpredicted_hits"] == pytest.approx(3.0)
    assert share["unpredicted_hit_share_of_gap"] == pytest.approx(12.0 / 26.0)  # 12 of the 26 excess nats
