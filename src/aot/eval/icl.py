"""In-context regression: the classical baselines, the squared-error curves and their bootstrap bands.

Every predictor maps a batch of prompts xs (B, n, d), ys (B, n) to predictions (B, n), where prediction i
uses only (x_1, y_1, …, x_{i−1}, y_{i−1}) and x_i — exactly what the causal model sees:

- ``least_squares``: ŵ = X⁺ y over the i − 1 examples, in float64 (X⁺ the pseudo-inverse: the minimum-norm
  solution while i − 1 < d); with noiseless y and isotropic x its normalised error is (d − k)/d at k < d
  examples and 0 from k = d on.
- ``averaging``: ŵ = (1/k) Σ_j y_j x_j (Garg et al.'s "averaging").
- ``3-nn``: the mean y of the 3 nearest earlier x (fewer while fewer exist).
- ``lasso``: scikit-learn's Lasso(α) on the earlier examples (optional: needs scikit-learn).
- ``zero``: 0 (its normalised error is 1).
"""

from __future__ import annotations

from collections.abc import Callable

import torch

from aot.errors import AotError

Predictor = Callable[[torch.Tensor, torch.Tensor], torch.Tensor]


def least_squares(xs: torch.Tensor, ys: torch.Tensor) -> torch.Tensor:
    """Minimum-norm least squares on the examples before each position, in float64."""
    xs, ys = xs.double(), ys.double()
    preds = torch.zeros_like(ys)
    for i in range(1, xs.shape[1]):
        w = torch.linalg.pinv(xs[:, :i]) @ ys[:, :i, None]  # (B, d, 1)
        preds[:, i] = (xs[:, i : i + 1] @ w)[:, 0, 0]
    return preds


def averaging(xs: torch.Tensor, ys: torch.Tensor) -> torch.Tensor:
    """ŵ = mean_j y_j x_j over the examples before each position."""
    xs, ys = xs.double(), ys.double()
    sums = torch.cumsum(ys[..., None] * xs, dim=1)  # Σ_{j≤i} y_j x_j
    counts = torch.arange(1, xs.shape[1] + 1, dtype=xs.dtype)[None, :, None]
    w_before = torch.zeros_like(sums)
    w_before[:, 1:] = (sums / counts)[:, :-1]
    return (w_before * xs).sum(-1)


def nearest_neighbours(xs: torch.Tensor, ys: torch.Tensor, k: int = 3) -> torch.Tensor:
    """Mean y of the ``k`` earlier points nearest in Euclidean distance (all earlier points while fewer)."""
    xs, ys = xs.double(), ys.double()
    preds = torch.zeros_like(ys)
    for i in range(1, xs.shape[1]):
        dist = torch.cdist(xs[:, i : i + 1], xs[:, :i])[:, 0]  # (B, i)
        nearest = dist.topk(min(k, i), largest=False).indices
        preds[:, i] = ys[:, :i].gather(1, nearest).mean(1)
    return preds


def lasso(xs: torch.Tensor, ys: torch.Tensor, alpha: float = 0.01) -> torch.Tensor:
    """scikit-learn's Lasso (no intercept) on the examples before each position; needs scikit-learn."""
    try:
        from sklearn.linear_model import Lasso
    except ImportError:
        raise AotError("the lasso baseline needs scikit-learn; install it with `pip install 'aot[icl]'`") from None
    from tqdm.auto import tqdm

    X, Y = xs.double().numpy(), ys.double().numpy()
    preds = torch.zeros_like(ys, dtype=torch.float64)
    for b in tqdm(range(X.shape[0]), desc="lasso", unit="prompt", leave=False, disable=X.shape[0] < 100):
        for i in range(1, X.shape[1]):
            model = Lasso(alpha=alpha, fit_intercept=False, max_iter=10_000).fit(X[b, :i], Y[b, :i])
            preds[b, i] = float(model.predict(X[b, i : i + 1])[0])
    return preds


def zero(xs: torch.Tensor, ys: torch.Tensor) -> torch.Tensor:
    return torch.zeros_like(ys, dtype=torch.float64)


BASELINES: dict[str, Predictor] = {
    "least squares": least_squares,
    "averaging": averaging,
    "3-nn": nearest_neighbours,
    "lasso": lasso,
    "zero": zero,
}


def baselines_for(task: str) -> list[str]:
    """The baselines drawn beside the models: Lasso only for sparse regression (it is slow: one fit per point)."""
    return [name for name in BASELINES if name != "lasso" or task == "sparse"]


def squared_errors(preds: torch.Tensor, ys: torch.Tensor, scale: float) -> torch.Tensor:
    """(pred − y)² / scale per prompt and position: (B, n)."""
    return (preds.double() - ys.double()).square() / scale


def bootstrap_band(
    errors: torch.Tensor, n_boot: int = 1000, low: float = 0.05, high: float = 0.95, seed: int = 0
) -> dict[str, list[float]]:
    """Mean over prompts of ``errors`` (B, n) per position, and the ``low``–``high`` quantiles of that mean over
    ``n_boot`` bootstrap resamples of the prompts."""
    gen = torch.Generator().manual_seed(seed)
    B = errors.shape[0]
    index = torch.randint(0, B, (n_boot, B), generator=gen)
    means = errors.double()[index].mean(dim=1)  # (n_boot, n)
    q = torch.quantile(means, torch.tensor([low, high], dtype=torch.float64), dim=0)
    return {"mean": errors.double().mean(0).tolist(), "low": q[0].tolist(), "high": q[1].tolist()}


@torch.no_grad()
def model_predictions(model: torch.nn.Module, xs: torch.Tensor, ys: torch.Tensor, batch: int = 256) -> torch.Tensor:
    """The model's predictions (B, n) for every position, in batches."""
    model.eval()
    dtype = next(model.parameters()).dtype
    out = [model(xs[i : i + batch].to(dtype), ys[i : i + batch].to(dtype)) for i in range(0, len(xs), batch)]
    return torch.cat(out).double()
