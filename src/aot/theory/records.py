"""Where and when a result was produced: date, machine and library versions (for results.json and tables)."""

from __future__ import annotations

import datetime
import os
import platform
from typing import Any

import torch


def machine_info() -> dict[str, Any]:
    return {
        "date": datetime.datetime.now(datetime.timezone.utc).strftime("%Y-%m-%d %H:%M UTC"),
        "platform": platform.platform(),
        "processor": platform.processor() or platform.machine(),
        "python": platform.python_version(),
        "torch": torch.__version__,
        "cpu_count": os.cpu_count(),
        "torch_threads": torch.get_num_threads(),
    }
