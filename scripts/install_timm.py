"""Install timm (the ``aot[timm]`` extra) beside the installed torch, or refuse in one line with nothing installed.

timm imports torchvision, and a torchvision works only beside the torch build it was compiled for: a plain
``pip install timm`` beside torch 2.13.0+cpu either replaces that torch with PyPI's CUDA torch (several GB, without
a word) or, with torch held, installs PyPI's torchvision 0.28.0, a CUDA build that fails to import ("operator
torchvision::nms does not exist"). This script plans with pip (``--dry-run --report``), torch held at the
installed version and the torchvision made for it (aot.models.timm_models.torchvision_for: 0.(m + 15) for torch
2.m, from download.pytorch.org/whl/LABEL for a local build such as +cpu), refuses a plan that would replace torch
or bring another build of torchvision (its local label differs from torch's), installs the plan, and checks that
timm imports.

    python scripts/install_timm.py [TIMM_REQUIREMENT] [--index-url URL]     (`make install-timm`)
"""

from __future__ import annotations

import argparse
import importlib.metadata
import json
import subprocess
import sys
import warnings
from urllib.parse import urlparse

with warnings.catch_warnings():  # the module warns that timm is not registered: not installed yet
    warnings.simplefilter("ignore", RuntimeWarning)
    from aot.models.timm_models import torch_version, torchvision_for


def label(version: str) -> str:
    """The local label of a version: ``cpu`` for 2.13.0+cpu, ``""`` for 0.28.0."""
    return version.partition("+")[2]


def installed(name: str) -> str | None:
    try:
        return importlib.metadata.version(name)
    except importlib.metadata.PackageNotFoundError:
        return None


def refuse(message: str, after: str = "nothing was installed") -> int:
    print(f"aot: error: {message}; {after}", file=sys.stderr)
    return 2


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("timm", nargs="?", default="timm", help="the timm requirement (default: timm)")
    parser.add_argument(
        "--index-url", help="where the matching torchvision is (default: PyTorch's index for torch's build)"
    )
    args = parser.parse_args(argv)
    torch = torch_version()
    requirement, index = torchvision_for(torch)
    index = args.index_url or index
    pip = [sys.executable, "-m", "pip", "install", f"torch=={torch}", requirement, args.timm]
    pip += ["--extra-index-url", index] if index else []
    plan = subprocess.run(
        [*pip, "--dry-run", "--quiet", "--report", "-", "--retries", "1", "--timeout", "20"],
        capture_output=True,
        text=True,
    )
    if plan.returncode:
        last = (plan.stderr.strip().splitlines() or ["pip failed"])[-1]
        return refuse(f"pip cannot plan {requirement} and {args.timm} beside torch {torch}: {last}")
    versions = {
        item["metadata"]["name"].lower(): item["metadata"]["version"] for item in json.loads(plan.stdout)["install"]
    }
    if "torch" in versions:
        return refuse(f"installing timm would replace torch {torch} with {versions['torch']}")
    vision = versions.get("torchvision") or installed("torchvision")
    if vision is None or label(vision) != label(torch):
        where = f" on {index}" if index else ""
        unreachable = " (pip could not reach it)" if index and urlparse(index).path.rstrip("/") in plan.stderr else ""
        return refuse(
            f"no torchvision made for torch {torch} is reachable: pip would install torchvision {vision}, a build for "
            f"another torch that fails to import beside this one; the match is {requirement}{where}{unreachable}; "
            "give an index that has it (make install-timm TORCH_INDEX=URL) or a torch whose torchvision is on yours"
        )
    subprocess.run([*pip, "--quiet"], check=True)
    check = subprocess.run(
        [sys.executable, "-c", "import timm, torchvision; print(timm.__version__)"], capture_output=True, text=True
    )
    if check.returncode:
        last = (check.stderr.strip().splitlines() or ["?"])[-1]
        return refuse(f"timm was installed but does not import ({last})", "pip uninstall timm torchvision undoes it")
    print(f"timm {check.stdout.strip()} and torchvision {installed('torchvision')} beside torch {torch}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
