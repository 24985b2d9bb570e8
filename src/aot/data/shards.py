"""Token data for language models: the corpus cache, prepared shard folders, and a batch sampler whose position is
one integer (the step).

There is one data path. ``prepare_lm_data(corpus, tokenizer)`` prepares a corpus named by ``--corpus`` (a registered
name, a text file or folder, ``hf:NAME``) once with :func:`aot.data.prepare.prepare` into
``<data dir>/prepared/<corpus key>/split-<val>-<test>/<tokenizer>/`` — llm.c shards with a ``meta.json`` — and
opens it; ``open_lm_data(DIR)`` opens a folder that ``aot data prepare`` wrote (``--data``), or llm.c shards from
elsewhere. Either way each shard is a read-only memmap and a split is a :class:`aot.data.shardset.TokenSplit`.

:class:`LMBatches` draws the global batch of step ``s`` from a generator seeded by ``(seed, s)`` alone, so the
data position is exactly the step: resuming at step ``s`` reproduces the batches an uninterrupted run would see,
and every process of a distributed run slices the same global batch (the global batch never depends on the
number of processes).
"""

from __future__ import annotations

import sys
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np
import torch

from aot.data.corpora import data_dir
from aot.data.prepare import META_FILE, PrepareOptions, prepare
from aot.data.shardset import TokenSplit, open_shards
from aot.data.sources import Sources, content_key, resolve
from aot.data.tokenizers import BPE_FILE, Tokenizer, TrainedBPE, get_tokenizer
from aot.errors import AotError
from aot.run_folder import FolderBusy

#: the corpus cache tokenizes in this process below this many bytes of text, in worker processes above
INLINE_BYTES = 64 << 20
#: how long a run waits for another process that is preparing the same corpus into the cache
CACHE_WAIT_SECONDS = 3600.0


@dataclass
class LMData:
    """The three token splits of a corpus and the tokenizer that made them."""

    tokenizer: Tokenizer
    splits: dict[str, TokenSplit]  # split name -> its tokens (memmapped shards)
    split_bytes: dict[str, int]  # UTF-8 bytes of each split's text (empty for llm.c shards from elsewhere)
    key: str  # cache / fingerprint key of the data
    folder: Path
    notes: list[str] = field(default_factory=list)

    @property
    def vocab_size(self) -> int:
        return self.tokenizer.vocab_size

    def info(self) -> dict[str, Any]:
        info: dict[str, Any] = {
            "corpus_key": self.key,
            "tokenizer": self.tokenizer.name,
            "vocab_size": self.vocab_size,
            "tokens": {name: len(tokens) for name, tokens in self.splits.items()},
            "bytes": dict(self.split_bytes),
            "shards": {name: len(tokens.parts) for name, tokens in self.splits.items()},
            "folder": str(self.folder),
        }
        if self.notes:
            info["notes"] = list(self.notes)
        return info


def token_dtype(vocab_size: int) -> type[np.unsignedinteger]:
    return np.uint16 if vocab_size <= 65536 else np.uint32


def corpus_cache(
    corpus: str, tokenizer_name: str, val_fraction: float, test_fraction: float, root: Path | None = None
) -> tuple[Sources, str, Path]:
    """The sources of ``corpus``, its cache key and the folder the corpus cache prepares it into."""
    sources = resolve([corpus], root)
    key = content_key(corpus, sources)
    folder = (root or data_dir()) / "prepared" / key / f"split-{val_fraction:g}-{test_fraction:g}" / tokenizer_name
    return sources, key, folder


def is_small(sources: Sources) -> bool:
    """Whether the corpus cache tokenizes ``sources`` in this process (below :data:`INLINE_BYTES` of files)."""
    return sources.hf is None and sources.total_bytes < INLINE_BYTES


def prepare_lm_data(
    corpus: str,
    tokenizer_name: str,
    val_fraction: float = 0.05,
    test_fraction: float = 0.05,
    root: Path | None = None,
) -> LMData:
    """Prepare corpus ``corpus`` with ``tokenizer_name`` into the cache (once) and open its splits. One text (a
    registered corpus, a ``.txt`` file) is split contiguously, the package's split since its first release: the
    tokens equal those of encoding each split's text in one call."""
    sources, key, folder = corpus_cache(corpus, tokenizer_name, val_fraction, test_fraction, root)
    options = PrepareOptions(tokenizer=tokenizer_name, val_fraction=val_fraction, test_fraction=test_fraction)
    workers = 0 if is_small(sources) else None
    waited = False
    deadline = time.monotonic() + CACHE_WAIT_SECONDS
    while not (folder / META_FILE).is_file():
        try:
            prepare(sources, folder, options, workers=workers, progress=False)
        except FolderBusy:  # another run prepares the same corpus: wait for its meta.json
            if time.monotonic() > deadline:
                raise
            if not waited:
                print(f"aot: waiting for another process preparing {folder}", file=sys.stderr, flush=True)
                waited = True
            time.sleep(0.5)
    data = open_lm_data(folder)
    data.key = key  # the corpus key runs have always recorded in their fingerprint
    return data


