"""A scaling study fitted end to end: per family the law with bootstrap intervals, its compute frontier, the gap
to a reference family along compute, and the law's extrapolation to given (N, D) points — as one JSON-able dict
(what ``aot scaling fit`` writes to results.json; :mod:`aot.sweep.scaling.render` and
:mod:`aot.sweep.scaling.figures` read it)."""

from __future__ import annotations

import hashlib
from collections.abc import Callable, Sequence
from dataclasses import asdict, dataclass, field
from typing import Any

import numpy as np

from aot.errors import AotError
from aot.sweep.scaling.bootstrap import LEVEL, Bootstrap, bootstrap_laws, estimate
from aot.sweep.scaling.frontier import FlopsModel, fit_flops_model, frontier_loss, optimal_params
from aot.sweep.scaling.law import INIT_GRID, PARAMETERS, Law, LawFit, Observations, fit_law
from aot.sweep.scaling.runs import ScalingRun, by_family
from aot.sweep.scaling.shared import bootstrap_shared, fit_shared
from aot.validation import SEED, Number, integer

#: the settings' ranges (the command's options say them in --help)
BOOTSTRAP = integer(0, 100_000)
STARTS = integer(1, len(INIT_GRID))
BOOT_STARTS = integer(1, 64)
FRONTIER_POINTS = 60


@dataclass(frozen=True)
class FitSettings:
    """How a study is fitted: L-BFGS from the ``starts`` best grid points for the fit, ``bootstrap`` resamples of
    the runs refitted from ``boot_starts`` starts each, seeded by ``seed``; with ``shared_e`` every family's law
    has the same E, fitted jointly (:mod:`aot.sweep.scaling.shared`)."""

    starts: int = 32
    bootstrap: int = 200
    boot_starts: int = 2
    seed: int = 0
    shared_e: bool = False

    def check(self) -> FitSettings:
        STARTS.named("--starts").check(self.starts)
        BOOTSTRAP.named("--bootstrap").check(self.bootstrap)
        BOOT_STARTS.named("--boot-starts").check(self.boot_starts)
        Number(int, SEED).named("--seed").check(self.seed)
        return self


@dataclass(frozen=True)
class Point:
    """An (N, D) the fitted law of ``family`` is read at (the paper's model sizes and token budget)."""

    label: str
    family: str
    params: float
    tokens: float


@dataclass
class FamilyFit:
    """One family's runs, law, FLOPs model and bootstrap."""

    family: str
    runs: list[ScalingRun]
    fit: LawFit
    flops_model: FlopsModel
    boot: Bootstrap = field(repr=False)

    @property
    def law(self) -> Law:
        return self.fit.law

    def frontier(self, flops: np.ndarray) -> dict[str, Any]:
        """The loss and the optimal N along ``flops``, with intervals."""
        fm = self.flops_model
        return {
            "loss": estimate(
                frontier_loss(self.law, fm, flops), self.boot.replicates(lambda w: frontier_loss(w, fm, flops))
            ),
            "params": estimate(
                optimal_params(self.law, fm, flops), self.boot.replicates(lambda w: optimal_params(w, fm, flops))
            ),
        }

    def at(self, n: float, d: float) -> dict[str, Any]:
        return estimate(self.law.loss(n, d), self.boot.replicates(lambda w: w.loss(n, d)))


def check_family(family: str, runs: Sequence[ScalingRun], source: str) -> None:
    """Enough runs to fit a family's five parameters: at least five, at two sizes or more and two budgets or more."""
    sizes, budgets = {r.params for r in runs}, {r.tokens for r in runs}
    if len(runs) < len(PARAMETERS) or len(sizes) < 2 or len(budgets) < 2:
        raise AotError(
            f"{source}: family {family!r} has {len(runs)} runs at {len(sizes)} model size(s) and {len(budgets)} token "
            f"budget(s); fitting E, A, α, B, β needs at least {len(PARAMETERS)} runs, at 2 or more sizes and 2 or more "
            "budgets (a scaling grid: e.g. 4 sizes × 3 budgets)"
        )


def family_seed(seed: int, family: str) -> int:
    """A family's bootstrap seed: independent of the other families and of their order."""
    return int(hashlib.sha256(f"{seed}:{family}".encode()).hexdigest()[:12], 16)


def observations(runs: Sequence[ScalingRun]) -> Observations:
    """The runs' (log N, log D, log L)."""
    return Observations.of([r.params for r in runs], [r.tokens for r in runs], [r.loss for r in runs])


def flops_model_of(runs: Sequence[ScalingRun]) -> FlopsModel:
    """FLOPs per token against N, from the runs' recorded training FLOPs (6 N without them)."""
    flops = None if any(r.flops is None for r in runs) else np.array([r.flops for r in runs])
    return fit_flops_model(np.array([r.params for r in runs]), np.array([r.tokens for r in runs]), flops)


