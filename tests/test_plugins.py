"""Installed aot registers itself in timm and lm-evaluation-harness (issue 42), neither of which discovers plugins
(timm 1.0.31: no entry points; lm-eval 0.4.13: none read): the distribution's ``aot-plugins.pth`` (setup.py)
imports ``_aot_plugins`` at start-up, whose finder registers aot once ``timm`` / ``lm_eval.api.registry`` has
executed (src/_aot_plugins.py).

- In a fresh Python that never imports aot: ``timm.list_models("aot*")`` lists every aot model, and lm-eval's
  ``get_model("aot")`` is the harness model while ``get_model("hf")`` is still lm-eval's (aot and torch are not
  imported until ``aot`` is asked for); ``lm_eval --model aot`` from the shell: tests/eval/test_lm_eval_plugin.py.
- ``AOT_NO_PLUGINS=1`` turns it off; a registration that raises (a broken aot) is one ``RuntimeWarning`` line, and
  timm and lm-eval import as without aot.
- The finder on its own, on a peer package written here: the hook runs once, after the module executed, the
  module's loader stays the peer's own, a failing peer import is left as it was.
"""

from __future__ import annotations

import importlib
import importlib.util
import json
import os
import site
import subprocess
import sys
import warnings
from collections.abc import Iterator
from importlib.machinery import SourceFileLoader
from pathlib import Path
from types import ModuleType
from typing import Any

import pytest

import _aot_plugins
from _aot_plugins import PluginFinder

HAS_TIMM = importlib.util.find_spec("timm") is not None
HAS_LM_EVAL = importlib.util.find_spec("lm_eval") is not None
BROKEN_AOT = 'raise RuntimeError("simulated broken aot")\n'


def fresh(code: str, cwd: Path, **env: str) -> subprocess.CompletedProcess:
    """``code`` in a new Python of this environment (its site-packages' .pth files run), from ``cwd``."""
    environ = {k: v for k, v in os.environ.items() if k not in ("AOT_NO_PLUGINS", "PYTHONPATH")}
    environ.update({"OMP_NUM_THREADS": "1", "HF_HUB_OFFLINE": "1", **env})
    return subprocess.run(
        [sys.executable, "-c", code], cwd=cwd, env=environ, capture_output=True, text=True, timeout=300
    )


def aot_warnings(stderr: str) -> list[str]:
    return [line for line in stderr.splitlines() if "RuntimeWarning: aot:" in line]


def test_the_pth_file_is_installed() -> None:
    """What the hook needs: ``aot-plugins.pth`` in a site directory of this Python (a wheel or editable install of
    this checkout; an install from before it needs ``make install`` / ``pip install --no-deps -e .`` again)."""
    dirs = [*site.getsitepackages(), site.getusersitepackages()]
    found = [Path(d) / "aot-plugins.pth" for d in dirs if (Path(d) / "aot-plugins.pth").is_file()]
    assert found, f"aot-plugins.pth is in none of {dirs}: reinstall aot (make install, or pip install --no-deps -e .)"
    assert found[0].read_text() == "import _aot_plugins\n"


@pytest.mark.skipif(not HAS_TIMM, reason="timm is not installed (make install-timm)")
def test_timm_lists_the_aot_models_in_a_python_that_never_imported_aot(tmp_path: Path) -> None:
    code = "import json, sys, timm\nprint(json.dumps(timm.list_models('aot*')))\n"
    done = fresh(code, tmp_path)
    if done.returncode != 0 and fresh("import timm", tmp_path, AOT_NO_PLUGINS="1").returncode != 0:
        pytest.skip("timm does not import here, with or without aot (make install-timm)")
    assert done.returncode == 0, done.stderr[-3000:]
    assert not aot_warnings(done.stderr), done.stderr[-3000:]
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", RuntimeWarning)
        from aot.models.timm_models import timm_names
    assert sorted(json.loads(done.stdout)) == sorted(timm_names()) and len(timm_names()) >= 9


