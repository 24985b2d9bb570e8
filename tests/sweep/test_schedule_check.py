"""The WSD-against-cosine check of a scaling study (aot.sweep.scaling.schedule_check) on hand-built rows."""

from __future__ import annotations

import math

import pytest

from aot.sweep.scaling.schedule_check import schedule_markdown, schedule_pairs, schedule_summary, verdict


def row(kind: str, seed: int, steps: int, val: float, se: float | None = 0.003, family: str = "gpt2", width: int = 64):
    return {"kind": kind, "family": family, "n_embd": width, "non_embedding_params": 300_000, "seed": seed,
            "steps": steps, "tokens": steps * 4096, "val_loss": val, "val_loss_se": se}  # fmt: skip


def test_each_cosine_run_meets_the_wsd_run_of_its_point_and_no_other():
    rows = [
        row("main", 0, 1000, 1.60),
        row("branch", 0, 500, 1.75),
        row("branch", 1, 500, 1.76),
        row("sweep", 0, 500, 1.50),  # an lr-sweep row at the same point is no WSD run of the study
        row("cosine", 0, 500, 1.74),
        row("cosine", 1, 500, 1.78),
        row("cosine", 0, 1000, 1.62),
        row("cosine", 1, 1000, 1.63),  # its WSD run (seed 1, 1000 steps) has not finished: left out
        row("cosine", 0, 500, 2.0, width=96),  # another width: no mate
    ]
    pairs = schedule_pairs(rows)
    assert [(p.steps, p.seed, p.wsd_kind) for p in pairs] == [(500, 0, "branch"), (500, 1, "branch"), (1000, 0, "main")]
    assert [p.difference for p in pairs] == pytest.approx([0.01, -0.02, -0.02])
    assert pairs[0].difference_se == pytest.approx(math.sqrt(2) * 0.003)


def test_seed_noise_is_the_larger_spread_of_the_two_schedules_and_sets_the_verdict():
    rows = [row("branch", 0, 500, 1.75), row("branch", 1, 500, 1.76), row("cosine", 0, 500, 1.74),
            row("cosine", 1, 500, 1.78)]  # fmt: skip
    summary = schedule_summary(schedule_pairs(rows), rows)
    assert summary["max_seed_noise"] == pytest.approx(0.04)  # cosine 1.74 / 1.78 against WSD 1.75 / 1.76
    assert summary["max_abs_difference"] == pytest.approx(0.02)
    assert "within the seed noise" in verdict(summary)
    worse = [*rows[:2], row("cosine", 0, 500, 1.65), row("cosine", 1, 500, 1.66)]
    far = schedule_summary(schedule_pairs(worse), worse)
    assert far["max_abs_difference"] == pytest.approx(0.10)
    assert "does NOT stand" in verdict(far)
    better = [*rows[:2], row("cosine", 0, 500, 1.85), row("cosine", 1, 500, 1.855)]
    assert "at least as good as cosine" in verdict(schedule_summary(schedule_pairs(better), better))


def test_the_seed_noise_comes_from_every_row_at_a_paired_point_not_only_the_pairs():
    """Seed 1 of the WSD run without its cosine twin still measures the noise at that point; a point without a
    cosine pair does not count."""
    rows = [row("branch", 0, 500, 1.75), row("main", 1, 500, 1.77), row("cosine", 0, 500, 1.76),
            row("main", 0, 1000, 1.6), row("main", 1, 1000, 1.9)]  # fmt: skip
    summary = schedule_summary(schedule_pairs(rows), rows)
    assert len(summary["pairs"]) == 1 and summary["pairs"][0]["seed_noise"] == pytest.approx(0.02)
    assert summary["max_seed_noise"] == pytest.approx(0.02)  # the 1000-step spread (0.3) has no cosine run
    assert "within the seed noise (0.0200)" in verdict(summary)


def test_without_two_seeds_or_without_pairs_the_check_says_what_is_missing():
    single = [row("main", 0, 1000, 1.6), row("cosine", 0, 1000, 1.61)]
    one_seed = schedule_summary(schedule_pairs(single), single)
    assert one_seed["max_seed_noise"] is None and "not measured" in verdict(one_seed)
    nothing = schedule_summary(schedule_pairs([row("main", 0, 1000, 1.6)]), [])
    assert nothing["pairs"] == [] and "has not been made" in schedule_markdown(nothing)


def test_a_row_without_a_standard_error_shows_none():
    no_se = [row("main", 0, 1000, 1.6, se=None), row("cosine", 0, 1000, 1.61)]
    summary = schedule_summary(schedule_pairs(no_se), no_se)
    assert summary["pairs"][0]["difference_se"] is None
    table = schedule_markdown(summary)
    assert "| gpt2 | 64 | 0.30 M | 1000 | 4.1 M | 0 | 1.6000 (main) | 1.6100 ± 0.0030 | -0.0100 | — |" in table
