"""timm registration: every image preset of :mod:`aot.models.presets` under a timm-style name, so that
``timm.create_model("aot_mssa_tiny_patch7_28", num_classes=...)`` builds it (the optional extra ``aot[timm]``).

Names are ``aot_{family}_{size}_patch{P}_{IMAGE}``: family ``mssa`` / ``mhsa`` / ``vit`` / ``crate`` from the
block's spec, size ``tiny`` (the CPU presets), ``small`` (``-s``) or ``base`` (``-b``). ``import
aot.models.timm_models`` registers them: timm 1.0.31 has no plugin entry point for model names (its registry is
filled only by ``register_model`` calls in imported modules); :func:`timm_names` lists them without timm. The
models (:class:`TimmImageClassifier`) have the interface of timm's ``VisionTransformer``:

- ``create_model`` keywords (:data:`TIMM_KEYWORDS`): ``num_classes`` (0: no classifier, the model returns the
  pooled features, ``num_features`` = ``n_embd`` wide), ``in_chans``, ``img_size``, ``drop_rate`` (aot's
  ``dropout``), ``drop_path_rate`` (timm's stochastic depth), ``global_pool``, ``device`` (built there; ``'meta'``
  allocates nothing) and ``dtype``; any other keyword is a ``TypeError`` (:class:`TimmArgumentError`, also an
  AotError), as timm's own models raise;
- ``global_pool``: ``'token'`` the class token (the default, what aot trains), ``'avg'`` / ``'max'`` /
  ``'avgmax'`` over the patch tokens, ``''`` every token unpooled — timm's own ``timm.layers.global_pool_nlc``;
  ``reset_classifier(n, global_pool=None)`` builds the head on the model's device and dtype;
- ``forward_features`` (the tokens after the final norm, ``(B, 1 + N, d)``), ``forward_head(x, pre_logits=True)``,
  timm's ``forward_intermediates`` (NCHW maps or NLC tokens of any blocks), ``features_only=True`` (timm's
  ``FeatureGetterNet`` over it, the last 3 blocks by default, as ViTs), ``feature_info``,
  ``prune_intermediate_layers``, ``set_input_size``, ``group_matcher``, ``set_grad_checkpointing``; ``torch.fx``
  and ``torch.export`` trace the model (TorchScript does not: see :class:`TimmImageClassifier`);
- ``pretrained_cfg`` / ``default_cfg`` (built by timm's ``build_model_with_cfg``) hold the model's own input size
  ``(C, H, W)`` and the mean / std of the data its preset is laid out for (:data:`DATA_STATS`), so
  ``timm.data.resolve_data_config({}, model=m)`` gives 1×28×28 and Fashion-MNIST's statistics, with no resize or
  crop (``crop_pct`` 1: aot reads images at the model's size).

Refused in one line (:class:`aot.errors.AotError`): ``pretrained=True`` (no weights are published).

timm imports torchvision, whose compiled part loads only beside the torch build it was made for: beside torch
2.13.0+cpu the PyPI torchvision 0.28.0 (a CUDA build) fails with "operator torchvision::nms does not exist";
``make install-timm`` (scripts/install_timm.py) installs one that imports. When timm does not import,
:data:`REGISTERED` is empty and one ``RuntimeWarning`` names the cause and the fix (:func:`torchvision_for` gives
the matching torchvision and its index).
"""

from __future__ import annotations

import contextlib
import importlib.metadata
import traceback
import warnings
from collections.abc import Callable
from functools import partial
from typing import Any

import torch
from torch import nn
from torch.fx import _symbolic_trace
from torch.utils.checkpoint import checkpoint

from aot.blockspec import block_spec
from aot.config import ModelConfig
from aot.errors import AotError
from aot.models.budget import check_model_fits
from aot.models.inputs import check_images
from aot.models.presets import PRESETS
from aot.models.vision import ImageClassifier

try:  # timm's pooling over tokens (timm 1.0.20)
    from timm.layers import global_pool_nlc
except Exception:  # timm absent or not importable: register() says why, once
    global_pool_nlc = None  # type: ignore[assignment]

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


class TimmArgumentError(AotError, TypeError):
    """A keyword argument that aot's timm models do not take: a ``TypeError``, as for any timm model, in one line."""