@pytest.mark.skipif(not HAS_LM_EVAL, reason="lm-eval is not installed (aot[eval])")
def test_lm_eval_resolves_aot_and_keeps_its_own_models(tmp_path: Path) -> None:
    code = (
        "import json, sys\n"
        "from lm_eval.api.registry import get_model, model_registry\n"
        "imported = sorted(m for m in ('aot', 'torch') if m in sys.modules)\n"
        "aot = get_model('aot')\n"
        "print(json.dumps([imported, f'{aot.__module__}:{aot.__name__}', get_model('hf').__name__]))\n"
    )
    done = fresh(code, tmp_path)
    assert done.returncode == 0, done.stderr[-3000:]
    imported, aot, hf = json.loads(done.stdout)
    assert imported == []  # registered as lm-eval's lazy placeholder: nothing of aot loads before it is asked for
    assert aot == "aot.eval.lm_eval_model:AotHarnessLM" and hf == "HFLM"


def test_aot_no_plugins_turns_it_off(tmp_path: Path) -> None:
    """Off: no finder, no aot model in timm (where timm imports at all) or lm-eval, aot never imported."""
    code = (
        "import json, sys\n"
        "finders = [type(f).__name__ for f in sys.meta_path]\n"
        "try:\n"
        "    import timm\n"
        "    timm_names = timm.list_models('aot*')\n"
        "except ImportError:  # timm absent, or not importable here\n"
        "    timm_names = []\n"
        "try:\n"
        "    from lm_eval.api.registry import model_registry\n"
        "    lm = 'aot' in model_registry\n"
        "except ImportError:\n"
        "    lm = False\n"
        "print(json.dumps([finders, timm_names, lm, 'aot' in sys.modules]))\n"
    )
    on = fresh("import sys; print([type(f).__name__ for f in sys.meta_path])", tmp_path)
    assert "PluginFinder" in on.stdout, on.stderr[-3000:]
    done = fresh(code, tmp_path, AOT_NO_PLUGINS="1")
    assert done.returncode == 0, done.stderr[-3000:]
    finders, timm_names, lm, aot = json.loads(done.stdout)
    assert "PluginFinder" not in finders and timm_names == [] and lm is False and aot is False


@pytest.mark.skipif(not (HAS_TIMM and HAS_LM_EVAL), reason="needs timm and lm-eval")
def test_a_broken_aot_is_one_warning_and_the_peers_still_import(tmp_path: Path) -> None:
    """An aot that raises on import (a package of that name first on ``PYTHONPATH``): ``import timm`` warns once and
    lists no aot model; lm-eval imports without a word, has its own models, and says why ``aot`` fails only when
    ``aot`` is asked for."""
    (tmp_path / "shadow" / "aot").mkdir(parents=True)
    (tmp_path / "shadow" / "aot" / "__init__.py").write_text(BROKEN_AOT)
    code = (
        "import json, sys\n"
        "import timm\n"
        "names = timm.list_models('aot*')\n"
        "from lm_eval.api.registry import get_model\n"
        "hf = get_model('hf').__name__\n"
        "try:\n"
        "    get_model('aot')\n"
        "    error = None\n"
        "except Exception as exc:\n"
        "    error = f'{type(exc).__name__}: {exc}'\n"
        "print(json.dumps([names, hf, error]))\n"
    )
    done = fresh(code, tmp_path, PYTHONPATH=str(tmp_path / "shadow"))
    if done.returncode != 0 and fresh("import timm", tmp_path, AOT_NO_PLUGINS="1").returncode != 0:
        pytest.skip("timm does not import here (make install-timm)")
    assert done.returncode == 0, done.stderr[-3000:]
    names, hf, error = json.loads(done.stdout)
    assert names == [] and hf == "HFLM" and error == "RuntimeError: simulated broken aot"
    (line,) = aot_warnings(done.stderr)
    assert line.endswith(
        "RuntimeWarning: aot: the aot_* timm models not registered: RuntimeError: simulated broken aot "
        "(set AOT_NO_PLUGINS=1 to skip this hook)"
    ), done.stderr[-3000:]


