"""What the tests of ``aot data prepare`` and of token shards share: an llm.c shard reader and writer written here
from the format's description alone (numpy only, never ``aot.data.llmc``), a generator of varied documents, the
expected tokens of a prepared folder computed by one-shot encoding, and a snapshot of a folder's bytes."""

from __future__ import annotations

import gzip
import json
import random
from pathlib import Path

import numpy as np

#: llm.c's (magic, version) -> token dtype, as its dev/data/data_common.py writes them
LLMC_KINDS = {(20240520, 1): "<u2", (20240801, 7): "<u4"}
HEADER_INTS = 256
SPLITS = ("train", "val", "test")

WORDS = [
    "the", "of", "and", "to", "in", "thee", "thou", "summer's", "day", "don't", "it's", "we'll", "café", "naïve",
    "Ünïcödé", "東京", "日本語", "😀", "🚀x", "123", "4.5", "1,000", "—", "...", "?!", "(paren)", "[x]", "a", "I",
    "Shall", "compare", "lovely", "temperate", "ß", "Ωmega", "\u2028", "tab\tbed", "x\x00y",
]  # fmt: skip
SEPARATORS = [" ", " ", " ", " ", "  ", "\n", "\n\n", "\r\n", " \n", "\t", ", ", ". "]


def read_llmc(path: Path) -> np.ndarray:
    """The tokens of one llm.c shard: a header of 256 little-endian int32 (magic, version, token count, zeros),
    then the tokens. Asserts what the format promises: a known (magic, version), a zero tail of the header, and a
    file size that is exactly the header plus the counted tokens."""
    raw = Path(path).read_bytes()
    assert len(raw) >= HEADER_INTS * 4, f"{path}: shorter than a header"
    head = np.frombuffer(raw[: HEADER_INTS * 4], dtype="<i4")
    magic, version, count = int(head[0]), int(head[1]), int(head[2])
    assert (magic, version) in LLMC_KINDS, f"{path}: magic {magic} version {version}"
    assert not head[3:].any(), f"{path}: the header's tail is not zero"
    dtype = np.dtype(LLMC_KINDS[(magic, version)])
    assert len(raw) == HEADER_INTS * 4 + count * dtype.itemsize, f"{path}: {len(raw)} bytes for {count} tokens"
    return np.frombuffer(raw[HEADER_INTS * 4 :], dtype=dtype).astype(np.int64)


def write_llmc(path: Path, tokens: np.ndarray | list[int], wide: bool = False) -> Path:
    """An llm.c shard of ``tokens`` (uint16, or uint32 with ``wide``), written as llm.c writes one."""
    head = np.zeros(HEADER_INTS, dtype="<i4")
    head[0], head[1] = (20240801, 7) if wide else (20240520, 1)
    head[2] = len(tokens)
    Path(path).write_bytes(head.tobytes() + np.asarray(tokens, dtype="<u4" if wide else "<u2").tobytes())
    return Path(path)


def split_tokens(out: Path, split: str) -> np.ndarray:
    """The tokens of ``split`` in a prepared folder, read with :func:`read_llmc`: its shards ``SPLIT_000000.bin``,
    ``SPLIT_000001.bin``, ... in order, numbered without a gap."""
    files = sorted(Path(out).glob(f"{split}_*.bin"))
    assert [f.name for f in files] == [f"{split}_{i:06d}.bin" for i in range(len(files))], files
    parts = [read_llmc(f) for f in files]
    return np.concatenate(parts) if parts else np.zeros(0, dtype=np.int64)


def make_documents(n: int, seed: int = 0, min_words: int = 1, max_words: int = 60) -> list[str]:
    """``n`` varied, non-empty documents: ASCII and multi-byte words, contractions, digits, punctuation, ``\\r\\n``,
    tabs, U+2028 and NUL (a NUL inside a JSON string is legal text)."""
    rng = random.Random(seed)
    docs = []
    for _ in range(n):
        words = [rng.choice(WORDS) for _ in range(rng.randint(min_words, max_words))]
        text = "".join(w + rng.choice(SEPARATORS) for w in words)
        docs.append(text.rstrip(" ") or "x")
    return docs


