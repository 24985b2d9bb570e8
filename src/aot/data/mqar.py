"""Multi-query associative recall (MQAR), the synthetic recall test of Zoology (Arora et al. 2023, "Zoology: Measuring
and Improving Recall in Efficient Language Models", arXiv 2312.04927, and its ``multiquery_ar`` generator).

A sequence of ``seq_len`` tokens starts with ``n_pairs`` key-value pairs ``k_1 v_1 k_2 v_2 …`` (keys distinct, values
distinct; keys from the lower half of the vocabulary ``[1, V/2)``, values from the upper half ``[V/2, V)``, token 0
reserved for filler). The rest of the sequence has ``(seq_len − 2·n_pairs) // 2`` even-offset *slots*; ``n_queries``
of them (every pair once, by default) hold a key asked again, and the model must predict that key's value at the
query's position. Every other position is filler: a random token of the whole vocabulary (Zoology's
``random_non_queries``) or 0.

Which slots hold queries: drawn without replacement with probability p_s ∝ a·s^(a−1) over the slots s = 1, 2, …
(``placement="power"``, Zoology's power law with a = ``power_a``, 0.01 by default: most queries come soon after the
pairs, some far), or uniformly (``placement="uniform"``, the same as a = 1). Which pair is asked in which slot is
uniform. Zoology's example, 2 pairs, 16 tokens, no random filler (queries at offsets 0 and 6 of the query part)::

    tokens   2    8    4    7    0    0    4    0    0    0    0    0    2    0    0    0
    targets  -    -    -    -    -    -    7    -    -    -    -    -    8    -    -    -

``targets`` are aligned with ``tokens``: ``targets[t]`` is what the model must predict after reading ``tokens[t]``
(-100, :data:`IGNORE`, everywhere but at the queries), so the loss and the accuracy count the answers only.

Batches are a function of ``(seed, step)`` alone (:class:`MQARBatches`, the trainer's batch-source protocol), so a
resumed run and every process of a DDP run see exactly the batches an uninterrupted single process would; the
held-out sets (:func:`held_out`) are fixed by their split alone, the same for every training seed and model.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import ClassVar

import numpy as np
import torch

from aot.errors import ConfigError
from aot.validation import Limit, at_least, check_fields, one_of, within

#: the target of every position that is not an answer (PyTorch's and HF's ignore index)
IGNORE = -100
PLACEMENTS = ("power", "uniform")
#: the held-out splits, each its own fixed stream of sequences
SPLITS = ("val", "test")
_HELD_OUT_ENTROPY = 2312_04927  # Zoology's arXiv number: the root of the held-out streams


@dataclass
class MQARConfig:
    """vocab_size: V (keys from [1, V/2), values from [V/2, V)). seq_len: tokens per sequence. n_pairs: key-value pairs
    at the start. n_queries: keys asked again later (``None``: every pair, as Zoology). placement: ``power`` (Zoology's
    power law over the query slots, exponent ``power_a``) or ``uniform``. random_fill: filler positions hold random
    tokens (Zoology's ``random_non_queries``) instead of 0."""

    vocab_size: int = 8192
    seq_len: int = 64
    n_pairs: int = 8
    n_queries: int | None = None
    placement: str = "power"
    power_a: float = 0.01
    random_fill: bool = True

    LIMITS: ClassVar[dict[str, Limit]] = {
        "vocab_size": within(4, 2**24),
        "seq_len": within(4, 2**20),
        "n_pairs": within(1, 2**19),
        "n_queries": at_least(1),
        "placement": one_of(*PLACEMENTS),
        "power_a": within(0, 1, low_open=True),
    }

    def __post_init__(self) -> None:
        check_fields(self, "data")
        keys, values = self.vocab_size // 2 - 1, self.vocab_size - self.vocab_size // 2
        if self.n_pairs > min(keys, values):
            raise ConfigError(
                f"data.n_pairs={self.n_pairs} needs as many distinct keys and values, but data.vocab_size="
                f"{self.vocab_size} has {keys} keys and {values} values; raise data.vocab_size to at least "
                f"{2 * self.n_pairs + 2} or lower data.n_pairs"
            )
        if self.queries > self.n_pairs:
            raise ConfigError(
                f"data.n_queries={self.n_queries} exceeds data.n_pairs={self.n_pairs} (each pair is asked at most "
                "once); lower it or leave it unset"
            )
        if self.queries > self.slots:
            raise ConfigError(
                f"data.seq_len={self.seq_len} leaves {self.slots} query slots after {self.n_pairs} pairs (one every "
                f"other position of the {self.seq_len - 2 * self.n_pairs} tokens after them), fewer than the "
                f"{self.queries} queries; raise data.seq_len to at least {2 * self.n_pairs + 2 * self.queries} or "
                "lower data.n_pairs"
            )

    @property
    def queries(self) -> int:
        """Queries per sequence."""
        return self.n_pairs if self.n_queries is None else self.n_queries

    @property
    def slots(self) -> int:
        """Positions a query can take: every other position after the pairs."""
        return max(self.seq_len - 2 * self.n_pairs, 0) // 2

    def slot_probabilities(self) -> np.ndarray:
        """p_s of each slot s = 1 … slots: ∝ a·s^(a−1) (``power``; Zoology's law) or uniform."""
        if self.placement == "uniform":
            return np.full(self.slots, 1.0 / self.slots)
        a = self.power_a
        p = a * np.arange(1, self.slots + 1, dtype=np.float64) ** (a - 1)
        return p / p.sum()


@dataclass
class MQARSequences:
    """Sequences and their answers: ``tokens`` (N, T) int64 and ``targets`` (N, T) int64 (:data:`IGNORE` but at the
    queries)."""

    tokens: torch.Tensor
    targets: torch.Tensor

    def __len__(self) -> int:
        return len(self.tokens)


def draw(cfg: MQARConfig, n: int, rng: np.random.Generator) -> MQARSequences:
    """``n`` sequences of ``cfg`` drawn from ``rng`` (see the module docstring)."""
    half, context, queries = cfg.vocab_size // 2, 2 * cfg.n_pairs, cfg.queries
    log_p = np.log(cfg.slot_probabilities())
    tokens = np.zeros((n, cfg.seq_len), dtype=np.int64)
    targets = np.full((n, cfg.seq_len), IGNORE, dtype=np.int64)
    for row in range(n):  # row by row from one stream: the first m of n sequences are the m sequences
        if cfg.random_fill:
            tokens[row] = rng.integers(0, cfg.vocab_size, size=cfg.seq_len)
        keys = rng.choice(half - 1, size=cfg.n_pairs, replace=False) + 1
        values = rng.choice(cfg.vocab_size - half, size=cfg.n_pairs, replace=False) + half
        tokens[row, 0:context:2], tokens[row, 1:context:2] = keys, values
        asked = rng.permutation(cfg.n_pairs)[:queries]
        # the slots: `queries` draws without replacement with probabilities p, by the Gumbel-top-k trick (the top q
        # of log p + Gumbel noise; Kool et al. 2019, "Stochastic Beams and Where to Find Them", §3): 5x faster than
        # rng.choice(..., replace=False, p=p), which draws the same distribution
        at = context + 2 * np.argsort(-(log_p + rng.gumbel(size=cfg.slots)))[:queries]
        tokens[row, at], targets[row, at] = keys[asked], values[asked]
    return MQARSequences(torch.from_numpy(tokens), torch.from_numpy(targets))


def step_rng(seed: int, step: int) -> np.random.Generator:
    """The random stream of one training step: a function of (seed, step) only (as :class:`aot.data.LMBatches`)."""
    return np.random.default_rng([seed, step])


def held_out(cfg: MQARConfig, split: str, n: int) -> MQARSequences:
    """The fixed held-out set ``split`` (``val`` or ``test``) of ``n`` sequences: its own stream, independent of every
    training stream (a different spawn key) and of the other split; the first ``m`` sequences of a set of ``n`` are
    the set of ``m``."""
    if split not in SPLITS:
        raise ConfigError(f"unknown held-out split {split!r}; use one of {', '.join(SPLITS)}")
    stream = np.random.SeedSequence(_HELD_OUT_ENTROPY, spawn_key=(SPLITS.index(split),))
    return draw(cfg, n, np.random.default_rng(stream))


class MQARBatches:
    """The trainer's batch source: ``get(step, start, stop)`` returns rows [start, stop) of step's global batch,
    ``(tokens, targets)``, each (rows, seq_len) int64."""

    def __init__(self, cfg: MQARConfig, batch_size: int, seed: int = 0) -> None:
        self.cfg = cfg
        self.batch_size = batch_size
        self.seed = seed

    def get(self, step: int, start: int = 0, stop: int | None = None) -> tuple[torch.Tensor, torch.Tensor]:
        batch = draw(self.cfg, self.batch_size, step_rng(self.seed, step))
        rows = slice(start, self.batch_size if stop is None else stop)
        return batch.tokens[rows], batch.targets[rows]

    def tokens_per_sample(self) -> int:
        return self.cfg.seq_len


__all__ = [
    "IGNORE",
    "PLACEMENTS",
    "SPLITS",
    "MQARBatches",
    "MQARConfig",
    "MQARSequences",
    "draw",
    "held_out",
    "step_rng",
]
