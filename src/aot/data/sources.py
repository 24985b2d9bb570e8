"""Text sources read as a stream of documents, never as one string: what ``aot data prepare`` and the corpus cache
tokenize.

A source is named by one string:

- a registered corpus name (``shakespeare``, ``austen``: fetched with ``aot data fetch``), one document;
- a ``.txt`` file (one document), a ``.jsonl`` / ``.jsonl.gz`` file (one document per line, the ``text`` field), a
  ``.parquet`` file (one document per row of the ``text`` column);
- a folder (every file of those kinds below it, in sorted path order) or a glob (``data/*.jsonl.gz``);
- ``hf:NAME[:CONFIG]`` — a HuggingFace ``datasets`` dataset (its ``train`` split), streamed when the hub answers,
  read from datasets' cache offline (``HF_HUB_OFFLINE=1``), or ``hf:FOLDER`` saved with ``save_to_disk``.

Documents come out in a fixed order (sources in the order given, files sorted, rows in file order), so the same
sources always give the same documents. A ``.txt`` file that is binary (a NUL byte) or not UTF-8 is skipped and
counted by default (:class:`SkipLog`), or refused with ``strict``: in a folder of millions of web pages one stray
file should not stop a run of hours, but it must not pass unnoticed either. A JSON line without the text field and a
parquet file without the text column are always refused: that is a wrong field name, not a stray document.
"""

from __future__ import annotations

import difflib
import glob
import gzip
import hashlib
import json
import zlib
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from aot.data.corpora import CORPORA, corpus_path, readable_name
from aot.data.hub import load_hub_dataset
from aot.errors import AotError
from aot.validation import path_kind

KINDS = {".txt": "text", ".jsonl": "jsonl", ".jsonl.gz": "jsonl", ".parquet": "parquet"}
SUFFIXES = tuple(KINDS)
#: characters per block when a text is streamed (contiguous splits)
BLOCK_CHARS = 1 << 20


def kind_of(path: Path) -> str | None:
    name = path.name.lower()
    for suffix, kind in KINDS.items():
        if name.endswith(suffix):
            return kind
    return None


@dataclass(frozen=True)
class SourceFile:
    path: Path
    kind: str  # text | jsonl | parquet
    universal_newlines: bool = False  # a registered corpus is read as `aot data fetch` wrote it (read_text)


@dataclass
class SkipLog:
    """Files skipped as not text (binary, not UTF-8), counted, with the first few named."""

    count: int = 0
    first: list[str] = field(default_factory=list)

    def add(self, path: Path, why: str) -> None:
        self.count += 1
        if len(self.first) < 20:
            self.first.append(f"{path}: {why}")

    def to_dict(self) -> dict[str, Any]:
        return {"count": self.count, "first": list(self.first)}


@dataclass
class Sources:
    """The resolved sources: files in reading order, or one ``hf:`` dataset."""

    specs: list[str]
    files: list[SourceFile]
    hf: str | None = None

    @property
    def plain_text(self) -> bool:
        """One text (a registered corpus or one ``.txt`` file): split contiguously by default."""
        return self.hf is None and len(self.files) == 1 and self.files[0].kind == "text"

    @property
    def total_bytes(self) -> int:
        return sum(f.path.stat().st_size for f in self.files)

    def fingerprint(self) -> str:
        """A hash of what names the sources, without reading them: each file's path, size and modification time
        (``hf:``: the name). A rerun of a prepare over changed files sees a different fingerprint; the content's own
        sha256 is recorded once the documents have been read (``meta.json`` ``source.sha256``)."""
        digest = hashlib.sha256()
        if self.hf is not None:
            digest.update(f"hf:{self.hf}".encode())
        for f in self.files:
            stat = f.path.stat()
            digest.update(f"{f.path.resolve()}\0{stat.st_size}\0{stat.st_mtime_ns}\0".encode())
        return digest.hexdigest()


def resolve(specs: list[str] | tuple[str, ...], root: Path | None = None) -> Sources:
    """The files (or the ``hf:`` dataset) that ``specs`` name, each checked to exist: one line naming a spec that
    names nothing readable."""
    if not specs:
        raise AotError("no source given; name a .txt / .jsonl / .jsonl.gz / .parquet file, a folder, a glob or hf:NAME")
    hf = [s for s in specs if s.startswith("hf:")]
    if hf:
        if len(specs) > 1:
            raise AotError(f"an hf: source must be the only one; got {', '.join(specs)}")
        return Sources(list(specs), [], hf=hf[0][3:])
    files: list[SourceFile] = []
    for spec in specs:
        files.extend(_files_of(spec, root))
    return Sources(list(specs), files)


