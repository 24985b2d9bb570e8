"""timm registration: every image preset of :mod:`aot.models.presets` under a timm-style name, so that
``timm.create_model("aot_mssa_tiny_patch7_28", num_classes=...)`` builds it (the optional extra ``aot[timm]``).

Names are ``aot_{family}_{size}_patch{P}_{IMAGE}``: family ``mssa`` / ``mhsa`` / ``vit`` / ``crate`` from the
block's spec, size ``tiny`` (the CPU presets), ``small`` (``-s``) or ``base`` (``-b``). Importing this module registers
them when timm imports (timm needs torchvision); :func:`timm_names` lists them without timm. No pretrained
weights are published: ``pretrained=True`` is an error.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from aot.blockspec import block_spec
from aot.errors import AotError
from aot.models.base import AotModel
from aot.models.factory import build_model
from aot.models.presets import PRESETS

_SIZE = {"cpu": "tiny", "s": "small", "b": "base"}
# timm's keyword arguments → ModelConfig fields; the pretrained_cfg ones timm always passes are ignored
_KWARGS = {"num_classes": "num_classes", "in_chans": "in_chans", "img_size": "image_size", "drop_rate": "dropout"}
_IGNORED = ("pretrained_cfg", "pretrained_cfg_overlay", "cache_dir")


def _family(block: str) -> str:
    """The family of ``block`` in a timm name: its spec's ``family`` (``mssa``, ``mhsa``, ``vit``, ``crate``), or
    its name with ``_`` for ``-``."""
    spec = block_spec(block)
    return spec.family or spec.name.replace("-", "_")


def timm_names() -> dict[str, str]:
    """timm name → aot preset name, for every image preset."""
    names = {}
    for preset in PRESETS.values():
        fields = preset.fields
        if fields.get("task") != "image":
            continue
        size = _SIZE[preset.name.rsplit("-", 1)[1]]
        family = _family(fields["block"])
        names[f"aot_{family}_{size}_patch{fields['patch_size']}_{fields['image_size']}"] = preset.name
    return names


def create(preset: str, pretrained: bool = False, **kwargs: Any) -> AotModel:
    """Build ``preset`` with timm's keyword arguments (num_classes, in_chans, img_size, drop_rate)."""
    if pretrained:
        raise AotError(f"no pretrained weights are published for {preset!r}; use pretrained=False")
    overrides = {}
    for key, value in kwargs.items():
        if key in _IGNORED or value is None:
            continue
        if key not in _KWARGS:
            raise AotError(f"timm argument {key!r} is not supported by aot models; use {', '.join(_KWARGS)}")
        overrides[_KWARGS[key]] = value
    return build_model(PRESETS[preset].config(**overrides))


def _entrypoint(timm_name: str, preset: str) -> Callable[..., AotModel]:
    def entrypoint(pretrained: bool = False, **kwargs: Any) -> AotModel:
        return create(preset, pretrained, **kwargs)

    entrypoint.__name__ = entrypoint.__qualname__ = timm_name
    entrypoint.__doc__ = f"aot preset {preset!r}: {PRESETS[preset].note}"
    return entrypoint


def register() -> list[str]:
    """Register every image preset with ``timm.models.register_model``; returns the names (empty without timm)."""
    try:
        from timm.models import register_model
    except Exception:  # timm absent, or its torchvision does not import beside this torch
        return []
    names = []
    for timm_name, preset in timm_names().items():
        register_model(_entrypoint(timm_name, preset))
        names.append(timm_name)
    return names


REGISTERED = register()
