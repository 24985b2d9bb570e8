"""Layer-by-layer denoising profile of a model, read through its hook points (``run_with_cache``).

For every block l the tokens it reads are ``attn_norm(hook_resid_pre)`` and, after its attention step, the
same norm of ``hook_resid_mid`` (blocks with an MLP) or ``hook_resid_post`` (attention-only blocks). Both are
measured in the layer's own head subspaces (:func:`aot.analysis.heads.HeadWeights.read_bases`) with the
measures of :mod:`aot.analysis.denoising`; the ratio of the output's SNR to the input's, with the same claims,
is Theorem 1's per-layer factor (:func:`aot.analysis.denoising.layer_gain`). Results carry bands: over batches
for the pooled SNR and the gains, over tokens for the per-token SNR, over sequences for the coding rates. The
baseline beside them is the SNR of the same tokens in random orthonormal subspaces of the same shapes (what a
layer that learned nothing would see).
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from typing import Any, cast

import numpy as np
import torch
from torch import nn

from aot.analysis.denoising import (
    claims,
    coding_rate,
    compression_term,
    energy_shares,
    layer_gain,
    orthonormal_bases,
    subspace_snr,
    token_snr,
)
from aot.analysis.heads import model_blocks, model_heads
from aot.nn.hooks import HookedModule

QUANTILES = (0.1, 0.25, 0.5, 0.75, 0.9)


def _stream_names(model: HookedModule) -> list[tuple[str, str]]:
    names = []
    for index, block in enumerate(model_blocks(model)):
        after = "hook_resid_mid" if hasattr(block, "hook_resid_mid") else "hook_resid_post"
        names.append((f"blocks.{index}.hook_resid_pre", f"blocks.{index}.{after}"))
    return names


@torch.no_grad()
def layer_streams(model: HookedModule, inputs: Sequence[Any]) -> list[tuple[torch.Tensor, torch.Tensor]]:
    """(tokens read by block l, the same after its attention step), both through the block's norm: (B, T, d)
    each, one pair per block. ``inputs`` are the positional arguments of ``model``."""
    names = _stream_names(model)
    _, cache = model.run_with_cache(*inputs, names_filter=[n for pair in names for n in pair])
    streams = []
    for block, (before, after) in zip(model_blocks(model), names):
        norm = cast(nn.Module, block.attn_norm)
        streams.append((norm(cache[before]), norm(cache[after])))
    return streams


def _nanmean(values: np.ndarray, axis: int) -> np.ndarray:
    """Mean over ``axis`` ignoring NaN (a head that claimed no token); NaN, without a warning, when all are."""
    finite = np.isfinite(values)
    total = np.where(finite, values, 0.0).sum(axis=axis)
    count = finite.sum(axis=axis)
    return np.where(count > 0, total / np.maximum(count, 1), np.nan)


def _band(values: list[float] | np.ndarray) -> dict[str, float]:
    array = np.asarray(values, dtype=np.float64)
    array = array[np.isfinite(array)]
    if array.size == 0:
        return {"mean": float("nan"), "q10": float("nan"), "q90": float("nan")}
    return {
        "mean": float(array.mean()),
        "q10": float(np.quantile(array, 0.1)),
        "q90": float(np.quantile(array, 0.9)),
    }


@torch.no_grad()
def denoising_profile(
    model: HookedModule, batches: Iterable[Sequence[Any]], eps: float = 0.5, labels: torch.Tensor | None = None
) -> dict[str, Any]:
    """Per layer: energy shares, claims, subspace SNR in / out and their ratio (the gain), per-token SNR
    quantiles, coding rate R and compression term R_c in / out. ``batches`` yields the model's positional
    inputs; ``labels`` (T,) fixes the cluster of every position instead of the claims (calibration)."""
    bases = [orthonormal_bases(heads.read_bases()) for heads in model_heads(model)]
    n_layer = len(bases)
    # the baseline: the same tokens in random subspaces of the same shapes (what no learning gives)
    generator = torch.Generator().manual_seed(0)
    random_bases = [orthonormal_bases(torch.randn(*u.shape, generator=generator, dtype=torch.float64)) for u in bases]
    per_batch: list[list[dict[str, Any]]] = [[] for _ in range(n_layer)]
    token_in: list[list[torch.Tensor]] = [[] for _ in range(n_layer)]
    token_out: list[list[torch.Tensor]] = [[] for _ in range(n_layer)]
    rates: list[dict[str, list[float]]] = [{"R_in": [], "R_out": [], "Rc_in": [], "Rc_out": []} for _ in range(n_layer)]
    for inputs in batches:
        for layer, (z_in, z_out) in enumerate(layer_streams(model, inputs)):
            u = bases[layer].to(z_in.device)
            flat_in = z_in.reshape(-1, z_in.shape[-1]).to(torch.float64)
            flat_out = z_out.reshape(-1, z_out.shape[-1]).to(torch.float64)
            shares_in = energy_shares(flat_in, u)  # (K, B·T)
            fixed = None if labels is None else labels.to(z_in.device).repeat(z_in.shape[0])
            claimed = claims(shares_in) if fixed is None else fixed
            gains = layer_gain(flat_in, flat_out, u, fixed)
            snr_random = subspace_snr(flat_in, random_bases[layer].to(z_in.device))
            per_batch[layer].append(
                {
                    "share": shares_in.mean(dim=1).tolist(),
                    "coverage": float(shares_in.sum(dim=0).mean()),
                    "claim_fraction": (torch.bincount(claimed, minlength=u.shape[0]) / claimed.numel()).tolist(),
                    "snr_in": gains.snr_in.tolist(),
                    "snr_out": gains.snr_out.tolist(),
                    "gain": gains.gain,
                    "gain_input_claims": gains.gain_input_claims,
                    "gain_output_claims": gains.gain_output_claims,
                    "snr_random": float(snr_random.nanmean()),
                }
            )
            token_in[layer].append(token_snr(shares_in, claimed).cpu())
            token_out[layer].append(token_snr(energy_shares(flat_out, u), claimed).cpu())
            rates[layer]["R_in"] += coding_rate(z_in, eps).tolist()
            rates[layer]["R_out"] += coding_rate(z_out, eps).tolist()
            rates[layer]["Rc_in"] += compression_term(z_in, u, eps).tolist()
            rates[layer]["Rc_out"] += compression_term(z_out, u, eps).tolist()
    layers = []
    for layer in range(n_layer):
        rows = per_batch[layer]
        heads_in = np.array([r["snr_in"] for r in rows])  # (batches, K)
        heads_out = np.array([r["snr_out"] for r in rows])
        pooled_in = _nanmean(heads_in, axis=1)  # mean over heads, per batch
        pooled_out = _nanmean(heads_out, axis=1)
        tokens_in = torch.cat(token_in[layer]).numpy()
        tokens_out = torch.cat(token_out[layer]).numpy()
        layers.append(
            {
                "layer": layer,
                "share": np.mean([r["share"] for r in rows], axis=0).tolist(),
                "coverage": float(np.mean([r["coverage"] for r in rows])),
                "claim_fraction": np.mean([r["claim_fraction"] for r in rows], axis=0).tolist(),
                "snr_in_per_head": _nanmean(heads_in, axis=0).tolist(),
                "snr_out_per_head": _nanmean(heads_out, axis=0).tolist(),
                "snr_in": _band(pooled_in),
                "snr_out": _band(pooled_out),
                "gain": _band([r["gain"] for r in rows]),
                "gain_input_claims": _band([r["gain_input_claims"] for r in rows]),
                "gain_output_claims": _band([r["gain_output_claims"] for r in rows]),
                "snr_in_random_subspaces": _band([r["snr_random"] for r in rows]),
                "token_snr_in": {f"q{int(q * 100)}": float(np.quantile(tokens_in, q)) for q in QUANTILES},
                "token_snr_out": {f"q{int(q * 100)}": float(np.quantile(tokens_out, q)) for q in QUANTILES},
                **{name: _band(values) for name, values in rates[layer].items()},
            }
        )
    full = [layer for layer, u in enumerate(bases) if u.shape[-1] >= u.shape[-2]]
    if full:  # U_k U_kᵀ = I: no token has a part outside its head's subspace, so SNR_k divides by ~0
        for layer in full:
            layers[layer]["snr_defined"] = False
        note = f"layers {full}: every head's subspace is the whole residual stream (head_dim = n_embd), so the "
        note += "subspace SNR and its gain are undefined there (their values divide by rounding error)"
        return {"eps": eps, "layers": layers, "snr_undefined": note}
    return {"eps": eps, "layers": layers}
