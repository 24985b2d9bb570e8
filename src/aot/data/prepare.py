"""``aot data prepare``: stream text sources into llm.c token shards in bounded memory, in parallel and resumably.

The pipeline (one reader, ``workers`` tokenizer processes, one writer):

1. The reader (:mod:`aot.data.sources`) yields records (a JSON line, a row, a ``.txt`` file) in a fixed order,
   raw, and numbers them ``0, 1, 2, …``; decoding them is the workers' job, so the reader stays light.
2. Each record is assigned to a split by a hash of its number and ``split_seed`` alone (:func:`split_of`), so a
   split never cuts a document and the assignment does not depend on the worker count. One text (a registered
   corpus, one ``.txt`` file) is instead split contiguously by characters — the first ``1 - val - test`` train,
   then val, then test — exactly as the package always split such corpora, streamed in pieces that end where the
   tokenizer's pre-tokenisation ends a token anyway (:func:`safe_cut`), so the tokens equal one-shot encoding.
3. Batches of records go to worker processes that decode, hash and tokenize them (tiktoken's / HF tokenizers'
   batch encoding); at most ``2 × workers`` batches are in flight, so memory is bounded by those batches, never by
   the corpus.
   Results are taken back in submission order, so the output is the same for 1 and N workers, byte for byte.
4. In documents mode every document is preceded by the end-of-text token (as llm.c's FineWeb script writes it).
5. The writer appends each split's tokens to its current shard file (on disk, not in memory) and closes the shard
   at the first document end past ``shard_tokens``. A shard is written under a temporary name and renamed when
   whole; ``progress.json`` then records it with the documents it covers. ``meta.json``, written last, says the
   folder is complete.

A rerun after a kill resumes: finished shards are kept (checked against their headers), the documents they cover
are read but not tokenized again, and the result is byte-identical to an uninterrupted run.
"""

from __future__ import annotations

import errno
import hashlib
import json
import multiprocessing
import os
import time
from collections import deque
from collections.abc import Callable, Iterable, Iterator
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

from aot.data import llmc
from aot.data.corpora import SPLITS
from aot.data.sources import (
    FILE,
    TEXT,
    Record,
    SkipLog,
    Sources,
    decode_record,
    iter_numbered_documents,
    iter_records,
    iter_text_blocks,
)
from aot.data.tokenizers import BPE_FILE, TrainedBPE, get_tokenizer
from aot.errors import AotError, os_error_line
from aot.run_folder import LOCK_FILE, file_sha256, folder_lock, write_text_atomic

META_FILE = "meta.json"
PROGRESS_FILE = "progress.json"
FORMAT = "aot-llmc-shards/1"
#: characters of text per batch sent to a worker
BATCH_CHARS = 1 << 20
#: characters per piece of one contiguous text (pieces end at a safe cut)
PIECE_CHARS = 1 << 20
#: UTF-8 bytes of training text a bpe-N tokenizer learns from (the first ones, in document order)
BPE_SAMPLE_BYTES = 256 << 20


@dataclass(frozen=True)
class PrepareOptions:
    """What a prepared folder depends on besides its sources (all recorded in ``meta.json``).

    split_by: ``documents`` (each document to one split by a hash), ``contiguous`` (one text cut by characters) or
    ``auto`` (contiguous for one text, documents otherwise). shard_tokens: a shard closes at the first document end
    past this many tokens (llm.c's FineWeb shards hold 100 M)."""

    tokenizer: str = "gpt2"
    val_fraction: float = 0.005
    test_fraction: float = 0.005
    split_by: str = "auto"
    split_seed: int = 0
    shard_tokens: int = 100_000_000
    text_field: str = "text"
    strict: bool = False

    def check(self) -> None:
        v, t = self.val_fraction, self.test_fraction
        if not (0 < v < 1 and 0 < t < 1 and v + t < 1):
            raise AotError(f"val fraction {v:g} and test fraction {t:g} must be in (0, 1) with a sum below 1")
        if self.split_by not in ("auto", "documents", "contiguous"):
            raise AotError(f"split_by {self.split_by!r}: use auto, documents or contiguous")
        if not 1 <= self.shard_tokens <= llmc.MAX_TOKENS:
            raise AotError(f"shard size {self.shard_tokens:,} tokens: give 1 to {llmc.MAX_TOKENS:,}")

    def resolved_split(self, sources: Sources) -> str:
        if self.split_by != "auto":
            return self.split_by
        return "contiguous" if sources.plain_text else "documents"

    def key(self) -> dict[str, Any]:
        """The options a resumed prepare must share with the one it continues."""
        out = asdict(self)
        out.pop("strict")
        return out


