"""The checks every config dataclass of the package is held to, and the reading of config files.

Every config dataclass (model, train, data, eval, denoise, bench, analyze) is checked the same way by
:func:`check_fields`: each field's type from the dataclass's type hints (``int``, ``float`` — finite —, ``bool``,
``str``, ``X | None``, ``list[X]``, ``tuple[X, ...]``) and the allowed values the class lists in its ``LIMITS``
(a :class:`Limit` per field: a numeric range, a set of choices, non-empty); the error is one line naming
``section.field``, the value and what is allowed. :func:`from_dict` builds a dataclass from a mapping (an unknown
key is a one-line error with a suggestion); :func:`load_config_file` reads a YAML or JSON file.

Files a user names (config files, corpora, data sets) are read through :func:`read_text_file`: a path that is
missing, a directory, not a regular file (``/dev/null``, a FIFO, which could block a read) or, where text is
needed, empty, and bytes that are not UTF-8, are each one line that names the file and says what it is.
"""

from __future__ import annotations

import argparse
import dataclasses
import difflib
import json
import math
import stat
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

    def interval(self) -> str:
        """The range as ``--help`` states it: ``in [1, 1,000,000]``, ``in (0, 1]``, ``>= 0``, ``> 0``."""
        if self.choices is not None:
            return self.describe()
        if self.low is not None and self.high is not None:
            left, right = "(" if self.low_open else "[", ")" if self.high_open else "]"
            return f"in {left}{_number(self.low)}, {_number(self.high)}{right}"
        if self.low is not None:
            return f"{'>' if self.low_open else '>='} {_number(self.low)}"
        if self.high is not None:
            return f"{'<' if self.high_open else '<='} {_number(self.high)}"
        return "any value"


def _number(value: float) -> str:
    """``1000000`` → ``1,000,000``; ``0.5`` → ``0.5``; ``2**63`` → ``2**63``."""
    if value == SEED_MAX:
        return "2**63"
    if float(value).is_integer():
        return f"{int(value):,}"
    return f"{value:g}"


@dataclass(frozen=True)
class Number:
    """A number an option takes: an ``int`` or a finite ``float`` allowed by ``limit``, named ``flag`` in its
    errors (``--top-p=1.5 must be a number in (0, 1]``, one line, :class:`ConfigError`). A library states an
    option's range with one (:func:`integer`, :func:`number`) and checks values with :meth:`check` before any
    work; the command line parses with it (an argparse ``type``: :func:`aot.cli.options.add_number`, which also
    says the range in ``--help``). Parsing only converts the text: the range is the library's check, so a value
    out of range takes `aot`'s one error path (one line, exit status 2) and a Python caller gets the same error."""

    kind: type
    limit: Limit
    flag: str = "the value"

    def named(self, flag: str) -> Number:
        return dataclasses.replace(self, flag=flag)

    def describe(self) -> str:
        """``an integer in [1, 1,000,000]``, ``a number > 0``, ``a number`` (no range)."""
        noun = "an integer" if self.kind is int else "a number"
        interval = self.limit.interval()
        return noun if interval == "any value" else f"{noun} {interval}"

    def check(self, value: Any) -> Any:
        """``value`` if it is such a number, else a one-line :class:`ConfigError`."""
        shown = f"{value:g}" if isinstance(value, float) and math.isfinite(value) else _short(value)
        wrong_type = isinstance(value, bool) or not isinstance(value, int if self.kind is int else (int, float))
        if not wrong_type and isinstance(value, float) and not math.isfinite(value):
            raise ConfigError(f"{self.flag}={shown} must be {self.describe().replace('a number', 'a finite number')}")
        if wrong_type or not self.limit.allows(value):
            raise ConfigError(f"{self.flag}={shown} must be {self.describe()}")
        return value

    def __call__(self, text: str) -> Any:
        """argparse's ``type``: the text as an int or a float (the range is checked where it is used, by
        :meth:`check`); text that is no number at all is argparse's usage error."""
        try:
            return self.kind(text)
        except ValueError:
            raise argparse.ArgumentTypeError(f"{self.flag}={text!r} must be {self.describe()}") from None


