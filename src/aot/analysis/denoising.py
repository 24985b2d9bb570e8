"""Does a trained model denoise layer by layer? Energies, SNR and coding rates of the tokens a layer reads.

Notation (tokens as rows, as in :mod:`aot.nn`): z ∈ R^d is a token after the layer's norm, U_k (d × p) the
subspace head k reads (MSSA: its U_k; MHSA: span(W_V,kᵀ)), Q_k an orthonormal basis of span(U_k) (the Q of
a QR; learned U_k are neither orthonormal nor of unit scale, and the measures below must not depend on it).

* energy share of head k:  e_k(z) = ‖Q_kᵀ z‖² / ‖z‖²  (∈ [0, 1]; Σ_k e_k = 1 when the Q_k are mutually
  orthogonal and span R^d).
* the head that claims z:  c(z) = argmax_k e_k(z).
* subspace SNR of head k:  the paper's SNR (Definition 1 / Theorem 1, :func:`aot.theory.metrics.snr_per_cluster`)
  with the claimed tokens as the cluster,  SNR_k = ‖Q_kQ_kᵀ Z_k‖_F / ‖(I − Q_kQ_kᵀ) Z_k‖_F,  Z_k the tokens with
  c(z) = k. On Definition 1 data with small δ the claims are the true clusters and SNR_k is exactly the
  theorem's SNR. Per token: snr(z) = √(e_c / (1 − e_c)).
* per-layer gain: SNR of the layer's output over SNR of its input, both in the layer's own subspaces with the
  same claims — Theorem 1's factor SNR⁽ˡ⁺¹⁾ / SNR⁽ˡ⁾ (1 + ητ in the idealised model). Claims taken from the
  input favour the input (a token is claimed where its input happens to have most energy, so any change
  regresses towards the mean and the gain reads < 1 for a layer that does nothing); claims taken from the
  output favour the output. The reported gain is the geometric mean of the two, ≈ 1 for a neutral change and
  equal to both when the claims agree (Definition 1 data).
* CRATE's coding rate and compression term (Yu et al. 2023), for N tokens Z (N × d) and precision ε:
  R(Z) = ½ logdet(I_d + d/(N ε²) ZᵀZ),   R_c(Z | U) = Σ_k ½ logdet(I_p + p/(N ε²) (Z Q_k)ᵀ (Z Q_k)).
"""

from __future__ import annotations

from dataclasses import dataclass

import torch

from aot.theory.metrics import snr_per_cluster


def orthonormal_bases(bases: torch.Tensor) -> torch.Tensor:
    """Q_k of a QR of every U_k: (K, d, p) -> (K, d, p) float64 with orthonormal columns, span(Q_k) = span(U_k)."""
    q, _ = torch.linalg.qr(bases.to(torch.float64))
    return q


def energy_shares(tokens: torch.Tensor, bases: torch.Tensor) -> torch.Tensor:
    """e_k(z) = ‖Q_kᵀ z‖² / ‖z‖² for every head and token: tokens (..., N, d), orthonormal bases (K, d, p) ->
    (..., K, N). Pass bases through :func:`orthonormal_bases` first."""
    tokens = tokens.to(torch.float64)
    inside = torch.einsum("...nd,kdp->...knp", tokens, bases).pow(2).sum(-1)  # (..., K, N)
    total = tokens.pow(2).sum(-1).clamp_min(torch.finfo(torch.float64).tiny)  # (..., N)
    return inside / total.unsqueeze(-2)


def claims(shares: torch.Tensor) -> torch.Tensor:
    """c(z): the head with the largest energy share of every token, (..., K, N) -> (..., N)."""
    return shares.argmax(dim=-2)


def token_snr(shares: torch.Tensor, labels: torch.Tensor | None = None) -> torch.Tensor:
    """snr(z) = √(e_c / (1 − e_c)) of every token, c its claiming head (or ``labels``): (..., K, N) -> (..., N)."""
    if labels is None:
        labels = claims(shares)
    own = shares.gather(-2, labels.unsqueeze(-2)).squeeze(-2)
    return torch.sqrt(own / (1.0 - own).clamp_min(1e-12))


def subspace_snr(tokens: torch.Tensor, bases: torch.Tensor, labels: torch.Tensor | None = None) -> torch.Tensor:
    """SNR_k of every head over the tokens it claims (or the given ``labels``): tokens (N, d), orthonormal
    bases (K, d, p) -> (K,); NaN for a head that claims no token. Reuses Theorem 1's SNR."""
    tokens = tokens.to(torch.float64)
    if labels is None:
        labels = claims(energy_shares(tokens, bases))
    return snr_per_cluster(tokens, bases, labels)


@dataclass
class LayerGain:
    """Subspace SNR (K,) of a layer's input and output with the input's claims, and the gains."""

    snr_in: torch.Tensor
    snr_out: torch.Tensor
    gain_input_claims: float
    gain_output_claims: float

    @property
    def gain(self) -> float:
        """The geometric mean of the two one-sided gains."""
        return (self.gain_input_claims * self.gain_output_claims) ** 0.5


def layer_gain(
    tokens_in: torch.Tensor, tokens_out: torch.Tensor, bases: torch.Tensor, labels: torch.Tensor | None = None
) -> LayerGain:
    """SNR of a layer's input and output (N, d) each in its orthonormal bases (K, d, p), with claims from the
    input and from the output (or the given ``labels`` for both); a gain is the ratio of the head-averaged SNRs."""
    claims_in = claims(energy_shares(tokens_in, bases)) if labels is None else labels
    claims_out = claims(energy_shares(tokens_out, bases)) if labels is None else labels
    snr_in, snr_out = subspace_snr(tokens_in, bases, claims_in), subspace_snr(tokens_out, bases, claims_in)
    out_claimed_in = subspace_snr(tokens_in, bases, claims_out).nanmean()
    out_claimed_out = subspace_snr(tokens_out, bases, claims_out).nanmean()
    return LayerGain(
        snr_in, snr_out, float(snr_out.nanmean() / snr_in.nanmean()), float(out_claimed_out / out_claimed_in)
    )


def coding_rate(tokens: torch.Tensor, eps: float) -> torch.Tensor:
    """R(Z) = ½ logdet(I_d + d/(N ε²) ZᵀZ) of tokens (..., N, d) -> (...), in nats (CRATE)."""
    tokens = tokens.to(torch.float64)
    n, d = tokens.shape[-2:]
    gram = tokens.transpose(-1, -2) @ tokens  # (..., d, d)
    eye = torch.eye(d, dtype=torch.float64, device=tokens.device)
    return 0.5 * torch.linalg.slogdet(eye + (d / (n * eps**2)) * gram).logabsdet


def compression_term(tokens: torch.Tensor, bases: torch.Tensor, eps: float) -> torch.Tensor:
    """R_c(Z | U) = Σ_k ½ logdet(I_p + p/(N ε²) (Z Q_k)ᵀ(Z Q_k)): tokens (..., N, d), bases (K, d, p) -> (...)."""
    tokens = tokens.to(torch.float64)
    n = tokens.shape[-2]
    p = bases.shape[-1]
    proj = torch.einsum("...nd,kdp->...knp", tokens, bases)  # (..., K, N, p)
    gram = proj.transpose(-1, -2) @ proj  # (..., K, p, p)
    eye = torch.eye(p, dtype=torch.float64, device=tokens.device)
    return 0.5 * torch.linalg.slogdet(eye + (p / (n * eps**2)) * gram).logabsdet.sum(-1)
