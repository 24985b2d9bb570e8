"""A peer in the same run: HuggingFace transformers' GPT2LMHeadModel on our GPT-2 baseline's config.

``transformers`` is an optional extra (``pip install aot[hf]``); without it the comparison is skipped with a
message. The HF model is built from a ``GPT2Config`` with the same layers, width, heads, vocabulary and
context, no dropout, the same GELU (GPT-2's tanh approximation, HF's default ``gelu_new``, for the ``gpt2-*``
presets; the exact one where our config says ``activation="gelu"``) and SDPA attention, and timed in the same
process, with the same thread count and dtype, by the same functions as our models. HF's logging is silenced
while the peer is built (its warnings are about HF's own defaults, not about this comparison).
"""

from __future__ import annotations

import importlib.util
from typing import Any

from torch import nn

from aot.blockspec import block_spec, block_specs
from aot.config import ModelConfig
from aot.errors import AotError

MISSING_MESSAGE = "HuggingFace transformers is not installed; `pip install aot[hf]` to compare with its GPT-2"

#: ``ModelConfig.activation`` → HF's ``activation_function`` (``gelu_new`` is GPT-2's tanh approximation)
HF_ACTIVATION = {"gelu": "gelu", "gelu_tanh": "gelu_new"}


def transformers_available() -> bool:
    return importlib.util.find_spec("transformers") is not None


def hf_gpt2(cfg: ModelConfig) -> nn.Module:
    """HF ``GPT2LMHeadModel`` with the config of our ``transformer`` block (GPT-2): same n_layer, n_embd,
    n_head, vocab_size, n_positions = block_size, MLP width, LayerNorm eps 1e-5, tied LM head."""
    if not transformers_available():
        raise AotError(MISSING_MESSAGE)
    if not block_spec(cfg.block).hf_gpt2 or cfg.task != "lm" or cfg.position != "learned" or not cfg.bias:
        gpt2 = " or ".join(repr(spec.name) for spec in block_specs() if spec.hf_gpt2)
        raise AotError(f"the HF GPT-2 peer needs a GPT-2 config (block={gpt2}, task='lm'), got {cfg.block!r}")
    from transformers import GPT2Config, GPT2LMHeadModel
    from transformers.utils import logging as hf_logging

    hf_cfg = GPT2Config(  # type: ignore[call-arg]
        vocab_size=cfg.vocab_size,
        n_positions=cfg.block_size,
        n_embd=cfg.n_embd,
        n_layer=cfg.n_layer,
        n_head=cfg.n_head,
        n_inner=int(cfg.mlp_ratio * cfg.n_embd),
        activation_function=HF_ACTIVATION[cfg.activation],
        resid_pdrop=cfg.dropout,
        embd_pdrop=cfg.dropout,
        attn_pdrop=cfg.dropout,
        layer_norm_epsilon=1e-5,
        tie_word_embeddings=True,
        bos_token_id=cfg.vocab_size - 1,
        eos_token_id=cfg.vocab_size - 1,
        use_cache=False,
        attn_implementation="sdpa",
    )
    verbosity = hf_logging.get_verbosity()
    hf_logging.set_verbosity_error()  # for the peer only; restored below
    try:
        model = GPT2LMHeadModel(hf_cfg)
    finally:
        hf_logging.set_verbosity(verbosity)
    model.loss_type = "ForCausalLM"  # HF's default loss, named, so its forward does not warn that none was set
    return model


def hf_parameter_names(n_layer: int) -> dict[str, tuple[str, bool]]:
    """HF GPT-2 parameter name → (aot parameter name, transposed?): HF's Conv1D stores weights transposed."""
    mapping: dict[str, tuple[str, bool]] = {
        "transformer.wte.weight": ("tok_embed.weight", False),
        "transformer.wpe.weight": ("pos_embed.weight", False),
        "transformer.ln_f.weight": ("backbone.final_norm.weight", False),
        "transformer.ln_f.bias": ("backbone.final_norm.bias", False),
    }
    for layer in range(n_layer):
        ours, theirs = f"backbone.blocks.{layer}.", f"transformer.h.{layer}."
        for hf_name, aot_name, transpose in [
            ("ln_1", "attn_norm", False),
            ("attn.c_attn", "attn.qkv_proj", True),
            ("attn.c_proj", "attn.out_proj", True),
            ("ln_2", "mlp_norm", False),
            ("mlp.c_fc", "mlp.up_proj", True),
            ("mlp.c_proj", "mlp.down_proj", True),
        ]:
            mapping[theirs + hf_name + ".weight"] = (ours + aot_name + ".weight", transpose)
            mapping[theirs + hf_name + ".bias"] = (ours + aot_name + ".bias", False)
    return mapping


def load_aot_weights_into_hf(aot_model: nn.Module, hf_model: nn.Module) -> None:
    """Copy an aot GPT-2's weights into a HF GPT-2 of the same config, so the two compute the same function —
    the check that the peer is the same model."""
    _copy_weights(aot_model, hf_model, to_hf=True)


def load_hf_weights_into_aot(hf_model: nn.Module, aot_model: nn.Module) -> None:
    """Copy a HF ``GPT2LMHeadModel``'s weights into an aot GPT-2 of the same sizes (``gpt2-*`` preset)."""
    _copy_weights(aot_model, hf_model, to_hf=False)


def _copy_weights(aot_model: nn.Module, hf_model: nn.Module, to_hf: bool) -> None:
    import torch

    ours, theirs = dict(aot_model.named_parameters()), dict(hf_model.named_parameters())
    mapping = hf_parameter_names(int(hf_model.config.n_layer))  # type: ignore[union-attr, arg-type]
    with torch.no_grad():
        for hf_name, (aot_name, transpose) in mapping.items():
            source, target = (ours[aot_name], theirs[hf_name]) if to_hf else (theirs[hf_name], ours[aot_name])
            target.copy_(source.t() if transpose else source)


def num_params(model: nn.Module) -> int:
    """Unique parameters (a tied weight once), as ``AotModel.num_params``."""
    return sum(p.numel() for p in {id(p): p for p in model.parameters()}.values())


def hf_version() -> dict[str, Any]:
    import transformers

    return {"transformers": transformers.__version__}
