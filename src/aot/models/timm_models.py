"""timm registration: every image preset of :mod:`aot.models.presets` under a timm-style name, so that
``timm.create_model("aot_mssa_tiny_patch7_28", num_classes=...)`` builds it (the optional extra ``aot[timm]``).

Names are ``aot_{family}_{size}_patch{P}_{IMAGE}``: family ``mssa`` / ``mhsa`` / ``vit`` / ``crate`` from the
block's spec, size ``tiny`` (the CPU presets), ``small`` (``-s``) or ``base`` (``-b``). ``import
aot.models.timm_models`` registers them (timm has no plugin mechanism for model names); :func:`timm_names`
lists them without timm. The models keep timm's conventions, as its ``VisionTransformer`` has them:

- ``create_model(name, num_classes=0)`` or ``reset_classifier(0)``: no classifier, the model returns the pooled
  features, ``num_features`` (= ``n_embd``) wide;
- ``global_pool`` (at ``create_model`` or ``reset_classifier(n, global_pool)``): ``'token'`` the class token
  (the default, what aot trains), ``'avg'`` / ``'max'`` / ``'avgmax'`` over the patch tokens, ``''`` every token
  unpooled — timm's own ``timm.layers.global_pool_nlc``;
- ``forward_features`` (the tokens after the final norm, ``(B, 1 + N, d)``) and ``forward_head(x, pre_logits=True)``;
- ``pretrained_cfg`` / ``default_cfg`` (built by timm's ``build_model_with_cfg``) hold the model's own input size
  ``(C, H, W)`` and the mean / std of the data its preset is laid out for (:data:`DATA_STATS`), so
  ``timm.data.resolve_data_config({}, model=m)`` gives 1×28×28 and Fashion-MNIST's statistics, with no resize or
  crop (``crop_pct`` 1: aot reads images at the model's size).

Refused in one line (:class:`aot.errors.AotError`): ``pretrained=True`` (no weights are published),
``features_only`` (use ``forward_features`` or ``forward_intermediates``), and timm arguments other than
``num_classes``, ``in_chans``, ``img_size``, ``drop_rate``, ``global_pool``.

timm imports torchvision, which must be the build made for the installed torch: beside torch 2.13.0+cpu the
PyPI torchvision 0.28.0 (a CUDA build) fails with "operator torchvision::nms does not exist". When timm does not
import, :data:`REGISTERED` is empty and one ``RuntimeWarning`` names the cause and the fix
(:func:`torchvision_for` gives the matching torchvision and its index).
"""

from __future__ import annotations

import importlib.metadata
import traceback
import warnings
from collections.abc import Callable
from functools import partial
from typing import Any

import torch

from aot.blockspec import block_spec
from aot.config import ModelConfig
from aot.errors import AotError
from aot.models.budget import check_model_fits
from aot.models.presets import PRESETS
from aot.models.vision import ImageClassifier

_SIZE = {"cpu": "tiny", "s": "small", "b": "base"}
# timm's keyword arguments → ModelConfig fields (global_pool is the model's own)
_KWARGS = {"num_classes": "num_classes", "in_chans": "in_chans", "img_size": "image_size", "drop_rate": "dropout"}
#: global_pool values: what timm's VisionTransformer accepts for a model with a class token, less attention pooling
POOLS = ("token", "avg", "max", "avgmax", "")

#: the data each image preset is laid out for, by (in_chans, image_size): its name, per-channel mean and std on
#: the 0-1 scale. Fashion-MNIST: aot.data.images.channel_stats of its 60,000 training images (recorded by
#: benchmarks/timm/data_stats.py in data_stats.json); ImageNet: timm's IMAGENET_DEFAULT_MEAN / _STD.
DATA_STATS: dict[tuple[int, int], tuple[str, tuple[float, ...], tuple[float, ...]]] = {
    (1, 28): ("fashion-mnist", (0.2860,), (0.3530,)),
    (3, 224): ("imagenet", (0.485, 0.456, 0.406), (0.229, 0.224, 0.225)),
}


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


