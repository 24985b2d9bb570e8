"""Where and when a result was produced — date, machine, library versions — recorded with every result."""

from __future__ import annotations

import datetime
import os
import platform
from typing import Any

import torch


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
