"""MQAR data (Zoology's multi-query associative recall): the layout checked against a direct loop over each sequence,
the query placement against its probabilities (and numpy's own sampler without replacement), the batches a function
of (seed, step), the held-out sets fixed, and one-line errors for configs that cannot be drawn."""

from __future__ import annotations

import numpy as np
import pytest
import torch

from aot.data.mqar import IGNORE, MQARBatches, MQARConfig, draw, held_out
from aot.errors import ConfigError


def context_pairs(tokens: list[int], n_pairs: int) -> dict[int, int]:
    """key -> value, read off the start of the sequence one pair at a time."""
    return {tokens[2 * i]: tokens[2 * i + 1] for i in range(n_pairs)}


@pytest.mark.parametrize("random_fill", [True, False])
def test_sequences_hold_pairs_then_queries_answered_by_their_values(random_fill: bool) -> None:
    cfg = MQARConfig(vocab_size=64, seq_len=40, n_pairs=6, n_queries=4, random_fill=random_fill)
    seqs = draw(cfg, 50, np.random.default_rng(3))
    assert seqs.tokens.shape == seqs.targets.shape == (50, 40) and seqs.tokens.dtype == torch.int64
    for tokens, targets in zip(seqs.tokens.tolist(), seqs.targets.tolist()):
        keys, values = tokens[0:12:2], tokens[1:12:2]
        assert len(set(keys)) == 6 and all(1 <= k < 32 for k in keys)  # distinct, lower half, never 0
        assert len(set(values)) == 6 and all(32 <= v < 64 for v in values)
        pairs = context_pairs(tokens, 6)
        answered = [t for t, target in enumerate(targets) if target != IGNORE]
        assert len(answered) == 4 and all(t >= 12 and (t - 12) % 2 == 0 for t in answered)
        assert len({tokens[t] for t in answered}) == 4  # each pair asked at most once
        for t in answered:
            assert tokens[t] in pairs and targets[t] == pairs[tokens[t]]
        fillers = [tokens[t] for t in range(12, 40) if t not in answered]
        if random_fill:
            assert len(set(fillers)) > 5
        else:
            assert set(fillers) == {0}


def test_every_pair_is_asked_by_default() -> None:
    cfg = MQARConfig(vocab_size=128, seq_len=64, n_pairs=8)
    seqs = draw(cfg, 20, np.random.default_rng(0))
    assert ((seqs.targets != IGNORE).sum(dim=1) == 8).all()


@pytest.mark.parametrize(("placement", "power_a"), [("power", 0.01), ("power", 0.3), ("uniform", 0.01)])
def test_a_single_query_lands_in_slot_s_with_probability_a_s_to_the_a_minus_1(placement: str, power_a: float) -> None:
    cfg = MQARConfig(vocab_size=64, seq_len=24, n_pairs=2, n_queries=1, placement=placement, power_a=power_a)
    slots = (24 - 4) // 2
    s = np.arange(1, slots + 1, dtype=np.float64)
    expected = np.full(slots, 1 / slots) if placement == "uniform" else power_a * s ** (power_a - 1)
    expected /= expected.sum()
    seqs = draw(cfg, 6000, np.random.default_rng(1))
    where = (seqs.targets != IGNORE).float().argmax(dim=1).numpy()
    counts = np.bincount((where - 4) // 2, minlength=slots)
    assert np.abs(counts / 6000 - expected).max() < 0.025
    chi2 = ((counts - 6000 * expected) ** 2 / (6000 * expected)).sum()
    assert chi2 < 40  # 9 degrees of freedom: p < 1e-5 beyond 40


def test_several_queries_are_drawn_as_numpys_sampling_without_replacement() -> None:
    cfg = MQARConfig(vocab_size=64, seq_len=20, n_pairs=2, n_queries=2, power_a=0.2)
    p = cfg.slot_probabilities()
    rng = np.random.default_rng(5)
    ours = np.zeros(cfg.slots)
    for where in (draw(cfg, 8000, np.random.default_rng(2)).targets != IGNORE).nonzero()[:, 1].numpy():
        ours[(where - 4) // 2] += 1
    numpys = np.zeros(cfg.slots)
    for _ in range(8000):
        numpys[rng.choice(cfg.slots, size=2, replace=False, p=p)] += 1
    assert np.abs(ours - numpys).max() / 8000 < 0.025  # the same inclusion probability of every slot


def test_a_batch_is_a_function_of_seed_and_step_and_its_rows_of_the_global_batch() -> None:
    cfg = MQARConfig(vocab_size=256, seq_len=32, n_pairs=4)
    batches = MQARBatches(cfg, batch_size=8, seed=7)
    tokens, targets = batches.get(3)
    again = MQARBatches(cfg, batch_size=8, seed=7).get(3)
    assert torch.equal(tokens, again[0]) and torch.equal(targets, again[1])
    assert not torch.equal(tokens, batches.get(4)[0])
    assert not torch.equal(tokens, MQARBatches(cfg, batch_size=8, seed=8).get(3)[0])
    rows = [batches.get(3, start, start + 2) for start in (0, 2, 4, 6)]  # four processes of a DDP run
    assert torch.equal(torch.cat([r[0] for r in rows]), tokens)
    assert torch.equal(torch.cat([r[1] for r in rows]), targets)
    assert batches.tokens_per_sample() == 32


def test_held_out_sets_are_fixed_distinct_and_prefixes_of_each_other() -> None:
    cfg = MQARConfig(vocab_size=256, seq_len=32, n_pairs=4)
    test = held_out(cfg, "test", 20)
    assert torch.equal(test.tokens, held_out(cfg, "test", 20).tokens)
    assert torch.equal(held_out(cfg, "test", 5).tokens, test.tokens[:5])
    assert not torch.equal(held_out(cfg, "val", 20).tokens, test.tokens)
    train = torch.cat([MQARBatches(cfg, 20, seed=s).get(0)[0] for s in (0, 1)])
    assert not (train[:, None, :] == test.tokens[None, :, :]).all(-1).any()
    with pytest.raises(ConfigError, match="unknown held-out split 'train'"):
        held_out(cfg, "train", 5)


@pytest.mark.parametrize(
    ("fields", "message"),
    [
        ({"vocab_size": 16, "n_pairs": 8}, r"data\.n_pairs=8 needs as many distinct keys and values.*data\.vocab_size"),
        ({"seq_len": 20, "n_pairs": 8}, r"data\.seq_len=20 leaves 2 query slots.*raise data\.seq_len to at least 32"),
        ({"n_pairs": 4, "n_queries": 5}, r"data\.n_queries=5 exceeds data\.n_pairs=4"),
        ({"placement": "gaussian"}, r"data\.placement='gaussian' must be one of power, uniform"),
        ({"power_a": 0.0}, r"data\.power_a=0.0 must be > 0 and <= 1"),
        ({"vocab_size": 10**12}, r"data\.vocab_size=1000000000000 must be"),
    ],
)
def test_a_config_that_cannot_be_drawn_is_one_line_naming_the_field(fields: dict, message: str) -> None:
    with pytest.raises(ConfigError, match=message) as error:
        MQARConfig(**fields)
    assert "\n" not in str(error.value)
