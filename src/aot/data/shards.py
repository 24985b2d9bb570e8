"""Token shards cached as memmaps, and a batch sampler whose position is one integer (the step).

``prepare_lm_data(corpus, tokenizer)`` tokenizes each contiguous split once and caches it under
``<data dir>/shards/<corpus key>/<tokenizer>/{train,val,test}.bin`` (uint16, or uint32 for vocabularies over
65,535) with a ``meta.json``. Later runs open the files as read-only memmaps.

:class:`LMBatches` draws the global batch of step ``s`` from a generator seeded by ``(seed, s)`` alone, so the
data position is exactly the step: resuming at step ``s`` reproduces the batches an uninterrupted run would see,
and every process of a distributed run slices the same global batch (the global batch never depends on the
number of processes).
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
import torch

from aot.data.corpora import SPLITS, corpus_key, data_dir, load_text, split_text
from aot.data.tokenizers import Tokenizer, get_tokenizer
from aot.errors import AotError
from aot.run_folder import atomic_target, write_text_atomic


@dataclass
class LMData:
    """The three token splits of a corpus and the tokenizer that made them."""

    tokenizer: Tokenizer
    splits: dict[str, np.ndarray]  # split name -> 1-D token ids (a memmap)
    split_bytes: dict[str, int]  # UTF-8 bytes of each split's text
    key: str  # corpus cache key
    folder: Path

    @property
    def vocab_size(self) -> int:
        return self.tokenizer.vocab_size

    def info(self) -> dict[str, Any]:
        return {
            "corpus_key": self.key,
            "tokenizer": self.tokenizer.name,
            "vocab_size": self.vocab_size,
            "tokens": {name: len(tokens) for name, tokens in self.splits.items()},
            "bytes": dict(self.split_bytes),
            "folder": str(self.folder),
        }


def token_dtype(vocab_size: int) -> type[np.unsignedinteger]:
    return np.uint16 if vocab_size <= 65536 else np.uint32


def prepare_lm_data(
    corpus: str,
    tokenizer_name: str,
    val_fraction: float = 0.05,
    test_fraction: float = 0.05,
    root: Path | None = None,
) -> LMData:
    """Tokenize corpus ``corpus`` with ``tokenizer_name`` (once; cached as memmaps) and open its splits."""
    text = load_text(corpus, root)
    if len(text) < 1000:
        raise AotError(f"corpus {corpus!r} has only {len(text)} characters; give at least a few thousand")
    key = corpus_key(corpus, text)
    split_tag = f"split-{val_fraction:g}-{test_fraction:g}"
    base = (root or data_dir()) / "shards" / key / split_tag
    texts = split_text(text, val_fraction, test_fraction)
    tokenizer = get_tokenizer(tokenizer_name, train_text=texts["train"], cache_dir=base / "tokenizers")
    folder = base / tokenizer.name
    meta_path = folder / "meta.json"
    if not meta_path.is_file():
        folder.mkdir(parents=True, exist_ok=True)
        meta: dict[str, Any] = {"corpus": corpus, "tokenizer": tokenizer.name, "vocab_size": tokenizer.vocab_size}
        dtype = token_dtype(tokenizer.vocab_size)
        for name in SPLITS:
            ids = np.asarray(tokenizer.encode(texts[name]), dtype=dtype)
            with atomic_target(folder / f"{name}.bin") as scratch:  # concurrent runs may write it too
                ids.tofile(scratch)
            meta[f"{name}_tokens"] = len(ids)
            meta[f"{name}_bytes"] = len(texts[name].encode("utf-8"))
        meta["dtype"] = np.dtype(dtype).name
        write_text_atomic(meta_path, json.dumps(meta, indent=2) + "\n")  # last: its presence means all shards are whole
    meta = json.loads(meta_path.read_text())
    splits: dict[str, np.ndarray] = {
        name: np.memmap(folder / f"{name}.bin", dtype=np.dtype(str(meta["dtype"])), mode="r") for name in SPLITS
    }
    split_bytes = {name: int(meta[f"{name}_bytes"]) for name in SPLITS}
    return LMData(tokenizer, splits, split_bytes, key, folder)


class LMBatches:
    """Random windows of ``block_size`` tokens; rows ``[start, stop)`` of the global batch of step ``step``.

    A batch is ``(tokens,)``: the model takes the window as input and as labels and shifts them itself
    (``model(tokens, labels=tokens)``, HF's convention), so each window scores ``block_size - 1`` next-token
    predictions. The offsets of a step depend only on ``(seed, step)``: the position in the data is the step
    number."""

    def __init__(self, tokens: np.ndarray, batch_size: int, block_size: int, seed: int = 0) -> None:
        if len(tokens) <= block_size + 1:
            raise AotError(
                f"the training split has {len(tokens)} tokens, fewer than block_size + 1 = {block_size + 1}; "
                "use a larger corpus or a smaller block_size"
            )
        self.tokens = tokens
        self.batch_size = batch_size
        self.block_size = block_size
        self.seed = seed

    def offsets(self, step: int) -> np.ndarray:
        rng = np.random.default_rng([self.seed, step])
        return rng.integers(0, len(self.tokens) - self.block_size - 1, size=self.batch_size)

    def get(self, step: int, start: int = 0, stop: int | None = None) -> tuple[torch.Tensor]:
        """``(tokens,)``: one (stop - start, block_size) int64 tensor, inputs and labels at once."""
        rows = self.offsets(step)[start:stop]
        windows = np.stack([np.asarray(self.tokens[o : o + self.block_size], dtype=np.int64) for o in rows])
        return (torch.from_numpy(windows),)

    def tokens_per_sample(self) -> int:
        return self.block_size


def eval_windows(tokens: np.ndarray, block_size: int, max_windows: int | None = None) -> np.ndarray:
    """Start offsets of non-overlapping windows that cover the split (every token predicted once); with
    ``max_windows``, that many spread evenly over the split."""
    n_windows = (len(tokens) - 1) // block_size
    if n_windows < 1:
        raise AotError(f"an evaluation split of {len(tokens)} tokens is shorter than block_size + 1")
    starts = np.arange(n_windows) * block_size
    if max_windows is not None and max_windows < n_windows:
        starts = starts[np.linspace(0, n_windows - 1, max_windows).round().astype(np.int64)]
    return starts
