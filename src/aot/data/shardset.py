"""Reading token shards for training: a prepared folder (``meta.json``), or llm.c shards from anywhere.

:class:`TokenSplit` presents a split's shards, each a read-only memmap, as one sequence of tokens: ``len`` and slices
(a slice that crosses a shard boundary is joined), so the step-seeded window sampler and the full-split evaluation
run over many shards as over one array, and resume and the DDP global batch stay as they are.

What :func:`open_shards` accepts:

- a folder written by ``aot data prepare`` (``meta.json``): the tokenizer, the splits and each shard's sha256 come
  from it; a folder with ``progress.json`` and no ``meta.json`` is an unfinished prepare and is refused;
- a folder or a glob of llm.c ``.bin`` shards written elsewhere (FineWeb's ``fineweb_train_*.bin`` /
  ``fineweb_val_*.bin``): a file is val when its name has ``val``, test when it has ``test``, train otherwise; without
  test shards the test split is the val split, and the data's ``info`` says so.
"""

from __future__ import annotations

import bisect
import glob
import hashlib
import json
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

from aot.data import llmc
from aot.data.corpora import SPLITS, readable_name
from aot.data.prepare import META_FILE, PROGRESS_FILE
from aot.errors import AotError
from aot.run_folder import file_sha256


class TokenSplit:
    """Several 1-D token arrays read as one: ``len``, integer and slice indexing (step 1), ``np.asarray``."""

    def __init__(self, parts: Sequence[np.ndarray], names: list[str] | None = None) -> None:
        self.parts = [p for p in parts if len(p)]
        self.names = names or []
        self.starts = [0]
        for part in self.parts:
            self.starts.append(self.starts[-1] + len(part))
        self.dtype = self.parts[0].dtype if self.parts else np.dtype(np.uint16)

    def __len__(self) -> int:
        return self.starts[-1]

    def __getitem__(self, key: int | slice) -> Any:
        if isinstance(key, slice):
            start, stop, step = key.indices(len(self))
            if step != 1:  # rare: read the whole split and let numpy apply the slice
                return np.asarray(self)[key]
            return self._range(start, stop)
        index = int(key) + (len(self) if key < 0 else 0)
        if not 0 <= index < len(self):
            raise IndexError(key)
        k = bisect.bisect_right(self.starts, index) - 1
        return self.parts[k][index - self.starts[k]]

    def _range(self, start: int, stop: int) -> np.ndarray:
        if stop <= start:
            return np.zeros(0, dtype=self.dtype)
        k = bisect.bisect_right(self.starts, start) - 1
        local = start - self.starts[k]
        if stop <= self.starts[k + 1]:
            return self.parts[k][local : local + stop - start]
        pieces = []
        while start < stop:
            take = min(stop, self.starts[k + 1]) - start
            pieces.append(np.asarray(self.parts[k][local : local + take]))
            start, k, local = start + take, k + 1, 0
        return np.concatenate(pieces)

    def __array__(self, dtype: Any = None, copy: Any = None) -> np.ndarray:
        whole = self._range(0, len(self))
        return np.asarray(whole, dtype=dtype) if dtype is not None else np.asarray(whole)

    def sample(self, max_tokens: int, pieces: int = 64) -> np.ndarray:
        """At most ``max_tokens`` tokens: the whole split when it is that small, else ``pieces`` contiguous runs
        spread evenly over it (a bounded, deterministic sample for statistics such as the n-gram baselines)."""
        if len(self) <= max_tokens:
            return np.asarray(self)
        run = max_tokens // pieces
        starts = np.linspace(0, len(self) - run, pieces).astype(np.int64)
        return np.concatenate([np.asarray(self[int(s) : int(s) + run]) for s in starts])


@dataclass
class ShardSet:
    """The splits of a shard folder, with what the folder says about them."""

    splits: dict[str, TokenSplit]
    tokenizer: str | None  # the tokenizer name the folder records (None: llm.c shards from elsewhere)
    vocab_size: int | None
    eot_id: int | None
    split_bytes: dict[str, int]
    key: str  # a cache / fingerprint key for the data
    folder: Path
    meta: dict[str, Any] = field(default_factory=dict)
    notes: list[str] = field(default_factory=list)
    max_ids: dict[str, int] = field(default_factory=dict)  # recorded (prepared) or sampled (foreign)