# -- splits -----------------------------------------------------------------------------------------------------


def _mix64(x: int) -> int:
    """splitmix64's finaliser: a well-spread 64-bit hash of ``x``."""
    mask = (1 << 64) - 1
    x = (x + 0x9E3779B97F4A7C15) & mask
    x = ((x ^ (x >> 30)) * 0xBF58476D1CE4E5B9) & mask
    x = ((x ^ (x >> 27)) * 0x94D049BB133111EB) & mask
    return x ^ (x >> 31)


def split_of(index: int, val_fraction: float, test_fraction: float, seed: int = 0) -> str:
    """The split of document ``index``: test when its hash ``u ∈ [0, 1)`` is below ``test_fraction``, val below
    ``test_fraction + val_fraction``, else train. A function of the number and the seed alone."""
    u = _mix64((seed << 40) ^ index) / 2.0**64
    if u < test_fraction:
        return "test"
    return "val" if u < test_fraction + val_fraction else "train"


def contiguous_bounds(n_chars: int, val_fraction: float, test_fraction: float) -> dict[str, tuple[int, int]]:
    """Character ranges of the contiguous split (the package's split of one text since its first release)."""
    val_start = int(n_chars * (1 - val_fraction - test_fraction))
    test_start = int(n_chars * (1 - test_fraction))
    return {"train": (0, val_start), "val": (val_start, test_start), "test": (test_start, n_chars)}


def safe_cut(text: str, target: int) -> int | None:
    """A position ``0 < i < len(text)`` where cutting ``text`` changes no token of GPT-2-style byte-level BPE (GPT-2's
    and a trained bpe-N share its pre-tokenisation), or ``None``: just after a ``\\n`` that has a non-space on both
    sides, or just before a space that has a letter on both sides. No pre-token spans such a point (a run of
    whitespace stops at a non-space on either side; a run of letters stops at a space), so the two pieces encode to
    the one-shot tokens. The latest such position at or before ``target``, else the earliest after it."""

    def newline_ok(i: int) -> bool:
        return i > 0 and i + 1 < len(text) and not text[i - 1].isspace() and not text[i + 1].isspace()

    def space_ok(i: int) -> bool:
        return i > 0 and i + 1 < len(text) and text[i - 1].isalpha() and text[i + 1].isalpha()

    for char, ok, shift in (("\n", newline_ok, 1), (" ", space_ok, 0)):
        i = text.rfind(char, 0, target)
        while i != -1:
            if ok(i):
                return i + shift
            i = text.rfind(char, 0, i)
        i = text.find(char, target)
        while i != -1:
            if ok(i):
                return i + shift
            i = text.find(char, i + 1)
    return None


def contiguous_pieces(
    blocks: Iterable[str], n_chars: int, options: PrepareOptions, any_cut: bool
) -> Iterator[tuple[str, str]]:
    """``(piece, split)`` of one text streamed in ``blocks``: every split boundary is a cut, and inside a split
    pieces of about :data:`PIECE_CHARS` end at a :func:`safe_cut` (``any_cut``: anywhere, for bytes)."""
    bounds = contiguous_bounds(n_chars, options.val_fraction, options.test_fraction)
    order = [(split, bounds[split][1]) for split in SPLITS]
    position, buffer, k = 0, "", 0

    def cut_point(text: str) -> int | None:
        return PIECE_CHARS if any_cut else safe_cut(text, PIECE_CHARS)

    def drain(final: bool) -> Iterator[tuple[str, str]]:
        nonlocal buffer, position, k
        while k < len(order):
            split, end = order[k]
            left = end - position
            if left <= len(buffer):
                piece, buffer = buffer[:left], buffer[left:]
                while len(piece) > 2 * PIECE_CHARS and (cut := cut_point(piece)) is not None:
                    yield piece[:cut], split
                    piece = piece[cut:]
                if piece:
                    yield piece, split
                position, k = end, k + 1
                continue
            while len(buffer) > 2 * PIECE_CHARS and (cut := cut_point(buffer)) is not None and cut < len(buffer):
                yield buffer[:cut], split
                buffer, position = buffer[cut:], position + cut
            if not final:
                return
            raise AssertionError("the text ended before its counted length")

    for block in blocks:
        buffer += block
        yield from drain(final=False)
    yield from drain(final=True)


