"""The HuggingFace model of an aot language model: ``AotForCausalLM``, a ``PreTrainedModel`` around aot's
``CausalLM`` (``self.aot``), so its logits are the model's own.

One source, two homes. With aot installed this is :mod:`aot.hf.modeling_aot`, and the lines between the two
``aot:`` marks below import aot's own model. ``aot export hf`` ships this file as the export's ``modeling_aot.py``
with those lines replaced by the source of what they import, taken from aot's modules as they are: the
``CausalLM`` head and the blocks, attention, cache and hooks of the exported block (:mod:`aot.hf.standalone`). The
export then needs only torch and transformers (``trust_remote_code=True`` where aot is not installed) and computes
what aot computes, line for line. Why assembled rather than written again for exports: the math lives once, in
:mod:`aot.nn`, and this wrapper once, here; a second, hand-written copy of the blocks would drift from aot.nn the
first time either changed, and the export tests would compare the copy with itself.

``forward`` runs aot's modules in aot's order (embedding, the blocks, the final norm, the tied head: what
``CausalLM.forward`` runs), so that it can also give what transformers' users ask of a causal LM:

- ``labels``: the mean next-token loss (HF's convention: the labels are the inputs, the model shifts; -100 is
  ignored). ``inputs_embeds`` in place of ``input_ids`` (positions are added to them as to the token embeddings).
- ``attention_mask`` with zeros (padding, left or right, in ``forward``, ``generate`` and pipelines): masked keys
  are left out of every attention, and positions count the unmasked tokens (``position_ids`` = cumsum(mask) − 1,
  transformers' rule), for learned and rotary positions alike; a token shift sees zero before a sequence's first
  token, as without padding. A recurrent block (``linear-attn``, ``mamba``) takes right padding only: a left pad
  would enter its state (refused in one line).
- ``output_hidden_states``: the embeddings, the residual stream after each block, the last one after the final
  norm (GPT-2's convention: ``num_hidden_layers + 1`` tensors). ``output_attentions``: each layer's attention
  probabilities (B, H, T, T_keys); for MSSA the softmax of the subspace scores s·P_k P_kᵀ. They are computed
  explicitly only when asked (aot's reference path, ``aot.nn.attention.reference_attention``), as they are with
  ``attn_implementation="eager"``; otherwise attention runs in ``F.scaled_dot_product_attention``.
- the cache (``AotCache``, :mod:`aot.hf.cache`): transformers' ``Cache`` API over aot's per-layer cache, so MSSA
  still stores one tensor per layer (not keys and values); feeding it back as ``cache`` (or the 4.x name
  ``past_key_values``), beam search, assisted and prompt-lookup decoding (which crop it) work on it.
- gradient checkpointing (``gradient_checkpointing_enable()``): each block recomputed in the backward pass.
- ``resize_token_embeddings`` (tied head, or untied with ``tie_word_embeddings=False``), the model's own vocabulary
  size kept in ``config.aot`` so that the saved folder loads again.
- ``generate`` past the context (``max_position_embeddings``, the model's ``block_size``) slides the window as
  ``aot sample`` does (``CausalLM.generate``): when the next step would not fit after the cached tokens, the cache
  restarts on the last ``block_size`` tokens, whose positions count from the window's start again.

How padding and attention weights reach aot's attention, which takes neither: for one block's call the wrapper
gives each attention module of the block (``_AttentionCore``) its own ``attend`` (and with custom positions
``rotate``), which masks the scores and keeps the probabilities, and zeroes a token shift's input at the masked
tokens; nothing changes outside that call, and without a mask, ``output_attentions`` or eager attention the
modules run as they are (the logits are then aot's forward's to the last bit).
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from functools import partial
from typing import Any

import torch
import torch.nn.functional as F
from torch import nn
from transformers import GenerationMixin, PreTrainedModel
from transformers.modeling_layers import GradientCheckpointingLayer
from transformers.modeling_outputs import CausalLMOutputWithPast

# --- aot: begin (an export writes in place of these lines the source of what they import: aot.hf.standalone) ---
from aot.errors import AotError
from aot.hf.cache import AotCache
from aot.hf.inner import model_config
from aot.models.inputs import check_token_ids
from aot.models.lm import CausalLM, shifted_cross_entropy
from aot.nn.attention import _AttentionCore, causal_mask, reference_attention
from aot.nn.rotary import Rotary
from aot.nn.token_shift import TokenShift

# --- aot: end ---
from .configuration_aot import AotConfig


class AotForCausalLM(PreTrainedModel, GenerationMixin):
    """A ``PreTrainedModel`` around aot's ``CausalLM`` (``self.aot``), built from ``config.aot`` or given."""

    config_class = AotConfig
    base_model_prefix = "aot"
    main_input_name = "input_ids"
    _tied_weights_keys = {"aot.lm_head.weight": "aot.tok_embed.weight"}  # noqa: RUF012 (transformers reads it)
    supports_gradient_checkpointing = True
    _supports_sdpa = True  # the default; attn_implementation="eager" computes softmax(q kᵀ s + mask) v explicitly
    # forward reads config._attn_implementation at every call, so set_attn_implementation takes effect at once
    # (transformers guesses otherwise from the source: an attention class that does not use its attention interface)
    _can_set_attn_implementation_cached_value = True

    def __init__(self, config: AotConfig, model: CausalLM | None = None) -> None:
        super().__init__(config)
        self._reference: dict[str, Any] = {}  # what _init_weights copies from (see initialize_weights)
        if model is None:
            if config.aot is None:
                raise AotError("AotConfig.aot is empty: the config of an aot model keeps its fields under 'aot'")
            model = CausalLM(model_config(config.aot))
        else:  # a trained model: transformers' initialisation must leave it as it is
            for module in model.modules():
                module._is_hf_initialized = True  # type: ignore[assignment]  # transformers' flag
        # aot's CausalLM ties its head in its constructor; here transformers ties it (post_init, and after loading),
        # so that loading knows the embedding from the head. Untied, the head starts as a copy of the embedding.
        weight = model.lm_head.weight.detach()
        tied = getattr(config, "tie_word_embeddings", True)
        model.lm_head.weight = nn.Parameter(torch.empty_like(weight) if tied else weight.clone())
        self.aot = model
        # the blocks as transformers' checkpointing runs layers (GradientCheckpointingLayer); each holds its block
        # without owning it, so the weights keep their names (aot.backbone.blocks.N)
        self.layers = nn.ModuleList(
            BlockCall(model.backbone.blocks, index) for index in range(len(model.backbone.blocks))
        )
        self.post_init()

    # -- initialisation -----------------------------------------------------------------------------------
    def initialize_weights(self) -> None:
        """transformers' initialisation (of a model built here, or of what a checkpoint lacks), with aot's own
        initialisation as the source: see :meth:`_init_weights`."""
        self._reference["active"] = True
        try:
            super().initialize_weights()
        finally:
            self._reference.clear()

    def _init_weights(self, module: nn.Module) -> None:
        """aot's initialisation (``aot.models.backbone.init_weights`` and the modules' constructors), module by
        module: the module's own parameters and buffers are copied from a freshly built aot model (one per
        initialisation pass, built when a module first needs it), those transformers has loaded or marked left
        alone. Rotary frequencies, a buffer that is not saved, are computed directly, so loading a checkpoint that
        holds every weight builds no second model. A module that is not part of the model (transformers' resized
        embeddings) gets aot's rule for its type: normal(0, init_std), zero bias."""
        own = [*module.named_parameters(recurse=False), *module.named_buffers(recurse=False)]
        if not own:
            return
        cfg = self.aot.cfg
        if isinstance(module, Rotary):
            module.inv_freq.copy_(Rotary(cfg.p, cfg.rope_theta).inv_freq)
            module._tables.clear()
            return
        reference = self._reference if self._reference.get("active") else {}
        if "names" not in reference:
            reference["names"] = {id(m): name for name, m in self.aot.named_modules()}
        name = reference["names"].get(id(module))
        if name is None:
            if isinstance(module, nn.Linear | nn.Embedding):
                nn.init.normal_(module.weight, std=cfg.init_std)
                if isinstance(getattr(module, "bias", None), torch.Tensor):
                    nn.init.zeros_(module.bias)  # type: ignore[arg-type]
            return
        if "model" not in reference:
            reference["model"] = CausalLM(model_config(self.config.aot))
        try:
            fresh = reference["model"].get_submodule(name)
        except AttributeError:
            return
        for key, tensor in own:
            source = getattr(fresh, key, None)
            if getattr(tensor, "_is_hf_initialized", False) or not isinstance(source, torch.Tensor):
                continue
            if source.shape == tensor.shape:
                with torch.no_grad():
                    tensor.copy_(source)

    # -- what transformers reads --------------------------------------------------------------------------
    @classmethod
    def _supports_default_dynamic_cache(cls) -> bool:
        return False  # our own cache (AotCache: MSSA stores one tensor per layer), made in forward

    @property
    def _is_stateful(self) -> bool:  # type: ignore[override]
        """A block that keeps a state in its cache (recurrent, or a token shift): it cannot be rolled back, so no
        assisted decoding."""
        return any(not isinstance(m, _AttentionCore) for m in self._mixers()) or any(
            isinstance(m, TokenShift) for m in self.aot.modules()
        )

    def _mixers(self) -> list[nn.Module]:
        return [block.get_submodule("attn") for block in self.aot.backbone.blocks]

    def get_input_embeddings(self) -> nn.Module:
        return self.aot.tok_embed

    def set_input_embeddings(self, value: nn.Module) -> None:
        self.aot.tok_embed = value  # type: ignore[assignment]

    def get_output_embeddings(self) -> nn.Module:
        return self.aot.lm_head

    def set_output_embeddings(self, new_embeddings: nn.Module) -> None:
        self.aot.lm_head = new_embeddings  # type: ignore[assignment]

    def resize_token_embeddings(self, *args: Any, **kwargs: Any) -> nn.Embedding:
        """transformers' resize, then the model's own config (``config.aot``) told the new vocabulary, so that the
        saved folder builds a model of the new size."""
        embeddings = super().resize_token_embeddings(*args, **kwargs)
        rows, vocab = int(embeddings.weight.shape[0]), int(self.config.vocab_size)
        if (self.aot.cfg.vocab_size, self.aot.cfg.padded_vocab) != (vocab, rows) and rows == vocab:
            self.config.aot = {**self.config.aot, "vocab_size": vocab, "vocab_multiple": 1}
            self.aot.cfg = model_config(self.config.aot)
        return embeddings

    # -- forward ------------------------------------------------------------------------------------------
    def forward(
        self,
        input_ids: torch.Tensor | None = None,
        attention_mask: torch.Tensor | None = None,
        position_ids: torch.Tensor | None = None,
        cache: AotCache | None = None,
        inputs_embeds: torch.Tensor | None = None,
        labels: torch.Tensor | None = None,
        use_cache: bool | None = None,
        output_attentions: bool | None = None,
        output_hidden_states: bool | None = None,
        return_dict: bool | None = None,
        past_key_values: AotCache | None = None,
        shift_labels: torch.Tensor | None = None,
        **_: Any,
    ) -> Any:
        """Logits of the wrapped model, and what is asked besides (see the module docstring)."""
        if (input_ids is None) == (inputs_embeds is None):
            raise AotError("AotForCausalLM takes input_ids or inputs_embeds: pass one of them")
        cfg = self.aot.cfg
        if input_ids is not None:
            check_token_ids(input_ids, self.config.vocab_size)
            batch, length, device = input_ids.shape[0], input_ids.shape[1], input_ids.device
        else:
            assert inputs_embeds is not None
            batch, length, device = inputs_embeds.shape[0], inputs_embeds.shape[1], inputs_embeds.device
        training = self.training and torch.is_grad_enabled() and any(c.gradient_checkpointing for c in self.layers)
        use_cache = (self.config.use_cache if use_cache is None else use_cache) and not training
        cache = own_cache(cache if cache is not None else past_key_values)
        if use_cache and cache is None:
            cache = AotCache(cfg.n_layer)
        cached = cache.length if cache is not None else 0
        if cached + length > cfg.block_size:
            raise AotError(
                f"sequence of {cached + length} tokens exceeds block_size={cfg.block_size}; "
                "crop the input or build the model with a larger block_size"
            )
        keep = self._keep(attention_mask, cached + length)
        positions = self._positions(position_ids, keep, cache, batch, cached, length, device, cfg.block_size)
        step = Step(
            keep=keep,
            positions=positions if positions is None or cache is None else cache.add_positions(positions),
            record=[] if (self.config.output_attentions if output_attentions is None else output_attentions) else None,
            explicit=self.config._attn_implementation == "eager",
        )
        if step.record is not None and not all(isinstance(m, _AttentionCore) for m in self._mixers()):
            raise AotError(f"block {cfg.block!r} has no attention probabilities to return (output_attentions)")

        x = self.aot.tok_embed(input_ids) if inputs_embeds is None else inputs_embeds
        if self.aot.pos_embed is not None:
            where = torch.arange(cached, cached + length, device=device) if positions is None else positions
            x = x + self.aot.pos_embed(where)
        x = self.aot.hook_embed(self.aot.drop(x))
        hidden = [x]
        for index, layer in enumerate(self.layers):
            x = layer(x, cache=None if cache is None else cache.layers[index], step=step)
            hidden.append(x)
        x = self.aot.backbone.hook_final(self.aot.backbone.final_norm(x))
        hidden[-1] = x  # the last hidden state after the final norm (GPT-2's convention)
        logits = self.aot.lm_head(x)
        if logits.shape[-1] != self.config.vocab_size:  # the alignment rows are no tokens: cut them off
            logits = logits[..., : self.config.vocab_size]
        show_hidden = self.config.output_hidden_states if output_hidden_states is None else output_hidden_states
        out = CausalLMOutputWithPast(
            loss=loss(logits, labels, shift_labels),
            logits=logits,
            cache=cache if use_cache else None,  # type: ignore[arg-type]
            hidden_states=tuple(hidden) if show_hidden else None,
            attentions=None if step.record is None else tuple(step.record),
        )
        return out if return_dict is not False else out.to_tuple()

    def _keep(self, attention_mask: torch.Tensor | None, n_keys: int) -> torch.Tensor | None:
        """The tokens to attend, (B, n_keys) bool, from a 2-D ``attention_mask`` over the cached and the new tokens;
        None when there is nothing to leave out."""
        if attention_mask is None:
            return None
        if attention_mask.ndim != 2 or attention_mask.shape[1] < n_keys:
            raise AotError(
                f"attention_mask of shape {tuple(attention_mask.shape)}: AotForCausalLM takes a (batch, tokens) mask "
                f"of ones and zeros over the cached and the new tokens ({n_keys})"
            )
        keep = attention_mask[:, -n_keys:].bool()
        if bool(keep.all()):
            return None
        mixers = self._mixers()
        if not all(isinstance(m, _AttentionCore) for m in mixers) and bool((keep.long().diff(dim=1) > 0).any()):
            raise AotError(
                f"block {self.aot.cfg.block!r} is recurrent: a pad before a token would enter its state; "
                "pad on the right (tokenizer.padding_side='right') or pass one prompt length per batch"
            )
        return keep

    @staticmethod
    def _positions(
        position_ids: torch.Tensor | None,
        keep: torch.Tensor | None,
        cache: AotCache | None,
        batch: int,
        cached: int,
        length: int,
        device: torch.device,
        block_size: int,
    ) -> torch.Tensor | None:
        """The positions (B, T) of the new tokens: ``position_ids``, else counted over the unmasked tokens
        (cumsum(mask) − 1, transformers' rule), else — when the cache already holds such positions — those that
        follow its length; None for aot's own (index = position)."""
        if position_ids is not None:
            positions = position_ids[..., -length:].to(device).expand(batch, length)
            if int(positions.max()) >= block_size or int(positions.min()) < 0:
                raise AotError(f"position_ids must lie in [0, block_size={block_size})")
        elif keep is not None:
            positions = (keep.long().cumsum(dim=1) - 1).clamp(min=0)[:, -length:]
        elif cache is not None and cache.positions is not None:
            positions = torch.arange(cached, cached + length, device=device).expand(batch, length)
        else:
            return None
        if cache is not None and cache.positions is None and cached:
            cache.positions = torch.arange(cached, device=device).expand(batch, cached)
        return positions

    # -- generation ---------------------------------------------------------------------------------------
    def _prepare_cache_for_generation(
        self, generation_config: Any, model_kwargs: dict, *args: Any, **kwargs: Any
    ) -> Any:
        """Our own cache (``AotCache``) where transformers would make its ``DynamicCache`` before the first step
        (assisted decoding needs it then); a cache the caller passes, and ``use_cache=False``, as transformers
        handles them. Other cache implementations (static, quantized, offloaded) are refused in one line."""
        if model_kwargs.get("cache") is not None or generation_config.use_cache is False:
            return super()._prepare_cache_for_generation(generation_config, model_kwargs, *args, **kwargs)  # type: ignore[misc]
        if generation_config.cache_implementation not in (None, "dynamic"):
            raise AotError(
                f"cache_implementation={generation_config.cache_implementation!r}: AotForCausalLM decodes on its own "
                "cache (AotCache), which grows as needed; leave cache_implementation unset"
            )
        model_kwargs["cache"] = AotCache(self.aot.cfg.n_layer)
        if getattr(generation_config, "is_assistant", False):
            model_kwargs["cache"].activate_past_recording()
        return None

    def prepare_inputs_for_generation(
        self,
        input_ids: torch.Tensor,
        next_sequence_length: int | None = None,
        cache: Any = None,
        inputs_embeds: torch.Tensor | None = None,
        **kwargs: Any,
    ) -> dict[str, Any]:
        """transformers' inputs of the next step, with the window slid as ``aot sample`` slides it: when the tokens
        to feed would not fit after the cached ones, the last ``block_size`` tokens on a new cache (or, without a
        cache, the last ``block_size`` tokens). Positions come from the attention mask over the window (or are
        aot's own), not from transformers' running count, which passes the context."""
        inputs = super().prepare_inputs_for_generation(
            input_ids, next_sequence_length=next_sequence_length, cache=cache, inputs_embeds=inputs_embeds, **kwargs
        )
        inputs.pop("position_ids", None)
        window = self.aot.cfg.block_size
        ours = isinstance(cache, AotCache)
        cached = cache.length if ours else 0
        fed = inputs["inputs_embeds"] if inputs.get("inputs_embeds") is not None else inputs["input_ids"]
        if ours and cached + fed.shape[1] <= window:
            return inputs  # the new tokens after the cached ones
        # this step computes from the start: all the tokens (a prompt given as embeddings, then the generated ones:
        # transformers' input_ids hold only those), the last `window` of them, and a new cache
        if inputs.get("inputs_embeds") is None and inputs_embeds is not None:
            inputs["inputs_embeds"] = torch.cat([inputs_embeds, self.aot.tok_embed(input_ids)], dim=1)
            inputs["input_ids"] = None
        elif inputs.get("inputs_embeds") is None:
            inputs["input_ids"] = input_ids
        key = "input_ids" if inputs.get("inputs_embeds") is None else "inputs_embeds"
        inputs[key] = inputs[key][:, -window:]
        if inputs.get("attention_mask") is not None:
            inputs["attention_mask"] = inputs["attention_mask"][:, -window:]
        if ours and cached:
            inputs["cache"] = AotCache(self.aot.cfg.n_layer)
        return inputs


