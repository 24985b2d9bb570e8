"""scripts/install_timm.py's second route: a torchvision wheel rewritten to its Python part (``VERSION+pyonly``) —
on a wheel made here with the layout of PyPI's (no network), and, where it is installed, on the real one."""

from __future__ import annotations

import base64
import hashlib
import importlib.metadata
import importlib.util
import re
import sys
import zipfile
from pathlib import Path
from types import ModuleType

import pytest

SCRIPT = Path(__file__).resolve().parents[2] / "scripts" / "install_timm.py"

REGISTRATIONS = """import torch
import torchvision.extension


@register_meta("roi_align")
def meta_roi_align(input, rois):
    return input


@torch.library.register_fake("torchvision::nms")
def meta_nms(dets, scores, iou_threshold):
    return dets


@torch.library.register_fake("torchvision::qnms")
def meta_qnms(dets, scores, iou_threshold):
    return dets
"""


@pytest.fixture(scope="module")
def script() -> ModuleType:
    spec = importlib.util.spec_from_file_location("install_timm", SCRIPT)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules["install_timm"] = module
    spec.loader.exec_module(module)
    return module


def make_wheel(folder: Path, torch_pin: str = "2.13.0") -> Path:
    """A wheel with the layout of PyPI's torchvision 0.28.0 (CUDA build): compiled files, their libraries, the
    unguarded registrations."""
    info = "torchvision-0.28.0.dist-info"
    files = {
        "torchvision/__init__.py": b"from . import extension\n",
        "torchvision/_C.so": b"\x7fELF compiled",
        "torchvision/image.so": b"\x7fELF compiled",
        "torchvision/_meta_registrations.py": REGISTRATIONS.encode(),
        "torchvision/version.py": b"__version__ = '0.28.0+cu130'\ngit_version = 'abc'\n",
        "torchvision.libs/libcudart.faf08d9a.so.13": b"\x7fELF cuda",
        f"{info}/METADATA": (
            "Metadata-Version: 2.1\nName: torchvision\nVersion: 0.28.0\n"
            f"Requires-Dist: numpy\nRequires-Dist: torch (=={torch_pin})\n"
        ).encode(),
        f"{info}/WHEEL": b"Wheel-Version: 1.0\nRoot-Is-Purelib: false\nTag: cp311-cp311-manylinux_2_28_x86_64\n",
        f"{info}/RECORD": b"",
    }
    wheel = folder / "torchvision-0.28.0-cp311-cp311-manylinux_2_28_x86_64.whl"
    with zipfile.ZipFile(wheel, "w") as archive:
        for name, data in files.items():
            archive.writestr(name, data)
    return wheel


def test_the_python_part_keeps_the_code_and_drops_what_cannot_load(script: ModuleType, tmp_path: Path) -> None:
    out = tmp_path / "out"
    out.mkdir()
    rewritten = script.python_only_wheel(make_wheel(tmp_path), "2.13.0+cpu", out)
    assert rewritten.name == "torchvision-0.28.0+pyonly-cp311-cp311-manylinux_2_28_x86_64.whl"
    with zipfile.ZipFile(rewritten) as archive:
        names = set(archive.namelist())
        files = {name: archive.read(name) for name in names}
    assert not [n for n in names if re.search(r"\.so(\.\d+)*$", n)] and "torchvision.libs" not in str(names)
    info = "torchvision-0.28.0+pyonly.dist-info"
    assert b"Version: 0.28.0+pyonly" in files[f"{info}/METADATA"]
    assert files["torchvision/version.py"].startswith(b"__version__ = '0.28.0+pyonly'")
    assert files["torchvision/__init__.py"] == b"from . import extension\n"  # the rest byte for byte
    registrations = files["torchvision/_meta_registrations.py"].decode()
    assert registrations.count("if torchvision.extension._has_ops() else (lambda fn: fn))") == 2
    assert '@register_meta("roi_align")' in registrations  # guarded by torchvision itself: unchanged
    compile(registrations, "_meta_registrations.py", "exec")
    record = files[f"{info}/RECORD"].decode().splitlines()
    assert record[-1] == f"{info}/RECORD,,"
    for line in record[:-1]:  # every file listed with its true hash and size
        name, digest, size = line.rsplit(",", 2)
        data = files[name]
        expected = base64.urlsafe_b64encode(hashlib.sha256(data).digest()).rstrip(b"=").decode()
        assert digest == f"sha256={expected}" and int(size) == len(data), name
    assert {line.split(",")[0] for line in record} == names


def test_a_wheel_for_another_torch_is_refused(script: ModuleType, tmp_path: Path) -> None:
    with pytest.raises(script.Refused, match=r"not the torchvision release made for torch 2.13.0\+cpu"):
        script.python_only_wheel(make_wheel(tmp_path, torch_pin="2.14.1"), "2.13.0+cpu", tmp_path)


def test_the_installed_python_part_raises_torchvisions_own_error_for_its_ops() -> None:
    try:
        version = importlib.metadata.version("torchvision")
    except importlib.metadata.PackageNotFoundError:
        pytest.skip("torchvision is not installed (make install-timm)")
    if not version.endswith("+pyonly"):
        pytest.skip(f"torchvision {version} is a full build, not the Python part")
    import torch
    import torchvision

    assert not torchvision.extension._has_ops()
    with pytest.raises(RuntimeError, match=r"Couldn.t load custom C\+\+ ops"):
        torchvision.ops.nms(torch.rand(3, 4), torch.rand(3), 0.5)
    package = Path(torchvision.__file__).parent
    assert not list(package.glob("*.so")) and not (package.parent / "torchvision.libs").exists()
    from torchvision.transforms import functional  # the Python parts timm uses work

    assert functional.hflip(torch.arange(6.0).view(1, 2, 3))[0, 0].tolist() == [2.0, 1.0, 0.0]