def make_text(n_chars: int, seed: int = 0) -> str:
    """One text of about ``n_chars`` characters (no NUL: a .txt file with one would be binary)."""
    parts, size, k = [], 0, 0
    while size < n_chars:
        doc = make_documents(1, seed=seed * 100_003 + k, max_words=120)[0].replace("\x00", "0")
        parts.append(doc + "\n")
        size += len(doc) + 1
        k += 1
    return "".join(parts)


def write_jsonl(path: Path, docs: list[str], field: str = "text", extra: bool = True) -> Path:
    """One JSON object per line (with an ``id`` beside the text, as real dumps have); ``.gz``: gzip."""
    lines = "".join(json.dumps({"id": i, field: d} if extra else {field: d}) + "\n" for i, d in enumerate(docs))
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    if path.name.endswith(".gz"):
        with gzip.open(path, "wt", encoding="utf-8") as handle:
            handle.write(lines)
    else:
        path.write_text(lines, encoding="utf-8")
    return path


def write_parquet(path: Path, docs: list[str], column: str = "text", row_group_size: int = 7) -> Path:
    import pyarrow as pa
    import pyarrow.parquet as pq

    table = pa.table({"id": list(range(len(docs))), column: docs})
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    pq.write_table(table, path, row_group_size=row_group_size)
    return path


def expected_documents(
    docs: list[str | None], tokenizer, val: float, test: float, seed: int = 0
) -> dict[str, np.ndarray]:
    """The tokens of each split in documents mode, by one-shot encoding: over the records in order, the documents
    whose split is ``split_of(i, ...)``, each as ``[EOT] + encode(doc)``; a record that is no document (``None``,
    ``""``: a skipped file, an empty text) keeps its number."""
    from aot.data.prepare import split_of

    rows: dict[str, list[int]] = {s: [] for s in SPLITS}
    for i, doc in enumerate(docs):
        if doc:
            rows[split_of(i, val, test, seed)].extend([tokenizer.eot_id, *tokenizer.encode(doc)])
    return {s: np.asarray(rows[s], dtype=np.int64) for s in SPLITS}


def expected_contiguous(text: str, tokenizer, val: float, test: float) -> dict[str, np.ndarray]:
    """The tokens of each split of one text: ``encode(split_text(text)[split])``, no end-of-text token."""
    from aot.data.corpora import split_text

    parts = split_text(text, val, test)
    return {s: np.asarray(tokenizer.encode(parts[s]), dtype=np.int64) for s in SPLITS}


def folder_bytes(folder: Path) -> dict[str, bytes]:
    """``name -> bytes`` of every file directly in ``folder`` except the lock file."""
    return {p.name: p.read_bytes() for p in sorted(Path(folder).iterdir()) if p.is_file() and p.name != ".aot.lock"}


def shard_names(folder: Path) -> list[str]:
    return sorted(p.name for p in Path(folder).glob("*_[0-9][0-9][0-9][0-9][0-9][0-9].bin"))


def one_line(message: str) -> str:
    """``message`` when it is one line without a traceback (what every refusal must be)."""
    assert "\n" not in message.strip() and "Traceback" not in message, message
    return message


def assert_one_line(code: int, err: str, *fragments: str) -> str:
    """A clean refusal: exit status 2, one stderr line ``aot: error: ...`` holding ``fragments``, no traceback."""
    lines = [line for line in err.splitlines() if line.strip()]
    assert code == 2 and len(lines) == 1 and lines[0].startswith("aot: error: "), f"status {code}: {err}"
    assert "Traceback" not in err
    for fragment in fragments:
        assert fragment in lines[0], lines[0]
    return lines[0]
