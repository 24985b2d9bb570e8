"""The HuggingFace config of an aot language model (model type ``aot``).

This file depends on ``transformers`` only: ``aot export hf`` copies it into the export as ``configuration_aot.py``
(named by ``auto_map`` in config.json), so that ``AutoConfig.from_pretrained(EXPORT, trust_remote_code=True)``
works where aot is not installed; with aot installed it is :mod:`aot.hf.configuration_aot`, which ``import aot.hf``
registers with ``AutoConfig``.
"""

from __future__ import annotations

from transformers import PreTrainedConfig


class AotConfig(PreTrainedConfig):
    """aot's model config (``aot.config.ModelConfig.to_dict()``, validated when the model was exported) under ``aot``,
    and the sizes HF tools read under their usual names (``max_position_embeddings`` is the context,
    ``block_size``: the model has no positions beyond it)."""

    model_type = "aot"
    aot: dict | None = None
    vocab_size: int = 256
    max_position_embeddings: int = 256
    hidden_size: int = 256
    num_hidden_layers: int = 1
    num_attention_heads: int = 1
    tie_word_embeddings: bool = True
    use_cache: bool = True
