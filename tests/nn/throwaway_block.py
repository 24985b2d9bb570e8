"""A block type with its own hyperparameter, in one module: what a contributor writes (docs/extending.md).

``tempered-mssa`` is MSSA (the paper's operator, no norm inside) whose attention scores are divided by a temperature
τ of its own, ``score_temperature`` (softmax(⟨U_kᵀz_i, U_kᵀz_j⟩ / (τ·√p))): the module (:class:`TemperedMSSA`),
its options (:class:`TemperedOptions`, one field with its range) and its spec (:data:`SPEC`: the module, the
options, a config default, a rule, its FLOPs and its row in ``aot bench``). Registering :data:`SPEC` is the second
and last step (tests/nn/test_throwaway_block.py): the config then takes ``block: tempered-mssa`` and
``score_temperature: 0.5`` flat in the model section, and `aot train`, `aot sweep`, `aot bench`, the trainer's MFU,
`aot analyze` and the run loader all work on it.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, ClassVar

from aot.blockspec import BlockOptions, BlockSpec
from aot.errors import ConfigError
from aot.nn.attention import MultiHeadSubspaceSelfAttention
from aot.nn.blocks import AttentionOnlyBlock
from aot.validation import Limit, above

NAME = "tempered-mssa"
LABEL = "Tempered MSSA"
CALLS: list[str] = []  # which of the spec's FLOPs counts were asked for (tests check the spec is read)


@dataclass
class TemperedOptions(BlockOptions):
    """score_temperature: τ, dividing every attention score (1: MSSA's own scores)."""

    score_temperature: float = 1.0

    LIMITS: ClassVar[dict[str, Limit]] = {"score_temperature": above(0)}


class TemperedMSSA(MultiHeadSubspaceSelfAttention):
    """MSSA with its scores divided by ``cfg.score_temperature``."""

    def __init__(self, cfg: Any) -> None:
        super().__init__(cfg)
        self.scale = self.scale / cfg.score_temperature


def _dense(cfg: Any) -> int:
    """U (d → K·p) and W_O (K·p → d), written out here rather than taken from the module."""
    CALLS.append("dense")
    return 4 * cfg.n_embd * cfg.n_head * cfg.p


def _attention(cfg: Any, n_keys: float) -> float:
    CALLS.append("attention")
    return 4 * n_keys * cfg.n_head * cfg.p


def _check(cfg: Any) -> None:
    if cfg.n_head < 2:
        raise ConfigError(f"block={NAME!r} needs at least 2 heads, got n_head={cfg.n_head}")


SPEC = BlockSpec(
    name=NAME,
    block=AttentionOnlyBlock,
    mixer=TemperedMSSA,
    options=TemperedOptions,
    defaults={"norm": "none"},
    check=_check,
    dense_flops=_dense,
    attention_flops=_attention,
    subspace=True,
    bench=((LABEL, {"tied_output": False}),),
)
