"""The non-attention half of the baseline blocks: GELU MLP (GPT-2 / ViT), SwiGLU (Llama), ISTA (CRATE) and
its overcomplete form (CRATE-α).

AoT blocks have none of these; they exist so that a comparison changes only the block.
"""

from __future__ import annotations

import torch
import torch.nn.functional as F
from torch import nn

from aot.config import ModelConfig

#: ``ModelConfig.activation`` → the ``approximate`` argument of :func:`torch.nn.functional.gelu`
GELU_APPROXIMATE = {"gelu": "none", "gelu_tanh": "tanh"}


class GeluMLP(nn.Module):
    """GPT-2 / ViT feed-forward: Linear(d, r·d) → GELU → Linear(r·d, d). GELU is exact (x·Φ(x), ViT) or, with
    ``activation="gelu_tanh"``, GPT-2's 0.5·x·(1 + tanh(√(2/π)(x + 0.044715x³)))."""

    def __init__(self, cfg: ModelConfig) -> None:
        super().__init__()
        hidden = int(cfg.mlp_ratio * cfg.n_embd)
        self.up_proj = nn.Linear(cfg.n_embd, hidden, bias=cfg.bias)
        self.down_proj = nn.Linear(hidden, cfg.n_embd, bias=cfg.bias)
        self.approximate = GELU_APPROXIMATE[cfg.activation]

    @staticmethod
    def flops_per_token(cfg: ModelConfig) -> int:
        """Forward FLOPs per token: up (d → r·d) and down (r·d → d)."""
        return 2 * 2 * cfg.n_embd * int(cfg.mlp_ratio * cfg.n_embd)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.down_proj(F.gelu(self.up_proj(x), approximate=self.approximate))


def swiglu_hidden(n_embd: int, mlp_ratio: float) -> int:
    """Llama's hidden width: 2/3 of r·d (so SwiGLU's three matrices cost what a GELU MLP's two do),
    rounded up to a multiple of 32."""
    hidden = int(2 * mlp_ratio * n_embd / 3)
    return 32 * ((hidden + 31) // 32)


class SwiGLU(nn.Module):
    """Llama feed-forward: W_down(SiLU(W_gate x) ⊙ W_up x), no biases."""

    def __init__(self, cfg: ModelConfig) -> None:
        super().__init__()
        hidden = swiglu_hidden(cfg.n_embd, cfg.mlp_ratio)
        self.gate_proj = nn.Linear(cfg.n_embd, hidden, bias=False)
        self.up_proj = nn.Linear(cfg.n_embd, hidden, bias=False)
        self.down_proj = nn.Linear(hidden, cfg.n_embd, bias=False)

    @staticmethod
    def flops_per_token(cfg: ModelConfig) -> int:
        """Forward FLOPs per token: gate and up (d → h) and down (h → d)."""
        return 3 * 2 * cfg.n_embd * swiglu_hidden(cfg.n_embd, cfg.mlp_ratio)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.down_proj(F.silu(self.gate_proj(x)) * self.up_proj(x))


class ISTA(nn.Module):
    """CRATE's sparse-coding step (docs/paper.md, CRATE): ReLU(Z − η Dᵀ(D Z − Z) − η λ), per token.

    With tokens as rows: ``relu(x + η (x D − x Dᵀ D) − η λ)``, D is a learned d × d dictionary.
    """

    def __init__(self, cfg: ModelConfig) -> None:
        super().__init__()
        self.dictionary = nn.Parameter(torch.empty(cfg.n_embd, cfg.n_embd))
        self.step = cfg.ista_step
        self.lambd = cfg.ista_lambda

    @staticmethod
    def flops_per_token(cfg: ModelConfig) -> int:
        """Forward FLOPs per token: three d × d products, x D, (x D) Dᵀ and x Dᵀ."""
        return 3 * 2 * cfg.n_embd * cfg.n_embd

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        D = self.dictionary
        residual = F.linear(F.linear(x, D), D.t()) - F.linear(x, D.t())  # Dᵀ(Dz − z) per token
        return F.relu(x - self.step * residual - self.step * self.lambd)


class OvercompleteISTA(nn.Module):
    """CRATE-α's sparse-coding step (Yang et al., *Scaling White-Box Transformers for Vision*, 2024), per token u:

        a₁ = ReLU(η Dᵀu − ηλ)                  (one ISTA step from the zero code)
        a₂ = ReLU(a₁ − η Dᵀ(D a₁ − u) − ηλ)    (a second one)
        out = D̂ a₂

    with an overcomplete encoding dictionary D ∈ R^{d×Cd} and a separate decoding dictionary D̂ ∈ R^{d×Cd}
    (C = ``ista_expand``). The block adds ``out`` to the stream. Both start kaiming-uniform as in CRATE-α's code.
    """

    def __init__(self, cfg: ModelConfig) -> None:
        super().__init__()
        width = cfg.ista_expand * cfg.n_embd
        self.encoder = nn.Parameter(torch.empty(cfg.n_embd, width))  # D
        self.decoder = nn.Parameter(torch.empty(cfg.n_embd, width))  # D̂
        self.step = cfg.ista_step
        self.lambd = cfg.ista_lambda

    @staticmethod
    def flops_per_token(cfg: ModelConfig) -> int:
        """Forward FLOPs per token: four d × Cd products — u D (the first step), a Dᵀ and (a Dᵀ − u) D (the
        second), a D̂ᵀ (decoding) — 2·d·Cd each, 8·C·d² in all."""
        return 4 * 2 * cfg.n_embd * cfg.ista_expand * cfg.n_embd

    def forward(self, u: torch.Tensor) -> torch.Tensor:
        D, shrink = self.encoder, self.step * self.lambd
        code = F.relu(self.step * (u @ D) - shrink)  # rows: a₁ᵀ = ReLU(η uᵀD − ηλ)
        code = F.relu(code - self.step * ((code @ D.t() - u) @ D) - shrink)
        return code @ self.decoder.t()


def sparse_coding_class(cfg: ModelConfig) -> type[ISTA] | type[OvercompleteISTA]:
    """CRATE's step: the complete ISTA step, or CRATE-α's overcomplete one when ``ista_expand`` > 1."""
    return OvercompleteISTA if cfg.ista_expand > 1 else ISTA


def sparse_coding_step(cfg: ModelConfig) -> nn.Module:
    """The module of CRATE's step for ``cfg`` (:func:`sparse_coding_class`)."""
    return sparse_coding_class(cfg)(cfg)


def sparse_coding_flops(cfg: ModelConfig) -> int:
    """Forward FLOPs per token of CRATE's step for ``cfg`` (:func:`sparse_coding_class`)."""
    return sparse_coding_class(cfg).flops_per_token(cfg)