def check_falls(family: str, law: Law, source: str) -> None:
    """A one-line error unless the fitted loss falls with both size and data (α > 0 and β > 0)."""
    if law.alpha <= 0 or law.beta <= 0:
        raise AotError(
            f"{source}: the fit of family {family!r} has α = {law.alpha:.3g}, β = {law.beta:.3g}: the loss "
            "does not fall with both size and data in these runs; add sizes or budgets (or check the losses)"
        )


def fit_family(family: str, runs: Sequence[ScalingRun], settings: FitSettings, source: str = "the runs") -> FamilyFit:
    """The law of one family's runs (:func:`aot.sweep.scaling.law.fit_law`), its FLOPs model and bootstrap."""
    check_family(family, runs, source)
    obs = observations(runs)
    fit = fit_law(obs, starts=settings.starts)
    check_falls(family, fit.law, source)
    boot = bootstrap_laws(obs, fit, settings.bootstrap, family_seed(settings.seed, family), settings.boot_starts)
    return FamilyFit(family, list(runs), fit, flops_model_of(runs), boot)


def fit_families_sharing_e(
    families: dict[str, list[ScalingRun]], settings: FitSettings, source: str = "the runs"
) -> dict[str, FamilyFit]:
    """Every family's law with one E (:func:`aot.sweep.scaling.shared.fit_shared`, started from each family's own
    fit), its FLOPs model and the joint bootstrap (refit i of each family: one joint refit)."""
    for name, runs in families.items():
        check_family(name, runs, source)
    obs = {name: observations(runs) for name, runs in families.items()}
    own = {name: fit_law(o, starts=settings.starts).law for name, o in obs.items()}
    shared = fit_shared(obs, own, starts=settings.starts)
    for name, law in shared.laws.items():
        check_falls(name, law, source)
    seed = family_seed(settings.seed, "shared E: " + ", ".join(families))
    boots = bootstrap_shared(obs, shared, settings.bootstrap, seed, settings.boot_starts)
    return {
        name: FamilyFit(name, list(runs), shared.family_fit(name), flops_model_of(runs), boots[name])
        for name, runs in families.items()
    }


def gap_along_frontier(fam: FamilyFit, ref: FamilyFit, flops: np.ndarray) -> dict[str, Any]:
    """L_fam / L_ref − 1 on the two frontiers at each budget, with the interval of paired refits (replicate i of
    each; their resamples are independent)."""
    point = frontier_loss(fam.law, fam.flops_model, flops) / frontier_loss(ref.law, ref.flops_model, flops) - 1
    ours = fam.boot.replicates(lambda w: frontier_loss(w, fam.flops_model, flops))
    theirs = ref.boot.replicates(lambda w: frontier_loss(w, ref.flops_model, flops))
    k = min(len(ours), len(theirs))
    return estimate(point, ours[:k] / theirs[:k] - 1 if k else np.empty(0))


def gap_at(fam: FamilyFit, point: Point, ref: FamilyFit, ref_point: Point) -> dict[str, Any]:
    """L_fam(point) / L_ref(ref_point) − 1, with the interval of paired refits."""
    value = fam.law.loss(point.params, point.tokens) / ref.law.loss(ref_point.params, ref_point.tokens) - 1
    ours = fam.boot.replicates(lambda w: w.loss(point.params, point.tokens))
    theirs = ref.boot.replicates(lambda w: w.loss(ref_point.params, ref_point.tokens))
    k = min(len(ours), len(theirs))
    return estimate(value, ours[:k] / theirs[:k] - 1 if k else np.empty(0))


def compute_exponents(law: Law, fm: FlopsModel) -> tuple[float, float]:
    """(a, b) of N_opt ∝ C^a and D_opt ∝ C^b: a = β / (α + pβ), b = 1 − p a (Hoffmann et al. eq. (4))."""
    a = law.beta / (law.alpha + fm.p * law.beta)
    return a, 1 - fm.p * a


