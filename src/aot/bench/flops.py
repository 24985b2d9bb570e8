"""FLOPs per token: an analytic count per block type, and a measurement with ``torch.utils.flop_counter``.

What is counted — the same things ``flop_counter`` counts — is every matrix product, at 2·m·n·k FLOPs: the
linear layers, the attention scores q kᵀ and the attention-weighted values, and the LM head. Not counted:
element-wise work (norms, softmax, GELU/SiLU, residual adds, rotary, cross-entropy, the optimizer) and
embedding look-ups. Attention is counted over the full T×T square (as ``flop_counter`` and the PaLM /
nanoGPT MFU formula do); a causal kernel skips about half of it — :attr:`FlopsPerToken.attention_causal`
holds that share, for an honest "useful work" figure beside the conventional one.

Per token and layer (d = n_embd, K heads of dimension p, T keys, forward). Each block's count is on its
spec (``aot.blockspec.BlockSpec.dense_flops`` / ``attention_flops``, :mod:`aot.nn.specs`), summed from the
counts beside each module's forward:

| block        | dense matmuls                                                   | attention |
|--------------|-----------------------------------------------------------------|-----------|
| aot-mssa     | 2·d·Kp (U) + 2·Kp·d (Uᵀ or W_O)                                   | 4·T·Kp    |
| aot-mhsa     | 2·d·3d (W_QKV) + 2·d·d (W_O)                                      | 4·T·d     |
| transformer  | aot-mhsa + 2·2·d·(r·d) (GELU MLP)                                 | 4·T·d     |
| llama        | aot-mhsa + 3·2·d·h (SwiGLU, h ≈ 2/3·r·d)                          | 4·T·d     |
| crate        | aot-mssa + 3·2·d·d (ISTA: x D, (x D) Dᵀ, x Dᵀ)                    | 4·T·Kp    |
| crate, C > 1 | aot-mssa + 4·2·d·Cd = 8·C·d² (CRATE-α: u D, a Dᵀ, (a Dᵀ − u) D, a D̂ᵀ) | 4·T·Kp    |

plus 2·d·V for the LM head. The recurrent blocks (``linear-attn``, ``mamba``: no T×T attention, a state
carried along the sequence) have no analytic count: :func:`flops_per_token` says so,
:func:`training_flops_per_sample` returns ``None``, and :func:`measure_flops` counts them.

Training: the backward of a product is two products (gradient of each input),
so a training step costs 3× the forward in *model* FLOPs (the MFU convention). The fused attention kernel's
backward also recomputes the scores (5 products instead of 4), so in *hardware* FLOPs — what
``flop_counter`` reports — attention costs 3.5× its forward: :meth:`FlopsPerToken.training` takes
``recompute`` to count either.

``flop_counter`` on CPU has no formula for the CPU flash-attention kernels (it counts them as 0);
:func:`register_cpu_attention_formulas` registers torch's own SDPA formulas for them.
"""

from __future__ import annotations

from dataclasses import dataclass

import torch
from torch import nn
from torch.utils.flop_counter import FlopCounterMode

from aot.blockspec import block_spec
from aot.config import ModelConfig
from aot.errors import AotError


@dataclass(frozen=True)
class FlopsPerToken:
    """Forward FLOPs per token of one pass, split into dense matmuls and attention products."""

    dense: float  # linear layers and the head
    attention: float  # scores + weighted values, full T×T square
    attention_causal: float  # the part of ``attention`` a causal mask leaves (keys ≤ query position)

    @property
    def forward(self) -> float:
        return self.dense + self.attention

    def training(self, recompute: bool = False) -> float:
        """Forward + backward. ``recompute``: also the score product the fused kernel recomputes in its
        backward (hardware FLOPs, what ``flop_counter`` counts); without it, model FLOPs (the MFU convention)."""
        return 3 * self.dense + (3.5 if recompute else 3.0) * self.attention

    def training_causal(self) -> float:
        """Model FLOPs of a training step counting only unmasked attention (useful work)."""
        return 3 * (self.dense + self.attention_causal)


def block_dense_flops(cfg: ModelConfig) -> float:
    """Forward FLOPs per token of one block's linear layers (its spec's count; table in the module docstring)."""
    count = block_spec(cfg.block).dense_flops
    if count is None:
        raise AotError(f"analytic FLOPs are not implemented for block={cfg.block!r}; measure them with `measure_flops`")
    return count(cfg)


