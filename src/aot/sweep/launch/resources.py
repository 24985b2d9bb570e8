"""What each trial of a sweep asks a cluster for: GPUs, CPUs, memory, a time limit, a partition and an account
(``aot sweep --gpus --cpus --mem --time --partition --account``, or a sweep file's ``launcher:`` section; a flag
overrides the file). One node per trial; with more than one GPU the trial runs under torchrun inside its job."""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass, fields, replace
from typing import Any

from aot.errors import ConfigError
from aot.validation import integer

GPUS = integer(0, 64)  # per trial, on its one node (more than one: torchrun inside the job)
CPUS = integer(1, 4096)

#: sbatch's --time formats: minutes, MM:SS, HH:MM:SS, D-HH, D-HH:MM, D-HH:MM:SS
_TIME = re.compile(r"^(?:(\d+)-)?(\d+)(?::(\d+))?(?::(\d+))?$")


def time_minutes(text: str) -> int:
    """``"90"`` → 90, ``"4:00:00"`` → 240, ``"1-12"`` → 2160 (sbatch's --time formats); at least 1 minute."""
    match = _TIME.match(str(text).strip())
    if not match:
        raise ConfigError(
            f"time limit {text!r} is not one of sbatch's formats: minutes, MM:SS, HH:MM:SS, D-HH, D-HH:MM, D-HH:MM:SS"
        )
    days, first, second, third = match.groups()
    if days is not None:  # D-HH[:MM[:SS]]
        minutes = int(days) * 1440 + int(first) * 60 + int(second or 0) + (1 if third and int(third) else 0)
    elif third is not None:  # HH:MM:SS
        minutes = int(first) * 60 + int(second) + (1 if int(third) else 0)
    elif second is not None:  # MM:SS
        minutes = int(first) + (1 if int(second) else 0)
    else:
        minutes = int(first)
    return max(1, minutes)


@dataclass(frozen=True)
class Resources:
    """One trial's share of the cluster (see the module); ``extra``: more sbatch options as (name, value) pairs,
    e.g. ``("qos", "high")``, ``("constraint", "a100")``."""

    gpus: int = 0
    cpus: int = 1
    mem: str | None = None
    time: str = "60"
    partition: str | None = None
    account: str | None = None
    extra: tuple[tuple[str, str], ...] = ()

    def __post_init__(self) -> None:
        GPUS.named("--gpus").check(self.gpus)
        CPUS.named("--cpus").check(self.cpus)
        if self.mem is not None and not re.fullmatch(r"\d+[KMGT]?", str(self.mem)):
            raise ConfigError(f"mem {self.mem!r} is not an amount sbatch reads; give e.g. 64G or 16000M")
        time_minutes(self.time)

    @property
    def minutes(self) -> int:
        return time_minutes(self.time)

    def with_overrides(self, **changes: Any) -> Resources:
        """These resources with the given fields replaced (``None`` values leave a field as it is)."""
        return replace(self, **{k: v for k, v in changes.items() if v is not None})

    @classmethod
    def from_mapping(cls, data: Mapping[str, Any], source: str) -> Resources:
        """The ``launcher:`` section of a sweep file; one line for a field it does not know."""
        known = {f.name for f in fields(cls)}
        unknown = sorted(set(data) - known)
        if unknown:
            raise ConfigError(
                f"{source}: launcher field {unknown[0]!r} is unknown; use {', '.join(sorted(known))} (extra: a mapping "
                "of more sbatch options)"
            )
        values = dict(data)
        extra = values.pop("extra", None) or {}
        if not isinstance(extra, Mapping):
            raise ConfigError(f"{source}: launcher.extra must be a mapping of sbatch options, e.g. {{qos: high}}")
        if "time" in values:
            values["time"] = str(values["time"])
        try:
            return cls(**values, extra=tuple((str(k), str(v)) for k, v in extra.items()))
        except TypeError as exc:
            raise ConfigError(f"{source}: launcher section: {exc}") from None

    def sbatch_options(self) -> dict[str, Any]:
        """submitit's SlurmExecutor parameters for one trial's job."""
        options: dict[str, Any] = {
            "time": self.minutes,
            "nodes": 1,
            "ntasks_per_node": 1,
            "cpus_per_task": self.cpus,
        }
        if self.gpus:
            options["gpus_per_node"] = self.gpus
        for name in ("mem", "partition", "account"):
            value = getattr(self, name)
            if value is not None:
                options[name] = value
        if self.extra:
            options["additional_parameters"] = dict(self.extra)
        return options
