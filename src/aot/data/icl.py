"""In-context regression prompts in the protocol of Garg et al. (2022), "What Can Transformers Learn
In-Context? A Case Study of Simple Function Classes".

A prompt is (x_1, y_1, …, x_n, y_n) with y_i = w·x_i (+ noise) for one w drawn per prompt:

- ``linear``: w ~ N(0, I_d);  ``sparse``: w ~ N(0, I_d) with all but k random coordinates zeroed;
  ``noisy``: linear plus ε ~ N(0, σ²) on every y.
- x ~ N(0, I_d) (isotropic), or out of distribution at evaluation: ``scaled`` (x · s), ``skewed`` (covariance
  R diag(λ) Rᵀ with λ_i ∝ 1/i², trace d, R a fixed random rotation), ``orthant`` (every x of a prompt in
  one random orthant: s ⊙ |x|).
- Curriculum (Garg's schedule): the number of active dimensions and of points grow by ``inc`` every
  ``interval`` steps from ``start`` to the full size; inactive dimensions of x are zero, so one model of
  input width d serves every stage.
- Pools: with ``pool_size`` the w's come from a fixed finite pool (Raventós et al.'s task diversity).

The squared error of a prediction is normalised by E[(w·x)²] = (number of non-zeros of w), i.e. divided by d
for ``linear`` and ``noisy`` and by k for ``sparse``: the zero predictor scores 1.

Batches are a function of the step alone (:class:`ICLBatches`, the trainer's batch-source protocol), so a
resumed run sees exactly the batches an uninterrupted one would.
"""

from __future__ import annotations

from dataclasses import dataclass

import torch

from aot.errors import ConfigError

ICL_TASKS = ("linear", "sparse", "noisy")
X_DISTRIBUTIONS = ("gaussian", "scaled", "skewed", "orthant")