def attention_flops(cfg: ModelConfig, n_keys: float) -> float:
    """Forward FLOPs per query token of one layer's attention over ``n_keys`` keys: q kᵀ and pattern · v
    (0 for a block without T×T attention)."""
    count = block_spec(cfg.block).attention_flops
    return 0.0 if count is None else count(cfg, n_keys)


def flops_per_token(cfg: ModelConfig, seq_len: int) -> FlopsPerToken:
    """Forward FLOPs per token of a pass over sequences of ``seq_len`` tokens (docs/paper.md §4, Efficiency).

    Counts the backbone and, for ``task='lm'``, the LM head (2·d·V); the small heads of the image and
    in-context models (patch embedding, read-in/out: < 1 % of the work) are left out. A block without an
    analytic count (the recurrent ones) is a one-line :class:`AotError`.
    """
    dense = block_dense_flops(cfg)
    head = 2 * cfg.n_embd * cfg.vocab_size if cfg.task == "lm" else 0
    mean_causal_keys = (seq_len + 1) / 2 if cfg.causal else seq_len  # mean over queries of the keys ≤ it
    return FlopsPerToken(
        dense=float(cfg.n_layer * dense + head),
        attention=float(cfg.n_layer * attention_flops(cfg, seq_len)),
        attention_causal=float(cfg.n_layer * attention_flops(cfg, mean_causal_keys)),
    )


def has_analytic_flops(cfg: ModelConfig) -> bool:
    """Whether ``cfg``'s block has an analytic count (its spec's ``dense_flops``)."""
    return block_spec(cfg.block).dense_flops is not None


def training_flops_per_sample(cfg: ModelConfig, seq_len: int) -> float | None:
    """Useful model FLOPs of training on one sequence of ``seq_len`` tokens (forward + backward, only the
    attention a causal mask leaves: what the trainer's MFU divides by, so MFU ≤ 1), or ``None`` for a block
    without an analytic count."""
    if not has_analytic_flops(cfg):
        return None
    return seq_len * flops_per_token(cfg, seq_len).training_causal()


_registered = False


def register_cpu_attention_formulas() -> None:
    """Teach ``flop_counter`` the CPU flash-attention kernels, with torch's own SDPA formulas
    (forward: 2 products; backward: 5, the recomputed scores included). Idempotent."""
    global _registered
    if _registered:
        return
    from torch.utils import flop_counter as fc

    aten = torch.ops.aten
    forward_op = getattr(aten, "_scaled_dot_product_flash_attention_for_cpu", None)
    backward_op = getattr(aten, "_scaled_dot_product_flash_attention_for_cpu_backward", None)
    if forward_op is not None and forward_op.default not in fc.flop_registry:

        def forward_formula(query_shape, key_shape, value_shape, *args, out_shape=None, **kwargs) -> int:  # type: ignore[no-untyped-def]
            return fc.sdpa_flop_count(query_shape, key_shape, value_shape)

        fc.register_flop_formula(forward_op)(forward_formula)
    if backward_op is not None and backward_op.default not in fc.flop_registry:

        def backward_formula(
            grad_out_shape, query_shape, key_shape, value_shape, *args, out_shape=None, **kwargs
        ) -> int:  # type: ignore[no-untyped-def]
            return fc.sdpa_backward_flop_count(grad_out_shape, query_shape, key_shape, value_shape)

        fc.register_flop_formula(backward_op)(backward_formula)
    _registered = True


def measure_flops(model: nn.Module, idx: torch.Tensor, training: bool) -> int:
    """FLOPs of one forward (``training=False``, no grad) or forward + backward of the LM loss on ``idx``
    (B, T), counted by ``torch.utils.flop_counter``. Divide by ``idx.numel()`` for FLOPs per token."""
    register_cpu_attention_formulas()
    with FlopCounterMode(display=False) as counter:
        if training:
            _, loss = model(idx, labels=idx)
            loss.backward()
        else:
            with torch.no_grad():
                model(idx)
    if training:
        model.zero_grad(set_to_none=True)
    return int(counter.get_total_flops())
