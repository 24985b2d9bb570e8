"""timm's own model tests over aot's timm models: ``tests/test_models.py`` of the installed timm's source
distribution (fetched once through pip, ``pip download timm==VERSION --no-binary :all: --no-deps``, into
``~/.cache/aot/timm-tests``), its test functions run here over every registered ``aot_*_tiny_*`` model.

timm parametrizes each test over ``list_models(...)`` with its own selection lists; aot's models join them where
timm puts its ViTs, three one-line edits of its source before it runs (:data:`CLASSIFICATION`):

- ``NON_STD_FILTERS`` gets ``'aot_*'``, as it has ``'vit_*'``: the features are tokens (B, 1 + N, d), not NCHW
  maps, so ``test_model_default_cfgs_non_std`` runs them, not the CNN contract of ``test_model_default_cfgs``,
  and ``features_only`` is tested through ``forward_intermediates``, not CNN stage hooks;
- ``FEAT_INTER_FILTERS`` gets ``'timm_models'`` (the module of aot's entrypoints), as it has
  ``'vision_transformer'``: ``forward_intermediates``, ``features_only`` (FeatureGetterNet) and
  ``prune_intermediate_layers`` are tested;
- ``EXCLUDE_JIT_FILTERS`` gets ``'aot_*'``, as it has ``'*naflex*'``: TorchScript cannot type the Python KV cache
  every aot block takes (``aot.nn.cache.LayerCache``), and torch 2.13 deprecates ``torch.jit.script`` for
  ``torch.export`` (test_timm.py exports the models instead).

Every (test, model) pair of a test that timm runs over the registry is here: run, or skipped with the one-line
reason of :data:`REASONS` when timm's lists leave the model out. Family-specific tests (``list_models
('efficientnet_[hx]_*')``, fixed model names) are not taken. The whole file skips in one line where timm does not
import or its source cannot be fetched.
"""

from __future__ import annotations

import fnmatch
import functools
import os
import subprocess
import sys
import tarfile
import tempfile
import types
import warnings
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

try:
    import timm
except Exception as exc:  # ImportError, or a torchvision built for another torch
    pytest.skip(f"timm does not import here ({type(exc).__name__}); make install-timm", allow_module_level=True)

from aot.models.timm_models import REGISTERED

#: the models taken: the tiny ones (28 x 28 Fashion-MNIST presets; the 224 x 224 ones cost minutes per test here)
MODELS = "aot_*_tiny_*"
TINY = sorted(name for name in REGISTERED if fnmatch.fnmatch(name, MODELS))
CACHE = Path(os.environ.get("AOT_TIMM_TESTS_DIR") or Path.home() / ".cache" / "aot" / "timm-tests")

#: where aot's models join timm's selection lists: (the list's first line in test_models.py, what it gets)
CLASSIFICATION = (
    ("NON_STD_FILTERS = [", "'aot_*', "),
    ("FEAT_INTER_FILTERS = [", "'timm_models', "),
    ("EXCLUDE_JIT_FILTERS = [", "'aot_*', "),
)

_JIT = (
    "TorchScript: every aot block takes a Python KV cache (aot.nn.cache.LayerCache) TorchScript cannot type, and "
    "torch.jit.script is deprecated for torch.export (EXCLUDE_JIT_FILTERS, as timm's *naflex*)"
)
_WEIGHTS = "pretrained weights: none are published for aot models (pretrained=True is refused)"
#: why a test leaves aot's models out (the timm list that does it, and the aot feature it is about)
REASONS = {
    "test_model_inference": _WEIGHTS,
    "test_model_load_pretrained": _WEIGHTS,
    "test_model_features_pretrained": _WEIGHTS,
    "test_model_forward_torchscript": _JIT,
    "test_model_forward_fx_torchscript": _JIT,
    "test_model_default_cfgs": (
        "NCHW feature maps: aot models give tokens (B, 1 + N, d) as timm's ViTs (NON_STD_FILTERS); "
        "test_model_default_cfgs_non_std runs them"
    ),
    "test_model_forward_features": (
        "features_only through CNN stage hooks: aot's is the ViTs' FeatureGetterNet over forward_intermediates "
        "(NON_STD_FILTERS); test_model_forward_intermediates_features runs it"
    ),
}


class Listed(list[str]):
    """What one ``list_models`` / ``list_pretrained`` call of timm's tests returned, restricted to :data:`MODELS`,
    with the call's arguments (to tell a registry-wide test from a family one)."""

    def __init__(self, names: list[str], args: tuple[Any, ...], kwargs: dict[str, Any], pretrained: bool) -> None:
        super().__init__(names)
        self.pattern = args[0] if args else kwargs.get("filter", "")
        self.pretrained = pretrained or bool(kwargs.get("pretrained"))

    @property
    def registry_wide(self) -> bool:
        """A test of every registered model (what the pattern does not narrow to a family)."""
        return not isinstance(self.pattern, str) or not self.pattern or self.pretrained


def _fetch(version: str) -> Path | str:
    """timm ``version``'s tests/test_models.py (cached), or why it cannot be had, in one line."""
    target = CACHE / version / "test_models.py"
    if target.is_file():
        return target
    with tempfile.TemporaryDirectory(prefix="aot-timm-sdist-") as scratch:
        pip = [sys.executable, "-m", "pip", "download", f"timm=={version}", "--no-binary", ":all:", "--no-deps"]
        quick = ["--quiet", "--retries", "1", "--timeout", "20"]
        got = subprocess.run([*pip, "-d", scratch, *quick], capture_output=True, text=True, timeout=300)
        archives = sorted(Path(scratch).glob("timm-*.tar.gz"))
        if got.returncode or not archives:
            lines = [line for line in got.stderr.splitlines() if line.strip() and "WARNING: Location" not in line]
            return f"pip cannot download timm {version}'s source ({(lines or ['no archive'])[-1].strip()})"
        with tarfile.open(archives[0]) as archive:
            member = archive.extractfile(f"timm-{version}/tests/test_models.py")
            if member is None:
                return f"timm {version}'s source has no tests/test_models.py"
            text = member.read()
    target.parent.mkdir(parents=True, exist_ok=True)
    scratch_file = target.with_suffix(f".{os.getpid()}.tmp")
    scratch_file.write_bytes(text)
    scratch_file.replace(target)
    return target