# -- workers ----------------------------------------------------------------------------------------------------

_WORKER: dict[str, Any] = {}


def _load_tokenizer(recipe: tuple[str, str | None]):  # type: ignore[no-untyped-def]
    name, path = recipe
    return TrainedBPE.load(Path(path)) if path is not None else get_tokenizer(name)


def _init_worker(recipe: tuple[str, str | None], eot: int | None, text_field: str, strict: bool) -> None:
    os.environ["TOKENIZERS_PARALLELISM"] = "false"  # one thread per worker: the workers are the parallelism
    _WORKER.update(tokenizer=_load_tokenizer(recipe), eot=eot, text_field=text_field, strict=strict)


@dataclass
class Encoded:
    """A batch of records, decoded and tokenized: the tokens of its tokenized documents concatenated (each preceded
    by the end-of-text id in documents mode); per record its token count, its UTF-8 bytes (-1: no document) and
    the sha256 of its text (32 zero bytes for no document); why a file was skipped, by position in the batch."""

    tokens: np.ndarray
    lengths: np.ndarray
    n_bytes: np.ndarray
    digests: bytes
    skipped: list[tuple[int, str]]


def _encode(records: list[Record], tokenize: list[bool]) -> Encoded:
    """Decode ``records`` (:func:`aot.data.sources.decode_record`), hash each document, and tokenize those marked
    in ``tokenize`` (a resumed prepare only hashes the documents its finished shards hold)."""
    tokenizer, eot = _WORKER["tokenizer"], _WORKER["eot"]
    texts, skipped = [], []
    n_bytes = np.full(len(records), -1, dtype=np.int64)
    digests = bytearray(32 * len(records))
    for k, record in enumerate(records):
        text, why = decode_record(record, _WORKER["text_field"], _WORKER["strict"])
        if why is not None:
            skipped.append((k, why))
        if not text:
            continue
        raw = text.encode("utf-8")
        n_bytes[k] = len(raw)
        if record.kind != TEXT:  # documents: each hashed here; one text is hashed whole by the reader
            digests[32 * k : 32 * k + 32] = hashlib.sha256(raw).digest()
        if tokenize[k]:
            texts.append(text)
    rows = tokenizer.encode_batch(texts) if texts else []
    dtype = np.uint32 if tokenizer.vocab_size > 65536 else np.uint16
    if eot is not None:
        head = np.array([eot], dtype=dtype)
        rows = [part for row in rows for part in (head, row)]
        counts = [len(r) + 1 for r in rows[1::2]]
    else:
        counts = [len(r) for r in rows]
    lengths = np.zeros(len(records), dtype=np.int64)
    lengths[[k for k in range(len(records)) if tokenize[k] and n_bytes[k] >= 0]] = counts
    tokens = np.concatenate([np.asarray(r, dtype=dtype) for r in rows]) if rows else np.zeros(0, dtype=dtype)
    return Encoded(tokens, lengths, n_bytes, bytes(digests), skipped)


