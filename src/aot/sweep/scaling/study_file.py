"""Reading a ``kind: scaling`` sweep file: one-line errors naming the file, the place and the known fields
(:class:`Fields`), and the plain values each section becomes (families, budgets, seed rules, the lr rule, the
cosine check and the token-shift runs) — what :class:`aot.sweep.scaling.plan.ScalingStudy` is built from."""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

from aot.errors import ConfigError

UNITS = ("steps", "tokens_per_param")


@dataclass(frozen=True)
class Fields:
    """One-line errors about a sweep file's mappings and values, each naming the file (``source``) and where."""

    source: str

    def error(self, where: str, message: str) -> ConfigError:
        return ConfigError(f"{self.source}: {where}: {message}")

    def mapping(self, data: Any, where: str, required: Sequence[str], optional: Sequence[str] = ()) -> dict[str, Any]:
        """``data`` as a mapping with every ``required`` field and no field outside ``required`` and
        ``optional``."""
        known = ", ".join([*required, *optional])
        if not isinstance(data, dict):
            raise self.error(where, f"must be a mapping of the fields {known}, not {data!r}")
        for name in data:
            if name not in required and name not in optional:
                raise self.error(where, f"unknown field {name!r}; known fields: {known}")
        for name in required:
            if name not in data:
                raise self.error(where, f"missing field {name!r}; known fields: {known}")
        return data

    def named(self, data: Any, where: str, what: str) -> dict[Any, Any]:
        """A mapping whose keys are names the file chooses (``what`` says what its entries are)."""
        if not isinstance(data, dict) or not data:
            raise self.error(where, f"must be a mapping of {what}, not {data!r}")
        return data

    def integer(self, value: Any, where: str, low: int | None = 0) -> int:
        if isinstance(value, bool) or not isinstance(value, int) or (low is not None and value < low):
            raise self.error(where, f"must be a whole number{'' if low is None else f' >= {low}'}, not {value!r}")
        return value

    def number(self, value: Any, where: str) -> float:
        """A positive number (YAML reads ``1e-3`` as text: it is converted)."""
        try:
            number = float(value)
        except (TypeError, ValueError):
            number = math.nan
        if isinstance(value, bool) or not math.isfinite(number) or number <= 0:
            raise self.error(where, f"must be a number > 0, not {value!r}")
        return number

    def text(self, value: Any, where: str) -> str:
        if not isinstance(value, str) or not value:
            raise self.error(where, f"must be a non-empty string, not {value!r}")
        return value

    def listed(self, value: Any, where: str, item: Callable[[Any, str], Any]) -> tuple[Any, ...]:
        """A non-empty list, each entry read by ``item``."""
        if not isinstance(value, list) or not value:
            raise self.error(where, f"must be a non-empty list, not {value!r}")
        return tuple(item(v, f"{where}[{i}]") for i, v in enumerate(value))

    def budgets(self, data: dict[str, Any], where: str, one: bool = False) -> Budgets:
        """The budget of a mapping that gives ``steps`` or ``tokens_per_param`` (exactly one): a list of them, or
        with ``one`` a single value."""
        units = [u for u in UNITS if u in data]
        if len(units) != 1:
            raise self.error(where, f"give one of {' or '.join(UNITS)}")
        unit, raw = units[0], data[units[0]]
        if one:
            return Budgets(unit, (self.number(raw, f"{where}.{unit}"),))
        return Budgets(unit, self.listed(raw, f"{where}.{unit}", self.number))


@dataclass(frozen=True)
class Budgets:
    """Training lengths in ``unit``: ``steps``, or ``tokens_per_param`` (tokens per non-embedding parameter, in
    steps of the recipe's batch, rounded)."""

    unit: str
    values: tuple[float, ...]


@dataclass(frozen=True)
class Family:
    """A family: ``label`` for tables, its ``model`` preset, its depth and its widths (one size each; none: the
    preset's own shape, one size), heads of ``head_dim`` (None: the study's)."""

    name: str
    label: str
    model: str
    n_layer: int | None = None
    widths: tuple[int, ...] = ()
    head_dim: int | None = None

    @property
    def sizes(self) -> range:
        return range(max(1, len(self.widths)))


@dataclass(frozen=True)
class SeedRule:
    """A seed, at every size (``size`` None) or at one (negative: counted from the largest), at every budget of
    the size (``budgets`` None) or at those given."""

    seed: int
    size: int | None = None
    budgets: Budgets | None = None


@dataclass(frozen=True)
class LrRule:
    """The lr: ``value`` for every run, or a sweep of ``first`` (extended along ``ladder``) at the two ``sizes``
    for ``budget``, joined by :func:`log_linear_lr`."""

    value: float | None = None
    first: tuple[float, ...] = ()
    ladder: tuple[float, ...] = ()
    sizes: tuple[int, ...] = ()
    budget: Budgets | None = None


@dataclass(frozen=True)
class CosineCheck:
    """Cosine runs from scratch of ``family`` at ``size``, each seed and budget: beside the WSD rows of the same
    size, budget and seed, they check that a cooldown branch is as good as a cosine run of its length."""

    family: str
    size: int
    seeds: tuple[int, ...]
    budgets: Budgets


