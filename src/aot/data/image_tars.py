"""Image sets as tar shards in the webdataset layout, read by random access: ``aot data pack-images ROOT --out DIR``.

Each shard ``{split}-{k:06d}.tar`` is a plain POSIX tar whose members come in pairs sharing a key, as webdataset
writes them: ``{key}.{jpg|png|...}`` holds the original file's bytes (never re-encoded) and ``{key}.cls`` its class
id as decimal text. A webdataset / wids reader streams them as they are. Images are shuffled across shards (a fixed
seeded permutation), so a shard holds every class, as a streaming reader wants.

Beside the shards, ``{split}-index.npy`` holds, per image, its shard number, the byte offset and size of its data in
that shard, and its class id; ``meta.json`` (written last) holds the class names, the shards with their sizes, and
what was skipped. Reading image ``i`` is one ``pread`` at a known offset (the idea of webdataset's indexed ``wids``),
so the trainer's step-seeded order, exact resume and the per-sample augmentation work as for a folder, with 1,000
files instead of 1.28 M. A shard shorter than meta.json says (a copy cut short) is a one-line error when the set is
opened; a member that does not decode is a counted skip, as a corrupt file in a folder.

Packing resumes: shards already listed in ``progress.json`` are kept and the next one starts after them.
"""

from __future__ import annotations

import io
import json
import os
import tarfile
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

from aot.data.image_files import (
    FileSplit,
    ImageFiles,
    ImageSplit,
    UnreadableImage,
    decode_image,
    open_image_files,
)
from aot.errors import AotError
from aot.run_folder import atomic_target, write_text_atomic

FORMAT = "aot-image-shards"
VERSION = 1
INDEX_DTYPE = np.dtype([("shard", "<i4"), ("offset", "<i8"), ("size", "<i8"), ("label", "<i4")])
OPEN_SHARDS = 64  # descriptors a reading process keeps open (ImageNet-1K's train split has ~140 shards)
DEFAULT_SHARD_BYTES = 1 << 30  # about 1 GiB: ImageNet-1K's train split in ~140 shards


@dataclass
class TarSplit:
    """Images as members of tar shards: image ``i`` is ``index[i]["size"]`` bytes at ``index[i]["offset"]`` of shard
    ``shards[index[i]["shard"]]``. File handles are opened lazily, per process (a forked worker opens its own)."""

    shards: list[Path]
    index: np.ndarray  # INDEX_DTYPE
    labels: np.ndarray = field(init=False)

    def __post_init__(self) -> None:
        self.labels = self.index["label"].astype(np.int64)
        self._handles: dict[int, int] = {}
        self._pid = os.getpid()

    def __len__(self) -> int:
        return len(self.index)

    def describe(self, i: int) -> str:
        row = self.index[i]
        return f"{self.shards[int(row['shard'])]} at byte {int(row['offset'])}"

    def _handle(self, shard: int) -> int:
        """An open descriptor of ``shard``; at most :data:`OPEN_SHARDS` stay open per process (the oldest closes)."""
        if self._pid != os.getpid():  # a forked worker: open its own descriptors (the parent's stay the parent's)
            self._handles, self._pid = {}, os.getpid()
        if shard not in self._handles:
            if len(self._handles) >= OPEN_SHARDS:
                os.close(self._handles.pop(next(iter(self._handles))))
            self._handles[shard] = os.open(self.shards[shard], os.O_RDONLY)
        return self._handles[shard]

    def image(self, i: int) -> Any:
        row = self.index[i]
        try:
            raw = os.pread(self._handle(int(row["shard"])), int(row["size"]), int(row["offset"]))
        except OSError as exc:
            raise UnreadableImage(f"{self.describe(i)}: {exc.strerror or exc}") from None
        if len(raw) != int(row["size"]):
            raise UnreadableImage(f"{self.describe(i)}: the shard ends inside this image")
        return decode_image(raw, self.describe(i))

    def subset(self, indices: np.ndarray) -> TarSplit:
        return TarSplit(self.shards, self.index[indices])

    def __getstate__(self) -> dict[str, Any]:
        return {"shards": self.shards, "index": self.index}

    def __setstate__(self, state: dict[str, Any]) -> None:
        self.shards, self.index = state["shards"], state["index"]
        self.__post_init__()