class Encoder:
    """Tokenize batches in order: inline (``workers=0``) or in a pool with a bounded number of batches in flight."""

    def __init__(
        self, recipe: tuple[str, str | None], eot: int | None, workers: int, text_field: str, strict: bool
    ) -> None:
        self.workers = workers
        self.pending: deque[tuple[Any, Any]] = deque()
        setup = (recipe, eot, text_field, strict)
        if workers > 0:
            # fork where there is one: a worker starts at once, whatever the caller's __main__ is (spawn re-imports a
            # script, and fails under `python -` or re-runs an unguarded one); the parent's pages stay shared
            method = "fork" if "fork" in multiprocessing.get_all_start_methods() else "spawn"
            self.pool = multiprocessing.get_context(method).Pool(workers, _init_worker, setup)
        else:
            _init_worker(*setup)

    def submit(self, records: list[Record], tokenize: list[bool], tag: Any) -> Iterator[tuple[Any, Encoded]]:
        """Queue a batch; yields the results that must be taken now to keep the queue bounded."""
        if self.workers == 0:
            yield tag, _encode(records, tokenize)
            return
        self.pending.append((tag, self.pool.apply_async(_encode, (records, tokenize))))
        while len(self.pending) > 2 * self.workers:
            yield self._take()

    def drain(self) -> Iterator[tuple[Any, Encoded]]:
        while self.pending:
            yield self._take()

    def _take(self) -> tuple[Any, Encoded]:
        tag, result = self.pending.popleft()
        return tag, result.get()

    def close(self) -> None:
        if self.workers > 0:
            self.pool.terminate()
            self.pool.join()


# -- shard writing ------------------------------------------------------------------------------------------------


@dataclass
class ShardRecord:
    split: str
    index: int
    file: str
    tokens: int
    sha256: str
    max_id: int
    first_doc: int  # the first document (by number) in the shard
    end_doc: int  # one past the last
    documents: int
    bytes: int  # UTF-8 bytes of the documents' text


class SplitWriter:
    """One split's current shard: tokens appended to a temporary file, closed into a whole shard."""

    def __init__(self, out: Path, split: str, next_index: int, vocab_size: int) -> None:
        self.out, self.split, self.index, self.vocab_size = out, split, next_index, vocab_size
        self.dtype = np.dtype(llmc.dtype_for(vocab_size)).newbyteorder("<")
        self.handle: Any = None
        self._reset()

    def _reset(self) -> None:
        self.count, self.max_id, self.documents, self.bytes = 0, 0, 0, 0
        self.first_doc, self.end_doc = -1, -1

    @property
    def name(self) -> str:
        return f"{self.split}_{self.index:06d}.bin"

    @property
    def scratch(self) -> Path:
        return self.out / f".{self.name}.tmp"

    def append(self, tokens: np.ndarray, doc: int, n_bytes: int) -> None:
        if self.handle is None:
            self.handle = open(self.scratch, "wb")  # noqa: SIM115 - open across appends, closed by close() / abort()
            self.handle.write(bytes(llmc.HEADER_BYTES))
        self.handle.write(np.asarray(tokens, dtype=self.dtype).tobytes())
        self.count += len(tokens)
        if len(tokens):
            self.max_id = max(self.max_id, int(tokens.max()))
        self.documents += 1
        self.bytes += n_bytes
        self.first_doc = doc if self.first_doc < 0 else self.first_doc
        self.end_doc = doc + 1

    def close(self) -> ShardRecord | None:
        """Write the header, make the shard whole under its name (fsync, rename) and describe it."""
        if self.handle is None:
            return None
        self.handle.seek(0)
        self.handle.write(llmc.header(self.count, self.vocab_size))
        self.handle.flush()
        os.fsync(self.handle.fileno())
        self.handle.close()
        self.handle = None
        digest = file_sha256(self.scratch)
        os.replace(self.scratch, self.out / self.name)
        record = ShardRecord(
            self.split, self.index, self.name, self.count, digest, self.max_id,
            self.first_doc, self.end_doc, self.documents, self.bytes,
        )  # fmt: skip
        self.index += 1
        self._reset()
        return record

    def abort(self) -> None:
        if self.handle is not None:
            self.handle.close()
            self.handle = None
        self.scratch.unlink(missing_ok=True)


# -- the run ------------------------------------------------------------------------------------------------------


@dataclass
class Progress:
    """What ``progress.json`` holds: the options and sources it was made with, and the finished shards."""

    options: dict[str, Any]
    fingerprint: str
    tokenizer: dict[str, Any]
    shards: list[ShardRecord] = field(default_factory=list)

    def save(self, out: Path) -> None:
        payload = {
            "options": self.options,
            "fingerprint": self.fingerprint,
            "tokenizer": self.tokenizer,
            "shards": [asdict(s) for s in self.shards],
        }
        write_text_atomic(out / PROGRESS_FILE, json.dumps(payload, indent=1) + "\n")

    def done_until(self, split: str) -> int:
        """Documents below this number are in a finished shard of ``split`` (or belong to another split)."""
        ends = [s.end_doc for s in self.shards if s.split == split]
        return max(ends) if ends else 0