def open_lm_data(
    spec: str | Path, tokenizer_name: str | None = None, verify: bool = True, rank: int = 0, world: int = 1
) -> LMData:
    """The splits of a prepared folder or of llm.c shards (:func:`aot.data.shardset.open_shards`). The tokenizer is
    the one the folder records; shards from elsewhere record none, so ``tokenizer_name`` names it. A token id that
    the tokenizer's vocabulary cannot hold is one line, before any training."""
    shards = open_shards(spec, verify=verify, rank=rank, world=world)
    if shards.tokenizer is not None:
        if shards.tokenizer.startswith("bpe-"):
            saved = shards.folder / BPE_FILE
            if not saved.is_file():
                raise AotError(
                    f"{str(shards.folder)!r} was prepared with {shards.tokenizer} but its {BPE_FILE} is missing; copy "
                    "it back or prepare the data again"
                )
            tokenizer: Tokenizer = TrainedBPE.load(saved)
        else:
            tokenizer = get_tokenizer(shards.tokenizer)
    else:
        tokenizer = get_tokenizer(tokenizer_name or "gpt2")
    for split, max_id in shards.max_ids.items():
        if max_id >= tokenizer.vocab_size:
            raise AotError(
                f"the {split} shards of {str(spec)!r} hold token id {max_id}, outside tokenizer {tokenizer.name}'s "
                f"vocabulary of {tokenizer.vocab_size}; name the tokenizer the shards were made with (--tokenizer)"
            )
    return LMData(tokenizer, shards.splits, shards.split_bytes, shards.key, shards.folder, shards.notes)


class LMBatches:
    """Random windows of ``block_size`` tokens; rows ``[start, stop)`` of the global batch of step ``step``.

    A batch is ``(tokens,)``: the model takes the window as input and as labels and shifts them itself
    (``model(tokens, labels=tokens)``, HF's convention), so each window scores ``block_size - 1`` next-token
    predictions. The offsets of a step depend only on ``(seed, step)``: the position in the data is the step
    number."""

    def __init__(
        self,
        tokens: np.ndarray | TokenSplit,
        batch_size: int,
        block_size: int,
        seed: int = 0,
        vocab_size: int | None = None,
    ) -> None:
        if len(tokens) <= block_size + 1:
            raise AotError(
                f"the training split has {len(tokens)} tokens, fewer than block_size + 1 = {block_size + 1}; "
                "use a larger corpus or a smaller block_size"
            )
        self.tokens = tokens
        self.batch_size = batch_size
        self.block_size = block_size
        self.seed = seed
        self.vocab_size = vocab_size  # when given, a window with an id outside the vocabulary is one line

    def offsets(self, step: int) -> np.ndarray:
        rng = np.random.default_rng([self.seed, step])
        return rng.integers(0, len(self.tokens) - self.block_size - 1, size=self.batch_size)

    def get(self, step: int, start: int = 0, stop: int | None = None) -> tuple[torch.Tensor]:
        """``(tokens,)``: one (stop - start, block_size) int64 tensor, inputs and labels at once."""
        rows = self.offsets(step)[start:stop]
        windows = np.stack([np.asarray(self.tokens[o : o + self.block_size], dtype=np.int64) for o in rows])
        if self.vocab_size is not None and windows.size and int(windows.max()) >= self.vocab_size:
            raise AotError(
                f"the training data holds token id {int(windows.max())} (step {step}), outside the model's vocabulary "
                f"of {self.vocab_size}; the shards were made with another tokenizer: name it with --tokenizer"
            )
        return (torch.from_numpy(windows),)

    def tokens_per_sample(self) -> int:
        return self.block_size


def eval_windows(tokens: np.ndarray | TokenSplit, block_size: int, max_windows: int | None = None) -> np.ndarray:
    """Start offsets of non-overlapping windows that cover the split (every token predicted once); with
    ``max_windows``, that many spread evenly over the split."""
    n_windows = (len(tokens) - 1) // block_size
    if n_windows < 1:
        raise AotError(f"an evaluation split of {len(tokens)} tokens is shorter than block_size + 1")
    starts = np.arange(n_windows) * block_size
    if max_windows is not None and max_windows < n_windows:
        starts = starts[np.linspace(0, n_windows - 1, max_windows).round().astype(np.int64)]
    return starts