def loss(logits: torch.Tensor, labels: torch.Tensor | None, shift_labels: torch.Tensor | None) -> torch.Tensor | None:
    """The mean next-token loss: against ``labels`` shifted by the model (:func:`shifted_cross_entropy`), or against
    ``shift_labels``, targets already aligned with the logits (what transformers' trainer passes under sequence
    parallelism; they replace ``labels``). -100 is ignored."""
    if shift_labels is not None:  # in float32 at least, as shifted_cross_entropy
        flat = logits.to(torch.promote_types(logits.dtype, torch.float32)).flatten(0, 1)
        return F.cross_entropy(flat, shift_labels.to(logits.device).flatten(), ignore_index=-100)
    return None if labels is None else shifted_cross_entropy(logits, labels)


class BlockCall(GradientCheckpointingLayer):
    """One aot block as transformers runs a layer: ``forward(x, cache, step)`` is the block on ``x`` with its
    attention told what ``step`` holds (:func:`steered`). transformers' gradient checkpointing wraps this forward, so
    the recomputation in the backward pass is told too. The block is held, not owned (no weights here)."""

    def __init__(self, blocks: nn.ModuleList, index: int) -> None:
        super().__init__()
        self.held, self.index = (blocks,), index  # a tuple, not a submodule: the blocks stay where aot keeps them

    def forward(self, x: torch.Tensor, cache: Any = None, step: Step | None = None) -> torch.Tensor:
        block = self.held[0][self.index]
        if step is None:
            return block(x, cache)  # type: ignore[no-any-return]
        with steered(block, step):
            return block(x, cache)  # type: ignore[no-any-return]


