"""What a block type is, in one record: :class:`BlockSpec`, and the registry of them.

A spec says everything the package needs to know about a block type: the module and the token mixer and
feed-forward it is built from, the config defaults and checks that come with it, its analytic FLOPs, whether
it keeps a fixed-size state instead of a KV cache (``recurrent``), whether it has MSSA's subspace bases U_k
(``subspace``: analysis, the lens, whether ``tied_output`` means anything), and the labels other tools use
(the TransformerLens mapping, the timm family, the HF GPT-2 peer, the rows of ``aot bench``). Code outside
``aot.nn`` asks the spec (``block_spec(cfg.block)``) instead of comparing ``cfg.block`` with a name.

``register_block(spec)`` is all it takes to add a block: ``ModelConfig`` then accepts its name and checks its
rules, ``build_model`` builds it, and ``aot bench``, the trainer's MFU and ``aot analyze`` use its facts. The
built-in blocks are registered by :mod:`aot.nn.specs` (``import aot`` imports it).

A block's own hyperparameters (CRATE's ISTA step, Mamba's state size, MSSA's token shift) are its
:class:`BlockOptions`: a small dataclass the spec names (``options=``), as torchtitan gives each model its own
config. ``ModelConfig`` holds the shared backbone fields and ``options``, the block's instance; config files,
``--set model.NAME=...`` and ``config.json`` keep writing the options flat beside the shared fields (``ista_step:
0.2``), and ``cfg.NAME`` reads one. So a block with its own hyperparameters is two files: its module, and its spec
with its options (tests/nn/throwaway_block.py is one).

This module sits below both :mod:`aot.config` (which validates ``ModelConfig.block`` through it) and
:mod:`aot.nn` (which registers the built-in specs); it imports neither, so a config is typed ``Any`` here.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any, ClassVar, TypeVar

from torch import nn

from aot.errors import ConfigError
from aot.validation import Limit, from_dict

#: a ModelConfig (typed loosely: this module is imported by aot.config)
Config = Any
ModuleFactory = Callable[[Config], nn.Module]
O = TypeVar("O", bound="BlockOptions")


@dataclass
class BlockOptions:
    """A block's own config fields: subclass it as a dataclass whose fields all have defaults, and name it in the
    block's spec (``BlockSpec(options=...)``). Types come from the hints and are checked as every config field is
    (:func:`aot.validation.check_fields`); ``LIMITS`` gives ranges and choices (:class:`aot.validation.Limit`);
    :meth:`check` any rule between fields. ``ADDED_LATER``: fields added after runs were recorded, left out of
    ``to_dict`` at these defaults so that those runs' config and resume fingerprint stay what they were.

    In files the fields sit flat in the model section (``model: {block: crate, ista_step: 0.2}``); in Python
    ``cfg.options`` is the instance and ``cfg.ista_step`` reads the field."""

    LIMITS: ClassVar[dict[str, Limit]] = {}
    ADDED_LATER: ClassVar[dict[str, Any]] = {}

    def check(self, cfg: Config) -> None:
        """Rules between this block's fields, or with the shared ones (``cfg``): one-line :class:`ConfigError`."""

    @classmethod
    def field_names(cls) -> tuple[str, ...]:
        return tuple(f.name for f in dataclasses.fields(cls))

    @classmethod
    def defaults(cls) -> dict[str, Any]:
        return {f.name: f.default for f in dataclasses.fields(cls)}

    @classmethod
    def from_dict(cls: type[O], data: dict[str, Any]) -> O:
        """Every field checked; an unknown key is a one-line error (:func:`aot.validation.from_dict`)."""
        return from_dict(cls, data, "model")

    def to_dict(self) -> dict[str, Any]:
        """Every field, less those of :attr:`ADDED_LATER` at their defaults."""
        return {
            f.name: getattr(self, f.name)
            for f in dataclasses.fields(self)
            if f.name not in self.ADDED_LATER or getattr(self, f.name) != self.ADDED_LATER[f.name]
        }


