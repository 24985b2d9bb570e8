"""The checks every config dataclass of the package is held to, and the reading of config files.

Every config dataclass (model, train, data, eval, denoise, bench, analyze) is checked the same way by
:func:`check_fields`: each field's type from the dataclass's type hints (``int``, ``float`` — finite —, ``bool``,
``str``, ``X | None``, ``list[X]``, ``tuple[X, ...]``) and the allowed values the class lists in its ``LIMITS``
(a :class:`Limit` per field: a numeric range, a set of choices, non-empty); the error is one line naming
``section.field``, the value and what is allowed. :func:`from_dict` builds a dataclass from a mapping (an unknown
key is a one-line error with a suggestion); :func:`load_config_file` reads a YAML or JSON file.
"""

from __future__ import annotations

import dataclasses
import difflib
import json
import math
import types
import typing
from dataclasses import dataclass
from pathlib import Path
from typing import Any, TypeVar, Union

from aot.errors import ConfigError

T = TypeVar("T")

#: seeds are 64-bit signed integers that are not negative (what torch.manual_seed and numpy both take)
SEED_MAX = 2**63


@dataclass(frozen=True)
class Limit:
    """The allowed values of one config field (each element's, for a list): ``low``/``high`` bounds (open or
    closed), ``choices``, and ``nonempty`` for lists. Numbers must also be finite (no NaN or infinity)."""

    low: float | None = None
    high: float | None = None
    low_open: bool = False
    high_open: bool = False
    choices: tuple[Any, ...] | None = None
    nonempty: bool = False

    def allows(self, value: Any) -> bool:
        if self.choices is not None:
            return value in self.choices
        if isinstance(value, (int, float)) and not isinstance(value, bool):
            if self.low is not None and (value <= self.low if self.low_open else value < self.low):
                return False
            if self.high is not None and (value >= self.high if self.high_open else value > self.high):
                return False
        return True

    def describe(self) -> str:
        if self.choices is not None:
            return "one of " + ", ".join(str(c) for c in self.choices)
        lo = None if self.low is None else f"{'>' if self.low_open else '>='} {self.low:g}"
        hi = None if self.high is None else f"{'<' if self.high_open else '<='} {self.high:g}"
        if lo and hi and self.high == SEED_MAX:
            return "in [0, 2**63)"
        return " and ".join(part for part in (lo, hi) if part) or "any value"


def at_least(low: float, nonempty: bool = False) -> Limit:
    """``>= low`` (and, with ``nonempty``, a list with at least one element)."""
    return Limit(low=low, nonempty=nonempty)


def above(low: float) -> Limit:
    """``> low``."""
    return Limit(low=low, low_open=True)


def within(low: float, high: float, *, low_open: bool = False, high_open: bool = False) -> Limit:
    """Between ``low`` and ``high``, each end closed unless it is said to be open."""
    return Limit(low=low, high=high, low_open=low_open, high_open=high_open)


def one_of(*choices: Any, nonempty: bool = False) -> Limit:
    """One of ``choices`` (each element, for a list)."""
    return Limit(choices=tuple(choices), nonempty=nonempty)


SEED = Limit(low=0, high=SEED_MAX, high_open=True)


def check_choice(name: str, value: Any, options: tuple[str, ...]) -> None:
    """``value`` must be one of ``options``; one-line :class:`ConfigError` naming ``name`` otherwise."""
    if value not in options:
        raise ConfigError(f"{name}={value!r} is not one of {', '.join(options)}")


def from_dict(cls: type[T], data: dict[str, Any], section: str) -> T:
    """Build dataclass ``cls`` from ``data``, every field checked (:func:`check_fields`); an unknown key is a
    one-line error with a suggestion."""
    if not isinstance(data, dict):
        raise ConfigError(f"the {section} section must be a mapping of field: value, got {type(data).__name__}")
    names = [f.name for f in dataclasses.fields(cls)]  # type: ignore[arg-type]
    for key in data:
        if key not in names:
            close = difflib.get_close_matches(str(key), names, n=1)
            hint = f"; did you mean {close[0]!r}?" if close else f"; valid fields: {', '.join(names)}"
            raise ConfigError(f"unknown field {_short(key)} in the {section} config{hint}")
    hints = _type_hints(cls)
    typed = {key: _typed(f"{section}.{key}", value, hints[key]) for key, value in data.items()}
    try:
        obj = cls(**typed)
    except TypeError as exc:  # a missing required field
        raise ConfigError(f"{section} config: {exc}") from None
    check_fields(obj, section)
    return obj


