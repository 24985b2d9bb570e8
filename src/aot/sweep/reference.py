"""Gaps to a reference model: which summary of the reference a contender is read against (:class:`Reference`).

A contender is compared with the reference trained on the same footing (the ``match`` fields: tokenizer,
position scheme, budget...) and, where that run exists, with the same overrides; an override that belongs to
the contender itself (its shape) is left to it, so the reference keeps its own shape but shares the recipe.
"""

from __future__ import annotations

from collections.abc import Sequence

from aot.sweep.selection import Summary
from aot.sweep.spec import Reference


def matched_reference(candidates: Sequence[Summary], contender: Summary, ref: Reference) -> Summary | None:
    """Among ``candidates`` (reference summaries already matched on footing): one with the contender's overrides,
    else one with its recipe overrides (:meth:`Reference.recipe`), else one with none; sharing the ``prefer``
    fields first; the best mean of those (the reference at its best lr). None without a candidate."""
    overrides = list(contender.get(ref.overrides) or [])
    recipe = ref.recipe(overrides)
    pools = (
        [c for c in candidates if list(c.get(ref.overrides) or []) == overrides],
        [c for c in candidates if list(c.get(ref.overrides) or []) == recipe],
        [c for c in candidates if not c.get(ref.overrides)],
    )
    for pool in pools:
        if pool:
            preferred = [c for c in pool if all(c.get(f) == contender.get(f) for f in ref.prefer)] or pool
            return min(preferred, key=lambda c: c.mean)
    return None


def reference_summary(summaries: Sequence[Summary], contender: Summary, ref: Reference) -> Summary | None:
    """The reference summary ``contender`` is measured against: among ``summaries``, the reference model's that
    share the ``match`` fields, then :func:`matched_reference`."""
    peers = [
        s for s in summaries if s.get(ref.field) == ref.value and all(s.get(f) == contender.get(f) for f in ref.match)
    ]
    return matched_reference(peers, contender, ref)


def gap(value: float, reference: float | None) -> float | None:
    """``value`` relative to ``reference`` ((v - r) / r), or None without a reference."""
    return None if not reference else (value - reference) / reference