def own_cache(cache: Any) -> AotCache | None:
    """``cache`` if it is ours; None for none or an empty cache of transformers' own (ours replaces it)."""
    if cache is None or isinstance(cache, AotCache):
        return cache
    if hasattr(cache, "get_seq_length") and cache.get_seq_length() == 0:
        return None
    raise AotError(
        f"AotForCausalLM continues its own cache (AotCache, as its outputs return it), not a {type(cache).__name__}"
    )


class Step:
    """What one forward call tells the attention layers besides their input: the keys to attend (``keep``, (B, T_keys)
    bool, None for all), every key's position (``positions``, (B, T_keys), None for aot's own), the list that
    collects each layer's attention probabilities (``record``, None when not asked) and whether to compute attention
    explicitly (``explicit``: eager)."""

    def __init__(
        self,
        keep: torch.Tensor | None,
        positions: torch.Tensor | None,
        record: list[torch.Tensor] | None,
        explicit: bool,
    ) -> None:
        self.keep, self.positions, self.record, self.explicit = keep, positions, record, explicit

    @property
    def plain(self) -> bool:
        """Nothing to tell: aot's modules run as they are."""
        return self.keep is None and self.positions is None and self.record is None and not self.explicit


@contextmanager
def steered(block: nn.Module, step: Step) -> Iterator[None]:
    """For the duration of one call of ``block``: each attention module attends through :func:`attend` (and rotates
    through :func:`rotate` when positions are given), and a token shift sees zeros at the masked tokens."""
    if step.plain:
        yield
        return
    cores = [m for m in block.modules() if isinstance(m, _AttentionCore)]
    handles = []
    for core in cores:
        core.attend = partial(attend, core, step)  # type: ignore[method-assign]  # this instance, this call
        if step.positions is not None and core.rotary is not None:
            core.rotate = partial(rotate, core, step)  # type: ignore[method-assign]
    if step.keep is not None:
        shifts = [m for m in block.modules() if isinstance(m, TokenShift)]
        handles = [m.register_forward_pre_hook(partial(zero_masked, step)) for m in shifts]
    try:
        yield
    finally:
        for core in cores:
            core.__dict__.pop("attend", None)
            core.__dict__.pop("rotate", None)
        for handle in handles:
            handle.remove()


