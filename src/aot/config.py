"""Model configuration: one dataclass for every block type and task head.

A config is plain data: it is validated on construction (one-line :class:`ConfigError` naming the field, by the
checks of :mod:`aot.validation` and the block's spec), serialised with every run (``to_dict`` / ``from_dict``),
and loaded from YAML or JSON files.
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass
from typing import Any, ClassVar

from aot import blockspec
from aot.errors import ConfigError
from aot.validation import Limit, above, at_least, check_choice, check_fields, from_dict

#: what a model is built for (ModelConfig.task): its input and head. Not the training tasks of ``aot train``
#: (:data:`aot.tasks.TASKS`: lm, vision, icl, recall; vision trains ``image`` models, recall ``lm`` ones)
MODEL_TASKS = ("lm", "image", "icl")
CAUSAL_TASKS = ("lm", "icl")  # the tasks whose models are causal unless the config says otherwise
NORMS = ("layernorm", "rmsnorm", "none")
ACTIVATIONS = ("gelu", "gelu_tanh")
POSITIONS = ("learned", "rope", "none")
RESIDUAL_SCALES = ("none", "scalar", "channel")
SUBSPACE_INITS = ("normal", "orthogonal")
TOKEN_SHIFTS = ("none", "scalar", "channel")


def block_types() -> tuple[str, ...]:
    """The registered block names (:func:`aot.blockspec.block_types`): registering a block's spec with
    ``aot.blockspec.register_block`` is all it takes for a config to accept it."""
    return blockspec.block_types()


def __getattr__(name: str) -> Any:
    if name == "BLOCK_TYPES":  # derived on access, so a block registered later is included
        return block_types()
    if name == "TASKS":  # the old name, which said the same as aot.tasks.TASKS and meant something else
        import warnings

        warnings.warn(
            "aot.config.TASKS is renamed MODEL_TASKS (what a model is built for; aot.tasks.TASKS are the training "
            "tasks); the old name goes in the next release",
            DeprecationWarning,
            stacklevel=2,
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
        attn_scale: scale attention scores by 1/sqrt(head_dim) (True) or not at all (the paper's formula).
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
        ista_step, ista_lambda: eta and lambda of CRATE's ISTA step (0.1 and 0.1 in the CRATE code).
        ista_residual: ``crate`` only. False (the CRATE code): the ISTA output replaces the residual stream,
            ``z <- ISTA(LN(z))``. True: the step is added as an increment, ``z <- z + ISTA(LN(z)) - LN(z)``, so
            the stream keeps what the step leaves unchanged; without it a deep causal LM collapses every
            token onto one vector and stays at the unigram (benchmarks/lm/crate_diagnosis.md).
        ista_expand: ``crate`` only. 1 (CRATE): the complete d × d dictionary above. C > 1: CRATE-α's
            overcomplete sparse-coding step (Yang et al., 2024): an encoding dictionary D ∈ R^{d×Cd}, two ISTA
            iterations from a zero code, a ← ReLU(η Dᵀu − ηλ), a ← ReLU(a − η Dᵀ(D a − u) − ηλ), decoded by a
            second dictionary D̂ ∈ R^{d×Cd} and added to the stream, ``z <- z + D̂ a`` with ``u = LN(z)``
            (CRATE-α uses C = 4; 2·C·d² parameters against the complete step's d²).
        linear_attn_normalize: ``linear-attn`` divides by φ(q)ᵀ Σ φ(k) (Katharopoulos et al.) or not.
        mamba_d_state, mamba_expand, mamba_d_conv: Mamba's state size N, expansion E/d and conv width.
        position: ``learned`` absolute embeddings, ``rope`` (rotary, inside attention) or ``none``;
            ``None`` picks the block's default: ``rope`` for llama, ``learned`` otherwise.
        bias: biases in linear layers and LayerNorm (GPT-2 style). The MSSA projection U never has one.
        dropout: dropout on attention weights and residual branches.
        init_std: std of the normal init of every weight (nanoGPT: 0.02); residual output projections use
            ``init_std / sqrt(2 * n_layer)``.
        subspace_init: ``aot-mssa`` only. ``normal`` (every weight as above) or ``orthogonal``: the bases
            [U_1 … U_K] start with orthonormal columns scaled by ``init_std * sqrt(n_embd)`` (the length a normal
            column has), so the K subspaces start mutually orthogonal, as Definition 1's data assumes (when
            K·p > d, as orthogonal as the shape allows: [U_1 … U_K] has orthogonal rows).
        token_shift: ``aot-mssa`` only. ``none`` (the paper's operator), or mix each token with the one before
            it ahead of the projection, z̃_t = z_t + μ ⊙ (z_{t−1} − z_t), with one learned μ (``scalar``) or one per
            channel (``channel``) (:mod:`aot.nn.token_shift`; RWKV's time-mix): Q = K = V = U_kᵀz̃, a
            previous-token path for recall (docs/math.md).

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
    attn_scale: bool = True
    norm: str | None = None
    final_norm: bool = True
    residual_scale: str = "none"
    residual_scale_init: float = 1.0
    mlp_ratio: float = 4.0
    activation: str = "gelu"
    ista_step: float = 0.1
    ista_lambda: float = 0.1
    ista_residual: bool = False
    ista_expand: int = 1
    linear_attn_normalize: bool = True
    mamba_d_state: int = 16
    mamba_expand: int = 2
    mamba_d_conv: int = 4
    position: str | None = None
    rope_theta: float = 10000.0
    bias: bool = True
    dropout: float = 0.0
    init_std: float = 0.02
    subspace_init: str = "normal"
    token_shift: str = "none"
    causal: bool | None = None

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
    ADDED_LATER: ClassVar[dict[str, Any]] = {"token_shift": "none", "vocab_multiple": 1}
    # ranges not checked by validate() (which names choices and sizes itself); types come from the hints
    LIMITS: ClassVar[dict[str, Limit]] = {
        "ista_step": at_least(0),
        "ista_lambda": at_least(0),
        "ista_expand": at_least(1),
        "rope_theta": above(0),
    }

    def __post_init__(self) -> None:
        check_fields(self, "model")
        self._fill_defaults()
        self.validate()

    # -- defaults that depend on other fields -------------------------------------------------------
    def _fill_defaults(self) -> None:
        if self.head_dim is None and self.n_head > 0 and self.n_embd % self.n_head == 0:
            self.head_dim = self.n_embd // self.n_head
        spec = blockspec.find_block(self.block)  # an unknown block is named by validate()
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
        check_choice("subspace_init", self.subspace_init, SUBSPACE_INITS)
        check_choice("token_shift", self.token_shift, TOKEN_SHIFTS)
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
            "mamba_d_state",
            "mamba_expand",
            "mamba_d_conv",
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
        """Every field, less those of :attr:`ADDED_LATER` at their defaults."""
        fields = dataclasses.asdict(self)
        return {k: v for k, v in fields.items() if k not in self.ADDED_LATER or v != self.ADDED_LATER[k]}

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> ModelConfig:
        return from_dict(cls, data, "model")

    def replace(self, **changes: Any) -> ModelConfig:
        """A copy with some fields changed (validated again)."""
        return from_dict(type(self), {**self.to_dict(), **changes}, "model")


__all__ = [
    "ACTIVATIONS",
    "BLOCK_TYPES",  # noqa: F822  (module __getattr__)
    "CAUSAL_TASKS",
    "MODEL_TASKS",
    "TOKEN_SHIFTS",
    "ModelConfig",
    "block_types",
]
