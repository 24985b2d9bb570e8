"""The runs a scaling fit reads: a JSON file with a ``runs`` list, one object per finished training run.

    {"runs": [{"family": "transformer", "non_embedding_params": 301824, "tokens": 2000000,
               "train_flops": 4.1e12, "val_loss": 2.31, "val_loss_se": 0.002, "seed": 0}, ...]}

Fields of a run: the family (``family``, or the field ``--family`` names: an ``aot sweep lm`` store has ``block``),
``non_embedding_params`` (N), ``tokens`` (D, training tokens), the loss (``val_loss``, or the field ``--loss``
names), and optionally the training FLOPs (``train_flops`` or ``training_flops``, else ``train_flops_per_token``
× tokens; without any, 6 N D is used and said), ``LOSS_se`` (its standard error) and ``seed``. ``where`` keeps
the runs whose fields have one of the given values (``kind`` in ``main``, ``branch``: the runs of a study, not its
lr sweep). An ``aot sweep`` results store (``aot sweep lm ...
--out DIR`` writes DIR/results.json) is such a file; when it declares its sweep (its ``sweep`` entry), only each
config's runs at its best lr are read (:meth:`aot.sweep.spec.SweepSpec.summaries`), since the others are the lr
sweep's losers; a scaling study's store (its sweep's ``kind`` is ``scaling``: :mod:`aot.sweep.scaling.plan`) is
read whole, since its lrs come from a rule and its lr sweep is rows of kind ``sweep`` that ``where`` leaves out.
Every problem is one line naming the file, the run and the field.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from aot.errors import AotError
from aot.run_folder import read_json_object
from aot.sweep.store import store_spec

FIX = 'give a JSON file of finished runs: {"runs": [{"family", "non_embedding_params", "tokens", "val_loss", ...}]}'
PARAMS_FIELD = "non_embedding_params"
TOKENS_FIELD = "tokens"
FLOPS_FIELDS = ("train_flops", "training_flops")
FLOPS_PER_TOKEN_FIELD = "train_flops_per_token"
#: the ``kind`` a scaling study's store declares in its ``sweep`` entry (aot.sweep.scaling.plan.ScalingStudy.spec)
STUDY_KIND = "scaling"


@dataclass(frozen=True)
class ScalingRun:
    """One finished run: its family, N non-embedding parameters, D training tokens, the loss, the training FLOPs
    (None: not recorded), the loss's standard error and the seed (None: not recorded)."""

    family: str
    params: float
    tokens: float
    loss: float
    flops: float | None = None
    loss_se: float | None = None
    seed: int | None = None


def by_family(runs: Sequence[ScalingRun]) -> dict[str, list[ScalingRun]]:
    """The runs grouped by family, the families in the order they first appear."""
    families: dict[str, list[ScalingRun]] = {}
    for run in runs:
        families.setdefault(run.family, []).append(run)
    return families


def read_scaling_runs(
    path: str | Path,
    family: str | None = None,
    loss: str = "val_loss",
    where: Mapping[str, Sequence[str]] | None = None,
) -> list[ScalingRun]:
    """The runs of the file at ``path`` (see the module); ``family``: the field that names a run's family (None:
    ``family``, else ``block``); ``where``: field → the values a kept run has there (compared as text)."""
    path = Path(path)
    doc = read_json_object(path, FIX)
    rows = doc.get("runs")
    if not isinstance(rows, list) or not rows:
        raise AotError(f"{str(path)!r} has no 'runs' list of runs; {FIX}")
    for i, row in enumerate(rows):
        if not isinstance(row, dict):
            raise AotError(f"{str(path)!r}: run {i} is not an object of fields; {FIX}")
    for field, values in (where or {}).items():
        rows = [row for row in rows if str(row.get(field)) in values]
        if not rows:
            raise AotError(f"{str(path)!r} has no run with {field} in {', '.join(values)} yet: nothing to fit")
    if "sweep" in doc and not is_study_store(doc):
        rows = best_lr_rows(path, doc, rows)
    family = family or ("family" if "family" in rows[0] else "block")
    runs = [_run(path, i, row, family, loss) for i, row in enumerate(rows)]
    _check_unique(path, runs)
    return runs


def is_study_store(doc: dict[str, Any]) -> bool:
    """Whether ``doc`` is a scaling study's store (read whole: see the module)."""
    sweep = doc.get("sweep")
    return isinstance(sweep, dict) and sweep.get("kind") == STUDY_KIND


def best_lr_rows(path: Path, doc: dict[str, Any], rows: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """The rows of a store that declares its sweep: each config's rows at its best lr."""
    try:
        spec = store_spec(doc)
        return [row for summary in spec.summaries(rows) for row in summary.rows]
    except (AotError, KeyError, TypeError, ValueError) as exc:
        raise AotError(
            f"{str(path)!r} declares a sweep whose rows cannot be summarised ({exc}); fix the rows or drop its "
            "'sweep' entry (every run is then read)"
        ) from None


def _run(path: Path, i: int, row: dict[str, Any], family_field: str, loss_field: str) -> ScalingRun:
    where = f"{str(path)!r}: run {i}"
    name = row.get(family_field)
    if not isinstance(name, str) or not name:
        raise AotError(
            f"{where} has no {family_field!r} (its family, a string); add it or name the field with --family"
        )
    n = _positive(where, row, PARAMS_FIELD)
    d = _positive(where, row, TOKENS_FIELD)
    flops = next((_positive(where, row, f) for f in FLOPS_FIELDS if row.get(f) is not None), None)
    if flops is None and row.get(FLOPS_PER_TOKEN_FIELD) is not None:
        flops = _positive(where, row, FLOPS_PER_TOKEN_FIELD) * d
    se = _positive(where, row, f"{loss_field}_se", required=False, zero=True)
    seed = row.get("seed")
    if seed is not None and (isinstance(seed, bool) or not isinstance(seed, int)):
        raise AotError(f"{where} has seed = {seed!r}; a seed is an integer (or leave it out)")
    return ScalingRun(name, n, d, _positive(where, row, loss_field), flops, se, seed)


def _positive(where: str, row: dict[str, Any], field: str, required: bool = True, zero: bool = False) -> Any:
    value = row.get(field)
    if value is None and not required:
        return None
    ok = isinstance(value, (int, float)) and not isinstance(value, bool) and math.isfinite(value)
    if not ok or not isinstance(value, (int, float)) or value < 0 or (value == 0 and not zero):
        shown = "missing" if value is None else f"{value!r}"
        bound = "a finite number >= 0" if zero else "a finite number > 0"
        raise AotError(f"{where} has {field} {shown}; it must be {bound}")
    return float(value)


def _check_unique(path: Path, runs: list[ScalingRun]) -> None:
    """No two runs of one family at the same (N, D, seed): two lrs of a sweep, or a run recorded twice."""
    seen: dict[tuple[str, float, float, int | None], int] = {}
    for i, run in enumerate(runs):
        key = (run.family, run.params, run.tokens, run.seed)
        if key in seen:
            raise AotError(
                f"{str(path)!r}: runs {seen[key]} and {i} are both {run.family} at N = {run.params:g}, "
                f"D = {run.tokens:g}, seed {run.seed}; keep one run per config and seed: --where FIELD=VALUE keeps "
                "some (e.g. kind=main,branch), or a 'sweep' entry (as `aot sweep` writes) has each config's best lr "
                "picked"
            )
        seen[key] = i
