"""TransformerLens-style hook points: identity modules with stable names.

Every interesting activation passes through a :class:`HookPoint` (``blocks.{l}.hook_resid_pre``,
``blocks.{l}.attn.hook_subspace`` for the MSSA projections U_k^T z, ``blocks.{l}.attn.hook_pattern``, ...).
A hook point does nothing unless a hook is attached, so it costs nothing in training; without hooks it even
skips ``nn.Module``'s call machinery (:meth:`HookPoint.__call__`), which a decoding step, one token through
every block, would otherwise pay about 70 times.
:class:`HookedModule` adds ``run_with_cache`` and a ``hooks`` context manager on top.
"""

from __future__ import annotations

import contextlib
import re
from collections.abc import Callable, Iterator
from typing import Any

import torch
from torch import nn
from torch.nn.modules import module as _torch_module

HookFn = Callable[[torch.Tensor, "HookPoint"], torch.Tensor | None]
NamesFilter = Callable[[str], bool] | str | list[str] | None


class HookPoint(nn.Module):
    """Identity on the forward pass; a place to read or replace an activation by name."""

    def __init__(self) -> None:
        super().__init__()
        self.name: str = ""

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return x

    def __call__(self, x: torch.Tensor) -> torch.Tensor:  # type: ignore[override]
        """``x`` itself when no hook (of this module or global) is attached; ``nn.Module``'s call otherwise."""
        if (
            self._forward_hooks
            or self._forward_pre_hooks
            or self._backward_hooks
            or self._backward_pre_hooks
            or _torch_module._global_forward_hooks
            or _torch_module._global_forward_pre_hooks
            or _torch_module._global_backward_hooks
            or _torch_module._global_backward_pre_hooks
        ):
            return super().__call__(x)  # type: ignore[no-any-return]
        return x

    @property
    def active(self) -> bool:
        """True when a hook is attached (attention uses this to compute its explicit pattern)."""
        return bool(self._forward_hooks)


def _hook_name(module_path: str) -> str:
    # models keep their blocks under `backbone`; hook names follow TransformerLens (`blocks.0.attn...`)
    return re.sub(r"^backbone\.", "", module_path)


def _as_filter(names_filter: NamesFilter) -> Callable[[str], bool]:
    if names_filter is None:
        return lambda name: True
    if isinstance(names_filter, str):
        return lambda name: name == names_filter
    if isinstance(names_filter, (list, tuple)):
        wanted = set(names_filter)
        return lambda name: name in wanted
    return names_filter


class HookedModule(nn.Module):
    """Mixin for models: names every :class:`HookPoint` and runs with hooks or a cache."""

    def hook_points(self) -> dict[str, HookPoint]:
        points = {}
        for path, module in self.named_modules():
            if isinstance(module, HookPoint):
                name = _hook_name(path)
                module.name = name
                points[name] = module
        return points

    @contextlib.contextmanager
    def hooks(self, fwd_hooks: list[tuple[str | Callable[[str], bool], HookFn]]) -> Iterator[None]:
        """Attach ``(name or filter, fn)`` hooks for the duration of the block. ``fn(tensor, hook)`` may return
        a replacement tensor (activation patching) or ``None`` (read only)."""
        handles = []
        points = self.hook_points()
        try:
            for selector, fn in fwd_hooks:
                match = _as_filter(selector if not isinstance(selector, str) else [selector])
                names = [n for n in points if match(n)]
                if not names:
                    raise KeyError(f"no hook point matches {selector!r}; see model.hook_points()")
                for name in names:
                    point = points[name]
                    handles.append(point.register_forward_hook(lambda mod, inp, out, fn=fn: fn(out, mod)))
            yield
        finally:
            for handle in handles:
                handle.remove()

    def run_with_cache(
        self, *args: Any, names_filter: NamesFilter = None, detach: bool = True, **kwargs: Any
    ) -> tuple[Any, dict[str, torch.Tensor]]:
        """Run ``forward`` and return ``(output, cache)``; cache maps hook names to activations. Pass a
        ``names_filter`` (a name, a list, or a predicate) to cache only what you need."""
        cache: dict[str, torch.Tensor] = {}
        match = _as_filter(names_filter)

        def save(tensor: torch.Tensor, hook: HookPoint) -> None:
            cache[hook.name] = tensor.detach() if detach else tensor

        selected = [n for n in self.hook_points() if match(n)]
        with self.hooks([(n, save) for n in selected]):
            out = self(*args, **kwargs)
        return out, cache