def classify(source: str) -> str:
    """timm's test source with aot's models in its selection lists (:data:`CLASSIFICATION`)."""
    for anchor, entry in CLASSIFICATION:
        if source.count(anchor) != 1:
            raise AssertionError(f"timm's test_models.py no longer has one {anchor!r}: update CLASSIFICATION")
        source = source.replace(anchor, anchor + entry)
    return source


def load(path: Path) -> types.ModuleType:
    """timm's test module, classified, its model lists restricted to :data:`MODELS`."""
    module = types.ModuleType("timm_test_models")
    module.__file__ = str(path)
    real_list_models, real_list_pretrained = timm.list_models, timm.list_pretrained

    def restricted(real: Callable[..., list[str]], pretrained: bool) -> Callable[..., Listed]:
        def listing(*args: Any, **kwargs: Any) -> Listed:
            names = [n for n in real(*args, **kwargs) if fnmatch.fnmatch(n, MODELS)]
            return Listed(names, args, kwargs, pretrained)

        return listing

    timm.list_models = restricted(real_list_models, False)  # type: ignore[assignment]
    timm.list_pretrained = restricted(real_list_pretrained, True)  # type: ignore[assignment]
    try:
        with warnings.catch_warnings():  # its CI markers (base, cfg, ...) and pytest-timeout's are not registered here
            warnings.simplefilter("ignore", pytest.PytestUnknownMarkWarning)
            exec(compile(classify(path.read_text()), str(path), "exec"), module.__dict__)
    finally:
        timm.list_models, timm.list_pretrained = real_list_models, real_list_pretrained  # type: ignore[assignment]
    return module


def model_marks(test: Callable[..., Any]) -> tuple[Listed | None, list[pytest.Mark]]:
    """The ``model_name`` listing of one of timm's tests, and its other parametrizations."""
    listed, others = None, []
    for mark in getattr(test, "pytestmark", []):
        if mark.name != "parametrize":
            continue  # timm's CI markers and pytest-timeout's: not registered here
        if mark.args[0] == "model_name" and isinstance(mark.args[1], Listed):
            listed = mark.args[1]
        else:
            others.append(mark)
    return listed, others


def adopt(name: str, test: Callable[..., Any], listed: Listed, others: list[pytest.Mark]) -> Callable[..., Any]:
    """``test`` over every tiny aot model: those timm's lists take run, the others skip with their reason."""

    @functools.wraps(test)
    def run(*args: Any, **kwargs: Any) -> Any:
        return test(*args, **kwargs)

    reason = REASONS.get(name, "left out by timm's selection lists (no reason recorded in REASONS)")
    params = [
        pytest.param(model, id=model, marks=() if model in listed else pytest.mark.skip(reason=reason))
        for model in TINY
    ]
    run.pytestmark = [*others, pytest.mark.parametrize("model_name", params)]  # type: ignore[attr-defined]
    return run


def adopted(module: types.ModuleType) -> dict[str, tuple[Callable[..., Any], Listed]]:
    """timm's registry-wide tests: name → (test, its listing)."""
    tests = {}
    for name, value in vars(module).items():
        if name.startswith("test_") and callable(value):
            listed, _ = model_marks(value)
            if listed is not None and listed.registry_wide:
                tests[name] = (value, listed)
    return tests


_SOURCE = _fetch(timm.__version__)
if isinstance(_SOURCE, str):
    pytest.skip(_SOURCE, allow_module_level=True)
TIMM_TESTS = load(_SOURCE)
cfg_device = TIMM_TESTS.cfg_device  # timm's fixture (the meta device for its config tests)
for _name, (_test, _listed) in adopted(TIMM_TESTS).items():
    globals()[_name] = adopt(_name, _test, _listed, model_marks(_test)[1])


def test_the_tiny_models_are_registered_and_taken() -> None:
    assert len(TINY) == 4 and all(name.startswith("aot_") for name in TINY)
    assert {"test_model_forward", "test_model_backward", "test_model_forward_fx"} <= set(adopted(TIMM_TESTS))


def test_every_model_a_test_leaves_out_has_a_reason() -> None:
    """A timm release whose lists leave aot's models out of a test this file does not know fails here, until
    REASONS says why."""
    missing = {name for name, (_, listed) in adopted(TIMM_TESTS).items() if set(TINY) - set(listed)} - set(REASONS)
    assert not missing, f"timm's tests that leave aot models out, without a reason in REASONS: {sorted(missing)}"


def test_classification_puts_aot_where_timm_puts_its_vits() -> None:
    assert "aot_*" in TIMM_TESTS.NON_STD_FILTERS and "vit_*" in TIMM_TESTS.NON_STD_FILTERS
    assert "timm_models" in TIMM_TESTS.FEAT_INTER_FILTERS and "vision_transformer" in TIMM_TESTS.FEAT_INTER_FILTERS
    assert "aot_*" in TIMM_TESTS.EXCLUDE_JIT_FILTERS
    with pytest.raises(AssertionError, match="no longer has one 'NON_STD_FILTERS"):
        classify("NON_STD = []")
