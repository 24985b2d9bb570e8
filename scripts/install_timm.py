"""Install timm (the ``aot[timm]`` extra) beside the installed torch, or refuse in one line with nothing installed.

timm imports torchvision, and a torchvision's compiled part loads only beside the torch build it was compiled for.
A plain ``pip install timm`` beside torch 2.13.0+cpu either replaces that torch with PyPI's CUDA torch (several GB,
without a word) or, with torch held, installs PyPI's torchvision 0.28.0, a CUDA build whose ``_C.so`` needs
``libtorch_cuda.so`` and whose import then fails ("operator torchvision::nms does not exist"). Two routes, in order:

1. **The build made for this torch** (aot.models.timm_models.torchvision_for: 0.(m + 15) for torch 2.m, from
   download.pytorch.org/whl/LABEL for a local build such as +cpu, or ``--index-url``): pip plans with torch held
   (``--dry-run --report``); a plan that would replace torch is refused; a plan whose torchvision has torch's local
   label is installed.
2. Otherwise (that index is not reachable, and ``--index-url`` was not given): **torchvision's Python part**. The
   PyPI wheel of the torchvision release made for this torch (its METADATA pins ``torch==`` this torch's version) is
   rewritten as ``VERSION+pyonly`` and installed: its compiled files (``_C.so``, ``image.so`` and the CUDA
   libraries they link) are left out, and its two fake-kernel registrations that torchvision does not guard
   (``register_fake("torchvision::nms")`` and ``"torchvision::qnms"`` in ``_meta_registrations.py``) get the guard
   its other registrations have (``torchvision.extension._has_ops()``). Everything else is the release's own
   Python code, byte for byte. What this torchvision lacks are its C++ operators (nms, roi_align, roi_pool,
   ps_roi_*, deform_conv2d) and its image decoders (torchvision.io's decode_jpeg / decode_png): each raises
   torchvision's own "Couldn't load custom C++ ops" error when called, as it does wherever its extension does not
   load; nothing computes differently. timm needs none of them: it imports torchvision.transforms (PIL and tensor
   code), torchvision.datasets, torchvision.ops.misc.FrozenBatchNorm2d (a Python module) and
   torchvision.models.feature_extraction (torch.fx), all pure Python.

Then timm is installed with torch and torchvision held, and checked: it imports, torch is the one that was there.

    python scripts/install_timm.py [TIMM_REQUIREMENT] [--index-url URL]     (`make install-timm`)
"""

from __future__ import annotations

import argparse
import base64
import hashlib
import importlib.metadata
import json
import re
import subprocess
import sys
import tempfile
import warnings
import zipfile
from pathlib import Path
from urllib.parse import urlparse

with warnings.catch_warnings():  # the module warns that timm is not registered: not installed yet
    warnings.simplefilter("ignore", RuntimeWarning)
    from aot.models.timm_models import torch_version, torchvision_for

#: the local label of a torchvision rewritten to its Python part (route 2)
PYONLY = "pyonly"
#: the fake-kernel registrations torchvision leaves unguarded (torchvision 0.20 to 0.28 at least)
_UNGUARDED = re.compile(r'^@torch\.library\.register_fake\(("torchvision::\w+")\)$', re.MULTILINE)
_GUARDED = r"@(torch.library.register_fake(\1) if torchvision.extension._has_ops() else (lambda fn: fn))"
PIP_QUIET = ["--quiet", "--retries", "1", "--timeout", "20"]


class Refused(Exception):
    """One line: why nothing (more) is installed."""


def label(version: str) -> str:
    """The local label of a version: ``cpu`` for 2.13.0+cpu, ``""`` for 0.28.0."""
    return version.partition("+")[2]


def installed(name: str) -> str | None:
    try:
        return importlib.metadata.version(name)
    except importlib.metadata.PackageNotFoundError:
        return None


def last_line(text: str, default: str = "?") -> str:
    lines = [line for line in text.strip().splitlines() if not line.startswith("WARNING: Location")]
    return (lines or [default])[-1]


