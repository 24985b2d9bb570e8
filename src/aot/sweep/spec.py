"""How a results store is read, as the store itself declares it (its ``sweep`` entry): the task and training
preset its rows trained, the row fields that name a config, the field its summaries show and, optionally, the
reference model its gaps are read against. A script that only reads a store (a headline table, a report) needs
nothing else to summarise it the way the script that wrote it does."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from aot.errors import ConfigError, warn_renamed
from aot.sweep.metrics import Metric, task_metrics
from aot.sweep.selection import Axes, Summary, seed_summary


@dataclass(frozen=True)
class Reference:
    """How a contender's gap is read: against the run of the reference model (``field`` = ``value``) that shares
    the ``match`` fields; preferring one with the contender's overrides (``overrides``), then one with the
    contender's overrides less its ``own`` ones (override prefixes that belong to the contender, e.g. its shape),
    then one with none; among those the one sharing the ``prefer`` fields, then the best (see
    :mod:`aot.sweep.reference`)."""

    field: str
    value: str
    match: tuple[str, ...] = ()
    overrides: str = "extra"
    own: tuple[str, ...] = ()
    prefer: tuple[str, ...] = ()

    def recipe(self, overrides: list[str]) -> list[str]:
        """The overrides that are not the contender's own (they change the recipe, not the contender)."""
        return [o for o in overrides if not o.startswith(self.own)]


@dataclass(frozen=True)
class SweepSpec:
    """What a store's rows are and how they are read: the ``task`` and training ``preset`` they trained, the row
    fields that name a config (``group``: everything but lr and seed), the field a summary shows (``shown``; the
    task's metric when empty) and the gap ``reference`` (optional)."""

    task: str
    preset: str = ""
    group: tuple[str, ...] = ()
    shown: str = ""
    reference: Reference | None = None
    extra: dict[str, Any] = field(default_factory=dict)  # anything else the writer declares (model, config file...)

    @property
    def axes(self) -> Axes:
        return Axes(self.group)

    @property
    def metric(self) -> Metric:
        """The metric the task's sweeps rank by (:data:`aot.sweep.metrics.TASK_METRICS`)."""
        return task_metrics(self.task).metric

    def summaries(self, rows: Sequence[dict[str, Any]], sweep_seed: int = 0) -> list[Summary]:
        """Each config of ``rows`` at its best lr, over seeds (:func:`aot.sweep.selection.seed_summary`)."""
        return seed_summary(rows, self.axes, self.metric, self.shown, sweep_seed)

    def to_dict(self) -> dict[str, Any]:
        out: dict[str, Any] = {"task": self.task, "preset": self.preset, "group": list(self.group)}
        if self.shown:
            out["shown"] = self.shown
        if self.reference is not None:
            ref = self.reference
            out["reference"] = {
                "field": ref.field,
                "value": ref.value,
                "match": list(ref.match),
                "overrides": ref.overrides,
                "own": list(ref.own),
                "prefer": list(ref.prefer),
            }
        return {**out, **self.extra}

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> SweepSpec:
        known = {"task", "preset", "group", "shown", "reference"}
        ref = data.get("reference")
        reference = None
        if ref:
            reference = Reference(
                ref["field"],
                ref["value"],
                tuple(ref.get("match", ())),
                ref.get("overrides", "extra"),
                tuple(ref.get("own", ())),
                tuple(ref.get("prefer", ())),
            )
        return cls(
            task=data["task"],
            preset=data.get("preset", ""),
            group=tuple(data.get("group", ())),
            shown=data.get("shown", ""),
            reference=reference,
            extra={k: v for k, v in data.items() if k not in known},
        )


#: a field of a sweep file that is renamed (the old name works for one release, said once)
RENAMED_FIELDS = {"preset": "recipe"}


def renamed_fields(data: Mapping[str, Any], source: str) -> dict[str, Any]:
    """A sweep file's mapping ``data`` with each renamed field (:data:`RENAMED_FIELDS`) under its new name, said
    once; the old and the new name both is an error."""
    out = dict(data)
    for old, new in RENAMED_FIELDS.items():
        if old in out:
            if new in out:
                raise ConfigError(f"{source}: give {new}: only ({old}: is its old name)")
            warn_renamed(f"{old}: (a sweep file's field)", f"{new}:", "training recipes", kind="field")
            out[new] = out.pop(old)
    return out
