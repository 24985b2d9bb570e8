"""The hypotheses of Theorem 1 (docs/paper.md §3), checked for given parameters.

    p ≳ log N,   δ ≲ √(log N / p),   τ ∈ (1/2, 1/(1 + N·e^(−9p/32))].

The τ interval is non-empty exactly when N·e^(−9p/32) < 1, i.e. p > (32/9)·ln N; that is the concrete form
of ``p ≳ log N`` used here. The ``≲`` on δ hides an unstated constant: ``delta_constant`` (default 1) makes it
explicit, and the sweeps of ``aot denoise`` measure where the factor really departs.

Beyond the paper: with no normalisation between layers, layer l sees signals scaled by c = (1 + ητ)^l
while the noise is untouched, so the scores a noise head forms, c·⟨a_j, e_i⟩, have spread c·δ·√p: the
noise-head event needs δ·(1 + ητ)^l ≲ √(log N / p) at every layer, not only δ at the first. Given η and L,
:func:`check_conditions` also checks this *through-the-layers* bound at l = L − 1.
"""

from __future__ import annotations

import math
from dataclasses import asdict, dataclass
from typing import Any

from aot.errors import AotError


@dataclass(frozen=True)
class TheoremConditions:
    """The outcome of :func:`check_conditions`; every bound and whether it holds."""

    p: int
    n_tokens: int
    delta: float
    tau: float
    delta_constant: float
    p_min: float  # (32/9) ln N: p must exceed it
    delta_max: float  # delta_constant · √(ln N / p)
    tau_min: float  # 1/2 (excluded)
    tau_max: float  # 1 / (1 + N e^(−9p/32)) (included)
    p_ok: bool
    delta_ok: bool
    tau_ok: bool
    delta_last_layer: float | None = None  # δ·(1 + ητ)^(L−1), when η and L are given
    layers_ok: bool | None = None  # delta_last_layer <= delta_max

    @property
    def holds_through_layers(self) -> bool:
        """The paper's conditions and the through-the-layers bound (True when η, L were not given)."""
        return self.holds and self.layers_ok is not False

    @property
    def tau_interval_nonempty(self) -> bool:
        return self.tau_max > self.tau_min

    @property
    def holds(self) -> bool:
        return self.p_ok and self.delta_ok and self.tau_ok

    def failures(self) -> list[str]:
        """One phrase per condition that fails (empty when all hold)."""
        out = []
        if not self.p_ok:
            out.append(f"p={self.p} <= (32/9) ln N = {self.p_min:.1f}")
        if not self.delta_ok:
            out.append(f"delta={self.delta:g} > {self.delta_constant:g}*sqrt(ln N / p) = {self.delta_max:.3f}")
        if not self.tau_ok:
            out.append(f"tau={self.tau:g} not in (1/2, {self.tau_max:.4f}]")
        return out

    def to_dict(self) -> dict[str, Any]:
        return {
            **asdict(self),
            "tau_interval_nonempty": self.tau_interval_nonempty,
            "holds": self.holds,
            "holds_through_layers": self.holds_through_layers,
            "failures": self.failures(),
        }


def tau_upper_bound(p: int, n_tokens: int) -> float:
    """1 / (1 + N e^(−9p/32)), the largest τ Theorem 1 allows (docs/paper.md §3)."""
    return 1.0 / (1.0 + n_tokens * math.exp(-9.0 * p / 32.0))


def min_head_dim(n_tokens: int) -> float:
    """(32/9) ln N: the τ interval (1/2, 1/(1 + N e^(−9p/32))] is non-empty iff p exceeds it."""
    return 32.0 / 9.0 * math.log(n_tokens)


def check_conditions(
    p: int,
    n_tokens: int,
    delta: float,
    tau: float,
    delta_constant: float = 1.0,
    *,
    eta: float | None = None,
    n_layers: int | None = None,
) -> TheoremConditions:
    """Check Theorem 1's hypotheses (docs/paper.md §3) for head dimension p, N tokens, noise δ and threshold τ.

    With ``eta`` and ``n_layers`` also check δ·(1 + ητ)^(L−1) <= delta_constant·√(ln N / p) (see the module).
    """
    if p < 1 or n_tokens < 2:
        raise AotError(f"need p >= 1 and N >= 2 tokens, got p={p}, N={n_tokens}")
    if delta < 0 or delta_constant <= 0:
        raise AotError(f"need delta >= 0 and delta_constant > 0, got {delta}, {delta_constant}")
    log_n = math.log(n_tokens)
    p_min = min_head_dim(n_tokens)
    delta_max = delta_constant * math.sqrt(log_n / p)
    tau_max = tau_upper_bound(p, n_tokens)
    delta_last_layer = None
    if eta is not None and n_layers is not None:
        delta_last_layer = delta * (1.0 + eta * tau) ** max(n_layers - 1, 0)
    return TheoremConditions(
        p=p,
        n_tokens=n_tokens,
        delta=float(delta),
        tau=float(tau),
        delta_constant=float(delta_constant),
        p_min=p_min,
        delta_max=delta_max,
        tau_min=0.5,
        tau_max=tau_max,
        p_ok=p > p_min,
        delta_ok=delta <= delta_max,
        tau_ok=0.5 < tau <= tau_max,
        delta_last_layer=delta_last_layer,
        layers_ok=None if delta_last_layer is None else delta_last_layer <= delta_max,
    )