def attend(core: _AttentionCore, step: Step, q: torch.Tensor, k: torch.Tensor, v: torch.Tensor) -> torch.Tensor:
    """``_AttentionCore.attend`` with the masked keys left out of every query's softmax (a query with no key left —
    a pad before a sequence's first token — keeps its causal keys: its output is a pad's, never read), and the
    attention probabilities kept in ``step.record``. Explicit (``reference_attention``) when the probabilities are
    asked for, a hook reads them, or attention is eager; ``F.scaled_dot_product_attention`` with the mask otherwise."""
    n_query, n_key = q.shape[-2], k.shape[-2]
    allowed = causal_mask(n_query, n_key, q.device) if core.causal else None
    if step.keep is not None:
        keys = step.keep[:, None, None, -n_key:]  # (B, 1, 1, Tk)
        masked = keys if allowed is None else allowed & keys  # (B, 1, Tq, Tk)
        fallback = torch.ones_like(masked) if allowed is None else allowed.expand_as(masked)
        allowed = torch.where(masked.any(dim=-1, keepdim=True), masked, fallback)
    dropout = core.dropout if core.training else 0.0
    if step.record is None and not (step.explicit or core.use_reference or core.hook_pattern.active):
        out = F.scaled_dot_product_attention(q, k, v, attn_mask=allowed, dropout_p=dropout, scale=core.scale)
        return hook_z(core, out)
    out, pattern = reference_attention(q, k, v, scale=core.scale, mask=allowed)
    pattern = core.hook_pattern(pattern)
    if dropout:
        pattern = F.dropout(pattern, dropout)
    if dropout or core.hook_pattern.active:
        out = torch.matmul(pattern, v)  # a hook may have replaced the pattern
    if step.record is not None:
        step.record.append(pattern)
    return hook_z(core, out)


