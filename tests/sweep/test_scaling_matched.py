"""aot.sweep.scaling.matched: the gap to a reference family at matched size and budget, against a direct
computation (log-log interpolation by numpy between the reference's sizes, means over seeds)."""

from __future__ import annotations

import math

import numpy as np
import pytest

from aot.sweep.scaling.matched import matched_gaps, matched_markdown
from aot.sweep.scaling.runs import ScalingRun


def run(family: str, n: float, d: float, loss: float, seed: int = 0) -> ScalingRun:
    return ScalingRun(family, n, d, loss, seed=seed)


REF = [run("gpt2", 3.0e5, 1e6, 1.90), run("gpt2", 3.0e5, 1e6, 1.94, seed=1), run("gpt2", 6.7e5, 1e6, 1.85)]
REF += [run("gpt2", 1.2e6, 1e6, 1.80), run("gpt2", 3.0e5, 4e6, 1.64)]


def test_a_matched_size_is_read_as_it_is_and_seeds_are_averaged():
    (g,) = matched_gaps([*REF, run("mssa", 2.997e5, 4e6, 1.906)], "gpt2")
    assert g.reference_sizes == (3.0e5,) and g.gap == pytest.approx(1.906 / 1.64 - 1, rel=1e-12)
    (h,) = matched_gaps([*REF, run("mssa", 3.01e5, 1e6, 2.1), run("mssa", 3.01e5, 1e6, 2.2, seed=1)], "gpt2")
    assert (h.seeds, h.reference_seeds) == (2, 2) and h.gap == pytest.approx(2.15 / 1.92 - 1, rel=1e-12)


def test_a_size_between_the_references_is_interpolated_in_log_n_and_log_l_and_never_extrapolated():
    runs = [*REF, run("mhsa", 5.3e5, 1e6, 2.03), run("mhsa", 2.0e6, 1e6, 1.7), run("mhsa", 5.3e5, 2e6, 1.9)]
    (g,) = matched_gaps(runs, "gpt2")  # 2 M params is beyond GPT-2's sizes; no GPT-2 at 2 M tokens
    sizes, losses = np.log([3.0e5, 6.7e5, 1.2e6]), np.log([1.92, 1.85, 1.80])
    expected = math.exp(float(np.interp(math.log(5.3e5), sizes, losses)))
    assert g.reference_sizes == (3.0e5, 6.7e5) and g.reference_loss == pytest.approx(expected, rel=1e-12)
    assert g.gap == pytest.approx(2.03 / expected - 1, rel=1e-12)


def test_the_table_has_a_row_per_family_and_size_and_a_column_per_budget():
    runs = [*REF, run("mssa", 3.0e5, 1e6, 2.112), run("mssa", 3.0e5, 4e6, 1.804), run("mhsa", 5.3e5, 1e6, 2.0)]
    text = matched_markdown(matched_gaps(runs, "gpt2"), "gpt2", {"gpt2": "GPT-2", "mssa": "AoT-MSSA"})
    lines = text.splitlines()
    assert lines[0] == "| family | N | GPT-2 read at | 1 M tokens | 4 M tokens |"
    assert "| AoT-MSSA | 0.30 M | 0.30 M | +10.0 % (1 / 2 seeds) | +10.0 % |" in lines
    mhsa = next(x for x in lines if x.startswith("| mhsa | 0.53 M | 0.30 M – 0.67 M (interpolated) |"))
    assert mhsa.endswith("| — |")
    assert "yet" in matched_markdown([], "gpt2", {"gpt2": "GPT-2"})


def test_the_figure_draws_one_line_per_family_and_budget_along_n(tmp_path):
    from aot.sweep.scaling.figures import draw_matched, matched_series

    runs = [*REF, run("mhsa", 1.0e6, 1e6, 1.9), run("mhsa", 5.3e5, 1e6, 2.03), run("mssa", 3.0e5, 4e6, 1.804)]
    gaps = matched_gaps(runs, "gpt2")
    series = matched_series(gaps)
    assert list(series) == [("mhsa", 1e6), ("mssa", 4e6)]
    ns, values = series[("mhsa", 1e6)]
    assert ns == [5.3e5, 1.0e6]  # in increasing N, whatever the order of the runs
    by_n = {g.params: g for g in gaps if g.family == "mhsa"}
    assert values == [pytest.approx(100 * by_n[n].gap, rel=1e-12) for n in ns]
    assert series[("mssa", 4e6)][1] == [pytest.approx(100 * (1.804 / 1.64 - 1), rel=1e-12)]
    path = draw_matched(gaps, "gpt2", tmp_path / "matched.png")
    assert path.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n" and path.stat().st_size > 10_000