def _tracing() -> bool:
    """True while ``torch.fx.symbolic_trace`` traces (the input is a Proxy: no shape, no values). torch.export's
    fake tensors have shapes, so the check still runs there (torch 2.13 tells the two apart; before, both count)."""
    symbolic = getattr(_symbolic_trace, "is_fx_symbolic_tracing", _symbolic_trace.is_fx_tracing)
    return bool(symbolic())


def _take_indices(n_blocks: int, indices: int | list[int] | tuple[int, ...] | None) -> tuple[list[int], int]:
    """timm's ``feature_take_indices``: None → every block, an int n → the last n, a list → those (negative from
    the end); returns the indices and the largest. Out of range is one line (:class:`AotError`)."""
    if indices is None:
        indices = n_blocks
    if isinstance(indices, int):
        if not 0 < indices <= n_blocks:
            raise AotError(f"the last {indices} blocks of {n_blocks} do not exist; ask for 1 to {n_blocks}")
        taken = list(range(n_blocks - indices, n_blocks))
    else:
        taken = [n_blocks + i if i < 0 else i for i in indices]
        bad = [i for i in taken if not 0 <= i < n_blocks]
        if bad or not taken:
            raise AotError(f"block indices {list(indices)} are not in 0 to {n_blocks - 1} (or -{n_blocks} to -1)")
    return taken, max(taken)