def _files_of(spec: str, root: Path | None) -> list[SourceFile]:
    if spec in CORPORA:
        path = corpus_path(spec, root)
        if not path.is_file():
            raise AotError(f"corpus {spec!r} is not fetched yet; run `{CORPORA[spec].fetch_command}`")
        return [SourceFile(path, "text", universal_newlines=True)]
    if any(c in spec for c in "*?["):
        matches = sorted(Path(p) for p in glob.glob(spec, recursive=True))
        found = [SourceFile(p, k) for p in matches if p.is_file() and (k := kind_of(p)) is not None]
        if not found:
            raise AotError(f"glob {spec!r} matches no {' / '.join(SUFFIXES)} file")
        return found
    path = Path(spec).expanduser()
    kind = path_kind(path)
    if kind == "a directory":
        found = [SourceFile(p, k) for p in sorted(path.rglob("*")) if p.is_file() and (k := kind_of(p)) is not None]
        if not found:
            raise AotError(f"folder {spec!r} holds no {' / '.join(SUFFIXES)} files")
        return found
    if kind == "missing":
        if "/" in spec or kind_of(path) is not None:
            raise AotError(f"source {spec!r} does not exist")
        close = difflib.get_close_matches(spec, CORPORA, n=1)
        hint = f"did you mean {close[0]!r}? " if close else ""
        raise AotError(
            f"unknown corpus {spec!r}; {hint}use one of {', '.join(CORPORA)}, a file, a folder, a glob or hf:NAME"
        )
    if kind != "a file":
        raise AotError(f"corpus file {spec!r} is {kind}, not a regular file; give a text, jsonl or parquet file")
    file_kind = kind_of(path)
    if file_kind is None:
        raise AotError(f"source {spec!r} is not a {' / '.join(SUFFIXES)} file; rename it or convert it")
    return [SourceFile(path, file_kind)]


# -- records and documents ----------------------------------------------------------------------------------------

#: what a record is, to :func:`decode_record`: a line of JSON, a ``.txt`` file's bytes, a row's value, a text piece
JSON, FILE, ROW, TEXT = "json", "file", "row", "text"


@dataclass(frozen=True)
class Record:
    """One record of a source, read but not yet decoded: ``kind`` (:data:`JSON` line bytes, :data:`FILE` bytes of
    a ``.txt`` file, :data:`ROW` value of a parquet / ``hf:`` text column, :data:`TEXT` a piece of text), the raw
    ``payload``, and where it comes from (``path``, ``line``) for an error message. Records are numbered in
    order; the number decides the record's split. A record whose text is empty (or a skipped file) is no
    document, and keeps its number, so the same rows give the same splits in every kind of source."""

    kind: str
    payload: Any
    path: str = ""
    line: int = 0
    universal_newlines: bool = False


def iter_records(sources: Sources, text_field: str = "text") -> Iterator[Record]:
    """The records of ``sources`` in order, raw: reading them is cheap (lines of bytes, files' bytes, Arrow
    batches), decoding them (:func:`decode_record`: JSON, UTF-8, the text field) is the tokenizer workers' job.
    Memory holds one record (or one parquet batch) at a time."""
    if sources.hf is not None:
        yield from _hf_records(sources.hf, text_field)
        return
    for source in sources.files:
        if source.kind == "text":
            yield Record(FILE, _read_bytes(source.path), str(source.path), 0, source.universal_newlines)
        elif source.kind == "jsonl":
            yield from _jsonl_records(source.path)
        else:
            yield from _parquet_records(source.path, text_field)


def decode_record(record: Record, text_field: str = "text", strict: bool = False) -> tuple[str, str | None]:
    """``(text, skipped)``: the record's text (``""``: no document), and why a ``.txt`` file was skipped (binary,
    not UTF-8; ``None`` otherwise). A JSON line that is not an object with a string ``text_field``, or a row of
    bytes that are not UTF-8, is one line naming the file (and the line); with ``strict`` so is a skipped file."""
    if record.kind == TEXT:
        return record.payload, None
    if record.kind == JSON:
        return _json_text(record.payload, record.path, record.line, text_field), None
    if record.kind == ROW:
        return _row_text(record.payload, record.path, text_field), None
    data: bytes = record.payload
    why = None
    if b"\0" in data:
        why = f"binary (a NUL byte at offset {data.index(0)})"
    else:
        try:
            text = data.decode("utf-8")
        except UnicodeDecodeError as exc:
            why = f"not UTF-8 (byte 0x{data[exc.start]:02x} at offset {exc.start})"
    if why is not None:
        if strict:
            raise AotError(f"{record.path!r} is {why}; convert it to UTF-8 text or remove it (or drop --strict)")
        return "", why
    if record.universal_newlines:
        text = text.replace("\r\n", "\n").replace("\r", "\n")
    return text, None