@dataclass(frozen=True)
class ShiftRun:
    """One run of issue 29's remedy: the remedy family with ``model.token_shift=shift`` at ``size`` and ``seed``."""

    shift: str
    size: int
    seed: int


@dataclass(frozen=True)
class Remedy:
    """Issue 29's remedy runs: ``family`` with a token shift, from-scratch WSD runs of ``budget`` at its lr rule."""

    family: str
    budget: Budgets
    runs: tuple[ShiftRun, ...]


def read_data(f: Fields, raw: Any) -> tuple[tuple[tuple[str, str], ...], int | None]:
    """The data fields the runs take (corpus or shards, tokenizer), and the train split's size in tokens."""
    data = f.mapping(raw, "data", (), ("corpus", "shards", "tokenizer", "train_tokens"))
    if ("corpus" in data) == ("shards" in data):
        raise f.error(
            "data", "give one of corpus (a registered name or a file) or shards (an `aot data prepare` folder)"
        )
    fields = tuple((k, f.text(data[k], f"data.{k}")) for k in ("corpus", "shards", "tokenizer") if k in data)
    tokens = None if "train_tokens" not in data else f.integer(data["train_tokens"], "data.train_tokens", 1)
    return fields, tokens


def read_sets(f: Fields, raw: Any, where: str) -> tuple[str, ...]:
    """``section.field=value`` assignments (as ``aot train --set`` takes them)."""
    if raw is None:
        return ()

    def item(value: Any, at: str) -> str:
        text = f.text(value, at)
        if "=" not in text or "." not in text.partition("=")[0]:
            raise f.error(at, f"{text!r} must look like section.field=value")
        return text

    return f.listed(raw, where, item)


def read_family(f: Fields, name: Any, raw: Any) -> Family:
    at = f"families.{name}"
    spec = f.mapping(raw, at, ("label", "model"), ("n_layer", "widths", "head_dim"))
    return Family(
        name=f.text(name, at),
        label=f.text(spec["label"], f"{at}.label"),
        model=f.text(spec["model"], f"{at}.model"),
        n_layer=None if "n_layer" not in spec else f.integer(spec["n_layer"], f"{at}.n_layer", 1),
        widths=f.listed(spec["widths"], f"{at}.widths", lambda v, w: f.integer(v, w, 1)) if "widths" in spec else (),
        head_dim=None if "head_dim" not in spec else f.integer(spec["head_dim"], f"{at}.head_dim", 1),
    )


def read_seed(f: Fields) -> Callable[[Any, str], SeedRule]:
    def read(raw: Any, where: str) -> SeedRule:
        spec = f.mapping(raw, where, ("seed",), ("size", *UNITS))
        budgets = f.budgets(spec, where) if any(u in spec for u in UNITS) else None
        size = None if "size" not in spec else f.integer(spec["size"], f"{where}.size", None)
        return SeedRule(f.integer(spec["seed"], f"{where}.seed"), size, budgets)

    return read


def read_lr(f: Fields, raw: Any) -> LrRule:
    spec = f.mapping(raw, "lr", (), ("value", "sweep", "ladder", "sizes", *UNITS))
    if "value" in spec:
        if len(spec) > 1:
            raise f.error("lr", "value is the lr of every run: give it alone, or a sweep (sweep, ladder, sizes, steps)")
        return LrRule(value=f.number(spec["value"], "lr.value"))
    f.mapping(spec, "lr", ("sweep", "ladder", "sizes"), ("value", *UNITS))
    sizes = f.listed(spec["sizes"], "lr.sizes", f.integer)
    if len(set(sizes)) != 2:
        raise f.error("lr.sizes", f"the rule joins two swept sizes; give two, not {spec['sizes']!r}")
    return LrRule(
        first=f.listed(spec["sweep"], "lr.sweep", f.number),
        ladder=f.listed(spec["ladder"], "lr.ladder", f.number),
        sizes=sizes,
        budget=f.budgets(spec, "lr", one=True),
    )


def read_cosine(f: Fields) -> Callable[[Any, str], CosineCheck]:
    def read(raw: Any, where: str) -> CosineCheck:
        spec = f.mapping(raw, where, ("family", "size", "seeds"), UNITS)
        return CosineCheck(
            f.text(spec["family"], f"{where}.family"),
            f.integer(spec["size"], f"{where}.size"),
            f.listed(spec["seeds"], f"{where}.seeds", f.integer),
            f.budgets(spec, where),
        )

    return read


def read_remedy(f: Fields, raw: Any) -> Remedy:
    spec = f.mapping(raw, "remedy", ("family", "runs"), UNITS)

    def run(item: Any, where: str) -> ShiftRun:
        entry = f.mapping(item, where, ("shift", "size", "seed"))
        return ShiftRun(
            f.text(entry["shift"], f"{where}.shift"),
            f.integer(entry["size"], f"{where}.size"),
            f.integer(entry["seed"], f"{where}.seed"),
        )

    return Remedy(
        f.text(spec["family"], "remedy.family"),
        f.budgets(spec, "remedy", one=True),
        f.listed(spec["runs"], "remedy.runs", run),
    )