@dataclass
class PrepareResult:
    out: Path
    meta: dict[str, Any]
    resumed_shards: int
    seconds: float

    def summary(self) -> str:
        splits = self.meta["splits"]
        parts = ", ".join(f"{s} {splits[s]['tokens']:,} tokens in {len(splits[s]['shards'])} shard(s)" for s in SPLITS)
        src = self.meta["source"]
        skipped = src["skipped"]["count"]
        note = f"; {skipped} file(s) skipped as not text (meta.json source.skipped)" if skipped else ""
        again = f"; {self.resumed_shards} shard(s) kept from an earlier run" if self.resumed_shards else ""
        mb = src["bytes"] / 1e6
        return (
            f"prepared {src['documents']:,} documents ({mb:,.1f} MB of text) with {self.meta['tokenizer']['name']} "
            f"into {self.out}: {parts} in {self.seconds:.1f}s ({mb / max(self.seconds, 1e-9):.2f} MB/s){again}{note}"
        )


def default_workers() -> int:
    return max(1, len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else (os.cpu_count() or 1))


def prepare(
    sources: Sources,
    out: Path,
    options: PrepareOptions,
    workers: int | None = None,
    progress: bool = True,
    on_shard: Callable[[ShardRecord], None] | None = None,
) -> PrepareResult:
    """Tokenize ``sources`` into shards in ``out`` (see the module docstring). Holds ``out``'s lock: a second
    prepare into the same folder is refused in one line. ``on_shard`` is called after each shard is recorded
    (tests use it to stop a run at a shard boundary)."""
    options.check()
    out = Path(out)
    with folder_lock(out, option="--out"):
        meta_path = out / META_FILE
        if meta_path.is_file():
            try:
                meta = json.loads(meta_path.read_text())
                if not isinstance(meta, dict):
                    raise ValueError("not an object")
            except (OSError, ValueError):
                raise AotError(
                    f"{str(meta_path)!r} is damaged; remove the folder {str(out)!r} and prepare again"
                ) from None
            if (
                meta.get("options") == options.key()
                and meta.get("source", {}).get("fingerprint") == sources.fingerprint()
            ):
                return PrepareResult(
                    out, meta, resumed_shards=sum(len(s["shards"]) for s in meta["splits"].values()), seconds=0.0
                )
            raise AotError(
                f"{str(out)!r} already holds data prepared from other sources or options (its {META_FILE}); "
                "choose another --out, or remove that folder first"
            )
        return _prepare_locked(
            sources, out, options, default_workers() if workers is None else workers, progress, on_shard
        )


