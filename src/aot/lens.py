"""TransformerLens view of a trained language model: ``to_hooked_transformer(model)`` returns a
``transformer_lens.HookedTransformer`` with the same weights and the same logits, so activation patching, path
patching, attribution and the rest of that toolkit run on AoT models without a line of our own.

    pip install 'aot[lens]'      # transformer-lens >= 3, < 4 (4.0 removed HookedTransformer)

    from aot.lens import to_hooked_transformer
    tl_model = to_hooked_transformer(model)               # model: an aot CausalLM (aot-mssa, aot-mhsa, transformer)
    logits, cache = tl_model.run_with_cache(tokens)       # cache["blocks.0.attn.hook_pattern"], ...

How each block maps onto TransformerLens's attention (per head h; ``W_Q[h]`` is d × p, ``W_O[h]`` is p × d):

- MSSA (docs/paper.md §2): Q = K = V = U_hᵀz, so ``W_Q[h] = W_K[h] = W_V[h] = U_h`` with zero biases; the
  output is Σ_h U_h(·) (``tied_output``: ``W_O[h] = U_hᵀ``) or the learned W_O. The heads keep MSSA's
  symmetric QK circuit, and ``hook_q``, ``hook_k`` and ``hook_v`` all hold U_hᵀz.
- MHSA: the rows of ``qkv_proj`` split into heads. ``transformer``: also the GELU MLP (``gelu`` or GPT-2's
  ``gelu_new``).
- The step size η of ``residual_scale`` (scalar or per channel) is folded into ``W_O`` and ``b_O``; the
  pre-LayerNorm (or none), rotary (GPT-NeoX's rotate-half, the same frequencies) or learned positions, the
  score scale (1/√p or 1) and the unembedding tied to the embedding carry over as they are.

The view is a copy for analysis: training it does not change the aot model. It is a ``HookedTransformer`` whose
``generate`` continues to ``max_new_tokens`` by default, as ``aot sample`` does (aot's models have no end-of-text
token; TransformerLens would ask for an ``eos_token_id``), gives the model's own greedy tokens with learned positions
too (without TransformerLens's key-value cache there, whose 3.x ``generate`` offsets them wrongly), and refuses in
one line a prompt plus new tokens beyond the context (``aot sample`` and ``AotForCausalLM.generate`` slide their
window instead). ``set_tokenizer`` takes the
tokenizer of an ``aot export hf`` folder (``AutoTokenizer.from_pretrained(EXPORT, trust_remote_code=True)``), or
pass it as ``to_hooked_transformer(model, tokenizer)``.
"""

from __future__ import annotations

import copy
import functools
import warnings
from typing import TYPE_CHECKING, Any

import torch

from aot.blockspec import block_spec, block_specs
from aot.errors import AotError
from aot.models.lm import CausalLM
from aot.nn.attention import MultiHeadSelfAttention, MultiHeadSubspaceSelfAttention
from aot.nn.feedforward import GeluMLP

if TYPE_CHECKING:  # pragma: no cover
    from transformer_lens import HookedTransformer


def supported_blocks() -> tuple[str, ...]:
    """The blocks with a TransformerLens mapping (their spec's ``lens``)."""
    return tuple(spec.name for spec in block_specs() if spec.lens)


_ACT_FN = {"gelu": "gelu", "gelu_tanh": "gelu_new"}


def _import_lens() -> Any:
    try:
        import transformer_lens
    except ImportError as error:
        raise AotError("the TransformerLens view needs transformer-lens 3.x: pip install 'aot[lens]'") from error
    if not hasattr(transformer_lens, "HookedTransformerConfig"):
        raise AotError("transformer-lens 4 removed HookedTransformer; install 3.x: pip install 'aot[lens]'")
    return transformer_lens


def check_mappable(model: CausalLM) -> None:
    """Raise a one-line error unless ``model`` has a TransformerLens mapping (checked before the import)."""
    if not isinstance(model, CausalLM):
        raise AotError(f"the TransformerLens view is for language models, not {type(model).__name__}")
    cfg = model.cfg
    if not block_spec(cfg.block).lens:
        raise AotError(
            f"no TransformerLens mapping for block {cfg.block!r}; supported: {', '.join(supported_blocks())}"
        )
    if getattr(cfg, "token_shift", "none") != "none":
        raise AotError("no TransformerLens mapping for MSSA with a token shift (token_shift); use token_shift='none'")
    if cfg.norm not in ("layernorm", "none"):
        raise AotError(f"no TransformerLens mapping for norm {cfg.norm!r} (layernorm or none)")
    if cfg.norm == "layernorm" and not cfg.final_norm:
        raise AotError("no TransformerLens mapping for LayerNorm blocks without a final norm (final_norm=false)")