def _well_formed(meta: dict[str, Any]) -> bool:
    """meta.json has the structure :func:`pack_images` writes (names, sizes, class names where they belong)."""
    splits, classes = meta.get("splits"), meta.get("classes")
    if not isinstance(splits, dict) or "train" not in splits or not isinstance(classes, list):
        return False
    return all(
        isinstance(entry, dict)
        and isinstance(entry.get("shards"), list)
        and all(isinstance(s, dict) and isinstance(s.get("name"), str) and isinstance(s.get("bytes"), int)
                for s in entry["shards"])
        for entry in splits.values()
    )  # fmt: skip


def open_image_shards(root: Path) -> ImageFiles:
    """The set packed into ``root`` by :func:`pack_images`, its shards checked against meta.json (sizes only: a
    shard cut short is named in one line)."""
    try:
        meta = json.loads((root / "meta.json").read_text())
    except (OSError, ValueError) as exc:
        raise AotError(f"cannot read {root / 'meta.json'} ({exc}); pack the images again") from None
    if not isinstance(meta, dict) or meta.get("format") != FORMAT:
        raise AotError(f"{root / 'meta.json'} is not an image-shard folder's; write one with `aot data pack-images`")
    if meta.get("version", 0) > VERSION:
        raise AotError(f"{root} was packed by a newer aot (version {meta['version']}); upgrade aot")
    if not _well_formed(meta):
        raise AotError(f"{root / 'meta.json'} is damaged (no splits, shards or classes); pack the images again")
    splits: dict[str, ImageSplit] = {}
    for split, entry in meta["splits"].items():
        shards = [root / s["name"] for s in entry["shards"]]
        for shard, spec in zip(shards, entry["shards"], strict=True):
            size = shard.stat().st_size if shard.is_file() else None
            if size != spec["bytes"]:
                found = "missing" if size is None else f"{size:,} bytes"
                raise AotError(
                    f"tar shard {shard} is {found}, meta.json says {spec['bytes']:,}: it was cut short or changed; "
                    "copy it again or re-run `aot data pack-images`"
                )
        index_path = root / f"{split}-index.npy"
        try:
            index = np.load(index_path)
        except (OSError, ValueError) as exc:  # missing, or a copy cut short: one line, as for a shard
            raise AotError(
                f"cannot read {index_path} ({exc}); copy it again or re-run `aot data pack-images`"
            ) from None
        if len(index) != entry["images"]:
            raise AotError(
                f"{index_path} lists {len(index):,} images, meta.json says {entry['images']:,}; "
                "copy it again or re-run `aot data pack-images`"
            )
        splits[split] = TarSplit(shards, index)
    notes = [*meta.get("notes", []), f"tar shards packed from {meta.get('source', '?')}"]
    return ImageFiles(root.name, splits, list(meta["classes"]), "tar-shards", dict(meta.get("skipped", {})), notes)


# -- writing ----------------------------------------------------------------------------------------------


def _member(name: str, size: int) -> tarfile.TarInfo:
    info = tarfile.TarInfo(name)
    info.size, info.mode, info.mtime = size, 0o444, 0  # the same bytes on every run: shards resume and compare
    return info


def _header_bytes(info: tarfile.TarInfo) -> int:
    return len(info.tobuf(tarfile.USTAR_FORMAT, "utf-8", "surrogateescape"))


