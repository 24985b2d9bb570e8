"""Model configuration: the fields every block shares, the block's own options, and the task head.

A config is plain data: it is validated on construction (one-line :class:`ConfigError` naming the field, by the
checks of :mod:`aot.validation` and the block's spec), serialised with every run (``to_dict`` / ``from_dict``),
and loaded from YAML or JSON files. A block's own hyperparameters are its spec's options
(:class:`aot.blockspec.BlockOptions`, ``cfg.options``); in files they sit flat in the model section.
"""

from __future__ import annotations

import dataclasses
import difflib
import functools
from dataclasses import dataclass
from typing import Any, ClassVar

from aot import blockspec
from aot.blockspec import BlockOptions
from aot.errors import ConfigError, warn_renamed
from aot.validation import Limit, above, check_choice, check_fields, from_dict

#: what a model is built for (ModelConfig.task): its input and head. Not the training tasks of ``aot train``
#: (:data:`aot.tasks.TASKS`: lm, vision, icl, recall; vision trains ``image`` models, recall ``lm`` ones)
MODEL_TASKS = ("lm", "image", "icl")
CAUSAL_TASKS = ("lm", "icl")  # the tasks whose models are causal unless the config says otherwise
NORMS = ("layernorm", "rmsnorm", "none")
ACTIVATIONS = ("gelu", "gelu_tanh")
POSITIONS = ("learned", "rope", "none")
RESIDUAL_SCALES = ("none", "scalar", "channel")
#: config fields renamed, old name -> new: files and ``replace`` still take the old name for one release, with a
#: one-line RenamedWarning (silently for configs aot saved itself: ``from_dict(..., saved=True)``)
RENAMED = {"attn_scale": "score_scale"}
RENAMED_WHY = {"attn_scale": "scale attention scores by 1/sqrt(p); the blocks' attn_scale is the residual step eta"}


def block_types() -> tuple[str, ...]:
    """The registered block names (:func:`aot.blockspec.block_types`): registering a block's spec with
    ``aot.blockspec.register_block`` is all it takes for a config to accept it."""
    return blockspec.block_types()


def __getattr__(name: str) -> Any:
    if name == "BLOCK_TYPES":  # derived on access, so a block registered later is included
        return block_types()
    if name == "TASKS":  # the old name, which said the same as aot.tasks.TASKS and meant something else
        warn_renamed(
            "aot.config.TASKS",
            "aot.config.MODEL_TASKS",
            "what a model is built for; aot.tasks.TASKS are the training tasks",
        )
        return MODEL_TASKS
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


