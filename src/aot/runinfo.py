"""Where and when a result was produced — date, machine, library versions — recorded with every result."""

from __future__ import annotations

import datetime
import os
import platform
import re
from typing import Any

import torch

from aot.errors import AotError


def cpu_model() -> str:
    """The processor's name (``platform.processor()`` is empty on most Linux machines)."""
    try:
        with open("/proc/cpuinfo") as f:
            for line in f:
                if line.startswith("model name"):
                    return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or platform.machine()


def machine_info() -> dict[str, Any]:
    info: dict[str, Any] = {
        "date": datetime.datetime.now(datetime.timezone.utc).strftime("%Y-%m-%d %H:%M UTC"),
        "platform": platform.platform(),
        "machine": platform.machine(),
        "processor": platform.processor() or cpu_model(),
        "python": platform.python_version(),
        "torch": torch.__version__,
        "cpu_count": os.cpu_count(),
        "torch_threads": torch.get_num_threads(),
    }
    if torch.cuda.is_available():
        info["gpu"] = torch.cuda.get_device_name(0)
    return info


def load_average() -> list[float]:
    """The 1-, 5- and 15-minute load averages, rounded: how busy the machine was around a timing."""
    return [round(x, 2) for x in os.getloadavg()]


def timing_record(load_before: list[float], note: str, **fields: Any) -> dict[str, Any]:
    """A benchmark's record: the machine, the torch threads asked for, the load before and after the timing and
    the caller's note (what else ran), then the caller's own fields."""
    return dict(
        machine=machine_info(),
        omp_num_threads=os.environ.get("OMP_NUM_THREADS"),
        load_average_before=load_before,
        load_average_after=load_average(),
        note=note,
        **fields,
    )


def timing_header(record: dict[str, Any], extra: str = "") -> str:
    """One line for a benchmark table: date · CPU · threads · torch [· extra] · load before → after."""
    m = record["machine"]
    parts = [m["date"], m["processor"], f"{m['cpu_count']} CPUs, {m['torch_threads']} thread", f"torch {m['torch']}"]
    parts += [extra] if extra else []
    parts.append(f"load average {record['load_average_before']} → {record['load_average_after']}")
    return " · ".join(parts)


def replace_marked_block(text: str, marker: str, content: str, source: object = "the file") -> str:
    """``text`` with what lies between ``<!-- marker -->`` and ``<!-- /marker -->`` replaced by ``content`` (the
    generated tables of the README and docs/: the benchmark scripts rewrite them from their records). ``source``
    names the file in the error when the markers are missing."""
    pattern = re.compile(rf"(<!-- {re.escape(marker)} -->\n).*?(<!-- /{re.escape(marker)} -->)", re.S)
    if not pattern.search(text):
        raise AotError(f"{source} has no <!-- {marker} --> block")
    return pattern.sub(lambda match: match.group(1) + content + "\n" + match.group(2), text)