def iter_documents(
    sources: Sources, text_field: str = "text", strict: bool = False, skipped: SkipLog | None = None
) -> Iterator[str]:
    """Every document of ``sources``, in order, decoded in this process (the reference reader; ``aot data
    prepare`` decodes the same records in its workers)."""
    for _, text in iter_numbered_documents(sources, text_field, strict, skipped):
        yield text


def iter_numbered_documents(
    sources: Sources, text_field: str = "text", strict: bool = False, skipped: SkipLog | None = None
) -> Iterator[tuple[int, str]]:
    """``(record number, text)`` of every document of ``sources``, in order."""
    skipped = skipped if skipped is not None else SkipLog()
    for number, record in enumerate(iter_records(sources, text_field)):
        text, why = decode_record(record, text_field, strict)
        if why is not None:
            skipped.add(Path(record.path), why)
        if text:
            yield number, text


def _read_bytes(path: Path) -> bytes:
    try:
        return path.read_bytes()
    except OSError as exc:
        raise AotError(f"cannot read {str(path)!r}: {exc.strerror or exc}") from None


def _jsonl_records(path: Path) -> Iterator[Record]:
    opener = gzip.open if path.name.lower().endswith(".gz") else open
    try:
        with opener(path, "rb") as handle:
            for number, line in enumerate(handle, 1):
                if line.strip():
                    yield Record(JSON, line, str(path), number)
    except (OSError, EOFError, zlib.error) as exc:  # a gzip stream that is cut short, corrupted or not gzip
        raise AotError(f"cannot read {str(path)!r}: {exc}; check the file (gzip -t) or prepare it again") from None


def _json_text(line: bytes | str, path: str, number: int, text_field: str) -> str:
    try:
        row = json.loads(line)
    except UnicodeDecodeError as exc:
        raise AotError(f"{path}:{number} is not UTF-8 ({exc.reason}); convert the file to UTF-8") from None
    except json.JSONDecodeError as exc:
        raise AotError(f"{path}:{number} is not JSON ({exc.msg}); every line must be one JSON object") from None
    value = row.get(text_field) if isinstance(row, dict) else None
    if not isinstance(value, str):
        keys = ", ".join(list(row)[:8]) if isinstance(row, dict) else type(row).__name__
        what = "is not a string" if isinstance(row, dict) and text_field in row else "is missing"
        raise AotError(
            f"{path}:{number}: the field {text_field!r} {what} (the line has: {keys}); "
            "give the field that holds the text with --text-field NAME"
        )
    return value


def _row_text(value: Any, path: str, text_field: str) -> str:
    if isinstance(value, bytes):
        try:
            return value.decode("utf-8")
        except UnicodeDecodeError:
            raise AotError(
                f"{path}: column {text_field!r} holds bytes that are not UTF-8; store the text as UTF-8 strings"
            ) from None
    if value is not None and not isinstance(value, str):
        raise AotError(
            f"{path}: column {text_field!r} holds {type(value).__name__}, not text; "
            "give the column that holds the text with --text-field NAME"
        )
    return value or ""


def _parquet_records(path: Path, text_field: str) -> Iterator[Record]:
    try:
        import pyarrow.parquet as pq  # type: ignore[import-not-found,import-untyped,unused-ignore]
    except ImportError:
        raise AotError(f"reading {str(path)!r} needs pyarrow: pip install 'aot[hf-data]'") from None
    try:
        parquet = pq.ParquetFile(path)
    except Exception as exc:  # pyarrow's ArrowInvalid for a file that is not parquet
        raise AotError(f"{str(path)!r} is not a readable parquet file ({str(exc).splitlines()[0]})") from None
    columns = parquet.schema_arrow.names
    if text_field not in columns:
        raise AotError(
            f"parquet {str(path)!r} has no column {text_field!r} (columns: {', '.join(columns[:12])}); "
            "give the column that holds the text with --text-field NAME"
        )
    where = f"parquet {str(path)!r}"
    for batch in parquet.iter_batches(columns=[text_field], batch_size=1024):
        for value in batch.column(0).to_pylist():
            yield Record(ROW, value, where)


def _hf_records(spec: str, text_field: str) -> Iterator[Record]:
    fix = "use local .jsonl / .parquet / .txt files"
    dataset = _open_hf(spec, fix)
    names = getattr(dataset, "column_names", None)
    if names is not None and text_field not in names:
        raise AotError(
            f"HuggingFace dataset {spec!r} has no column {text_field!r} (columns: {names}); give --text-field"
        )
    where = f"HuggingFace dataset {spec!r}"
    for row in dataset:
        yield Record(ROW, row.get(text_field), where)