@dataclass
class NoOptions(BlockOptions):
    """The options of a block that has none of its own."""


@dataclass(frozen=True)
class BlockSpec:
    """One block type. Only ``name``, ``block`` and ``mixer`` are required.

    Building: ``block(cfg, mixer=..., feedforward=...)`` is the module of one layer (``aot.nn.blocks``);
    ``mixer(cfg)`` its token mixer (MSSA, MHSA, linear attention, Mamba's S6); ``feedforward(cfg)`` what
    follows it (GELU MLP, SwiGLU, ISTA), or ``None``.

    Config: ``options`` is the block's own config fields (a :class:`BlockOptions` dataclass; none by default);
    ``defaults`` are the values of shared config fields the config leaves unset (``None``), e.g. Llama's
    ``norm='rmsnorm'``; ``heads_span_width``: the mixer splits d into the heads (n_head·head_dim = n_embd);
    ``check(cfg)``: any other rule on the shared fields, raising :class:`ConfigError`.

    FLOPs (forward, per token and layer; every matrix product at 2·m·n·k, what ``torch.utils.flop_counter``
    counts): ``dense_flops(cfg)`` of the linear layers, ``attention_flops(cfg, n_keys)`` of the T×T attention
    (q kᵀ and pattern · v over ``n_keys`` keys), ``None`` without one. ``dense_flops=None``: no analytic
    count (``aot.bench.flops`` says so; measure with ``flop_counter``).
    """

    name: str
    block: Callable[..., nn.Module]
    mixer: ModuleFactory
    feedforward: ModuleFactory | None = None
    options: type[BlockOptions] = NoOptions
    defaults: Mapping[str, Any] = field(default_factory=dict)
    heads_span_width: bool = False
    check: Callable[[Config], None] | None = None
    dense_flops: Callable[[Config], float] | None = None
    attention_flops: Callable[[Config, float], float] | None = None
    #: the mixer carries a fixed-size state from token to token instead of a KV cache (causal only, no scores)
    recurrent: bool = False
    #: bytes one layer keeps for the backward pass per token and unit of width, an upper bound (float32; measured
    #: with autograd's saved-tensor hooks in tests/models/test_budget.py): what ``aot.models.budget`` estimates a
    #: training step's activations with before anything is built
    activation_bytes: int = 128
    #: the mixer is MSSA, with subspace bases U_k (``tied_output`` chooses how it lifts back)
    subspace: bool = False
    #: ``aot.lens.to_hooked_transformer`` maps it onto a TransformerLens HookedTransformer
    lens: bool = False
    #: the family in model names (``aot_{family}_...`` for timm); ``None``: the block name
    family: str | None = None
    #: the block is GPT-2's, so HF's GPT2LMHeadModel is its peer in ``aot bench``
    hf_gpt2: bool = False
    #: the rows ``aot bench`` compares this block as: (label, config fields) each; empty: not in the suite
    bench: tuple[tuple[str, Mapping[str, Any]], ...] = ()

    def build(self, cfg: Config) -> nn.Module:
        """The module of one layer of this block type."""
        return self.block(cfg, mixer=self.mixer, feedforward=self.feedforward)

    def validate(self, cfg: Config) -> None:
        """The block's rules on ``cfg`` (its fields already type-checked, ``head_dim`` set): one-line
        :class:`ConfigError`."""
        if self.heads_span_width and cfg.n_head * cfg.head_dim != cfg.n_embd:
            raise ConfigError(
                f"block={self.name!r} needs n_head*head_dim == n_embd, got {cfg.n_head}*{cfg.head_dim} != "
                f"{cfg.n_embd}; leave head_dim unset"
            )
        if self.recurrent and not cfg.causal:
            raise ConfigError(
                f"block={self.name!r} is causal only (a left-to-right recurrence); use it for task='lm' or 'icl'"
            )
        if self.recurrent and cfg.position == "rope":
            raise ConfigError(
                f"position='rope' rotates attention scores; block={self.name!r} has none, use position='learned'"
            )
        cfg.options.check(cfg)
        if self.check is not None:
            self.check(cfg)


