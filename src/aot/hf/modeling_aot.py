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

What the wrapper adds to the model:

- ``forward`` returns HF's output: the logits, with ``labels`` the mean next-token loss (HF's convention: the
  labels are the inputs, the model shifts; -100 is ignored), and our own cache (``Cache``: MSSA stores one tensor
  per layer, not keys and values), which ``generate`` hands back at the next step; beam search reorders it with
  ``Cache.reorder_cache``. The 4.x argument name ``past_key_values`` is accepted for ``cache``.
- ``generate`` past the context (``max_position_embeddings``, the model's ``block_size``) slides the window as
  ``aot sample`` does (``CausalLM.generate``): when the next step would not fit after the cached tokens, the cache
  restarts on the last ``block_size`` tokens.
- No padding: an ``attention_mask`` with zeros is refused in one line (pass unpadded prompts, one length per
  batch).
"""

from __future__ import annotations

from typing import Any

import torch
from transformers import GenerationMixin, PreTrainedModel
from transformers.modeling_outputs import CausalLMOutputWithPast

# --- aot: begin (an export writes in place of these lines the source of what they import: aot.hf.standalone) ---
from aot.errors import AotError
from aot.hf.inner import model_config
from aot.models.lm import CausalLM
from aot.nn.cache import Cache

# --- aot: end ---
from .configuration_aot import AotConfig


class AotForCausalLM(PreTrainedModel, GenerationMixin):
    """A ``PreTrainedModel`` around aot's ``CausalLM`` (``self.aot``), built from ``config.aot`` or given."""

    config_class = AotConfig
    base_model_prefix = "aot"
    main_input_name = "input_ids"
    _tied_weights_keys = {"aot.lm_head.weight": "aot.tok_embed.weight"}  # noqa: RUF012 (transformers reads it)

    def __init__(self, config: AotConfig, model: CausalLM | None = None) -> None:
        super().__init__(config)
        if model is None:
            if config.aot is None:
                raise AotError("AotConfig.aot is empty: the config of an aot model keeps its fields under 'aot'")
            model = CausalLM(model_config(config.aot))
        self.aot = model
        self.post_init()

    def _init_weights(self, module: torch.nn.Module) -> None:
        """The model initialises itself (and from_pretrained loads the weights): nothing to do here."""

    @classmethod
    def from_pretrained(cls, *args: Any, **kwargs: Any) -> Any:
        """transformers' loading, then the buffers that are not saved (rotary frequencies) recomputed: transformers
        builds the model on the meta device and does not fill them."""
        model = super().from_pretrained(*args, **kwargs)
        fresh = CausalLM(model_config(model.config.aot))
        with torch.no_grad():
            for name, buffer in fresh.named_buffers():
                model.aot.get_buffer(name).copy_(buffer)
        return model

    @classmethod
    def _supports_default_dynamic_cache(cls) -> bool:
        return False  # our own cache (MSSA stores one tensor per layer, not keys and values), made in forward

    def get_input_embeddings(self) -> torch.nn.Module:
        return self.aot.tok_embed

    def get_output_embeddings(self) -> torch.nn.Module:
        return self.aot.lm_head

    def forward(
        self,
        input_ids: torch.Tensor,
        attention_mask: torch.Tensor | None = None,
        cache: Cache | None = None,
        past_key_values: Cache | None = None,
        labels: torch.Tensor | None = None,
        use_cache: bool | None = None,
        return_dict: bool | None = None,
        **_: Any,
    ) -> Any:
        """Logits of the wrapped model; with ``labels`` the mean next-token loss (the model shifts them)."""
        if attention_mask is not None and not bool(attention_mask.all()):
            raise AotError("AotForCausalLM does not support padding: pass unpadded prompts (one length per batch)")
        cache = cache if cache is not None else past_key_values
        if not isinstance(cache, Cache):  # e.g. an empty cache of transformers' own: ours replaces it
            cache = None
        use_cache = self.config.use_cache if use_cache is None else use_cache
        if use_cache and cache is None:
            cache = self.aot.new_cache()
        logits, loss = self.aot(input_ids, labels=labels, cache=cache)
        out = CausalLMOutputWithPast(loss=loss, logits=logits, cache=cache if use_cache else None)  # type: ignore[arg-type]
        return out if return_dict is not False else out.to_tuple()

    def prepare_inputs_for_generation(
        self, input_ids: torch.Tensor, next_sequence_length: int | None = None, cache: Any = None, **kwargs: Any
    ) -> dict[str, Any]:
        """transformers' inputs of the next step, with the window slid as ``aot sample`` slides it: when the tokens
        to feed would not fit after the cached ones, the last ``block_size`` tokens on a new cache (or, without a
        cache, the last ``block_size`` tokens)."""
        inputs = super().prepare_inputs_for_generation(
            input_ids, next_sequence_length=next_sequence_length, cache=cache, **kwargs
        )
        window = self.aot.cfg.block_size
        cached = cache.length if isinstance(cache, Cache) else 0
        if cached + inputs["input_ids"].shape[1] > window:
            inputs["input_ids"] = input_ids[:, -window:]
            if isinstance(cache, Cache):
                inputs["cache"] = self.aot.new_cache()
            if inputs.get("attention_mask") is not None:
                inputs["attention_mask"] = inputs["attention_mask"][:, -window:]
        return inputs
