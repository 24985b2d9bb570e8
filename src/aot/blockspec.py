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

This module sits below both :mod:`aot.config` (which validates ``ModelConfig.block`` through it) and
:mod:`aot.nn` (which registers the built-in specs); it imports neither, so a config is typed ``Any`` here.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any

from torch import nn

from aot.errors import ConfigError

#: a ModelConfig (typed loosely: this module is imported by aot.config)
Config = Any
ModuleFactory = Callable[[Config], nn.Module]


@dataclass(frozen=True)
class BlockSpec:
    """One block type. Only ``name``, ``block`` and ``mixer`` are required.

    Building: ``block(cfg, mixer=..., feedforward=...)`` is the module of one layer (``aot.nn.blocks``);
    ``mixer(cfg)`` its token mixer (MSSA, MHSA, linear attention, Mamba's S6); ``feedforward(cfg)`` what
    follows it (GELU MLP, SwiGLU, ISTA), or ``None``.

    Config: ``defaults`` are the values of config fields the config leaves unset (``None``), e.g. Llama's
    ``norm='rmsnorm'``; ``heads_span_width``: the mixer splits d into the heads (n_head·head_dim = n_embd);
    ``own_fields``: config fields only this block reads, each with the one-line error (``{value}``,
    ``{block}``) for a block that is given one away from its default; ``check(cfg)``: any other rule, raising
    :class:`ConfigError`.

    FLOPs (forward, per token and layer; every matrix product at 2·m·n·k, what ``torch.utils.flop_counter``
    counts): ``dense_flops(cfg)`` of the linear layers, ``attention_flops(cfg, n_keys)`` of the T×T attention
    (q kᵀ and pattern · v over ``n_keys`` keys), ``None`` without one. ``dense_flops=None``: no analytic
    count (``aot.bench.flops`` says so; measure with ``flop_counter``).
    """

    name: str
    block: Callable[..., nn.Module]
    mixer: ModuleFactory
    feedforward: ModuleFactory | None = None
    defaults: Mapping[str, Any] = field(default_factory=dict)
    heads_span_width: bool = False
    own_fields: Mapping[str, str] = field(default_factory=dict)
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
        defaults = {f.name: f.default for f in dataclasses.fields(cfg)}
        for spec in _REGISTRY.values():
            for name, message in spec.own_fields.items():
                if name not in self.own_fields and getattr(cfg, name) != defaults[name]:
                    raise ConfigError(message.format(value=getattr(cfg, name), block=self.name))
        if self.check is not None:
            self.check(cfg)


_REGISTRY: dict[str, BlockSpec] = {}


def register_block(spec: BlockSpec) -> BlockSpec:
    """Register ``spec`` under ``spec.name`` (replacing one of that name); returns it."""
    _REGISTRY[spec.name] = spec
    return spec


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
    if spec is None:
        raise ConfigError(f"block={name!r} is not one of {', '.join(_REGISTRY)}")
    return spec


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