def pretrained_cfg(preset: str) -> dict[str, Any]:
    """timm's pretrained config of ``preset`` (the fields of ``timm.models.PretrainedCfg``): its input size,
    the statistics of its data, no weights."""
    fields = PRESETS[preset].fields
    chans, size = fields["in_chans"], fields["image_size"]
    data, mean, std = DATA_STATS[(chans, size)]
    return {
        "url": "",
        "num_classes": fields["num_classes"],
        "input_size": (chans, size, size),
        "fixed_input_size": True,  # learned positions of one grid
        "interpolation": "bilinear",
        "crop_pct": 1.0,
        "mean": mean,
        "std": std,
        "first_conv": "patch_embed",
        "classifier": "head",
        "description": f"aot preset {preset!r} ({PRESETS[preset].note}); mean / std of {data}; no weights",
    }


def _check_pool(global_pool: str) -> str:
    if global_pool not in POOLS:
        raise AotError(
            f"global_pool={global_pool!r} is not supported by aot models; use 'token' (the class token), "
            "'avg', 'max' or 'avgmax' (over the patch tokens) or '' (every token, unpooled)"
        )
    return global_pool


class TimmImageClassifier(ImageClassifier):
    """:class:`~aot.models.vision.ImageClassifier` with timm's classifier conventions: ``num_classes=0`` (no
    head), ``num_features``, ``global_pool``. What ``timm.create_model`` returns for an ``aot_*`` name."""

    num_prefix_tokens = 1  # the class token
    has_class_token = True
    pretrained_cfg: dict[str, Any]  # set by timm's build_model_with_cfg, then by _fit_input
    default_cfg: dict[str, Any]  # timm's older name of the same dict

    def __init__(self, cfg: ModelConfig, global_pool: str = "token", headless: bool = False) -> None:
        super().__init__(cfg)
        self.global_pool = _check_pool(global_pool)
        self.num_features = self.head_hidden_size = self.embed_dim = cfg.n_embd
        if headless:
            self.reset_classifier(0)

    def forward_head(self, features: torch.Tensor, pre_logits: bool = False) -> torch.Tensor:
        from timm.layers import global_pool_nlc

        pooled = global_pool_nlc(features, self.global_pool, num_prefix_tokens=self.num_prefix_tokens)
        return pooled if pre_logits else self.head(pooled)

    def reset_classifier(self, num_classes: int, global_pool: str | None = None) -> None:
        """A new classifier for ``num_classes`` (0: none, the model returns features); ``global_pool`` as timm's."""
        if global_pool is not None:
            self.global_pool = _check_pool(global_pool)
        super().reset_classifier(num_classes)


def _image_size(value: Any) -> Any:
    """timm's ``img_size``: an int or ``(H, W)`` (what ``build_model_with_cfg`` passes); aot's images are square."""
    if isinstance(value, (tuple, list)):
        if len(value) != 2 or value[0] != value[1]:
            raise AotError(f"img_size={tuple(value)!r}: aot models take square images; give one size, e.g. 28")
        return value[0]
    return value


def create(preset: str, global_pool: str = "token", **kwargs: Any) -> TimmImageClassifier:
    """Build ``preset`` with timm's model keyword arguments (num_classes, in_chans, img_size, drop_rate)."""
    overrides = {}
    for key, value in kwargs.items():
        if value is None:
            continue
        if key not in _KWARGS:
            raise AotError(
                f"timm argument {key!r} is not supported by aot models; use {', '.join(_KWARGS)} or global_pool"
            )
        overrides[_KWARGS[key]] = _image_size(value) if key == "img_size" else value
    headless = overrides.get("num_classes") == 0
    if headless:
        del overrides["num_classes"]
    cfg = PRESETS[preset].config(**overrides)
    if torch.get_default_device().type != "meta":  # as build_model: refuse what the machine cannot hold
        check_model_fits(cfg, TimmImageClassifier)
    return TimmImageClassifier(cfg, global_pool=global_pool, headless=headless)


def _fit_input(model: TimmImageClassifier) -> TimmImageClassifier:
    """``pretrained_cfg`` of the model as built: its own ``(in_chans, size, size)``, and mean / std with one
    entry per channel (the channel average when ``in_chans`` differs from the data's: grey from colour, or the
    grey statistics repeated)."""
    cfg = dict(model.pretrained_cfg)
    chans, size = model.cfg.in_chans, model.cfg.image_size
    cfg["input_size"] = (chans, size, size)
    for key in ("mean", "std"):
        values = tuple(cfg[key])
        if len(values) != chans:
            cfg[key] = (sum(values) / len(values),) * chans
    model.pretrained_cfg = model.default_cfg = cfg
    return model