@dataclass
class Curriculum:
    """Garg et al.'s schedule: ``min(end, start + inc · ⌊step / interval⌋)``; ``start == end`` switches it off."""

    start: int
    end: int
    inc: int = 1
    interval: int = 2000

    def at(self, step: int) -> int:
        return min(self.end, self.start + self.inc * (step // self.interval))


@dataclass
class ICLDataConfig:
    """task: linear, sparse or noisy. n_dims: d (the model's input width). n_points: points per prompt at the
    end of the curriculum (Garg: 2d + 1). sparsity: k non-zeros of w (``sparse``). noise_std: σ (``noisy``).
    pool_size: draw w from a fixed pool of this many (``None``: a fresh w every prompt).
    curriculum: grow dimensions from dims_start and points from points_start, by dims_inc / points_inc every
    curriculum_interval steps (Garg et al.: +1 dim and +2 points every 2000 steps)."""

    task: str = "linear"
    n_dims: int = 10
    n_points: int = 21
    sparsity: int = 3
    noise_std: float = 0.5
    pool_size: int | None = None
    curriculum: bool = True
    dims_start: int = 5
    dims_inc: int = 1
    points_start: int = 11
    points_inc: int = 2
    curriculum_interval: int = 2000

    def __post_init__(self) -> None:
        if self.task not in ICL_TASKS:
            raise ConfigError(f"unknown ICL task {self.task!r}; use one of {', '.join(ICL_TASKS)}")
        for name in ("n_dims", "n_points", "sparsity", "dims_start", "points_start", "curriculum_interval"):
            value = getattr(self, name)
            if isinstance(value, bool) or not isinstance(value, int) or value < 1:
                raise ConfigError(f"data.{name}={value!r} must be a positive integer")
        if self.task == "sparse" and self.sparsity > self.n_dims:
            raise ConfigError(f"data.sparsity={self.sparsity} exceeds n_dims={self.n_dims}")
        if self.pool_size is not None and self.pool_size < 1:
            raise ConfigError(f"data.pool_size={self.pool_size} must be positive (or null for no pool)")
        if self.noise_std < 0:
            raise ConfigError(f"data.noise_std={self.noise_std} must be >= 0")

    @property
    def dims(self) -> Curriculum:
        start = min(self.dims_start, self.n_dims) if self.curriculum else self.n_dims
        return Curriculum(start, self.n_dims, self.dims_inc, self.curriculum_interval)

    @property
    def points(self) -> Curriculum:
        start = min(self.points_start, self.n_points) if self.curriculum else self.n_points
        return Curriculum(start, self.n_points, self.points_inc, self.curriculum_interval)


@dataclass
class Prompts:
    """A batch of prompts: xs (B, n, d), ys (B, n), ws (B, d), and the normaliser of the squared error."""

    xs: torch.Tensor
    ys: torch.Tensor
    ws: torch.Tensor
    error_scale: float


class ICLSampler:
    """Draws prompts of one task; the OOD options change only how x is drawn."""

    def __init__(
        self, cfg: ICLDataConfig, x_distribution: str = "gaussian", x_scale: float = 2.0, seed: int = 0
    ) -> None:
        if x_distribution not in X_DISTRIBUTIONS:
            raise ConfigError(f"unknown x distribution {x_distribution!r}; use one of {', '.join(X_DISTRIBUTIONS)}")
        self.cfg = cfg
        self.x_distribution = x_distribution
        self.x_scale = x_scale
        fixed = torch.Generator().manual_seed(10_000 + seed)  # the pool and the skew: fixed for a config
        self.pool = self._draw_w(cfg.pool_size, cfg.n_dims, fixed) if cfg.pool_size else None
        self.skew = self._skewed_root(cfg.n_dims, fixed) if x_distribution == "skewed" else None

    def _draw_w(self, n: int, dims: int, gen: torch.Generator) -> torch.Tensor:
        w = torch.randn(n, self.cfg.n_dims, generator=gen, dtype=torch.float64)
        w[:, dims:] = 0.0
        if self.cfg.task == "sparse":  # keep k random active coordinates
            k = min(self.cfg.sparsity, dims)
            order = torch.rand(n, dims, generator=gen, dtype=torch.float64).argsort(dim=1)
            keep = torch.zeros(n, self.cfg.n_dims, dtype=torch.bool)
            keep.scatter_(1, order[:, :k], True)
            w = w * keep
        return w

    @staticmethod
    def _skewed_root(d: int, gen: torch.Generator) -> torch.Tensor:
        """A square root of Σ = R diag(λ) Rᵀ with λ_i ∝ 1/i², trace(Σ) = d (Garg et al. §4)."""
        lam = 1.0 / torch.arange(1, d + 1, dtype=torch.float64) ** 2
        lam = lam * d / lam.sum()
        R, _ = torch.linalg.qr(torch.randn(d, d, generator=gen, dtype=torch.float64))
        return R @ torch.diag(lam.sqrt()) @ R.T

    def error_scale(self, dims: int) -> float:
        """E[(w·x)²] for isotropic x: the number of non-zeros of w."""
        return float(min(self.cfg.sparsity, dims) if self.cfg.task == "sparse" else dims)

    def sample(self, batch: int, n_points: int, dims: int, gen: torch.Generator) -> Prompts:
        """``batch`` prompts of ``n_points`` points with ``dims`` active dimensions (the rest of x is zero)."""
        d = self.cfg.n_dims
        x = torch.randn(batch, n_points, d, generator=gen, dtype=torch.float64)
        if self.x_distribution == "scaled":
            x = x * self.x_scale
        elif self.x_distribution == "skewed":
            assert self.skew is not None
            x = x @ self.skew
        elif self.x_distribution == "orthant":
            signs = torch.randint(0, 2, (batch, 1, d), generator=gen).to(x.dtype) * 2 - 1
            x = x.abs() * signs
        x[..., dims:] = 0.0
        if self.pool is not None:
            w = self.pool[torch.randint(0, len(self.pool), (batch,), generator=gen)].clone()
            w[:, dims:] = 0.0
        else:
            w = self._draw_w(batch, dims, gen)
        y = torch.einsum("bnd,bd->bn", x, w)
        if self.cfg.task == "noisy":
            y = y + self.cfg.noise_std * torch.randn(batch, n_points, generator=gen, dtype=torch.float64)
        return Prompts(x, y, w, self.error_scale(dims))


def step_generator(seed: int, step: int) -> torch.Generator:
    """The random stream of one training step: a function of (seed, step) only."""
    return torch.Generator().manual_seed(seed * 1_000_003 + step)


class ICLBatches:
    """The trainer's batch source: ``get(step, start, stop)`` returns rows [start, stop) of step's global batch
    (xs float32 (B, n, d), ys float32 (B, n)); n and the active dimensions follow the curriculum."""

    def __init__(self, cfg: ICLDataConfig, batch_size: int, seed: int = 0) -> None:
        self.cfg = cfg
        self.batch_size = batch_size
        self.seed = seed
        self.sampler = ICLSampler(cfg, seed=seed)

    def get(self, step: int, start: int = 0, stop: int | None = None) -> tuple[torch.Tensor, ...]:
        prompts = self.sampler.sample(
            self.batch_size, self.cfg.points.at(step), self.cfg.dims.at(step), step_generator(self.seed, step)
        )
        rows = slice(start, self.batch_size if stop is None else stop)
        return prompts.xs[rows].float(), prompts.ys[rows].float()

    def tokens_per_sample(self) -> int:
        return 2 * self.cfg.n_points  # the prompt length at the end of the curriculum


def eval_prompts(
    cfg: ICLDataConfig,
    n_prompts: int,
    seed: int = 1234,
    x_distribution: str = "gaussian",
    x_scale: float = 2.0,
) -> Prompts:
    """A fixed held-out set: ``n_prompts`` full prompts (all d dimensions, n_points points)."""
    sampler = ICLSampler(cfg, x_distribution, x_scale, seed=0)  # the pool is the training pool
    return sampler.sample(n_prompts, cfg.n_points, cfg.n_dims, torch.Generator().manual_seed(seed + 7))


def garg_points(n_dims: int) -> int:
    """Garg et al.'s prompt length for dimension d: 2d + 1 points."""
    return 2 * n_dims + 1


__all__ = [
    "ICL_TASKS",
    "X_DISTRIBUTIONS",
    "Curriculum",
    "ICLBatches",
    "ICLDataConfig",
    "ICLSampler",
    "Prompts",
    "eval_prompts",
    "garg_points",
]