def _record_hash(data: bytes) -> str:
    return "sha256=" + base64.urlsafe_b64encode(hashlib.sha256(data).digest()).rstrip(b"=").decode()


def python_only_wheel(wheel: Path, torch: str, out: Path) -> Path:
    """``wheel`` (a torchvision wheel for torch ``torch``'s release) rewritten as ``VERSION+pyonly``: no compiled
    files, the unguarded fake registrations guarded, METADATA / RECORD / version.py to match. Raises
    :class:`Refused` for a wheel that is not the release made for this torch or whose layout is not the known one."""
    with zipfile.ZipFile(wheel) as source:
        files = {name: source.read(name) for name in source.namelist() if not name.endswith("/")}
    info = next(name.split("/")[0] for name in files if name.split("/")[0].endswith(".dist-info"))
    metadata = files[f"{info}/METADATA"].decode()
    version = re.search(r"^Version: (\S+)$", metadata, re.MULTILINE)
    pins = re.findall(r"^Requires-Dist: torch ?\(?==([^\s);]+)", metadata, re.MULTILINE)
    public_torch = torch.partition("+")[0]
    if version is None or pins != [public_torch]:
        raise Refused(f"{wheel.name} is not the torchvision release made for torch {torch} (it pins torch {pins})")
    release = version.group(1).partition("+")[0]
    new_version = f"{release}+{PYONLY}"
    registrations = files["torchvision/_meta_registrations.py"].decode()
    patched, count = _UNGUARDED.subn(_GUARDED, registrations)
    if "import torchvision.extension" not in registrations or not 1 <= count <= 4:
        raise Refused(f"torchvision {release}'s _meta_registrations.py is not the layout this script knows")
    new_info = f"torchvision-{new_version}.dist-info"
    kept: dict[str, bytes] = {}
    for name, data in files.items():
        top = name.split("/")[0]
        if top.endswith(".libs") or re.search(r"\.so(\.\d+)*$", name) or name == f"{info}/RECORD":
            continue  # compiled: built for another torch build, cannot load here
        if name == "torchvision/_meta_registrations.py":
            data = patched.encode()
        elif name == "torchvision/version.py":
            data = re.sub(r"^__version__ = .*$", f"__version__ = {new_version!r}", data.decode(), flags=re.M).encode()
        elif name == f"{info}/METADATA":
            data = metadata.replace(f"Version: {version.group(1)}", f"Version: {new_version}", 1).encode()
        kept[name.replace(f"{info}/", f"{new_info}/", 1) if top == info else name] = data
    record = [f"{name},{_record_hash(data)},{len(data)}" for name, data in kept.items()]
    kept[f"{new_info}/RECORD"] = ("\n".join([*record, f"{new_info}/RECORD,,"]) + "\n").encode()
    tags = wheel.name.removesuffix(".whl").split("-")[-3:]
    target = out / ("-".join(["torchvision", new_version, *tags]) + ".whl")
    with zipfile.ZipFile(target, "w", zipfile.ZIP_DEFLATED) as result:
        for name, data in kept.items():
            result.writestr(name, data)
    return target


def pip(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "pip", *args], capture_output=True, text=True)


def plan(requirements: list[str], index: str | None) -> tuple[dict[str, str], str]:
    """What ``pip install REQUIREMENTS`` would install, name → version (nothing installed), and pip's warnings."""
    extra = ["--extra-index-url", index] if index else []
    result = pip("install", *requirements, *extra, "--dry-run", "--report", "-", *PIP_QUIET)
    if result.returncode:
        raise Refused(f"pip cannot plan {' and '.join(requirements[1:])}: {last_line(result.stderr, 'pip failed')}")
    report = json.loads(result.stdout)["install"]
    return {item["metadata"]["name"].lower(): item["metadata"]["version"] for item in report}, result.stderr