@pytest.mark.skipif(not HAS_LM_EVAL, reason="lm-eval is not installed (aot[eval])")
def test_a_failing_lm_eval_registration_is_one_warning(tmp_path: Path) -> None:
    """lm-eval's ``lm_eval.models`` made unimportable: the registry module still imports, ``aot`` is not in it, and
    the one warning says why."""
    code = (
        "import sys\n"
        "sys.modules['lm_eval.models'] = None\n"
        "from lm_eval.api.registry import model_registry\n"
        "print('aot' in model_registry)\n"
    )
    done = fresh(code, tmp_path)
    assert done.returncode == 0 and done.stdout.split() == ["False"], done.stderr[-3000:]
    (line,) = aot_warnings(done.stderr)
    assert "lm-eval's model 'aot' not registered: ModuleNotFoundError: import of lm_eval.models halted" in line


# -- the finder on its own ----------------------------------------------------------------------------------------


@pytest.fixture
def peer(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[Path]:
    """A package ``aot_test_peer`` on ``sys.path`` (removed from ``sys.modules`` afterwards)."""
    (tmp_path / "aot_test_peer").mkdir()
    (tmp_path / "aot_test_peer" / "__init__.py").write_text("VALUE = 1\n")
    monkeypatch.syspath_prepend(str(tmp_path))
    importlib.invalidate_caches()
    yield tmp_path / "aot_test_peer" / "__init__.py"
    for name in [m for m in sys.modules if m.startswith("aot_test_peer")]:
        del sys.modules[name]


def watch(monkeypatch: pytest.MonkeyPatch, hook: Any) -> PluginFinder:
    finder = PluginFinder({"aot_test_peer": ("the test hook", hook)})
    monkeypatch.setattr(sys, "meta_path", [finder, *sys.meta_path])
    return finder


def test_the_hook_runs_once_after_the_module_executed(peer: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    seen: list[tuple[str, int]] = []
    finder = watch(monkeypatch, lambda module: seen.append((module.__name__, module.VALUE)))
    module = importlib.import_module("aot_test_peer")
    assert seen == [("aot_test_peer", 1)]
    assert type(module.__loader__) is SourceFileLoader and "exec_module" not in vars(module.__loader__)
    assert finder not in sys.meta_path and finder.hooks == {}  # every hook ran: the finder left
    importlib.reload(module)
    assert seen == [("aot_test_peer", 1)]


def test_a_failing_peer_import_is_left_as_it_was(peer: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    seen: list[ModuleType] = []
    finder = watch(monkeypatch, seen.append)
    peer.write_text("raise ImportError('the peer itself')\n")
    with pytest.raises(ImportError, match="the peer itself"):
        importlib.import_module("aot_test_peer")
    assert seen == [] and "aot_test_peer" in finder.hooks  # still watched: the next import may succeed
    peer.write_text("VALUE = 2\n")
    importlib.invalidate_caches()
    sys.modules.pop("aot_test_peer", None)
    assert importlib.import_module("aot_test_peer").VALUE == 2 and len(seen) == 1


def test_a_failing_hook_is_one_runtime_warning(peer: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    def hook(module: ModuleType) -> None:
        raise ValueError("no\nluck")

    watch(monkeypatch, hook)
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        import aot_test_peer  # type: ignore[import-not-found]

    assert aot_test_peer.VALUE == 1
    (warning,) = caught
    assert warning.category is RuntimeWarning
    assert str(warning.message) == (
        "aot: the test hook not registered: ValueError: no luck (set AOT_NO_PLUGINS=1 to skip this hook)"
    )
    assert warning.filename == __file__  # pointed at the import, past importlib's frames


def test_install_honours_aot_no_plugins(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(sys, "meta_path", [f for f in sys.meta_path if not isinstance(f, PluginFinder)])
    monkeypatch.setenv("AOT_NO_PLUGINS", "1")
    assert _aot_plugins.install() is None and not any(isinstance(f, PluginFinder) for f in sys.meta_path)
    monkeypatch.setenv("AOT_NO_PLUGINS", "0")
    monkeypatch.setattr(_aot_plugins, "HOOKS", {"aot_test_never_imported": ("x", lambda module: None)})
    finder = _aot_plugins.install()
    assert finder is not None and sys.meta_path[0] is finder and _aot_plugins.install() is finder
