"""aot's registration in timm and lm-evaluation-harness, done when they are imported, without importing aot first.

Neither peer discovers plugins: timm 1.0.31 fills its model registry only from ``register_model`` calls in imported
modules, and lm-eval 0.4.13 reads no entry point (its registry holds its own ``MODEL_MAPPING`` and what imported
modules register). So the distribution installs ``aot-plugins.pth`` into site-packages, whose one line
(``import _aot_plugins``) runs this module at interpreter start-up: it imports nothing beyond ``os`` and ``sys``
(both loaded already) and puts one finder on ``sys.meta_path`` that watches two modules only:

- ``timm``: once the package has executed, ``import aot.models.timm_models`` registers the ``aot_*`` models, so
  ``timm.list_models("aot*")`` lists them in a Python that never imported aot;
- ``lm_eval.api.registry``: once it has executed, lm-eval's own models are registered (``import lm_eval.models``,
  as 0.4.13's ``get_model`` does for an empty registry) and then ``aot`` as a lazy placeholder,
  ``"aot.eval.lm_eval_model:AotHarnessLM"`` (what lm-eval's own ``MODEL_MAPPING`` entries are, and what its later
  plugin discovery makes of the ``lm_eval.models`` entry point): ``lm_eval --model aot`` resolves from the shell,
  and aot and torch are imported only when a command asks for ``aot``. An lm-eval that discovers plugins itself
  (``registry.load_plugins``) is left to do so.

The peer's import never fails because of this: any exception of the registration (or of the finder) becomes one
``RuntimeWarning`` and the import goes on. Each hook runs once, after the module executed successfully; the finder
leaves ``sys.meta_path`` when both have run. ``AOT_NO_PLUGINS=1`` (any value but empty or ``0``) at start-up turns
the whole thing off; ``import aot.models.timm_models`` / ``import aot.eval.lm_eval_model`` still register by hand.
"""

import os
import sys

TYPE_CHECKING = False  # neither typing nor __future__ is imported at start-up: the annotations are strings
if TYPE_CHECKING:
    from collections.abc import Callable, Sequence
    from types import ModuleType
    from typing import Any

DISABLE = "AOT_NO_PLUGINS"
#: lm-eval's name of the model, and where lm-eval loads it from on first use
LM_EVAL_MODEL = ("aot", "aot.eval.lm_eval_model:AotHarnessLM")


def _register_timm(_timm: "ModuleType") -> None:
    import importlib

    importlib.import_module("aot.models.timm_models")  # registers the aot_* models (a no-op while it is importing)


def _register_lm_eval(registry: "ModuleType") -> None:
    if hasattr(registry, "load_plugins"):  # lm-eval discovers the lm_eval.models entry point itself
        return
    import lm_eval.models  # noqa: F401  (lm-eval's own models first: 0.4.13 imports them only into an empty registry)

    name, target = LM_EVAL_MODEL
    if name not in registry.model_registry:
        registry.model_registry.register(name, target=target)


#: the watched modules, and what runs once each has executed
HOOKS: "dict[str, tuple[str, Callable[[ModuleType], None]]]" = {
    "timm": ("the aot_* timm models", _register_timm),
    "lm_eval.api.registry": ("lm-eval's model 'aot'", _register_lm_eval),
}


def _warn(what: str, exc: BaseException) -> None:
    import warnings

    message = f"aot: {what} not registered: {type(exc).__name__}: {exc} (set {DISABLE}=1 to skip this hook)"
    # stacklevel 3: past this function and the wrapped exec_module (importlib's frames are skipped), at the import
    warnings.warn(" ".join(message.split()), RuntimeWarning, stacklevel=3)


class PluginFinder:
    """A ``sys.meta_path`` finder that finds nothing itself: for a watched module it takes the spec the other
    finders give and wraps that loader's ``exec_module`` (on the loader instance, so the module's ``__loader__`` is
    still the peer's own), to run the hook after the module executed."""

    def __init__(self, hooks: "dict[str, tuple[str, Callable[[ModuleType], None]]]") -> None:
        self.hooks = dict(hooks)

    def find_spec(self, fullname: str, path: "Sequence[str] | None" = None, target: "Any" = None) -> "Any":
        if fullname not in self.hooks:
            return None
        try:
            return self._wrapped_spec(fullname, path, target)
        except Exception as exc:  # the peer imports as without aot
            _warn(self.hooks.pop(fullname)[0], exc)
            return None

    def _wrapped_spec(self, fullname: str, path: "Sequence[str] | None", target: "Any") -> "Any":
        spec = None
        for finder in sys.meta_path:
            find = getattr(finder, "find_spec", None)
            if finder is self or find is None:
                continue
            spec = find(fullname, path, target)
            if spec is not None:
                break
        loader: Any = getattr(spec, "loader", None)
        original = getattr(loader, "exec_module", None)
        if spec is None or original is None:
            return spec
        what, hook = self.hooks[fullname]

        def exec_module(module: "ModuleType") -> None:
            try:
                original(module)
            finally:
                if loader.__dict__.get("exec_module") is exec_module:
                    del loader.exec_module  # back to the loader's own method
            if getattr(module, "__name__", None) != fullname or self.hooks.pop(fullname, None) is None:
                return
            if not self.hooks:
                self.uninstall()
            try:
                hook(module)
            except Exception as exc:
                _warn(what, exc)

        loader.exec_module = exec_module
        return spec

    def uninstall(self) -> None:
        if self in sys.meta_path:
            sys.meta_path.remove(self)


def install() -> "PluginFinder | None":
    """Put the finder first on ``sys.meta_path`` (once), unless ``AOT_NO_PLUGINS`` is set; returns it."""
    if os.environ.get(DISABLE, "") not in ("", "0"):
        return None
    for finder in sys.meta_path:
        if isinstance(finder, PluginFinder):
            return finder
    watched = {name: hook for name, hook in HOOKS.items() if name not in sys.modules}
    if not watched:
        return None
    finder = PluginFinder(watched)
    sys.meta_path.insert(0, finder)
    return finder


install()
