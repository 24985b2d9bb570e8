"""How a config is layered, for every command that takes one (``aot train``, ``aot sweep``, ``aot denoise``,
``aot bench``, ``aot analyze``):

    defaults / a named preset  <  --config FILE  <  command-line flags  <  --set section.field=value

A config is a mapping of sections (``model``, ``train``, ``data``, ...; ``denoise``, ``sweep``, ``learn``;
``bench``; ``analyze``) to mappings of fields. Each layer replaces the fields it names, section by section
(:func:`layer`); an unknown section is a one-line :class:`ConfigError`. Each section's dataclass then validates the
merged result (:func:`build_sections`, through :func:`aot.validation.from_dict`); :func:`layered` does both.
"""

from __future__ import annotations

import contextlib
import copy
import typing
from collections.abc import Iterable, Mapping
from typing import Any

from aot.errors import ConfigError
from aot.validation import from_dict, load_config_file


def merge(
    base: dict[str, Any], override: dict[str, Any], sections: Iterable[str], source: str = "the config"
) -> dict[str, Any]:
    """``override``'s fields replace ``base``'s, section by section; an unknown section is a one-line error that
    names ``source`` (where ``override`` came from)."""
    sections = tuple(sections)
    merged = copy.deepcopy(base)
    for section, values in override.items():
        if section not in sections:
            fix = f"put the fields under `{sections[0]}:`" if len(sections) == 1 else f"use {', '.join(sections)}"
            raise ConfigError(f"unknown section {section!r} in {source}; {fix}")
        if values is None:  # an empty section in YAML (`train:`)
            continue
        if not isinstance(values, dict):
            raise ConfigError(f"section {section!r} in {source} must be a mapping of field: value")
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
        merged = merge(merged, load_config_file(config_file), sections, f"config file {str(config_file)!r}")
    merged = merge(merged, flags or {}, sections, "the command-line flags")
    return merge(merged, parse_set(sets or []), sections, "--set")


def build_sections(types: Mapping[str, Any], merged: Mapping[str, Any]) -> dict[str, Any]:
    """Each section of ``merged`` built by its type in ``types`` (section name → dataclass; a mapping type such as
    ``dict[str, Any]`` keeps the section as a plain dict), every field checked by
    :func:`aot.validation.from_dict`; a missing section gets its defaults. One-line :class:`ConfigError` naming
    the first bad section or ``section.field``."""
    merge({}, dict(merged), types, "the config")  # an unknown or non-mapping section: one line
    built: dict[str, Any] = {}
    for name, cls in types.items():
        raw = merged.get(name) or {}
        if cls is dict or typing.get_origin(cls) is dict:
            built[name] = dict(raw)
        else:
            built[name] = from_dict(cls, raw, name)
    return built


def layered(
    types: Mapping[str, Any],
    base: dict[str, Any] | None = None,
    config_file: str | None = None,
    flags: dict[str, Any] | None = None,
    sets: Iterable[str] | None = None,
) -> dict[str, Any]:
    """``base`` < ``config_file`` < ``flags`` < ``sets`` (:func:`layer`), each section then built by its type in
    ``types`` (:func:`build_sections`): section name → validated section object."""
    return build_sections(types, layer(base or {}, types, config_file, flags, sets))
