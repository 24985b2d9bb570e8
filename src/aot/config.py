"""Model configuration: one dataclass for every block type and task head.

A config is plain data: it is validated on construction (one-line :class:`ConfigError` naming the field),
serialised with every run (``to_dict`` / ``from_dict``), and loaded from YAML or JSON files.
"""

from __future__ import annotations

import dataclasses
import difflib
import json
from dataclasses import dataclass
from pathlib import Path
from typing import Any, TypeVar

from aot.errors import ConfigError

BLOCK_TYPES = ("aot-mssa", "aot-mhsa", "transformer", "crate", "llama", "linear-attn", "mamba")
TASKS = ("lm", "image", "icl")
NORMS = ("layernorm", "rmsnorm", "none")
POSITIONS = ("learned", "rope", "none")
RESIDUAL_SCALES = ("none", "scalar", "channel")

T = TypeVar("T")


@dataclass
class ModelConfig:
    """Everything needed to build a model: ``embedding -> Backbone(blocks) -> head``.

    Backbone fields (shared by every task):
        block: one of ``aot-mssa``, ``aot-mhsa``, ``transformer`` (GPT-2 / ViT), ``crate``, ``llama``,
            ``linear-attn`` (causal linear attention), ``mamba`` (Mamba's S6, needs ``aot[mamba]``).
        n_layer, n_embd (d), n_head (K, the number of subspaces / heads).
        head_dim: p, the dimension of each head's subspace; default ``n_embd // n_head``.
        tied_output: MSSA only. True lifts each head back with its own basis (W_O = [U_1 ... U_K], the
            paper's operator); False uses a separate learned output matrix with bias (CRATE's code).
        attn_scale: scale attention scores by 1/sqrt(head_dim) (True) or not at all (the paper's formula).
        norm: pre-norm inside each block: ``layernorm`` (language), ``rmsnorm`` (llama) or ``none``
            (the paper's vision models). ``None`` picks the block's default.
        final_norm: apply the same norm after the last block.
        residual_scale: the step size eta of ``Z + eta * MSSA(Z)``: ``none`` (absorbed into the weights),
            ``scalar`` (one learnable eta per layer) or ``channel`` (LayerScale, one per channel).
        residual_scale_init: initial value of eta.
        mlp_ratio: hidden width of the GELU MLP (``transformer``) and SwiGLU (``llama``, times 2/3).
        ista_step, ista_lambda: eta and lambda of CRATE's ISTA step (0.1 and 0.1 in the CRATE code).
        linear_attn_normalize: ``linear-attn`` divides by φ(q)ᵀ Σ φ(k) (Katharopoulos et al.) or not.
        mamba_d_state, mamba_expand, mamba_d_conv: Mamba's state size N, expansion E/d and conv width.
        position: ``learned`` absolute embeddings, ``rope`` (rotary, inside attention) or ``none``;
            ``None`` picks ``rope`` for llama and ``learned`` otherwise.
        bias: biases in linear layers and LayerNorm (GPT-2 style). The MSSA projection U never has one.
        dropout: dropout on attention weights and residual branches.
        init_std: std of the normal init of every weight (nanoGPT: 0.02); residual output projections use
            ``init_std / sqrt(2 * n_layer)``.

    Task fields:
        task: ``lm`` (causal language model), ``image`` (classifier), ``icl`` (in-context regression).
        vocab_size, block_size: LM vocabulary and context length.
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
    ista_step: float = 0.1
    ista_lambda: float = 0.1
    linear_attn_normalize: bool = True
    mamba_d_state: int = 16
    mamba_expand: int = 2
    mamba_d_conv: int = 4
    position: str | None = None
    rope_theta: float = 10000.0
    bias: bool = True
    dropout: float = 0.0
    init_std: float = 0.02

    task: str = "lm"
    vocab_size: int = 256
    block_size: int = 256
    image_size: int = 28
    patch_size: int = 4
    in_chans: int = 1
    num_classes: int = 10
    n_dims: int = 20
    n_points: int = 41

    def __post_init__(self) -> None:
        self._fill_defaults()
        self.validate()

    # -- defaults that depend on other fields -------------------------------------------------------
    def _fill_defaults(self) -> None:
        if self.head_dim is None and self.n_head > 0 and self.n_embd % self.n_head == 0:
            self.head_dim = self.n_embd // self.n_head
        if self.norm is None:
            self.norm = "rmsnorm" if self.block == "llama" else "layernorm"
        if self.position is None:
            self.position = "rope" if self.block == "llama" else "learned"

    @property
    def p(self) -> int:
        """Subspace (head) dimension p; always set after validation."""
        assert self.head_dim is not None
        return self.head_dim

    @property
    def causal(self) -> bool:
        """Language models and in-context regressors are causal; image classifiers are not."""
        return self.task in ("lm", "icl")

    # -- validation ---------------------------------------------------------------------------------
    def validate(self) -> None:
        """Raise a one-line :class:`ConfigError` naming the first invalid field and how to fix it."""
        _choice("block", self.block, BLOCK_TYPES)
        _choice("task", self.task, TASKS)
        _choice("norm", self.norm, NORMS)
        _choice("position", self.position, POSITIONS)
        _choice("residual_scale", self.residual_scale, RESIDUAL_SCALES)
        for name in (
            "n_layer",
            "n_embd",
            "n_head",
            "vocab_size",
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
        if self.block in ("aot-mhsa", "transformer", "llama") and self.n_head * self.head_dim != self.n_embd:
            raise ConfigError(
                f"block={self.block!r} needs n_head*head_dim == n_embd, got {self.n_head}*{self.head_dim} != "
                f"{self.n_embd}; leave head_dim unset"
            )
        if self.block in ("linear-attn", "mamba") and not self.causal:
            raise ConfigError(
                f"block={self.block!r} is causal only (a left-to-right recurrence); use it for task='lm' or 'icl'"
            )
        if self.block in ("linear-attn", "mamba") and self.position == "rope":
            raise ConfigError(
                f"position='rope' rotates attention scores; block={self.block!r} has none, use position='learned'"
            )
        if self.block == "linear-attn" and self.n_head * self.head_dim != self.n_embd:
            raise ConfigError(
                f"block='linear-attn' needs n_head*head_dim == n_embd, got {self.n_head}*{self.head_dim}; "
                "leave head_dim unset"
            )
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
        return dataclasses.asdict(self)

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> ModelConfig:
        return from_dict(cls, data, "model")

    def replace(self, **changes: Any) -> ModelConfig:
        """A copy with some fields changed (validated again)."""
        return from_dict(type(self), {**self.to_dict(), **changes}, "model")


def _choice(name: str, value: Any, options: tuple[str, ...]) -> None:
    if value not in options:
        raise ConfigError(f"{name}={value!r} is not one of {', '.join(options)}")


def from_dict(cls: type[T], data: dict[str, Any], section: str) -> T:
    """Build dataclass ``cls`` from ``data``; an unknown key is a one-line error with a suggestion."""
    if not isinstance(data, dict):
        raise ConfigError(f"the {section} section must be a mapping of field: value, got {type(data).__name__}")
    names = [f.name for f in dataclasses.fields(cls)]  # type: ignore[arg-type]
    for key in data:
        if key not in names:
            close = difflib.get_close_matches(str(key), names, n=1)
            hint = f"; did you mean {close[0]!r}?" if close else f"; valid fields: {', '.join(names)}"
            raise ConfigError(f"unknown field {key!r} in the {section} config{hint}")
    try:
        return cls(**data)
    except TypeError as exc:  # a missing required field
        raise ConfigError(f"{section} config: {exc}") from None


def load_config_file(path: str | Path) -> dict[str, Any]:
    """Read a YAML or JSON config file into a dict; a missing or malformed file is a one-line error."""
    path = Path(path)
    if not path.is_file():
        raise ConfigError(f"config file {str(path)!r} does not exist; see the presets in configs/")
    text = path.read_text()
    try:
        if path.suffix == ".json":
            data = json.loads(text)
        else:
            import yaml

            data = yaml.safe_load(text)
    except Exception as exc:
        first = str(exc).strip().splitlines()[0] if str(exc).strip() else type(exc).__name__
        raise ConfigError(f"cannot parse config file {str(path)!r}: {first}") from None
    if data is None:
        data = {}
    if not isinstance(data, dict):
        raise ConfigError(f"config file {str(path)!r} must hold a mapping at the top level")
    return data


def field_names(cls: type) -> list[str]:
    return [f.name for f in dataclasses.fields(cls)]


__all__ = ["BLOCK_TYPES", "TASKS", "ModelConfig", "field_names", "from_dict", "load_config_file"]
