"""The Markdown of a fitted study (:func:`aot.sweep.scaling.study.fit_study`'s results): a table of (E, A, α, B, β)
per family with intervals, and a table of the law read at the given points with the gaps to the reference."""

from __future__ import annotations

from typing import Any

from aot.sweep.render import table

LAW_COLUMNS = (("E", "E", ".3f"), ("A", "A", ".3g"), ("alpha", "α", ".3f"), ("B", "B", ".3g"), ("beta", "β", ".3f"))


def with_interval(est: dict[str, Any] | None, spec: str = ".3f", scale: float = 1.0, unit: str = "") -> str:
    """``value [low, high]`` (``—`` for a missing value; the interval left out when there is none)."""
    if est is None or est.get("value") is None:
        return "—"
    value = f"{scale * est['value']:{spec}}{unit}"
    if est.get("low") is None or est.get("high") is None:
        return value
    return f"{value} [{scale * est['low']:{spec}}, {scale * est['high']:{spec}}]"


def law_rows(results: dict[str, Any]) -> list[list[str]]:
    """A row per family: its runs, sizes, budgets, each parameter with its interval, N_opt's exponent."""
    rows = []
    for name, fam in results["families"].items():
        sizes, budgets = fam["sizes"], fam["budgets"]
        rows.append(
            [
                name,
                str(fam["runs"]),
                f"{sizes[0]:.3g}-{sizes[-1]:.3g} ({len(sizes)})",
                f"{budgets[0]:.3g}-{budgets[-1]:.3g} ({len(budgets)})",
                *(with_interval(fam["law"][key], spec) for key, _, spec in LAW_COLUMNS),
                with_interval(fam["optimal_params_exponent"]),
            ]
        )
    return rows


LAW_HEADER = ["family", "runs", "N (sizes)", "D (budgets)", *(f"{label} [95 %]" for _, label, _ in LAW_COLUMNS)]
LAW_HEADER.append("N_opt ∝ C^a: a [95 %]")


def point_rows(results: dict[str, Any]) -> list[list[str]]:
    """A row per point: its family, N, D, the predicted loss and the gap to the reference point, with intervals."""
    return [
        [
            p["label"],
            p["family"],
            f"{p['params']:.3g}",
            f"{p['tokens']:.3g}",
            with_interval(p["loss"]),
            with_interval(p["gap"], "+.1f", 100, " %") + (f" (vs {p['gap_to']})" if p["gap_to"] else ""),
        ]
        for p in results["points"]
    ]


POINT_HEADER = ["point", "family", "N", "D", "predicted loss [95 %]", "gap to the reference [95 %]"]


GAP_HEADER = ["compute", "training FLOPs", "family", "gap [95 %]"]


def gap_rows(results: dict[str, Any]) -> list[list[str]]:
    """The frontier gap of each family to the reference at the marked budgets (the smallest run's compute, the
    largest run's, each reference point's), a row per budget and family."""
    gap = results.get("gap") or {"at": []}
    return [
        [mark["where"], f"{mark['flops']:.3g}", name, with_interval(est, "+.1f", 100, " %")]
        for mark in gap["at"]
        for name, est in mark["families"].items()
    ]


SHARED_E = (
    " With one E shared by every family, fitted jointly (the sum of the families' objectives; each keeps its A, α,"
    " B, β), the bootstrap resampling runs within each family."
)


def study_markdown(results: dict[str, Any], title: str = "Scaling laws", source: str = "") -> str:
    """table.md of ``aot scaling fit``: the law per family, then the points, with what the intervals are."""
    boot = next(iter(results["families"].values()))["bootstrap"]
    s = results["settings"]
    lines = [f"# {title}", ""]
    if source:
        lines += [f"Runs: `{source}`.", ""]
    lines += [
        "L(N, D) = E + A / N^α + B / D^β per family (N: non-embedding parameters, D: training tokens), fitted as "
        f"Hoffmann et al. 2022 (approach 3: Huber δ = 1e-3 on log L, L-BFGS from the {s['starts']} best points of "
        f"their grid of initialisations); [95 %]: percentile intervals of {boot['requested']} bootstrap refits over "
        f"runs (seed {s['seed']})." + (SHARED_E if s.get("shared_e") else ""),
        "",
        *table(LAW_HEADER, law_rows(results)),
    ]
    rows = gap_rows(results)
    if rows:
        lines += ["", f"The gap to {results['reference']} on the compute frontiers (L / L_ref − 1 at equal FLOPs):", ""]
        lines += table(GAP_HEADER, rows)
    if results["points"]:
        lines += ["", "The law read at given sizes and budgets (an extrapolation beyond the runs):", ""]
        lines += table(POINT_HEADER, point_rows(results))
    return "\n".join(lines) + "\n"