def hooked_config(model: CausalLM) -> Any:
    """The ``HookedTransformerConfig`` of ``model``'s architecture (raises for a block without a mapping)."""
    check_mappable(model)
    lens = _import_lens()
    cfg = model.cfg
    dtype = next(model.parameters()).dtype
    first: Any = model.backbone.blocks[0]  # every block has the same shapes
    extra: dict[str, Any] = {}
    mlp = _gelu_mlp(first)
    if mlp is not None:
        extra.update(d_mlp=mlp.up_proj.out_features, act_fn=_ACT_FN[cfg.activation])
    if cfg.position == "rope":
        extra.update(positional_embedding_type="rotary", rotary_dim=cfg.p, rotary_base=cfg.rope_theta)
    return lens.HookedTransformerConfig(
        n_layers=cfg.n_layer,
        d_model=cfg.n_embd,
        n_heads=cfg.n_head,
        d_head=cfg.p,
        n_ctx=cfg.block_size,
        d_vocab=cfg.vocab_size,
        attn_only=mlp is None,
        normalization_type="LN" if cfg.norm == "layernorm" else None,  # norm "none": no final norm either
        eps=first.attn_norm.eps if cfg.norm == "layernorm" else 1e-5,
        use_attn_scale=True,
        attn_scale=1.0 / first.attn.scale,  # TransformerLens divides the scores by it
        default_prepend_bos=False,
        dtype=dtype,
        device=str(next(model.parameters()).device),
        init_weights=False,
        **extra,
    )


def _gelu_mlp(block: Any) -> GeluMLP | None:
    """The block's GELU MLP (``transformer``), or ``None`` for an attention-only block."""
    mlp = getattr(block, "mlp", None)
    return mlp if isinstance(mlp, GeluMLP) else None


def _heads_in(weight: torch.Tensor, n_head: int) -> torch.Tensor:
    """A (H·p, d) projection (rows = head channels) as TransformerLens's (H, d, p)."""
    return weight.view(n_head, -1, weight.shape[-1]).transpose(1, 2)


def hooked_state_dict(model: CausalLM) -> dict[str, torch.Tensor]:
    """``model``'s weights under TransformerLens's names and shapes (see the module docstring)."""
    cfg = model.cfg
    H, p, d = cfg.n_head, cfg.p, cfg.n_embd
    vocab = cfg.vocab_size  # an aligned (padded) embedding's extra rows are no tokens
    embed, unembed = model.tok_embed.weight[:vocab], model.lm_head.weight[:vocab]
    state: dict[str, torch.Tensor] = {"embed.W_E": embed, "unembed.W_U": unembed.t()}
    state["unembed.b_U"] = model.lm_head.weight.new_zeros(cfg.vocab_size)
    zeros = model.tok_embed.weight.new_zeros
    if cfg.position != "rope":  # learned, or none: TransformerLens's standard embedding at zero
        state["pos_embed.W_pos"] = model.pos_embed.weight if model.pos_embed is not None else zeros(cfg.block_size, d)
    blocks: list[Any] = list(model.backbone.blocks)
    for i, block in enumerate(blocks):
        prefix = f"blocks.{i}."
        attn = block.attn
        if isinstance(attn, MultiHeadSubspaceSelfAttention):
            bases = _heads_in(attn.subspace_proj.weight, H)  # U_h, (H, d, p)
            for name in "QKV":
                state[prefix + f"attn.W_{name}"] = bases
                state[prefix + f"attn.b_{name}"] = zeros(H, p)
            if attn.out_proj is None:  # tied: Σ_h U_h(·)
                W_O, b_O = bases.transpose(1, 2), zeros(d)
            else:
                W_O, b_O = attn.out_proj.weight.t().reshape(H, p, d), attn.out_proj.bias
        elif isinstance(attn, MultiHeadSelfAttention):
            w_q, w_k, w_v = attn.qkv_proj.weight.chunk(3, dim=0)
            biases = attn.qkv_proj.bias.chunk(3) if attn.qkv_proj.bias is not None else (zeros(H * p),) * 3
            for name, weight, bias in zip("QKV", (w_q, w_k, w_v), biases, strict=True):
                state[prefix + f"attn.W_{name}"] = _heads_in(weight, H)
                state[prefix + f"attn.b_{name}"] = bias.view(H, p)
            W_O, b_O = attn.out_proj.weight.t().reshape(H, p, d), attn.out_proj.bias
        else:  # pragma: no cover - hooked_config refuses these blocks first
            raise AotError(f"no TransformerLens mapping for {type(attn).__name__}")
        b_O = zeros(d) if b_O is None else b_O
        eta = block.attn_scale.eta
        if eta is not None:  # x + η ⊙ (out W_O + b_O): fold η into the output projection
            W_O, b_O = W_O * eta, b_O * eta
        state[prefix + "attn.W_O"], state[prefix + "attn.b_O"] = W_O, b_O
        if cfg.norm == "layernorm":
            state[prefix + "ln1.w"] = block.attn_norm.weight
            state[prefix + "ln1.b"] = block.attn_norm.bias if block.attn_norm.bias is not None else zeros(d)
        mlp = _gelu_mlp(block)
        if mlp is not None:
            hidden = mlp.up_proj.out_features
            state[prefix + "ln2.w"] = block.mlp_norm.weight
            state[prefix + "ln2.b"] = block.mlp_norm.bias if block.mlp_norm.bias is not None else zeros(d)
            state[prefix + "mlp.W_in"] = mlp.up_proj.weight.t()
            state[prefix + "mlp.b_in"] = mlp.up_proj.bias if mlp.up_proj.bias is not None else zeros(hidden)
            state[prefix + "mlp.W_out"] = mlp.down_proj.weight.t()
            state[prefix + "mlp.b_out"] = mlp.down_proj.bias if mlp.down_proj.bias is not None else zeros(d)
    if cfg.norm == "layernorm":
        final: Any = model.backbone.final_norm
        state["ln_final.w"] = final.weight
        state["ln_final.b"] = final.bias if final.bias is not None else zeros(d)
    return {name: tensor.detach().clone().contiguous() for name, tensor in state.items()}