_REGISTRY: dict[str, BlockSpec] = {}


#: the config fields every block shares (``ModelConfig``'s own), which no block's options may reuse; set by
#: :mod:`aot.config`
SHARED_FIELDS: set[str] = set()


def register_block(spec: BlockSpec) -> BlockSpec:
    """Register ``spec`` under ``spec.name`` (replacing one of that name); returns it. An option named like a
    shared config field, or like another block's option with another default, is a :class:`ConfigError`: in files
    the options sit flat beside the shared fields, so one name must mean one thing."""
    if not (isinstance(spec.options, type) and issubclass(spec.options, BlockOptions)):
        raise ConfigError(f"block {spec.name!r}: options must be a BlockOptions dataclass, got {spec.options!r}")
    for name, default in spec.options.defaults().items():
        if name in SHARED_FIELDS or name == "options":
            raise ConfigError(f"block {spec.name!r}: option {name!r} is a shared model field; give it another name")
        for other in _REGISTRY.values():
            theirs = other.options.defaults()
            if other.name != spec.name and name in theirs and theirs[name] != default:
                raise ConfigError(
                    f"block {spec.name!r}: option {name!r} is also block {other.name!r}'s, with default "
                    f"{theirs[name]!r} (here {default!r}); give it another name"
                )
    _REGISTRY[spec.name] = spec
    return spec


def option_owners(name: str) -> list[BlockSpec]:
    """The registered blocks with an option called ``name``."""
    return [spec for spec in _REGISTRY.values() if name in spec.options.field_names()]


def unregister_block(name: str) -> None:
    """Remove a registered block (tests that register a throwaway one)."""
    _REGISTRY.pop(name, None)


def block_types() -> tuple[str, ...]:
    """The registered block names, in registration order."""
    return tuple(_REGISTRY)


def block_specs() -> tuple[BlockSpec, ...]:
    """Every registered spec, in registration order."""
    return tuple(_REGISTRY.values())


def find_block(name: str) -> BlockSpec | None:
    """The spec of block ``name``, or ``None`` when no block of that name is registered."""
    return _REGISTRY.get(name)


def block_spec(name: str) -> BlockSpec:
    """The spec of block ``name``; a one-line :class:`ConfigError` naming the registered blocks otherwise."""
    spec = _REGISTRY.get(name)
    if spec is None and not _REGISTRY:
        raise ConfigError(f"block={name!r}: no block is registered yet; import aot.nn (or aot.models) first")
    if spec is None:
        raise ConfigError(f"block={name!r} is not one of {', '.join(_REGISTRY)}")
    return spec


def block_rows() -> list[dict[str, Any]]:
    """One row per registered block for ``aot models --blocks``: its module, mixer and what follows it, whether
    it keeps a recurrent state, and its own options with their defaults and allowed values."""

    def name_of(obj: Any) -> str | None:
        return None if obj is None else getattr(obj, "__name__", type(obj).__name__)

    rows = []
    for spec in _REGISTRY.values():
        limits = spec.options.LIMITS
        options = {
            name: {"default": default, **({"allowed": limits[name].describe()} if name in limits else {})}
            for name, default in spec.options.defaults().items()
        }
        rows.append(
            {
                "block": spec.name,
                "module": name_of(spec.block),
                "mixer": name_of(spec.mixer),
                "after_mixer": name_of(spec.feedforward),
                "recurrent": spec.recurrent,
                "options_class": spec.options.__name__,
                "options": options,
            }
        )
    return rows


def output_tying(cfg: Config) -> bool | None:
    """``cfg.tied_output`` where the block has subspace bases (where it means something), else ``None``."""
    return cfg.tied_output if block_spec(cfg.block).subspace else None


__all__ = [
    "BlockSpec",
    "block_spec",
    "block_specs",
    "block_types",
    "find_block",
    "output_tying",
    "register_block",
    "unregister_block",
]