def integer(low: int | None = None, high: int | None = None) -> Number:
    """Integers in [low, high] (``None``: no bound at that end)."""
    return Number(int, Limit(low=low, high=high))


def number(
    low: float | None = None, high: float | None = None, *, low_open: bool = False, high_open: bool = False
) -> Number:
    """Finite floats between ``low`` and ``high`` (closed ends unless said open; ``None``: no bound)."""
    return Number(float, Limit(low=low, high=high, low_open=low_open, high_open=high_open))


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


def path_kind(path: Path) -> str:
    """What ``path`` is, in words: ``a file``, ``a directory``, ``a character device``, ``a block device``,
    ``a FIFO``, ``a socket``, or ``missing`` (a broken link too)."""
    try:
        mode = path.stat().st_mode
    except FileNotFoundError:
        return "missing"
    except OSError:  # permission denied on a parent, a name too long, ...: reading it says why
        return "a file"
    for test, kind in (
        (stat.S_ISREG, "a file"),
        (stat.S_ISDIR, "a directory"),
        (stat.S_ISCHR, "a character device"),
        (stat.S_ISBLK, "a block device"),
        (stat.S_ISFIFO, "a FIFO"),
        (stat.S_ISSOCK, "a socket"),
    ):
        if test(mode):
            return kind
    return "not a regular file"


def check_file(path: str | Path, what: str, fix: str) -> Path:
    """``path`` must be a regular file: otherwise a one-line :class:`ConfigError` naming ``what`` (e.g. ``config
    file``), the path and what it is (missing, a directory, a character device such as /dev/null, a FIFO), then
    ``fix``."""
    path = Path(path)
    kind = path_kind(path)
    if kind == "missing":
        raise ConfigError(f"{what} {str(path)!r} does not exist; {fix}")
    if kind == "a directory":
        raise ConfigError(f"{what} {str(path)!r} is a directory, not a file; {fix}")
    if kind != "a file":
        raise ConfigError(f"{what} {str(path)!r} is {kind}, not a regular file; {fix}")
    return path


def read_text_file(path: str | Path, what: str, fix: str, allow_empty: bool = False, kind: str = "file") -> str:
    """The UTF-8 text of the regular file ``path`` (:func:`check_file`). An unreadable file, an empty one (unless
    ``allow_empty``) and one whose bytes are not UTF-8 are one-line errors (:class:`ConfigError`) naming the file (for
    bad bytes: the encoding expected, the first bad byte and its offset); ``kind`` names what the text should be
    (``YAML or JSON file``)."""
    path = check_file(path, what, fix)
    try:
        data = path.read_bytes()
    except OSError as exc:
        raise ConfigError(f"cannot read {what} {str(path)!r}: {exc.strerror or exc}") from None
    if not data and not allow_empty:
        raise ConfigError(f"{what} {str(path)!r} is empty; {fix}")
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise ConfigError(
            f"{what} {str(path)!r} is not a text (UTF-8) {kind}: byte 0x{data[exc.start]:02x} at offset "
            f"{exc.start}; convert it to UTF-8 (e.g. `iconv -f latin1 -t utf-8`)"
        ) from None


def load_config_file(path: str | Path) -> dict[str, Any]:
    """Read a YAML or JSON config file into a dict: a missing, non-file, non-UTF-8 or malformed file is a one-line
    error (an empty file is an empty config)."""
    path = Path(path)
    fix = "give a YAML or JSON file (see the examples in configs/)"
    text = read_text_file(path, "config file", fix, allow_empty=True, kind="YAML or JSON file")
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
    "Number",
    "above",
    "at_least",
    "check_choice",
    "check_fields",
    "check_file",
    "check_seed",
    "from_dict",
    "integer",
    "load_config_file",
    "number",
    "one_of",
    "path_kind",
    "read_text_file",
    "within",
]