def _entrypoint(timm_name: str, preset: str) -> Callable[..., TimmImageClassifier]:
    def entrypoint(pretrained: bool = False, **kwargs: Any) -> TimmImageClassifier:
        if pretrained:
            raise AotError(f"no pretrained weights are published for {timm_name!r}; use pretrained=False")
        if kwargs.pop("features_only", False):
            raise AotError(
                f"features_only is not supported by {timm_name!r}; use model.forward_features(x) (the tokens, "
                "B x (1 + N) x d) or model.forward_intermediates(x) (every block's output), or num_classes=0"
            )
        from timm.models import build_model_with_cfg

        return _fit_input(build_model_with_cfg(partial(create, preset), timm_name, False, **kwargs))

    entrypoint.__name__ = entrypoint.__qualname__ = timm_name
    entrypoint.__doc__ = f"aot preset {preset!r}: {PRESETS[preset].note}"
    return entrypoint


def torchvision_for(version: str) -> tuple[str, str | None]:
    """The torchvision requirement made for torch ``version`` and the index that has that build (``None``:
    PyPI). PyTorch releases torchvision 0.(m + 15) with torch 2.m, and a local build (``+cpu``, ``+cu126``) on
    ``https://download.pytorch.org/whl/LABEL`` only: PyPI's torchvision is built against PyPI's (CUDA) torch."""
    public, _, label = version.partition("+")
    major, minor = (int(part) for part in public.split(".")[:2])
    if major != 2:
        return f"the torchvision release made for torch {version}", None
    index = f"https://download.pytorch.org/whl/{label}" if label else None
    return f"torchvision==0.{minor + 15}.*", index


def torch_version() -> str:
    """The installed torch's version as pip sees it: ``2.13.0+cpu`` from PyTorch's CPU index, ``2.14.1`` from PyPI
    (whose ``torch.__version__`` says ``+cu130``: the label that matters is the distribution's)."""
    try:
        return importlib.metadata.version("torch")
    except importlib.metadata.PackageNotFoundError:
        return torch.__version__


def _install_hint() -> str:
    requirement, index = torchvision_for(torch_version())
    return f"pip install '{requirement}'" + (f" --index-url {index}" if index else "")


def import_failure(exc: BaseException) -> str:
    """Why timm did not import, and the fix, in one line."""
    installed = torch_version()
    missing = (exc.name or "").split(".")[0] if isinstance(exc, ModuleNotFoundError) else None
    if missing == "timm":
        return (
            f"timm is not installed; install the torchvision made for torch {installed} first ({_install_hint()}), "
            "then pip install 'aot[timm]' (pip then keeps this torch)"
        )
    if missing == "torchvision":
        return f"timm needs torchvision, which is not installed; {_install_hint()}"
    first = (str(exc).strip().splitlines() or [type(exc).__name__])[0]
    if "torchvision" in first or any("torchvision" in f.filename for f in traceback.extract_tb(exc.__traceback__)):
        try:
            vision = importlib.metadata.version("torchvision")
        except importlib.metadata.PackageNotFoundError:
            vision = "?"
        return (
            f"torchvision {vision} does not import beside torch {installed} ({first}): it was built for "
            f"another torch build; {_install_hint()}"
        )
    return f"timm does not import ({type(exc).__name__}: {first})"


def register() -> list[str]:
    """Register every image preset with ``timm.models.register_model``; returns the names. When timm does not
    import (absent, or its torchvision does not load beside this torch): one ``RuntimeWarning`` naming the cause
    and the fix, and no names."""
    try:
        from timm.models import register_model
    except Exception as exc:
        warnings.warn(f"aot: the aot_* timm models are not registered: {import_failure(exc)}", RuntimeWarning, 2)
        return []
    names = []
    for timm_name, preset in timm_names().items():
        globals()[timm_name] = register_model(_entrypoint(timm_name, preset))  # as in timm's own model modules
        names.append(timm_name)
    return names


# register_model appends each name to __all__
__all__ = ["DATA_STATS", "POOLS", "REGISTERED", "TimmImageClassifier", "create", "pretrained_cfg", "timm_names"]


#: timm's pretrained configs of the names, read by ``register_model`` from the module of each entrypoint
default_cfgs = {name: pretrained_cfg(preset) for name, preset in timm_names().items()}
REGISTERED = register()
