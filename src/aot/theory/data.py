"""Definition 1 of the paper (docs/paper.md §1): a mixture of noisy low-rank Gaussians.

Tokens are rows here (``Z`` is (N, d), as in :mod:`aot.nn`); the paper's Z is the transpose. For a token i
of cluster k

    z_i = U_k a_i + Σ_{j≠k} U_j e_{i,j},   a_i ~ N(0, I_p),   e_{i,j} ~ N(0, δ² I_p),

with [U_1 … U_K] orthonormal columns (d ≥ K·p), equal dimensions p and equal cluster sizes N/K.
"""

from __future__ import annotations

from dataclasses import dataclass

import torch

from aot.errors import AotError


@dataclass
class MixtureSample:
    """One draw of Definition 1.

    tokens: (N, d) the noisy tokens z_i (rows).
    signal: (N, d) the clean part U_k a_i of every token (the denoising target).
    labels: (N,) cluster index k of every token; tokens are grouped cluster by cluster.
    bases: (K, d, p) the orthonormal bases, U_k = bases[k].
    delta: the noise level δ.
    """

    tokens: torch.Tensor
    signal: torch.Tensor
    labels: torch.Tensor
    bases: torch.Tensor
    delta: float

    @property
    def noise(self) -> torch.Tensor:
        """(N, d) the part of every token that lies in the other clusters' subspaces."""
        return self.tokens - self.signal

    @property
    def n_clusters(self) -> int:
        return int(self.bases.shape[0])

    def to(self, device: str | torch.device) -> MixtureSample:
        """The same sample on another device."""
        return MixtureSample(
            tokens=self.tokens.to(device),
            signal=self.signal.to(device),
            labels=self.labels.to(device),
            bases=self.bases.to(device),
            delta=self.delta,
        )


def check_sizes(d: int, p: int, n_clusters: int, tokens_per_cluster: int) -> None:
    """One-line :class:`AotError` unless the sizes fit Definition 1 (K mutually orthogonal p-dim subspaces)."""
    for name, value in (("d", d), ("p", p), ("K", n_clusters), ("tokens per cluster", tokens_per_cluster)):
        if isinstance(value, bool) or not isinstance(value, int) or value < 1:
            raise AotError(f"{name}={value!r} must be a positive integer")
    if n_clusters * p > d:
        raise AotError(
            f"K*p = {n_clusters}*{p} = {n_clusters * p} exceeds d={d}: K orthogonal p-dimensional subspaces need "
            f"d >= K*p; raise d or lower K or p"
        )


def orthonormal_bases(
    d: int, p: int, n_clusters: int, generator: torch.Generator | None = None, dtype: torch.dtype = torch.float64
) -> torch.Tensor:
    """K mutually orthogonal p-dimensional bases, (K, d, p): the Q of a QR of a d × K·p Gaussian matrix.

    The columns of [U_1 … U_K] are orthonormal, so the subspaces are mutually orthogonal (docs/paper.md §1).
    """
    check_sizes(d, p, n_clusters, 1)
    gaussian = torch.randn(d, n_clusters * p, generator=generator, dtype=torch.float64)
    q, r = torch.linalg.qr(gaussian)  # q: (d, K·p)
    q = q * torch.sign(torch.diagonal(r))  # fix the signs: the unique QR with a positive diagonal
    return q.T.reshape(n_clusters, p, d).transpose(1, 2).contiguous().to(dtype)


def sample_mixture(
    d: int,
    p: int,
    n_clusters: int,
    tokens_per_cluster: int,
    delta: float,
    seed: int | None = 0,
    *,
    bases: torch.Tensor | None = None,
    generator: torch.Generator | None = None,
    dtype: torch.dtype = torch.float64,
) -> MixtureSample:
    """Draw N = K · tokens_per_cluster tokens of Definition 1 (docs/paper.md §1).

    The bases come from :func:`orthonormal_bases` unless given (learning experiments keep one set of bases
    and draw fresh tokens). ``generator`` overrides ``seed``; the same seed gives the same sample.
    """
    check_sizes(d, p, n_clusters, tokens_per_cluster)
    if not delta >= 0:
        raise AotError(f"delta={delta!r} must be a non-negative noise level")
    if generator is None:
        generator = torch.Generator().manual_seed(0 if seed is None else seed)
    if bases is None:
        bases = orthonormal_bases(d, p, n_clusters, generator)
    elif tuple(bases.shape) != (n_clusters, d, p):
        raise AotError(f"bases have shape {tuple(bases.shape)}, expected (K, d, p) = ({n_clusters}, {d}, {p})")
    bases = bases.to(torch.float64)
    n_tokens = n_clusters * tokens_per_cluster
    labels = torch.arange(n_clusters).repeat_interleave(tokens_per_cluster)  # (N,)
    # coefficients in every subspace: (N, K, p); the own cluster's block is the signal a_i ~ N(0, I),
    # the others are the noise e_{i,j} ~ N(0, δ² I)
    coefficients = torch.randn(n_tokens, n_clusters, p, generator=generator, dtype=torch.float64)
    own = torch.nn.functional.one_hot(labels, n_clusters).to(torch.float64)[:, :, None]  # (N, K, 1)
    signal_coeffs = coefficients * own
    noise_coeffs = coefficients * (1 - own) * delta
    signal = torch.einsum("nkp,kdp->nd", signal_coeffs, bases)
    noise = torch.einsum("nkp,kdp->nd", noise_coeffs, bases)
    return MixtureSample(
        tokens=(signal + noise).to(dtype),
        signal=signal.to(dtype),
        labels=labels,
        bases=bases.to(dtype),
        delta=float(delta),
    )