def _prepare_locked(
    sources: Sources,
    out: Path,
    options: PrepareOptions,
    workers: int,
    progress: bool,
    on_shard: Callable[[ShardRecord], None] | None,
) -> PrepareResult:
    start = time.perf_counter()
    split_by = options.resolved_split(sources)
    for stale in out.glob(".*.tmp"):  # a killed run's unfinished shard or record: never read, never kept
        stale.unlink()
    state = _load_progress(out, options, sources)
    resumed = len(state.shards) if state is not None else 0
    fresh = state is None
    n_chars = _count_chars(sources) if split_by == "contiguous" else 0
    if split_by == "contiguous" and n_chars < 1000:
        raise AotError(f"the text has only {n_chars} characters; give at least a few thousand")
    tokenizer, recipe = _tokenizer_for(sources, out, options, split_by, n_chars, state)
    eot = getattr(tokenizer, "eot_id", None) if split_by == "documents" else None
    if state is None:
        state = Progress(options.key(), sources.fingerprint(), {"name": tokenizer.name, "path": recipe[1]})
        state.save(out)  # before the first shard: a shard on disk is always one this folder's record may claim
    done = {split: state.done_until(split) for split in SPLITS}  # records below are in finished shards
    writers = {
        split: SplitWriter(out, split, sum(1 for s in state.shards if s.split == split), tokenizer.vocab_size)
        for split in SPLITS
    }
    skipped = SkipLog()
    content = hashlib.sha256()  # one text: of the text; documents: of each document's sha256, in order
    counted = {"documents": 0, "bytes": 0}
    encoder = Encoder(recipe, eot, workers, options.text_field, options.strict)
    bar = _bar(progress)
    try:
        records: list[Record] = []
        tags: list[tuple[int, str, bool, str]] = []
        size = 0

        def take(results: Iterable[tuple[list[tuple[int, str, bool, str]], Encoded]]) -> None:
            for batch_tags, encoded in results:
                for k, why in encoded.skipped:
                    skipped.add(Path(batch_tags[k][3]), why)
                offset = 0
                for k, (number, split, tokenize, _) in enumerate(batch_tags):
                    n_bytes = int(encoded.n_bytes[k])
                    if n_bytes < 0:
                        continue  # an empty text or a skipped file: no document
                    counted["documents"] += 1
                    counted["bytes"] += n_bytes
                    if split_by == "documents":
                        content.update(encoded.digests[32 * k : 32 * k + 32])
                    bar.update(n_bytes)
                    if not tokenize:
                        continue
                    length = int(encoded.lengths[k])
                    writer = writers[split]
                    writer.append(encoded.tokens[offset : offset + length], number, n_bytes)
                    offset += length
                    if writer.count >= options.shard_tokens:
                        _finish_shard(writer, state, out, on_shard)
                per_second = counted["documents"] / max(time.perf_counter() - start, 1e-9)
                bar.set_postfix(docs=f"{counted['documents']:,}", docs_s=f"{per_second:,.0f}", refresh=False)

        for number, (record, split) in enumerate(_records(sources, options, split_by, n_chars, tokenizer)):
            if record.kind == TEXT:
                content.update(record.payload.encode("utf-8"))
            records.append(record)
            tags.append((number, split, number >= done[split], record.path if record.kind == FILE else ""))
            size += len(record.payload) if isinstance(record.payload, str | bytes) else 0
            if size >= BATCH_CHARS:
                take(encoder.submit(records, [t[2] for t in tags], tags))
                records, tags, size = [], [], 0
        if records:
            take(encoder.submit(records, [t[2] for t in tags], tags))
        take(encoder.drain())
        for writer in writers.values():
            _finish_shard(writer, state, out, on_shard)
    except OSError as exc:
        for writer in writers.values():
            writer.abort()
        kept = len(state.shards)
        hint = "free some space" if exc.errno == errno.ENOSPC else "check the folder"
        raise AotError(
            f"{os_error_line(exc, f'writing shards into {str(out)!r}').split(';')[0]}; {kept} finished shard(s) are "
            f"kept: {hint}, then run the same command again to resume"
        ) from None
    except BaseException:
        for writer in writers.values():
            writer.abort()
        if not state.shards:  # refused before any shard was finished: a fresh folder is left as it was
            _discard(out, fresh)
        raise
    finally:
        encoder.close()
        bar.close()
    if counted["documents"] == 0:
        _discard(out, fresh)
        raise AotError(
            f"the sources ({', '.join(sources.specs)}) hold no documents"
            + (f" ({skipped.count} file(s) skipped as not text: {skipped.first[0]})" if skipped.count else "")
            + "; give text files, or JSON lines / parquet rows with a text field"
        )
    empty = [split for split in SPLITS if not any(s.split == split and s.tokens for s in state.shards)]
    if empty:
        _discard(out, fresh)
        fraction = {"val": options.val_fraction, "test": options.test_fraction, "train": 0.0}
        raise AotError(
            f"the {empty[0]} split got no documents ({counted['documents']:,} documents in all, {empty[0]} fraction "
            f"{fraction[empty[0]]:g}); raise --{empty[0]}-fraction or give more documents"
        )
    meta = _meta(sources, options, split_by, tokenizer, state, skipped, content.hexdigest(), counted)
    write_text_atomic(out / META_FILE, json.dumps(meta, indent=2) + "\n")
    (out / PROGRESS_FILE).unlink(missing_ok=True)
    return PrepareResult(out, meta, resumed, time.perf_counter() - start)