class TimmImageClassifier(ImageClassifier):
    """:class:`~aot.models.vision.ImageClassifier` with the interface of timm's ``VisionTransformer``: what
    ``timm.create_model`` returns for an ``aot_*`` name. Its numbers are the ImageClassifier's: same parameters,
    same forward; what it adds are timm's conventions (``num_classes=0``, ``global_pool``, ``in_chans``,
    ``feature_info``, ``forward_intermediates``, ``prune_intermediate_layers``, ``set_input_size``,
    ``group_matcher``, ``set_grad_checkpointing``, stochastic depth) and a forward that ``torch.fx`` and
    ``torch.export`` trace (the input check steps aside for fx's Proxy, which has no shape). Not TorchScript: every
    aot block takes a Python key-value cache (:class:`aot.nn.cache.LayerCache`) that TorchScript cannot type, and
    torch 2.13 deprecates ``torch.jit.script`` for ``torch.export``."""

    pretrained_cfg: dict[str, Any]  # set by timm's build_model_with_cfg (with aot's input, _input_cfg)
    default_cfg: dict[str, Any]  # timm's older name of the same dict

    def __init__(
        self, cfg: ModelConfig, global_pool: str = "token", headless: bool = False, drop_path_rate: float = 0.0
    ) -> None:
        super().__init__(cfg)
        self.global_pool = _check_pool(global_pool)
        self.num_prefix_tokens = 1  # the class token
        self.has_class_token = True
        self.in_chans = cfg.in_chans
        self.image_size = cfg.image_size
        self.grid_size = cfg.image_size // cfg.patch_size
        self.num_features = self.head_hidden_size = self.embed_dim = cfg.n_embd
        self.grad_checkpointing = False
        # timm's feature taps, as its ViTs have them: every block, at the patch grid's stride
        self.feature_info = [
            {"module": f"backbone.blocks.{i}", "num_chs": cfg.n_embd, "reduction": cfg.patch_size}
            for i in range(cfg.n_layer)
        ]
        if drop_path_rate:
            self._add_drop_path(drop_path_rate)
        if headless:
            self.reset_classifier(0)

    def _add_drop_path(self, rate: float) -> None:
        """timm's stochastic depth: each residual branch of block i is dropped, per sample, with probability
        ``rate · i / (L − 1)`` while training (timm.layers.DropPath after the block's dropout)."""
        from timm.layers import DropPath

        if not 0.0 <= rate < 1.0:
            raise AotError(f"drop_path_rate={rate} must be in [0, 1)")
        blocks = list(self.backbone.blocks)
        for index, block in enumerate(blocks):
            drop = getattr(block, "drop", None)
            if not isinstance(drop, nn.Dropout):
                raise AotError(f"drop_path_rate: block {type(block).__name__} has no residual dropout to extend")
            block_rate = rate * index / max(len(blocks) - 1, 1)
            if block_rate > 0:
                block.drop = nn.Sequential(drop, DropPath(block_rate))

    # -- forward ----------------------------------------------------------------------------------------
    def embed(self, images: torch.Tensor) -> torch.Tensor:
        """images (B, C, H, W) → tokens (B, 1 + N, d), as ImageClassifier.embed; the input check steps aside
        while TorchScript compiles or torch.fx traces."""
        if not torch.jit.is_scripting() and not _tracing():
            check_images(images, self.in_chans, self.image_size)
        patches = self.patch_embed(images).flatten(2).transpose(1, 2)  # (B, N, d)
        cls = self.cls_token.expand(patches.shape[0], -1, -1)
        return self.hook_embed(torch.cat([cls, patches], dim=1) + self.pos_embed)

    def _block(self, block: nn.Module, tokens: torch.Tensor) -> torch.Tensor:
        if self.grad_checkpointing and not torch.jit.is_scripting() and torch.is_grad_enabled():
            return checkpoint(block, tokens, use_reentrant=False)  # type: ignore[no-any-return]
        return block(tokens)  # type: ignore[no-any-return]

    def _final(self, tokens: torch.Tensor) -> torch.Tensor:
        return self.backbone.hook_final(self.backbone.final_norm(tokens))  # type: ignore[no-any-return]

    def forward_features(self, images: torch.Tensor) -> torch.Tensor:
        """The tokens after the final norm, (B, 1 + N, d): the backbone's forward, block by block."""
        tokens = self.embed(images)
        for block in self.backbone.blocks:
            tokens = self._block(block, tokens)
        return self._final(tokens)

    def forward_head(self, features: torch.Tensor, pre_logits: bool = False) -> torch.Tensor:
        pooled = global_pool_nlc(features, self.global_pool, num_prefix_tokens=self.num_prefix_tokens)
        return pooled if pre_logits else self.head(pooled)

    def forward_intermediates(  # type: ignore[override]
        self,
        images: torch.Tensor,
        indices: int | list[int] | tuple[int, ...] | None = None,
        return_prefix_tokens: bool = False,
        norm: bool = False,
        stop_early: bool = False,
        output_fmt: str = "NCHW",
        intermediates_only: bool = False,
        output_dict: bool = False,
    ) -> Any:
        """timm's ``forward_intermediates``: the residual stream after the blocks in ``indices`` (None: all; n:
        the last n; a list), the class token split off, as ``(B, d, H/P, W/P)`` maps (``output_fmt='NCHW'``) or
        ``(B, N, d)`` tokens (``'NLC'``); ``norm`` applies the final norm to each; ``stop_early`` runs no block
        past the last one asked for. Returns ``(final features, intermediates)``, the intermediates alone
        (``intermediates_only``), or timm's dict (``output_dict``). (ImageClassifier.forward_intermediates, aot's
        own, returns whole token tensors.)"""
        if output_fmt not in ("NCHW", "NLC"):
            raise AotError(f"output_fmt={output_fmt!r}: aot models give 'NCHW' maps or 'NLC' tokens")
        taken, last = _take_indices(len(self.backbone.blocks), indices)
        batch = images.shape[0]
        tokens = self.embed(images)
        blocks = list(self.backbone.blocks)
        intermediates = []
        for index, block in enumerate(blocks[: last + 1] if stop_early else blocks):
            tokens = self._block(block, tokens)
            if index in taken:
                intermediates.append(self.backbone.final_norm(tokens) if norm else tokens)
        prefix = [t[:, : self.num_prefix_tokens] for t in intermediates]
        spatial = [t[:, self.num_prefix_tokens :] for t in intermediates]
        if output_fmt == "NCHW":
            grid = self.grid_size
            spatial = [t.reshape(batch, grid, grid, -1).permute(0, 3, 1, 2).contiguous() for t in spatial]
        if output_dict:
            result: dict[str, Any] = {"image_intermediates": spatial}
            if return_prefix_tokens:
                result["image_intermediates_prefix"] = prefix
            if not intermediates_only:
                result["image_features"] = self._final(tokens)
            return result
        taps: list[Any] = list(zip(spatial, prefix)) if return_prefix_tokens else spatial
        return taps if intermediates_only else (self._final(tokens), taps)

    # -- timm's model API -------------------------------------------------------------------------------
    def reset_classifier(self, num_classes: int, global_pool: str | None = None) -> None:
        """A new, freshly initialised classifier for ``num_classes`` (0: none, the model returns the pooled
        features), on the model's device and dtype and in its training mode; ``global_pool`` as timm's (None:
        keep the current one)."""
        if global_pool is not None:
            self.global_pool = _check_pool(global_pool)
        like = self.patch_embed.weight
        self.num_classes = num_classes
        if num_classes == 0:
            self.head = nn.Identity()
        else:
            self.cfg = self.cfg.replace(num_classes=num_classes)
            self.head = nn.Linear(self.cfg.n_embd, num_classes, device=like.device, dtype=like.dtype)
        self.head.train(self.training)

    def group_matcher(self, coarse: bool = False) -> dict[str, Any]:
        """timm's parameter groups (layer-wise lr decay), as its ViTs': the embedding, then one group per block, the
        final norm with the last block; the head matches none (timm puts it last)."""
        return {
            "stem": r"^cls_token|^pos_embed|^patch_embed",
            "blocks": [(r"^backbone\.blocks\.(\d+)", None), (r"^backbone\.final_norm", (99999,))],
        }

    def set_grad_checkpointing(self, enable: bool = True) -> None:
        """Recompute each block in the backward pass instead of keeping its activations (torch.utils.checkpoint);
        the forward's numbers do not change."""
        self.grad_checkpointing = enable

    def prune_intermediate_layers(
        self, indices: int | list[int] | tuple[int, ...] = 1, prune_norm: bool = False, prune_head: bool = True
    ) -> list[int]:
        """Drop the blocks after the last of ``indices`` (timm's convention), the final norm with ``prune_norm``,
        the classifier and pooling with ``prune_head``; returns the kept indices. The config follows
        (``n_layer``, ``final_norm``), so a pruned model saves and loads as what it is."""
        taken, last = _take_indices(len(self.backbone.blocks), indices)
        self.backbone.blocks = self.backbone.blocks[: last + 1]
        self.feature_info = self.feature_info[: last + 1]
        changes: dict[str, Any] = {"n_layer": last + 1}
        if prune_norm:
            self.backbone.final_norm = nn.Identity()
            changes["final_norm"] = False
        self.cfg = self.backbone.cfg = self.cfg.replace(**changes)
        if prune_head:
            self.reset_classifier(0, "")
        return taken

    def set_input_size(
        self, img_size: int | tuple[int, int] | None = None, patch_size: int | tuple[int, int] | None = None
    ) -> None:
        """Take images of ``img_size`` (square) cut into ``patch_size`` patches: the learned positions are
        resampled to the new grid (timm's ``resample_abs_pos_embed``), the patch embedding to the new patch
        (``resample_patch_embed``); trainable stays trainable, frozen stays frozen."""
        from timm.layers import resample_abs_pos_embed, resample_patch_embed

        size = self.cfg.image_size if img_size is None else int(_image_size(img_size))
        patch = self.cfg.patch_size if patch_size is None else int(_image_size(patch_size))
        cfg = self.cfg.replace(image_size=size, patch_size=patch)  # refuses a size the patch does not divide
        old_grid, grid = self.grid_size, size // patch
        with torch.no_grad():
            if patch != self.cfg.patch_size:
                old = self.patch_embed
                conv = nn.Conv2d(
                    cfg.in_chans, cfg.n_embd, patch, stride=patch, device=old.weight.device, dtype=old.weight.dtype
                )
                conv.weight = nn.Parameter(
                    resample_patch_embed(old.weight, [patch, patch]), requires_grad=old.weight.requires_grad
                )
                conv.bias = old.bias
                self.patch_embed = conv
            if grid != old_grid:
                self.pos_embed = nn.Parameter(
                    resample_abs_pos_embed(
                        self.pos_embed, new_size=[grid, grid], old_size=[old_grid, old_grid], num_prefix_tokens=1
                    ),
                    requires_grad=self.pos_embed.requires_grad,
                )
        self.cfg = cfg
        self.image_size, self.grid_size, self.num_patches = size, grid, grid * grid
        for info in self.feature_info:
            info["reduction"] = patch
        if hasattr(self, "pretrained_cfg"):
            _fit_input(self)
        try:  # timm 1.0.31's record of the model's current input (timm.models.get_model_input_config)
            from timm.models._input import update_model_input_size
        except ImportError:
            return
        update_model_input_size(self, (size, size), patch_size=(patch, patch) if patch_size is not None else None)