def fit_study(
    runs: Sequence[ScalingRun],
    reference: str | None = None,
    points: Sequence[Point] = (),
    settings: FitSettings | None = None,
    source: str = "the runs",
) -> dict[str, Any]:
    """Fit every family of ``runs`` and read the frontier, the gaps to ``reference`` (a family of the runs; None:
    no gaps) and ``points`` off the fits. ``source`` names the runs in errors (the file)."""
    settings = (settings or FitSettings()).check()
    families = by_family(runs)
    for name in [reference, *(p.family for p in points)]:
        if name is not None and name not in families:
            raise AotError(f"{source} has no runs of family {name!r}; its families are {', '.join(families)}")
    for name, mine in families.items():
        check_family(name, mine, source)
    if settings.shared_e:
        fits = fit_families_sharing_e(families, settings, source)
    else:
        fits = {name: fit_family(name, mine, settings, source) for name, mine in families.items()}
    grid = flops_grid(fits, points)
    results: dict[str, Any] = {
        "reference": reference,
        "level": LEVEL,
        "settings": asdict(settings),
        "families": {name: family_summary(f) for name, f in fits.items()},
        "frontier": {"flops": grid.tolist(), "recorded_max": max(run_flops(f).max() for f in fits.values())},
        "runs": [{**asdict(r), "flops_used": float(f.flops_model.per_token(r.params) * r.tokens if r.flops is None
                                                    else r.flops)} for f in fits.values() for r in f.runs],
    }  # fmt: skip
    results["frontier"]["families"] = {name: f.frontier(grid) for name, f in fits.items()}
    if reference is not None:
        ref = fits[reference]
        others = {name: f for name, f in fits.items() if name != reference}
        results["gap"] = {
            "flops": grid.tolist(),
            "families": {name: gap_along_frontier(f, ref, grid) for name, f in others.items()},
            "at": [
                {
                    "where": where,
                    "flops": c,
                    "families": {name: gap_along_frontier(f, ref, np.asarray(c)) for name, f in others.items()},
                }
                for where, c in gap_marks(fits, points, reference)
            ],
        }
    results["points"] = [point_summary(p, fits, points, reference) for p in points]
    return results


def gap_marks(fits: dict[str, FamilyFit], points: Sequence[Point], reference: str) -> list[tuple[str, float]]:
    """The budgets a gap table reads the frontier gap at: the smallest and the largest run's compute, and each
    point of the reference family (every point without one) at its own compute."""
    recorded = np.concatenate([run_flops(f) for f in fits.values()])
    marks = [("smallest run", float(recorded.min())), ("largest run", float(recorded.max()))]
    chosen = [p for p in points if p.family == reference] or list(points)
    return marks + [(p.label, float(fits[p.family].flops_model.per_token(p.params) * p.tokens)) for p in chosen]


def run_flops(fit: FamilyFit) -> np.ndarray:
    """Each run's training FLOPs: recorded, else from the family's FLOPs model (6 N D)."""
    return np.array(
        [r.flops if r.flops is not None else fit.flops_model.per_token(r.params) * r.tokens for r in fit.runs]
    )


def flops_grid(fits: dict[str, FamilyFit], points: Sequence[Point]) -> np.ndarray:
    """Log-spaced budgets from the smallest recorded run to the largest run or point (whichever is larger)."""
    recorded = np.concatenate([run_flops(f) for f in fits.values()])
    at_points = [float(fits[p.family].flops_model.per_token(p.params) * p.tokens) for p in points]
    return np.geomspace(recorded.min(), max([recorded.max(), *at_points]), FRONTIER_POINTS)


def parameter(name: str) -> Callable[[Law], float]:
    """The law's parameter ``name`` (E, A, alpha, B, beta) as a function of a law."""
    return lambda law: law.values()[name]


def family_summary(f: FamilyFit) -> dict[str, Any]:
    """A family's law (each parameter with its interval), exponents of the optimum, FLOPs model and fit details."""
    law = {name: estimate(f.law.values()[name], f.boot.replicates(parameter(name))) for name in PARAMETERS}
    a, b = compute_exponents(f.law, f.flops_model)
    exponents = f.boot.replicates(lambda w: compute_exponents(w, f.flops_model))
    return {
        "runs": len(f.runs),
        "sizes": sorted({r.params for r in f.runs}),
        "budgets": sorted({r.tokens for r in f.runs}),
        "law": law,
        "optimal_params_exponent": estimate(a, exponents[:, 0] if len(exponents) else exponents),
        "optimal_tokens_exponent": estimate(b, exponents[:, 1] if len(exponents) else exponents),
        "flops_model": asdict(f.flops_model),
        "objective": f.fit.objective,
        "starts": f.fit.starts,
        "agreeing_starts": f.fit.agreeing,
        "bootstrap": {"requested": f.boot.requested, "fitted": len(f.boot.laws), "failed": f.boot.failed},
    }


def point_summary(
    p: Point, fits: dict[str, FamilyFit], points: Sequence[Point], reference: str | None
) -> dict[str, Any]:
    """A point's predicted loss and, for a family other than the reference, its gap to the first reference point
    at the same tokens (None without one)."""
    fam = fits[p.family]
    out: dict[str, Any] = {
        **asdict(p),
        "flops": float(fam.flops_model.per_token(p.params) * p.tokens),
        "loss": fam.at(p.params, p.tokens),
        "gap": None,
        "gap_to": None,
    }
    if reference is not None and p.family != reference:
        ref_point = next((q for q in points if q.family == reference and q.tokens == p.tokens), None)
        if ref_point is not None:
            out["gap"] = gap_at(fam, p, fits[reference], ref_point)
            out["gap_to"] = ref_point.label
    return out