def open_shards(spec: str | Path, verify: bool = True, rank: int = 0, world: int = 1) -> ShardSet:
    """Open the shards that ``spec`` names (module docstring). ``verify``: check each recorded shard's sha256 (this
    process checks shards ``rank, rank + world, …``, so the ranks of a distributed run share the work)."""
    spec = str(spec)
    path = Path(spec).expanduser()
    if path.is_dir() and (path / META_FILE).is_file():
        return _open_prepared(path, verify, rank, world)
    if path.is_dir() and (path / PROGRESS_FILE).is_file():
        raise AotError(
            f"{spec!r} is an unfinished `aot data prepare` (progress.json, no meta.json); run the same prepare "
            "command again to finish it"
        )
    if path.is_dir():
        files = sorted(path.glob("*.bin"))
    elif any(c in spec for c in "*?["):
        files = sorted(Path(p) for p in glob.glob(spec, recursive=True) if p.endswith(".bin"))
    elif path.is_file():
        files = [path]
    else:
        raise AotError(f"data {spec!r} does not exist; give a folder made by `aot data prepare`, or llm.c .bin shards")
    if not files:
        raise AotError(
            f"data {spec!r} holds no .bin token shards; prepare them with `aot data prepare SOURCE --out DIR`"
        )
    return _open_foreign(spec, files)


def _open_prepared(folder: Path, verify: bool, rank: int, world: int) -> ShardSet:
    meta_path = folder / META_FILE
    try:
        meta = json.loads(meta_path.read_text())
        tokenizer = meta["tokenizer"]
        listed = {split: meta["splits"][split]["shards"] for split in SPLITS}
    except (ValueError, KeyError, TypeError):
        raise AotError(f"{str(meta_path)!r} is damaged; prepare the data again into a new folder") from None
    everything = [(split, s) for split in SPLITS for s in listed[split]]
    splits: dict[str, TokenSplit] = {}
    for split in SPLITS:
        arrays = []
        for shard in listed[split]:
            shard_path = folder / shard["file"]
            if not shard_path.is_file():
                raise AotError(f"token shard {str(shard_path)!r} is missing; copy it back or prepare the data again")
            header = llmc.read_header(shard_path)
            if header.count != shard["tokens"]:
                raise AotError(
                    f"token shard {str(shard_path)!r} holds {header.count:,} tokens, {META_FILE} says "
                    f"{shard['tokens']:,}; prepare the data again"
                )
            arrays.append(llmc.open_shard(shard_path))
        splits[split] = TokenSplit(arrays, [s["file"] for s in listed[split]])
    if verify:
        for _, shard in everything[rank::world]:
            digest = file_sha256(folder / shard["file"])
            if digest != shard["sha256"]:
                raise AotError(
                    f"token shard {str(folder / shard['file'])!r} fails its sha256 (expected {shard['sha256'][:12]}…, "
                    f"got {digest[:12]}…): it changed after it was prepared; prepare the data again"
                )
    key_digest = hashlib.sha256("".join(s["sha256"] for _, s in everything).encode()).hexdigest()[:12]
    return ShardSet(
        splits,
        tokenizer.get("name"),
        tokenizer.get("vocab_size"),
        tokenizer.get("eot_id"),
        {split: int(meta["splits"][split]["bytes"]) for split in SPLITS},
        f"{folder.name}-{key_digest}",
        folder,
        meta,
        max_ids={split: max((s["max_id"] for s in listed[split]), default=0) for split in SPLITS},
    )


def _open_foreign(spec: str, files: list[Path]) -> ShardSet:
    groups: dict[str, list[Path]] = {split: [] for split in SPLITS}
    for file in files:
        name = file.name.lower()
        groups["val" if "val" in name else "test" if "test" in name else "train"].append(file)
    notes = []
    if not groups["train"]:
        raise AotError(f"data {spec!r} has no training shards (every .bin name has 'val' or 'test')")
    if not groups["val"]:
        raise AotError(f"data {spec!r} has no validation shards (a .bin whose name has 'val'); add one")
    if not groups["test"]:
        groups["test"] = groups["val"]
        notes.append("the data has no test shards: the test split is the val split")
    splits, max_ids = {}, {}
    for split, paths in groups.items():
        arrays = [llmc.open_shard(p) for p in paths]
        splits[split] = TokenSplit(arrays, [p.name for p in paths])
        # held-out shards are small (FineWeb's: one of 100 M tokens) and are read whole by the final evaluation:
        # scanned whole; training shards by their first 2**20 tokens, the rest checked batch by batch
        limit = None if split != "train" else 1 << 20
        max_ids[split] = max((int(np.max(a[:limit])) for a in arrays if len(a)), default=0)
    digest = hashlib.sha256()
    for file in files:
        stat = file.stat()
        digest.update(f"{file.name}\0{stat.st_size}\0".encode())
    folder = files[0].parent
    readable = readable_name(folder.name)
    return ShardSet(
        splits, None, None, None, {}, f"{readable}-{digest.hexdigest()[:12]}", folder, notes=notes, max_ids=max_ids
    )