@functools.cache
def hooked_class() -> type:
    """``HookedTransformer`` with the defaults of an aot model (see the module docstring)."""
    lens = _import_lens()

    class AotHookedTransformer(lens.HookedTransformer):  # type: ignore[misc,name-defined]
        """A TransformerLens view of an aot language model (:func:`to_hooked_transformer`)."""

        def generate(self, input: Any = "", max_new_tokens: int = 10, stop_at_eos: bool = False, **kwargs: Any) -> Any:
            """TransformerLens's ``generate``, to ``max_new_tokens`` unless ``stop_at_eos`` (with a tokenizer's eos or
            ``eos_token_id``); the prompt and the new tokens must fit the context. With learned positions it runs
            without TransformerLens's key-value cache unless ``use_past_kv_cache`` says otherwise: 3.x's cached
            ``generate`` embeds the whole sequence at the cache's offset, which gives other tokens than the model's
            (and fails once the sequence is longer than half the context)."""
            kwargs.setdefault("use_past_kv_cache", self.cfg.positional_embedding_type != "standard")
            tokens = input if isinstance(input, torch.Tensor) else self.to_tokens(input)
            if tokens.shape[1] + max_new_tokens > self.cfg.n_ctx:
                raise AotError(
                    f"a prompt of {tokens.shape[1]} tokens and max_new_tokens={max_new_tokens} exceed the context of "
                    f"{self.cfg.n_ctx} tokens of the TransformerLens view; shorten them (`aot sample` and "
                    "AotForCausalLM.generate slide their window instead)"
                )
            return super().generate(input, max_new_tokens=max_new_tokens, stop_at_eos=stop_at_eos, **kwargs)

        def set_tokenizer(self, tokenizer: Any, default_padding_side: Any = None) -> None:
            """TransformerLens's, handed a copy of ``tokenizer`` that prepends its bos: TransformerLens would reload
            one from the tokenizer's folder, which for an export means loading its config again (and, without
            ``import aot.hf``, asking whether to trust its code)."""
            if getattr(tokenizer, "bos_token", None) is not None and getattr(tokenizer, "add_bos_token", True) is False:
                tokenizer = copy.deepcopy(tokenizer)
                tokenizer.add_bos_token = True
            super().set_tokenizer(tokenizer, default_padding_side)

    return AotHookedTransformer


def to_hooked_transformer(model: CausalLM, tokenizer: Any = None) -> HookedTransformer:
    """A ``HookedTransformer`` computing what ``model`` computes (same logits; see the module docstring), with
    ``tokenizer`` (a HuggingFace tokenizer, e.g. an export's) set when given."""
    check_mappable(model)
    with warnings.catch_warnings():  # 3.x deprecates HookedTransformer in favour of 4.x's HF-only bridge
        warnings.simplefilter("ignore", DeprecationWarning)
        tl_model = hooked_class()(hooked_config(model))
    state = hooked_state_dict(model)
    missing, unexpected = tl_model.load_state_dict(state, strict=False)
    # TransformerLens keeps buffers (masks, rotary tables, IGNORE) in its state dict; every weight must be set
    missing = [name for name in missing if not name.endswith(("mask", "IGNORE", "rotary_sin", "rotary_cos"))]
    if missing or unexpected:
        raise AotError(f"TransformerLens view: weights not mapped {missing}, unknown {unexpected}")
    if tokenizer is not None:
        tl_model.set_tokenizer(tokenizer)
    return tl_model.eval()
