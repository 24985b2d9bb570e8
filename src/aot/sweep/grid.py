"""The grid of a sweep and the order its runs go in.

A grid comes from ``--set section.field=v1,v2,...`` assignments: every combination of their values is one config
(:func:`grid_configs`). The lr is not an axis like the others: with several lrs each config first trains at every
lr with the first seed (the sweep), then the other seeds train at the lr that won it only (:func:`plan_sweep`); a
seed whose sweep is not finished yet waits in :attr:`Plan.pending`.
"""

from __future__ import annotations

import hashlib
import itertools
import json
import re
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, field
from typing import Generic, TypeVar

from aot.errors import ConfigError

C = TypeVar("C")
L = TypeVar("L")
T = TypeVar("T")

LR_FIELD = "train.lr"
SEED_FIELD = "train.seed"


def split_values(text: str) -> list[str]:
    """``"1e-3,3e-3"`` → ``["1e-3", "3e-3"]``: commas inside brackets or quotes (a YAML list) do not split."""
    values, depth, quote, start = [], 0, "", 0
    for i, char in enumerate(text):
        if quote:
            quote = "" if char == quote else quote
        elif char in "\"'":
            quote = char
        elif char in "[{":
            depth += 1
        elif char in "]}":
            depth -= 1
        elif char == "," and depth == 0:
            values.append(text[start:i])
            start = i + 1
    return [*values, text[start:]]


def parse_axes(assignments: Sequence[str]) -> dict[str, list[str]]:
    """``["train.lr=1e-3,3e-3", "model.n_layer=2"]`` → ``{"train.lr": ["1e-3", "3e-3"], "model.n_layer": ["2"]}``;
    one-line errors for an assignment that is not ``section.field=values``, an empty value, or a field given twice."""
    axes: dict[str, list[str]] = {}
    for item in assignments:
        key, sep, raw = item.partition("=")
        if not sep or not re.fullmatch(r"[A-Za-z_]\w*\.[A-Za-z_]\w*", key):
            raise ConfigError(f"--set {item!r} must look like section.field=value[,value...] (e.g. train.lr=1e-3,3e-3)")
        values = [v.strip() for v in split_values(raw)]
        if not raw.strip() or any(not v for v in values):
            raise ConfigError(f"--set {item!r} has an empty value; give one or more values separated by commas")
        if key in axes:
            raise ConfigError(f"--set {key} is given twice; list all its values in one --set {key}=v1,v2")
        axes[key] = values
    return axes


def grid_configs(axes: dict[str, list[str]]) -> list[tuple[str, ...]]:
    """Every combination of the axes' values, each as ``section.field=value`` assignments in the axes' order."""
    names = list(axes)
    return [tuple(f"{n}={v}" for n, v in zip(names, combo)) for combo in itertools.product(*axes.values())]


def run_key(*parts: object) -> str:
    """A short stable id of a run: a hash of what defines it (what a store row and its folder are named by)."""
    return hashlib.sha256(json.dumps(parts).encode()).hexdigest()[:10]


def folder_name(text: str, key: str, limit: int = 80) -> str:
    """A run folder's name: ``text`` with characters a file name should not hold replaced, cut, then the key."""
    slug = re.sub(r"[^A-Za-z0-9._=+-]+", "_", text).strip("_")[:limit]
    return f"{slug}-{key}" if slug else key


@dataclass
class Plan(Generic[T]):
    """The runs to do, in order; ``pending`` are the seeds that wait for a sweep to pick their lr."""

    runs: list[T] = field(default_factory=list)
    pending: list[T] = field(default_factory=list)


def plan_sweep(
    points: Iterable[tuple[C, Sequence[L]]],
    seeds: Sequence[int],
    winner: Callable[[C], L | None],
    make: Callable[[C, L | None, int], T],
) -> Plan[T]:
    """The runs of ``points`` (each a config with the lrs it tries) over ``seeds``: every lr at the first seed,
    then each other seed at the config's only lr, or at ``winner(config)`` (the lr that won its sweep at the
    first seed; ``None`` while the sweep is unfinished: those runs are ``pending``, with lr ``None``). ``make``
    turns (config, lr, seed) into a run."""
    if not seeds:
        raise ConfigError("a sweep needs at least one seed")
    first, *others = seeds
    plan: Plan[T] = Plan()
    for config, lrs in points:
        plan.runs += [make(config, lr, first) for lr in lrs]
        chosen = lrs[0] if len(lrs) == 1 else winner(config)
        for seed in others:
            (plan.runs if chosen is not None or len(lrs) == 1 else plan.pending).append(make(config, chosen, seed))
    return plan