class _OpenShard:
    """A shard being written: each image is appended as it is read (memory holds one image, not a shard), into a
    scratch file beside ``path`` that :meth:`close` renames into place once whole; :meth:`discard` removes it."""

    def __init__(self, path: Path) -> None:
        self.path = path
        self.scratch = path.with_name(f".{path.name}.{os.getpid()}.tmp")  # a resumed packing removes a killed one
        self.tar = tarfile.open(self.scratch, "w", format=tarfile.USTAR_FORMAT)  # noqa: SIM115 - open across adds
        self.rows: list[tuple[int, int, int]] = []  # (offset, size, label) of each image
        self.bytes = 0

    def add(self, key: str, suffix: str, raw: bytes, label: int) -> None:
        info = _member(f"{key}{suffix}", len(raw))
        self.rows.append((self.tar.offset + _header_bytes(info), len(raw), label))
        self.tar.addfile(info, io.BytesIO(raw))
        text = f"{label}".encode()
        self.tar.addfile(_member(f"{key}.cls", len(text)), io.BytesIO(text))
        self.bytes = self.tar.offset

    def close(self) -> int:
        """Finish the tar, put it in place; its size in bytes."""
        self.tar.close()
        os.replace(self.scratch, self.path)
        return self.path.stat().st_size

    def discard(self) -> None:
        self.tar.close()
        self.scratch.unlink(missing_ok=True)


def _save_array(path: Path, array: np.ndarray) -> None:
    with atomic_target(path) as scratch, open(scratch, "wb") as handle:
        np.save(handle, array)


def _identify(raw: bytes) -> bool:
    """Whether the bytes start like an image PIL can open (the header only: cheap; a corrupt body is found later)."""
    from PIL import Image, UnidentifiedImageError

    if not raw:
        return False
    try:
        with Image.open(io.BytesIO(raw)):
            return True
    except (UnidentifiedImageError, Image.DecompressionBombError, OSError, ValueError, SyntaxError):
        return False


def _resume_state(out: Path, settings: dict[str, Any]) -> dict[str, Any]:
    """What an interrupted packing into ``out`` with the same ``settings`` finished (or a fresh start in a new or empty
    folder); anything else in ``out`` is a one-line refusal that leaves it as it is."""
    if out.exists() and not out.is_dir():
        raise AotError(f"--out {str(out)!r} is a file; give a new or empty folder")
    out.mkdir(parents=True, exist_ok=True)
    progress_path = out / "progress.json"
    if progress_path.is_file():
        try:
            saved = json.loads(progress_path.read_text())
            assert isinstance(saved, dict) and isinstance(saved.get("splits"), dict)
        except (ValueError, AssertionError):
            raise AotError(f"{progress_path} is damaged; remove the folder {str(out)!r} and pack again") from None
        if saved.get("settings") != settings:
            raise AotError(
                f"{str(out)!r} holds an unfinished packing of another source or other options; rerun that command, "
                "or give another --out"
            )
        for scratch in out.glob(".*.tmp"):  # a shard being written when the packing was killed
            scratch.unlink()
        return saved
    others = sorted(p.name for p in out.iterdir())
    if others:
        raise AotError(f"--out {str(out)!r} already holds files ({', '.join(others[:3])}); give a new or empty folder")
    return {"settings": settings, "splits": {}}


