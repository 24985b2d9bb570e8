"""How a config is layered, for every command that takes one:

    defaults / a named preset  <  --config FILE  <  command-line flags  <  --set section.field=value

A config is a mapping of sections (``model``, ``train``, ``data``, ...) to mappings of fields. Each layer replaces
the fields it names, section by section; an unknown section is a one-line :class:`ConfigError`. The sections'
own dataclasses then validate the merged result (:func:`aot.config.from_dict`).
"""

from __future__ import annotations

import contextlib
import copy
from collections.abc import Iterable
from typing import Any

from aot.config import load_config_file
from aot.errors import ConfigError


def merge(base: dict[str, Any], override: dict[str, Any], sections: Iterable[str]) -> dict[str, Any]:
    """``override``'s fields replace ``base``'s, section by section; an unknown section is a one-line error."""
    sections = tuple(sections)
    merged = copy.deepcopy(base)
    for section, values in override.items():
        if section not in sections:
            raise ConfigError(f"unknown section {section!r} in the config; use {', '.join(sections)}")
        if values is None:  # an empty section in YAML (`train:`)
            continue
        if not isinstance(values, dict):
            raise ConfigError(f"section {section!r} must be a mapping of field: value")
        merged.setdefault(section, {}).update(values)
    return merged


def parse_value(raw: str) -> Any:
    """One ``--set`` value as YAML (``3e-3`` → 0.003, ``true`` → True, ``[1, 2]`` → a list); text that is not
    YAML stays text, for the field's type check to name."""
    import yaml

    try:
        value = yaml.safe_load(raw)
    except yaml.YAMLError:
        return raw
    if isinstance(value, str):  # YAML 1.1 reads "3e-3" as a string; numbers without a dot are still numbers
        with contextlib.suppress(ValueError):
            value = float(value)
    return value


def split_assignment(item: str) -> tuple[str, str, str]:
    """``"train.lr=3e-4"`` → ``("train", "lr", "3e-4")``; a one-line error for anything else."""
    key, sep, raw = item.partition("=")
    section, dot, name = key.partition(".")
    if not sep or not dot or not name or not section:
        raise ConfigError(f"--set {item!r} must look like section.field=value (e.g. train.lr=3e-4)")
    return section, name, raw


def parse_set(assignments: Iterable[str]) -> dict[str, Any]:
    """``["train.lr=3e-4", "model.n_layer=8"]`` → ``{"train": {"lr": 3e-4}, "model": {"n_layer": 8}}``."""
    override: dict[str, Any] = {}
    for item in assignments:
        section, name, raw = split_assignment(item)
        override.setdefault(section, {})[name] = parse_value(raw)
    return override


def layer(
    base: dict[str, Any],
    sections: Iterable[str],
    config_file: str | None = None,
    flags: dict[str, Any] | None = None,
    sets: Iterable[str] | None = None,
) -> dict[str, Any]:
    """``base`` < ``config_file`` < ``flags`` < ``sets``, merged section by section (not yet validated)."""
    sections = tuple(sections)
    merged = copy.deepcopy(base)
    if config_file:
        merged = merge(merged, load_config_file(config_file), sections)
    merged = merge(merged, flags or {}, sections)
    return merge(merged, parse_set(sets or []), sections)