def install_python_only(torch: str, requirement: str) -> str:
    """Route 2: PyPI's wheel of ``requirement``, rewritten to its Python part, installed; returns its version."""
    with tempfile.TemporaryDirectory(prefix="aot-torchvision-") as scratch:
        folder = Path(scratch)
        got = pip("download", requirement, "--no-deps", "--only-binary", ":all:", "-d", str(folder), *PIP_QUIET)
        wheels = sorted(folder.glob("torchvision-*.whl"))
        if got.returncode or not wheels:
            raise Refused(f"pip cannot download {requirement}: {last_line(got.stderr, 'no wheel')}")
        (folder / "out").mkdir()
        wheel = python_only_wheel(wheels[0], torch, folder / "out")
        done = pip("install", f"torch=={torch}", str(wheel), *PIP_QUIET)
        if done.returncode:
            raise Refused(f"pip cannot install {wheel.name}: {last_line(done.stderr)}")
    return installed("torchvision") or "?"


def check(torch: str) -> str:
    """timm's version, once timm and torchvision import beside the torch that was there."""
    probe = subprocess.run(
        [sys.executable, "-c", "import timm, torchvision, torch; print(timm.__version__, torch.__version__)"],
        capture_output=True,
        text=True,
    )
    if probe.returncode:
        raise Refused(f"timm was installed but does not import ({last_line(probe.stderr)})")
    if installed("torch") != torch:
        raise Refused(f"torch {torch} was replaced by {installed('torch')}; pip install 'torch=={torch}' restores it")
    return probe.stdout.split()[0]


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("timm", nargs="?", default="timm", help="the timm requirement (default: timm)")
    parser.add_argument(
        "--index-url", help="where the matching torchvision is (default: PyTorch's index for torch's build)"
    )
    args = parser.parse_args(argv)
    torch = torch_version()
    requirement, default_index = torchvision_for(torch)
    index = args.index_url or default_index
    vision, before = installed("torchvision"), (installed("torchvision"), installed("timm"))
    release = requirement.partition("==")[2].rstrip("*")  # "0.28." for torch 2.13
    try:
        if vision is None or label(vision) not in (label(torch), PYONLY) or not vision.startswith(release):
            versions, warned = plan([f"torch=={torch}", requirement, args.timm], index)
            if "torch" in versions:
                raise Refused(f"installing timm would replace torch {torch} with {versions['torch']}")
            planned = versions.get("torchvision") or vision
            if planned is not None and label(planned) == label(torch):  # route 1: the build made for this torch
                extra = ["--extra-index-url", index] if index else []
                done = pip("install", f"torch=={torch}", f"torchvision=={planned}", *extra, *PIP_QUIET)
                if done.returncode:
                    raise Refused(f"pip cannot install torchvision {planned}: {last_line(done.stderr)}")
            elif args.index_url:
                unreachable = urlparse(index).path.rstrip("/") in warned
                raise Refused(
                    f"no torchvision made for torch {torch} on {index}"
                    + (" (pip could not reach it)" if unreachable else "")
                    + f": pip would install torchvision {planned}, a build for another torch"
                )
            else:  # route 2: the release's Python part
                install_python_only(torch, requirement)
        vision = installed("torchvision") or "?"
        done = pip("install", f"torch=={torch}", f"torchvision=={vision}", args.timm, *PIP_QUIET)
        if done.returncode:
            raise Refused(f"pip cannot install {args.timm}: {last_line(done.stderr)}")
        timm = check(torch)
    except Refused as exc:
        unchanged = (installed("torchvision"), installed("timm")) == before
        after = "nothing was installed" if unchanged else "pip uninstall timm torchvision undoes it"
        print(f"aot: error: {exc}; {after}", file=sys.stderr)
        return 2
    how = (
        "its Python part only: no C++ ops or image decoders (scripts/install_timm.py)"
        if label(vision) == PYONLY
        else "the build made for it"
    )
    print(f"timm {timm} and torchvision {vision} beside torch {torch} ({how})")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