def _open_hf(spec: str, fix: str) -> Any:
    """The ``train`` split of ``spec``: a ``save_to_disk`` folder, or a hub name (streamed when online)."""
    folder = Path(spec)
    if folder.is_dir():
        try:
            import datasets  # type: ignore[import-not-found,import-untyped,unused-ignore]
        except ImportError:
            raise AotError(f"reading hf:{spec} needs HuggingFace datasets: pip install 'aot[hf-data]'") from None
        try:
            loaded = datasets.load_from_disk(str(folder))
        except Exception as exc:
            raise AotError(f"hf:{spec} is not a folder saved with save_to_disk ({str(exc).splitlines()[0]})") from None
        if isinstance(loaded, datasets.DatasetDict):
            if "train" not in loaded:
                raise AotError(f"hf:{spec} has no 'train' split (splits: {', '.join(loaded)})")
            loaded = loaded["train"]
        return loaded
    import os

    offline = any(os.environ.get(v, "").upper() in ("1", "ON", "YES", "TRUE") for v in ("HF_HUB_OFFLINE",))
    return load_hub_dataset(spec, f"source 'hf:{spec}'", fix, split="train", streaming=not offline)


# -- one text, streamed in blocks (contiguous splits) -------------------------------------------------------------


def iter_text_blocks(sources: Sources, block_chars: int = BLOCK_CHARS) -> Iterator[str]:
    """The concatenated text of ``sources`` (``.txt`` files only) in blocks of about ``block_chars`` characters,
    decoded strictly: the text of the legacy contiguous split, never held whole. A file that is not UTF-8 is one
    line naming it."""
    import codecs

    for source in sources.files:
        if source.kind != "text":
            raise AotError(f"a contiguous split reads .txt files only; {str(source.path)!r} is {source.kind}")
        decoder = codecs.getincrementaldecoder("utf-8")()
        offset = 0
        carry_cr = False
        with open(source.path, "rb") as handle:
            while True:
                raw = handle.read(block_chars)
                final = not raw
                try:
                    text = decoder.decode(raw, final=final)
                except UnicodeDecodeError as exc:  # exc.object: the bytes held from the last block, then raw
                    where = offset - (len(exc.object) - len(raw)) + exc.start
                    raise AotError(
                        f"corpus file {str(source.path)!r} is not a text (UTF-8) file: byte "
                        f"0x{exc.object[exc.start]:02x} at offset {where}; convert it to UTF-8 (e.g. `iconv -f latin1 "
                        "-t utf-8`)"
                    ) from None
                offset += len(raw)
                if source.universal_newlines:
                    text, carry_cr = _universal(text, carry_cr, final)
                if text:
                    yield text
                if final:
                    break
        if offset == 0:
            raise AotError(f"corpus file {str(source.path)!r} is empty; give a text with a few thousand characters")


def _universal(text: str, carry_cr: bool, final: bool) -> tuple[str, bool]:
    """Universal newlines across blocks: ``\\r\\n`` and ``\\r`` become ``\\n`` (a ``\\r`` that ends a block waits
    for the next one)."""
    if carry_cr:
        text = "\r" + text
    carry = not final and text.endswith("\r")
    if carry:
        text = text[:-1]
    return text.replace("\r\n", "\n").replace("\r", "\n"), carry


#: text sources up to this size are keyed by their content, larger ones by their fingerprint (reading tens of GB to
#: name a cache folder would cost minutes at every start)
CONTENT_KEY_BYTES = 64 << 20


def content_key(spec: str, sources: Sources) -> str:
    """The corpus cache key of ``spec``: a readable name plus the first 12 hex digits of the sha256 of its text (one
    text or text files up to :data:`CONTENT_KEY_BYTES`, read in blocks: the same key as hashing the whole string,
    the key runs have always recorded) or of its fingerprint (anything else)."""
    readable = readable_name(Path(spec).name or spec)
    digest = hashlib.sha256()
    texts = sources.hf is None and all(f.kind == "text" for f in sources.files)
    if texts and sources.total_bytes <= CONTENT_KEY_BYTES:
        for block in iter_text_blocks(sources):
            digest.update(block.encode("utf-8"))
    else:
        digest.update(sources.fingerprint().encode())
    return f"{readable}-{digest.hexdigest()[:12]}"


def check_text_source(spec: str) -> None:
    """Refuse, before any work, a corpus ``spec`` given as a path that names no readable text source (missing, a
    folder without text files, /dev/null) or, for text files up to 64 MB, holds bytes that are not UTF-8: one line
    naming it (:func:`aot.data.sources.resolve`, then the text read in blocks, never whole). Registered names and
    ``hf:`` corpora are left to the run (they are fetched or streamed when used)."""
    if not spec.startswith("hf:") and spec not in CORPORA:
        sources = resolve([spec])
        if all(f.kind == "text" for f in sources.files) and sources.total_bytes <= CONTENT_KEY_BYTES:
            for _ in iter_text_blocks(sources):  # decoded in blocks: bytes that are not UTF-8 are one line now
                pass