def check_fields(obj: Any, section: str) -> None:
    """Check every field of dataclass instance ``obj``: its type (ints given for floats become floats, lists
    for tuples become tuples) and its ``LIMITS``. One-line :class:`ConfigError` naming ``section.field``."""
    hints = _type_hints(type(obj))
    limits: dict[str, Limit] = getattr(type(obj), "LIMITS", {})
    for f in dataclasses.fields(obj):
        where = f"{section}.{f.name}"
        value = _typed(where, getattr(obj, f.name), hints[f.name])
        object.__setattr__(obj, f.name, value)
        limit = limits.get(f.name)
        if limit is None or value is None:
            continue
        items = value if isinstance(value, (list, tuple)) else [value]
        if limit.nonempty and not items:
            raise ConfigError(f"{where} is empty; give at least one value")
        for i, item in enumerate(items):
            if not limit.allows(item):
                at = f"{where}[{i}]" if isinstance(value, (list, tuple)) else where
                raise ConfigError(f"{at}={_short(item)} must be {limit.describe()}")


def check_seed(value: Any, name: str = "--seed") -> int:
    """A seed must be an integer in [0, 2**63); one-line error otherwise."""
    if isinstance(value, bool) or not isinstance(value, int) or not SEED.allows(value):
        raise ConfigError(f"{name}={_short(value)} must be an integer in [0, 2**63)")
    return value


_HINTS: dict[type, dict[str, Any]] = {}


def _type_hints(cls: type) -> dict[str, Any]:
    if cls not in _HINTS:
        _HINTS[cls] = typing.get_type_hints(cls)
    return _HINTS[cls]


def _short(value: Any, width: int = 60) -> str:
    text = repr(value)
    return text if len(text) <= width else text[: width - 3] + "..."


def _typed(where: str, value: Any, hint: Any) -> Any:
    """``value`` checked against type ``hint`` (and converted: int -> float, list <-> tuple, integral float ->
    int); a one-line :class:`ConfigError` naming ``where`` when it does not fit."""
    origin, args = typing.get_origin(hint), typing.get_args(hint)
    if hint is Any:
        return value
    if origin in (Union, types.UnionType):
        if value is None and type(None) in args:
            return None
        options = [a for a in args if a is not type(None)]
        errors = []
        for option in options:
            try:
                return _typed(where, value, option)
            except ConfigError as exc:
                errors.append(exc)
        if len(options) == 1 and type(None) in args:
            raise ConfigError(f"{errors[0]} (or null)")
        raise errors[0]
    if origin in (list, tuple):
        if not isinstance(value, (list, tuple)):
            raise ConfigError(f"{where}={_short(value)} must be a list")
        inner = args[0] if args else Any
        items = [_typed(f"{where}[{i}]", item, inner) for i, item in enumerate(value)]
        return tuple(items) if origin is tuple else items
    if origin is dict or hint is dict:
        if not isinstance(value, dict):
            raise ConfigError(f"{where}={_short(value)} must be a mapping")
        return value
    if hint is bool:
        if not isinstance(value, bool):
            raise ConfigError(f"{where}={_short(value)} must be true or false")
        return value
    if hint is int:
        if isinstance(value, float) and math.isfinite(value) and value.is_integer():
            return int(value)
        if isinstance(value, bool) or not isinstance(value, int):
            raise ConfigError(f"{where}={_short(value)} must be an integer")
        return value
    if hint is float:
        if isinstance(value, bool) or not isinstance(value, (int, float)):
            raise ConfigError(f"{where}={_short(value)} must be a number")
        if not math.isfinite(value):
            raise ConfigError(f"{where}={_short(value)} must be a finite number")
        return float(value)
    if hint is str:
        if not isinstance(value, str):
            raise ConfigError(f"{where}={_short(value)} must be a string")
        return value
    return value


def load_config_file(path: str | Path) -> dict[str, Any]:
    """Read a YAML or JSON config file into a dict; a missing or malformed file is a one-line error."""
    path = Path(path)
    if not path.is_file():
        raise ConfigError(f"config file {str(path)!r} does not exist; see the examples in configs/")
    try:
        text = path.read_bytes().decode("utf-8")
    except UnicodeDecodeError:
        raise ConfigError(f"config file {str(path)!r} is not a text (UTF-8) YAML or JSON file") from None
    except OSError as exc:
        raise ConfigError(f"cannot read config file {str(path)!r}: {exc.strerror or exc}") from None
    try:
        if path.suffix == ".json":
            data = json.loads(text)
        else:
            import yaml

            data = yaml.safe_load(text)
    except Exception as exc:
        first = str(exc).strip().splitlines()[0] if str(exc).strip() else type(exc).__name__
        raise ConfigError(f"cannot parse config file {str(path)!r}: {first}") from None
    if data is None:
        data = {}
    if not isinstance(data, dict):
        raise ConfigError(f"config file {str(path)!r} must hold a mapping at the top level")
    return data


__all__ = [
    "SEED",
    "SEED_MAX",
    "Limit",
    "above",
    "at_least",
    "check_choice",
    "check_fields",
    "check_seed",
    "from_dict",
    "load_config_file",
    "one_of",
    "within",
]