def hook_z(core: _AttentionCore, out: torch.Tensor) -> torch.Tensor:
    """The per-head outputs through ``hook_z`` as aot's own attend passes them (in TransformerLens's layout where
    aot's ``hook_heads`` gives it)."""
    heads = getattr(core, "hook_heads", None)
    return heads(core.hook_z, out) if heads is not None else core.hook_z(out)  # type: ignore[no-any-return]


def rotate(
    core: _AttentionCore, step: Step, q: torch.Tensor, k: torch.Tensor, q_offset: int
) -> tuple[torch.Tensor, torch.Tensor]:
    """``_AttentionCore.rotate`` at each token's own position (``step.positions``: the keys' (B, T_keys); the
    queries are the last ones) instead of its index: :class:`Rotary`'s rotation with its own tables, per token."""
    assert step.positions is not None and core.rotary is not None
    key_positions = step.positions[:, -k.shape[-2] :]
    cos, sin = core.rotary.tables(int(key_positions.max()) + 1, q.device, q.dtype)

    def turn(x: torch.Tensor, where: torch.Tensor) -> torch.Tensor:
        c, s = cos[where][:, None], sin[where][:, None]  # (B, 1, T, p)
        half = x.shape[-1] // 2
        return x * c + torch.cat([-x[..., half:], x[..., :half]], dim=-1) * s

    return turn(q, key_positions[:, -q.shape[-2] :]), turn(k, key_positions)


def zero_masked(step: Step, module: nn.Module, args: tuple[Any, ...]) -> tuple[Any, ...]:
    """A token shift's input with the masked tokens zeroed: the token after a pad sees zero before it, as a
    sequence's first token does."""
    x, *rest = args
    assert step.keep is not None
    return (x * step.keep[:, -x.shape[1] :, None].to(x.dtype), *rest)