def _finish_shard(
    writer: SplitWriter, state: Progress, out: Path, on_shard: Callable[[ShardRecord], None] | None
) -> None:
    record = writer.close()
    if record is None:
        return
    state.shards.append(record)
    state.save(out)
    if on_shard is not None:
        on_shard(record)


def _discard(out: Path, fresh: bool) -> None:
    """A refused prepare that started in an empty folder leaves nothing behind."""
    if not fresh:
        return
    for path in [*out.glob("*.bin"), out / PROGRESS_FILE, out / BPE_FILE]:
        path.unlink(missing_ok=True)


def _load_progress(out: Path, options: PrepareOptions, sources: Sources) -> Progress | None:
    """The finished shards of an interrupted prepare into ``out`` with the same options and sources (each checked
    against its header; a shard that fails is dropped with the ones after it), or ``None`` for a fresh start."""
    path = out / PROGRESS_FILE
    if not path.is_file():
        others = sorted(p.name for p in out.iterdir() if p.name != LOCK_FILE and not p.name.endswith(".bin"))
        if others:
            raise AotError(
                f"--out {str(out)!r} already holds other files ({', '.join(others[:3])}); give a new or empty folder"
            )
        leftovers = sorted(p.name for p in out.glob("*.bin"))
        if leftovers:
            raise AotError(
                f"{str(out)!r} holds token shards ({leftovers[0]}, ...) that no prepare recorded; choose an empty --out"
            )
        (out / BPE_FILE).unlink(missing_ok=True)  # a tokenizer trained by a run killed before its first record
        return None
    try:
        raw = json.loads(path.read_text())
        state = Progress(
            raw["options"], raw["fingerprint"], raw["tokenizer"], [ShardRecord(**s) for s in raw["shards"]]
        )
    except (ValueError, KeyError, TypeError):
        raise AotError(f"{str(path)!r} is damaged; remove the folder {str(out)!r} and prepare again") from None
    if state.options != options.key() or state.fingerprint != sources.fingerprint():
        raise AotError(
            f"{str(out)!r} holds an unfinished prepare of other sources or options; rerun it with the same "
            "command, or choose another --out"
        )
    kept: list[ShardRecord] = []
    broken: set[str] = set()
    for record in state.shards:
        if record.split in broken:
            continue
        try:
            header = llmc.read_header(out / record.file)
            if header.count != record.tokens:
                raise AotError("count differs")
            kept.append(record)
        except AotError:
            broken.add(record.split)
            for later in state.shards:
                if later.split == record.split and later.index >= record.index:
                    (out / later.file).unlink(missing_ok=True)
    state.shards = kept
    recorded = {record.file for record in kept}
    for orphan in out.glob("*_[0-9][0-9][0-9][0-9][0-9][0-9].bin"):  # renamed whole, killed before its record
        if orphan.name not in recorded:
            orphan.unlink()
    return state


def _count_chars(sources: Sources) -> int:
    return sum(len(block) for block in iter_text_blocks(sources))


def _records(
    sources: Sources, options: PrepareOptions, split_by: str, n_chars: int, tokenizer: Any
) -> Iterator[tuple[Record, str]]:
    """Every record with its split: one text's pieces with the split they fall in, or each record of the sources
    with the split its number hashes to."""
    if split_by == "contiguous":
        any_cut = tokenizer.name == "bytes"
        for piece, split in contiguous_pieces(iter_text_blocks(sources), n_chars, options, any_cut):
            yield Record(TEXT, piece), split
        return
    for number, record in enumerate(iter_records(sources, options.text_field)):
        yield record, split_of(number, options.val_fraction, options.test_fraction, options.split_seed)


