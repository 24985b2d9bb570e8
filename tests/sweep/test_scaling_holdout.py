"""The hold-out check (aot.sweep.scaling.holdout): a family's law fitted without its largest size predicts that
size's runs exactly when they follow the law, and misses by the factor put into them when they do not (checked
against the direct ratio); seeds of one point are averaged; families with fewer than three sizes are left out."""

from __future__ import annotations

import math

import pytest

from aot.sweep.scaling import ScalingRun
from aot.sweep.scaling.holdout import HOLDOUT_HEADER, hold_out_largest, hold_out_markdown
from scaling_synthetic import BUDGETS, SIZES, TRUE


def runs_of(family: str, sizes=SIZES, largest_factor: float = 1.0) -> list[ScalingRun]:  # type: ignore[no-untyped-def]
    return [
        ScalingRun(family, n, d, float(TRUE.loss(n, d)) * (largest_factor if n == max(sizes) else 1.0))
        for n in sizes
        for d in BUDGETS
    ]


def test_runs_on_the_law_are_predicted_and_a_largest_size_off_it_misses_by_its_factor():
    runs = runs_of("on") + runs_of("off", largest_factor=1.05)
    rows = hold_out_largest(runs, starts=4)
    assert [(r.family, r.tokens) for r in rows] == [("on", d) for d in BUDGETS] + [("off", d) for d in BUDGETS]
    for r in rows:
        assert r.params == 2e7 and r.fitted_sizes == SIZES[:-1] and r.seeds == 1
        truth = float(TRUE.loss(2e7, r.tokens))
        assert r.predicted == pytest.approx(truth, rel=1e-4)
        expected = 0.0 if r.family == "on" else 1 / 1.05 - 1  # predicted / measured − 1, by hand
        assert r.error == pytest.approx(expected, abs=1e-4)


def test_seeds_of_one_point_are_averaged_and_small_families_are_left_out():
    runs = runs_of("f")
    extra = [ScalingRun("f", 2e7, d, float(TRUE.loss(2e7, d)) * 1.1, seed=1) for d in BUDGETS]
    two_sizes = runs_of("g", sizes=SIZES[:2])
    rows = hold_out_largest(runs + extra + two_sizes, starts=4)
    assert {r.family for r in rows} == {"f"}
    for r in rows:
        truth = float(TRUE.loss(2e7, r.tokens))
        assert r.seeds == 2 and r.measured == pytest.approx(truth * 1.05, rel=1e-12)
    markdown = hold_out_markdown(rows, {"f": "Family F"}).splitlines()
    assert markdown[0] == "| " + " | ".join(HOLDOUT_HEADER) + " |" and len(markdown) == 2 + len(BUDGETS)
    cells = [c.strip() for c in markdown[2].strip("|").split("|")]
    assert cells[:3] == ["Family F", "0.30, 1.00, 4.00 M", "20.00 M"]
    assert cells[4] == "2" and cells[5] == f"{rows[0].measured:.3f}" and cells[7] == f"{100 * rows[0].error:+.1f} %"
    assert math.isclose(rows[0].error, rows[0].predicted / rows[0].measured - 1)