def _image_size(value: Any) -> Any:
    """timm's ``img_size``: an int or ``(H, W)`` (what ``build_model_with_cfg`` passes); aot's images are square."""
    if isinstance(value, (tuple, list)):
        if len(value) != 2 or value[0] != value[1]:
            raise AotError(f"img_size={tuple(value)!r}: aot models take square images; give one size, e.g. 28")
        return value[0]
    return value


#: the keywords of timm's create_model that aot's models take, beside num_classes / in_chans / img_size / drop_rate
TIMM_KEYWORDS = (*_KWARGS, "global_pool", "drop_path_rate", "device", "dtype")


def create(
    preset: str,
    global_pool: str = "token",
    drop_path_rate: float | None = None,
    device: torch.device | str | None = None,
    dtype: torch.dtype | None = None,
    **kwargs: Any,
) -> TimmImageClassifier:
    """Build ``preset`` with timm's model keyword arguments (:data:`TIMM_KEYWORDS`); ``device`` builds it there
    (``'meta'``: nothing allocated), ``dtype`` converts its floating-point tensors. Any other keyword is a
    :class:`TimmArgumentError` (a TypeError, as timm's own models raise)."""
    overrides = {}
    for key, value in kwargs.items():
        if value is None:
            continue
        if key not in _KWARGS:
            raise TimmArgumentError(
                f"aot model {preset!r} got an unexpected keyword argument {key!r}; it takes {', '.join(TIMM_KEYWORDS)}"
            )
        overrides[_KWARGS[key]] = _image_size(value) if key == "img_size" else value
    headless = overrides.get("num_classes") == 0
    if headless:
        del overrides["num_classes"]
    cfg = PRESETS[preset].config(**overrides)
    with torch.device(device) if device is not None else contextlib.nullcontext():
        if torch.get_default_device().type != "meta":  # as build_model: refuse what the machine cannot hold
            check_model_fits(cfg, TimmImageClassifier)
        model = TimmImageClassifier(cfg, global_pool, headless, drop_path_rate or 0.0)
    return model.to(dtype=dtype) if dtype is not None else model