@dataclass
class _SplitPacker:
    """The packing of one split: images taken in a fixed shuffled order, gathered into shards of about
    ``shard_bytes``; ``state`` (saved in progress.json after every shard) says how far it got."""

    split: str
    images: FileSplit
    out: Path
    shard_bytes: int
    state: dict[str, Any]
    save: Callable[[], None]
    progress: Callable[[str], None] | None

    def run(self, seed: int, start: float) -> np.ndarray:
        """Pack what is left; return the split's index (INDEX_DTYPE)."""
        split_number = int.from_bytes(self.split.encode()[:8], "little")  # each split its own shuffle
        order = np.random.default_rng([seed, split_number]).permutation(len(self.images))
        rows = self._finished_rows()
        position, shard = self.state["next"], None
        try:
            while position < len(self.images):
                i = int(order[position])
                position += 1
                path = self.images.path(i)
                try:
                    raw = path.read_bytes()
                except OSError:
                    raw = b""
                if not _identify(raw):
                    reason = "empty file" if not raw else "not readable as an image"
                    self.state["skipped"][reason] = self.state["skipped"].get(reason, 0) + 1
                    continue
                if shard is None:
                    shard = _OpenShard(self.out / f"{self.split}-{len(self.state['shards']):06d}.tar")
                shard.add(f"{position - 1:08d}", path.suffix.lower(), raw, int(self.images.labels[i]))
                if shard.bytes >= self.shard_bytes:
                    self._finish(shard, rows, position, start)
                    shard = None
            if shard is not None:
                self._finish(shard, rows, position, start)
                shard = None
        finally:
            if shard is not None:  # interrupted: the finished shards stay, this one goes (rerun to resume)
                shard.discard()
        index = np.zeros(len(rows), dtype=INDEX_DTYPE)
        if rows:
            table = np.asarray(rows, dtype=np.int64)
            index["shard"], index["offset"], index["size"], index["label"] = table.T
        return index

    def _finished_rows(self) -> list[tuple[int, int, int, int]]:
        """The index rows of the shards an interrupted packing finished (a later, unlisted shard is redone)."""
        if not self.state["shards"]:
            return []
        saved = np.load(self.out / f".{self.split}-rows.npy")
        return [(a, b, c, d) for a, b, c, d in saved.tolist() if a < len(self.state["shards"])]

    def _finish(self, shard: _OpenShard, rows: list, position: int, start: float) -> None:
        """Close ``shard``, record its images' index rows and the progress (the packing resumes after it)."""
        number = len(self.state["shards"])
        size = shard.close()
        rows.extend((number, offset, length, label) for offset, length, label in shard.rows)
        _save_array(self.out / f".{self.split}-rows.npy", np.asarray(rows, dtype=np.int64).reshape(-1, 4))
        self.state["shards"].append({"name": shard.path.name, "images": len(shard.rows), "bytes": size})
        self.state["next"] = position
        self.save()
        if self.progress:
            done = f"{position:,} / {len(self.images):,} images"
            elapsed = time.perf_counter() - start
            self.progress(f"{self.split}: {done}, {shard.path.name} ({size / 1e6:,.0f} MB), {elapsed:,.0f}s")


def pack_images(
    source: Path,
    out: Path,
    shard_bytes: int = DEFAULT_SHARD_BYTES,
    seed: int = 0,
    progress: Callable[[str], None] | None = None,
) -> dict[str, Any]:
    """Pack the folder ``source`` (any layout :func:`aot.data.image_files.open_image_files` reads) into tar shards of
    about ``shard_bytes`` each in ``out``; returns meta.json's content. Files that are empty or do not open as images
    are skipped and counted. Resumable: rerun the same command after an interruption."""
    if (source / "meta.json").is_file():
        raise AotError(f"{source} is already packed (it has meta.json); train from it with --data {source}")
    data = open_image_files(source, seed=seed)
    settings = {"source": str(source.resolve()), "shard_bytes": shard_bytes, "seed": seed}
    done = _resume_state(out, settings)
    progress_path = out / "progress.json"

    def save() -> None:
        write_text_atomic(progress_path, json.dumps(done, indent=1))

    skipped = dict(data.skipped)
    meta_splits: dict[str, Any] = {}
    start = time.perf_counter()
    for split, images in data.splits.items():
        assert isinstance(images, FileSplit)
        state = done["splits"].setdefault(split, {"shards": [], "next": 0, "skipped": {}})
        index = _SplitPacker(split, images, out, shard_bytes, state, save, progress).run(seed, start)
        _save_array(out / f"{split}-index.npy", index)
        for reason, count in state["skipped"].items():
            skipped[reason] = skipped.get(reason, 0) + count
        meta_splits[split] = {"images": len(index), "shards": state["shards"]}
    meta = {
        "format": FORMAT,
        "version": VERSION,
        "source": str(source.resolve()),
        "layout": data.layout,
        "classes": data.classes,
        "splits": meta_splits,
        "skipped": skipped,
        "notes": data.notes,
        "seed": seed,
    }
    write_text_atomic(out / "meta.json", json.dumps(meta, indent=1) + "\n")
    for split in meta_splits:
        (out / f".{split}-rows.npy").unlink(missing_ok=True)
    progress_path.unlink(missing_ok=True)
    return meta