@dataclass
class ModelConfig:
    """Everything needed to build a model: ``embedding -> Backbone(blocks) -> head``.

    Backbone fields (shared by every task):
        block: a registered block (:func:`block_types`): ``aot-mssa``, ``aot-mhsa``, ``transformer`` (GPT-2 /
            ViT), ``crate``, ``llama``, ``linear-attn`` (causal linear attention), ``mamba`` (Mamba's S6, needs
            ``aot[mamba]``), and any block registered with ``aot.blockspec.register_block``; the block's spec
            (``aot.nn.specs``) sets its defaults and checks its rules.
        n_layer, n_embd (d), n_head (K, the number of subspaces / heads).
        head_dim: p, the dimension of each head's subspace; default ``n_embd // n_head``.
        tied_output: MSSA only. True lifts each head back with its own basis (W_O = [U_1 ... U_K], the
            paper's operator); False uses a separate learned output matrix with bias (CRATE's code).
        score_scale: scale attention scores by 1/sqrt(head_dim) (True) or not at all (the paper's formula).
            Was ``attn_scale``, a name the blocks use for the residual step η (``residual_scale``).
        norm: pre-norm inside each block: ``layernorm`` (language), ``rmsnorm`` (llama) or ``none``
            (the paper's vision models). ``None`` picks the block's default (its spec's ``defaults``, else
            ``layernorm``).
        final_norm: apply the same norm after the last block.
        residual_scale: the step size eta of ``Z + eta * MSSA(Z)``: ``none`` (absorbed into the weights),
            ``scalar`` (one learnable eta per layer) or ``channel`` (LayerScale, one per channel).
        residual_scale_init: initial value of eta.
        mlp_ratio: hidden width of the GELU MLP (``transformer``) and SwiGLU (``llama``, times 2/3).
        activation: the ``transformer`` block's MLP nonlinearity: ``gelu`` (exact, erf; ViT) or ``gelu_tanh``
            (the tanh approximation GPT-2 uses; HF's ``gelu_new``). The ``gpt2-*`` presets set ``gelu_tanh``.
        position: ``learned`` absolute embeddings, ``rope`` (rotary, inside attention) or ``none``;
            ``None`` picks the block's default: ``rope`` for llama, ``learned`` otherwise.
        bias: biases in linear layers and LayerNorm (GPT-2 style). The MSSA projection U never has one.
        dropout: dropout on attention weights and residual branches.
        init_std: std of the normal init of every weight (nanoGPT: 0.02); residual output projections use
            ``init_std / sqrt(2 * n_layer)``.
        options: the block's own fields (its spec's :class:`aot.blockspec.BlockOptions`; ``None``: their
            defaults). In files and ``--set`` they sit flat beside the fields above (``ista_step: 0.2``), and
            ``cfg.ista_step`` reads one. The built-in blocks' options (:mod:`aot.nn.specs`):
            ``aot-mssa``: ``subspace_init``, ``token_shift``; ``crate``: ``ista_step``, ``ista_lambda``,
            ``ista_residual``, ``ista_expand``; ``linear-attn``: ``linear_attn_normalize``; ``mamba``:
            ``mamba_d_state``, ``mamba_expand``, ``mamba_d_conv``; ``aot models --blocks`` lists them with their
            defaults and ranges, and each options class's docstring says what they mean.

        causal: each token attends only to tokens at or before it. ``None`` (the default, and what configs
            saved before the field existed load as) derives it from the task: True for ``lm`` and ``icl``,
            False for ``image``. Set it to build, e.g., the paper's non-causal MSSA operator for theory
            (``build_model`` refuses a non-causal ``lm`` or ``icl`` model: it would see what it predicts).

    Task fields:
        task: ``lm`` (causal language model), ``image`` (classifier), ``icl`` (in-context regression).
        vocab_size, block_size: LM vocabulary and context length.
        vocab_multiple: the embedding and the LM head get ``vocab_size`` rounded up to a multiple of this many rows
            (nanoGPT's 50,304 for GPT-2's 50,257 is 64), so the head's matmul has an aligned width on a GPU; the
            logits are cut back to ``vocab_size`` (the extra rows never take part in a loss or a sample).
        image_size, patch_size, in_chans, num_classes: image classifier.
        n_dims, n_points: ICL input dimension and the largest number of (x, y) pairs in a prompt.
    """

    block: str = "aot-mssa"
    n_layer: int = 4
    n_embd: int = 128
    n_head: int = 4
    head_dim: int | None = None
    tied_output: bool = True
    score_scale: bool = True
    norm: str | None = None
    final_norm: bool = True
    residual_scale: str = "none"
    residual_scale_init: float = 1.0
    mlp_ratio: float = 4.0
    activation: str = "gelu"
    position: str | None = None
    rope_theta: float = 10000.0
    bias: bool = True
    dropout: float = 0.0
    init_std: float = 0.02
    causal: bool | None = None
    options: BlockOptions | None = None

    task: str = "lm"
    vocab_size: int = 256
    vocab_multiple: int = 1
    block_size: int = 256
    image_size: int = 28
    patch_size: int = 4
    in_chans: int = 1
    num_classes: int = 10
    n_dims: int = 20
    n_points: int = 41

    #: fields added after runs were recorded: ``to_dict`` leaves them out at these defaults, so the config.json and
    #: resume fingerprint of every run made before them stay what they were (and such a run resumes)
    ADDED_LATER: ClassVar[dict[str, Any]] = {"vocab_multiple": 1}
    # ranges not checked by validate() (which names choices and sizes itself); types come from the hints
    LIMITS: ClassVar[dict[str, Limit]] = {"rope_theta": above(0)}

    def __post_init__(self) -> None:
        check_fields(self, "model")
        self._fill_defaults()
        self.validate()

    # -- the block's options, read and written as attributes ------------------------------------------
    def __getattr__(self, name: str) -> Any:
        """``cfg.NAME`` for an option of the block (``cfg.ista_step``), and the renamed fields' old names."""
        if name.startswith("__"):
            raise AttributeError(name)
        if name in RENAMED:
            warn_renamed(f"ModelConfig.{name}", f"ModelConfig.{RENAMED[name]}", RENAMED_WHY[name])
            return getattr(self, RENAMED[name])
        options = self.__dict__.get("options")
        if options is not None and name in options.field_names():
            return getattr(options, name)
        owners = [spec.name for spec in blockspec.option_owners(name)]
        if owners:
            raise AttributeError(f"{name!r} is an option of block {' / '.join(owners)}, not of {self.block!r}")
        raise AttributeError(f"{type(self).__name__!r} object has no attribute {name!r}")

    def __setattr__(self, name: str, value: Any) -> None:
        options = self.__dict__.get("options")
        if options is not None and name not in SHARED_FIELDS and name in options.field_names():
            setattr(options, name, value)
        else:
            object.__setattr__(self, name, value)

    def option(self, name: str) -> Any:
        """Option ``name``'s value: the block's own, or, for a block without it, the option's default (what its
        owner does when the option is off: ``token_shift`` is ``'none'`` for MHSA). A name no block has is an
        :class:`AttributeError`."""
        options = self.__dict__.get("options")
        if options is not None and name in options.field_names():
            return getattr(options, name)
        defaults = {owner.options.defaults()[name] for owner in blockspec.option_owners(name)}
        if len(defaults) != 1:
            raise AttributeError(f"no block has an option {name!r}")
        return defaults.pop()

    # -- defaults that depend on other fields -------------------------------------------------------
    def _fill_defaults(self) -> None:
        spec = blockspec.find_block(self.block)  # an unknown block is named by validate()
        if spec is not None:
            self.options = _block_options(spec, self.options)
        if self.head_dim is None and self.n_head > 0 and self.n_embd % self.n_head == 0:
            self.head_dim = self.n_embd // self.n_head
        for name, value in (spec.defaults if spec is not None else {}).items():
            if getattr(self, name) is None:
                setattr(self, name, value)
        if self.norm is None:
            self.norm = "layernorm"
        if self.position is None:
            self.position = "learned"
        if self.causal is None:
            self.causal = self.task in CAUSAL_TASKS

    @property
    def padded_vocab(self) -> int:
        """The rows of the embedding and the LM head: ``vocab_size`` rounded up to a multiple of ``vocab_multiple``."""
        return -(-self.vocab_size // self.vocab_multiple) * self.vocab_multiple

    @property
    def p(self) -> int:
        """Subspace (head) dimension p; always set after validation."""
        assert self.head_dim is not None
        return self.head_dim

    # -- validation ---------------------------------------------------------------------------------
    def validate(self) -> None:
        """Raise a one-line :class:`ConfigError` naming the first invalid field and how to fix it."""
        spec = blockspec.block_spec(self.block)
        check_choice("task", self.task, MODEL_TASKS)
        check_choice("norm", self.norm, NORMS)
        check_choice("position", self.position, POSITIONS)
        check_choice("residual_scale", self.residual_scale, RESIDUAL_SCALES)
        check_choice("activation", self.activation, ACTIVATIONS)
        if not isinstance(self.causal, bool):
            raise ConfigError(f"causal={self.causal!r} must be true or false (or left unset)")
        for name in (
            "n_layer",
            "n_embd",
            "n_head",
            "vocab_size",
            "vocab_multiple",
            "block_size",
            "image_size",
            "patch_size",
            "in_chans",
            "num_classes",
            "n_dims",
            "n_points",
        ):
            value = getattr(self, name)
            if isinstance(value, bool) or not isinstance(value, int) or value < 1:
                raise ConfigError(f"{name}={value!r} must be a positive integer")
        if self.head_dim is None:
            raise ConfigError(
                f"n_embd={self.n_embd} is not divisible by n_head={self.n_head}; "
                "change one of them or set head_dim explicitly"
            )
        if isinstance(self.head_dim, bool) or not isinstance(self.head_dim, int) or self.head_dim < 1:
            raise ConfigError(f"head_dim={self.head_dim!r} must be a positive integer")
        spec.validate(self)  # the block's own rules: head widths, causal-only, its fields, its checks
        if self.position == "rope" and self.head_dim % 2:
            raise ConfigError(f"position='rope' needs an even head_dim, got head_dim={self.head_dim}")
        if not 0.0 <= self.dropout < 1.0:
            raise ConfigError(f"dropout={self.dropout} must be in [0, 1)")
        if self.mlp_ratio <= 0:
            raise ConfigError(f"mlp_ratio={self.mlp_ratio} must be positive")
        if self.init_std <= 0:
            raise ConfigError(f"init_std={self.init_std} must be positive")
        if self.task == "image" and self.image_size % self.patch_size:
            raise ConfigError(
                f"image_size={self.image_size} is not divisible by patch_size={self.patch_size}; "
                "pick a patch size that tiles the image"
            )
        if self.task == "image" and self.position == "rope":
            raise ConfigError("position='rope' is for sequences; use position='learned' for task='image'")

    # -- (de)serialisation --------------------------------------------------------------------------
    def to_dict(self) -> dict[str, Any]:
        """Every shared field, then the block's options flat beside them; less the fields of :attr:`ADDED_LATER`
        (and the options') at their defaults."""
        shared = {f: getattr(self, f) for f in SHARED_FIELDS_ORDER if f != "options"}
        out = {k: v for k, v in shared.items() if k not in self.ADDED_LATER or v != self.ADDED_LATER[k]}
        options = self.__dict__.get("options")
        return {**out, **(options.to_dict() if options is not None else {})}

    @classmethod
    def from_dict(cls, data: dict[str, Any], saved: bool = False) -> ModelConfig:
        """A config from its model section: the shared fields, and the block's options flat beside them (or in an
        ``options`` mapping). A renamed field's old name works with a one-line RenamedWarning, silently when
        ``saved`` (a config aot wrote: a run's config.json, a checkpoint, an export). Another block's option at its
        default is dropped (configs saved before options were per block hold every block's), away from it it is a
        one-line error naming the block it belongs to."""
        if not isinstance(data, dict):
            raise ConfigError(f"the model section must be a mapping of field: value, got {type(data).__name__}")
        data = dict(data)
        for old, new in RENAMED.items():
            if old in data:
                if not saved:
                    warn_renamed(f"model.{old}", f"model.{new}", RENAMED_WHY[old], kind="field")
                value = data.pop(old)
                data.setdefault(new, value)
        given = data.pop("options", None)
        flat = {key: value for key, value in data.items() if key not in SHARED_FIELDS}
        shared = {key: value for key, value in data.items() if key in SHARED_FIELDS}
        if isinstance(given, BlockOptions) and flat:  # the block's instance, with fields given flat beside it
            spec = blockspec.find_block(str(data.get("block", cls.block)))
            if spec is not None and type(given) is spec.options:  # (another block's class: _block_options names it)
                given = {**given.to_dict(), **flat}
        elif isinstance(given, dict) or given is None:
            given = {**(given or {}), **flat}
        # every key that is not a shared field is an option: _block_options sorts the block's own from the rest
        return from_dict(cls, {**shared, "options": given}, "model")

    def replace(self, **changes: Any) -> ModelConfig:
        """A copy with some fields or options changed (validated again)."""
        return type(self).from_dict({**self.to_dict(), **changes})


#: the fields every block shares, in declaration order (a block's options may not reuse them)
SHARED_FIELDS_ORDER = tuple(f.name for f in dataclasses.fields(ModelConfig))
SHARED_FIELDS = frozenset(SHARED_FIELDS_ORDER)
blockspec.SHARED_FIELDS.update(SHARED_FIELDS)


def _block_options(spec: blockspec.BlockSpec, given: Any) -> BlockOptions:
    """``ModelConfig.options`` as block ``spec``'s options class: its defaults for ``None``, checked fields for a
    mapping or an instance; a one-line error for another block's options."""
    if given is None:
        return spec.options()
    if isinstance(given, dict):
        own = spec.options.field_names()
        for key, value in given.items():
            if key not in own:
                _foreign_option(key, value, spec, own)
        return spec.options.from_dict({k: v for k, v in given.items() if k in own})
    if type(given) is not spec.options:
        raise ConfigError(
            f"options={type(given).__name__}(...) are not block {spec.name!r}'s; give {spec.options.__name__} or a "
            f"mapping of its fields ({', '.join(spec.options.field_names()) or 'it has none'})"
        )
    copy = dataclasses.replace(given)  # a config owns its options (cfg.NAME = ... writes them)
    check_fields(copy, "model")
    return copy


def _foreign_option(key: str, value: Any, spec: blockspec.BlockSpec, own: tuple[str, ...]) -> None:
    """A key that is neither shared nor block ``spec``'s option: another block's at its default is dropped; else
    a one-line error (the block it belongs to, or the fields it may have meant)."""
    owners = blockspec.option_owners(key)
    if owners and all(value == owner.options.defaults()[key] for owner in owners):
        return
    if owners:
        names = " / ".join(repr(owner.name) for owner in owners)
        raise ConfigError(
            f"{key}={value!r} is an option of block {names}; block={spec.name!r} has none: drop it, or set that block"
        )
    valid = [*SHARED_FIELDS_ORDER, *own]
    others = {name: other.name for other in blockspec.block_specs() for name in other.options.field_names()}
    close = difflib.get_close_matches(str(key), [*valid, *others], n=1)
    hint = f"; valid fields: {', '.join(valid)}"
    if close:
        hint = f"; did you mean {close[0]!r}" + ("?" if close[0] in valid else f" (block {others[close[0]]!r})?")
    raise ConfigError(f"unknown field {key!r} in the model config{hint}")


def _accept_flat_options(init: Any) -> Any:
    """``ModelConfig(block='crate', ista_step=0.2)``, the options as keywords, as before they moved into
    ``options``: still taken for one release, with a one-line RenamedWarning."""

    @functools.wraps(init)
    def __init__(self: ModelConfig, *args: Any, **kwargs: Any) -> None:
        flat = {k: kwargs.pop(k) for k in list(kwargs) if k not in SHARED_FIELDS and k not in RENAMED}
        for old, new in RENAMED.items():
            if old in kwargs:
                warn_renamed(f"ModelConfig({old}=...)", f"ModelConfig({new}=...)", RENAMED_WHY[old], kind="keyword")
                kwargs.setdefault(new, kwargs.pop(old))
        if flat:
            shown = ", ".join(f"{k}=..." for k in flat)
            warn_renamed(
                f"ModelConfig({shown})",
                f"ModelConfig(options={{{', '.join(repr(k) + ': ...' for k in flat)}}})",
                "a block's own fields; ModelConfig.from_dict still takes them flat, as files do",
                kind="keywords",
            )
            given = kwargs.get("options")
            kwargs["options"] = {**(given.to_dict() if isinstance(given, BlockOptions) else given or {}), **flat}
        init(self, *args, **kwargs)

    return __init__


ModelConfig.__init__ = _accept_flat_options(ModelConfig.__init__)  # type: ignore[method-assign]


__all__ = [
    "ACTIVATIONS",
    "BLOCK_TYPES",  # noqa: F822  (module __getattr__)
    "CAUSAL_TASKS",
    "MODEL_TASKS",
    "RENAMED",
    "SHARED_FIELDS",
    "ModelConfig",
    "block_types",
]