def _fit_input(model: TimmImageClassifier) -> TimmImageClassifier:
    """``pretrained_cfg`` of the model as built: its own ``(in_chans, size, size)``, and mean / std with one
    entry per channel (the channel average when ``in_chans`` differs from the data's: grey from colour, or the
    grey statistics repeated)."""
    model.pretrained_cfg = model.default_cfg = _input_cfg(model.pretrained_cfg, model.cfg.in_chans, model.image_size)
    return model


def _input_cfg(cfg: dict[str, Any], chans: int, size: int) -> dict[str, Any]:
    cfg = dict(cfg, input_size=(chans, size, size))
    for key in ("mean", "std"):
        values = tuple(cfg[key])
        if len(values) != chans:
            cfg[key] = (sum(values) / len(values),) * chans
    return cfg


#: the blocks that timm's features_only takes by default (its ViTs' ``out_indices=3``: the last three)
FEATURE_OUT_INDICES = 3


def _entrypoint(timm_name: str, preset: str) -> Callable[..., Any]:
    def entrypoint(pretrained: bool = False, **kwargs: Any) -> Any:
        if pretrained:
            raise AotError(f"no pretrained weights are published for {timm_name!r}; use pretrained=False")
        from timm.models import build_model_with_cfg

        fields = PRESETS[preset].fields
        chans = kwargs.get("in_chans") or fields["in_chans"]
        size = _image_size(kwargs.get("img_size") or fields["image_size"])
        overlay = _input_cfg(pretrained_cfg(preset), chans, size)
        kwargs["pretrained_cfg_overlay"] = {
            **{key: overlay[key] for key in ("input_size", "mean", "std")},
            **(kwargs.get("pretrained_cfg_overlay") or {}),
        }
        out_indices = kwargs.pop("out_indices", FEATURE_OUT_INDICES)
        return build_model_with_cfg(
            partial(create, preset),
            timm_name,
            False,
            feature_cfg={"out_indices": out_indices, "feature_cls": "getter"},  # as timm's ViTs: forward_intermediates
            **kwargs,
        )

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
    where = f" --index-url {index}" if index else ""
    return f"pip install '{requirement}'{where} (in aot's checkout: make install-timm)"


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