def _tokenizer_for(
    sources: Sources, out: Path, options: PrepareOptions, split_by: str, n_chars: int, state: Progress | None
) -> tuple[Any, tuple[str, str | None]]:
    """The tokenizer and how a worker rebuilds it; a bpe-N is trained once (on the first
    :data:`BPE_SAMPLE_BYTES` of training text) and saved as ``out/tokenizer.json``."""
    name = options.tokenizer
    if not name.startswith("bpe-"):
        return get_tokenizer(name), (name, None)
    saved = out / BPE_FILE
    if state is not None and saved.is_file():
        return TrainedBPE.load(saved), (name, str(saved))
    try:
        vocab_size = int(name.split("-", 1)[1])
    except ValueError:
        raise AotError(f"unknown tokenizer {name!r}; use bytes, gpt2 or bpe-N (e.g. bpe-4096)") from None
    if not 257 <= vocab_size <= 65535:
        raise AotError(f"tokenizer {name!r}: the BPE vocab size must be in [257, 65535]")
    lines = _bpe_sample_lines(sources, options, split_by, n_chars)
    bpe = TrainedBPE.train_from_lines(lines, vocab_size, with_eot=split_by == "documents")
    bpe.save(saved)
    return bpe, (name, str(saved))


def _bpe_sample_lines(sources: Sources, options: PrepareOptions, split_by: str, n_chars: int) -> Iterator[str]:
    """Lines of the first :data:`BPE_SAMPLE_BYTES` of training text, in order (for one small text: all of its
    training split, line by line, as the corpus cache always trained its BPE)."""
    budget = BPE_SAMPLE_BYTES
    carry = ""
    texts: Iterable[tuple[str, str]]
    if split_by == "contiguous":
        texts = contiguous_pieces(iter_text_blocks(sources), n_chars, options, any_cut=True)
    else:
        texts = (
            (text, split_of(i, options.val_fraction, options.test_fraction, options.split_seed))
            for i, text in iter_numbered_documents(sources, options.text_field, options.strict, SkipLog())
        )
    for text, split in texts:
        if split != "train":
            if split_by == "contiguous":
                break
            continue
        if split_by == "documents":
            yield from text.splitlines(keepends=True)
        else:
            parts = (carry + text).splitlines(keepends=True)
            # a line is whole once a later character follows its end (a "\r" may be the first half of "\r\n")
            carry = parts.pop() if parts and not parts[-1].endswith("\n") else ""
            yield from parts
        budget -= len(text.encode("utf-8"))
        if budget <= 0:
            break
    if carry:
        yield carry


def _meta(
    sources: Sources,
    options: PrepareOptions,
    split_by: str,
    tokenizer: Any,
    state: Progress,
    skipped: SkipLog,
    sha256: str,
    counted: dict[str, int],
) -> dict[str, Any]:
    from importlib.metadata import PackageNotFoundError
    from importlib.metadata import version as package_version

    try:
        prepared_with = f"aot {package_version('aot')}"
    except PackageNotFoundError:  # a source tree on PYTHONPATH
        prepared_with = "aot (source tree)"
    magic, version = llmc.kind_for(tokenizer.vocab_size)
    splits: dict[str, Any] = {}
    for split in SPLITS:
        records = [s for s in state.shards if s.split == split]
        splits[split] = {
            "tokens": sum(s.tokens for s in records),
            "bytes": sum(s.bytes for s in records),
            "documents": sum(s.documents for s in records),
            "shards": [{"file": s.file, "tokens": s.tokens, "sha256": s.sha256, "max_id": s.max_id} for s in records],
        }
    return {
        "format": FORMAT,
        "header": {"magic": magic, "version": version, "dtype": np.dtype(llmc.dtype_for(tokenizer.vocab_size)).name},
        "tokenizer": {
            "name": tokenizer.name,
            "vocab_size": tokenizer.vocab_size,
            "eot_id": getattr(tokenizer, "eot_id", None) if split_by == "documents" else None,
            "file": BPE_FILE if tokenizer.name.startswith("bpe-") else None,
        },
        "options": options.key(),
        "split_by": split_by,
        "source": {
            "specs": sources.specs,
            "fingerprint": sources.fingerprint(),
            "sha256": sha256,
            "documents": counted["documents"],
            "bytes": counted["bytes"],
            "skipped": skipped.to_dict(),
        },
        "splits": splits,
        "prepared_with": prepared_with,
    }


def _bar(enabled: bool):  # type: ignore[no-untyped-def]
    from tqdm.auto import tqdm

    return tqdm(
        disable=not enabled, unit="B", unit_scale=True, unit_divisor=1000, desc="text", dynamic_ncols=True, leave=False
    )
