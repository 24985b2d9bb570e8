"""The token-shard file format of llm.c and modded-nanogpt, in which FineWeb and OpenWebText are published.

A shard is one file: a header of 256 little-endian int32 — ``[0]`` the magic number, ``[1]`` the version, ``[2]`` the
number of tokens, the rest zero — then the tokens. Two kinds exist (llm.c, ``dev/data/data_common.py``):

- magic ``20240520``, version ``1``: uint16 tokens, for vocabularies of at most 65,536 ids (GPT-2's, bytes, bpe-N);
- magic ``20240801``, version ``7``: uint32 tokens, for larger vocabularies (llm.c writes Llama 3's this way).

So shards written here train in llm.c / modded-nanogpt, and their published shards train here. The header's token
count makes a truncated file detectable without a checksum: a file whose size is not ``1024 + count × itemsize``
is refused by :func:`open_shard`.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import BinaryIO

import numpy as np

from aot.errors import AotError

HEADER_INTS = 256
HEADER_BYTES = HEADER_INTS * 4
#: (magic, version) -> token dtype
KINDS: dict[tuple[int, int], type[np.unsignedinteger]] = {
    (20240520, 1): np.uint16,
    (20240801, 7): np.uint32,
}
MAX_TOKENS = 2**31 - 1  # the count is an int32


def kind_for(vocab_size: int) -> tuple[int, int]:
    """The (magic, version) whose token dtype holds ids below ``vocab_size``."""
    return (20240520, 1) if vocab_size <= 65536 else (20240801, 7)


def dtype_for(vocab_size: int) -> type[np.unsignedinteger]:
    return KINDS[kind_for(vocab_size)]


def header(count: int, vocab_size: int) -> bytes:
    """The 1,024-byte header of a shard of ``count`` tokens for a vocabulary of ``vocab_size``."""
    if not 0 <= count <= MAX_TOKENS:
        raise AotError(
            f"a shard holds at most {MAX_TOKENS:,} tokens (its header counts them in an int32); got {count:,}"
        )
    ints = np.zeros(HEADER_INTS, dtype="<i4")
    ints[0], ints[1] = kind_for(vocab_size)
    ints[2] = count
    return ints.tobytes()


def write_shard_to(handle: BinaryIO, tokens: np.ndarray, vocab_size: int) -> None:
    """Write one whole shard (header, then the tokens) into an open binary file."""
    dtype = np.dtype(dtype_for(vocab_size)).newbyteorder("<")
    handle.write(header(len(tokens), vocab_size))
    handle.write(np.asarray(tokens, dtype=dtype).tobytes())


@dataclass(frozen=True)
class ShardHeader:
    path: Path
    magic: int
    version: int
    count: int

    @property
    def dtype(self) -> np.dtype:
        return np.dtype(KINDS[(self.magic, self.version)]).newbyteorder("<")


def read_header(path: Path) -> ShardHeader:
    """The header of shard ``path``, checked: a known (magic, version) and a file size that matches the count.
    Anything else is one line naming the file, what is wrong and the fix."""
    fix = "prepare the data again (`aot data prepare`), or remove the file"
    try:
        with open(path, "rb") as handle:
            raw = handle.read(HEADER_BYTES)
        size = path.stat().st_size
    except OSError as exc:
        raise AotError(f"cannot read token shard {str(path)!r}: {exc.strerror or exc}") from None
    if len(raw) < HEADER_BYTES:
        raise AotError(f"token shard {str(path)!r} is truncated: {len(raw)} bytes, shorter than its header; {fix}")
    ints = np.frombuffer(raw, dtype="<i4")
    magic, version, count = int(ints[0]), int(ints[1]), int(ints[2])
    if (magic, version) not in KINDS:
        known = ", ".join(f"magic {m} version {v}" for m, v in KINDS)
        raise AotError(
            f"{str(path)!r} is not an llm.c token shard (magic {magic}, version {version}; known: {known}); {fix}"
        )
    shard = ShardHeader(path, magic, version, count)
    expected = HEADER_BYTES + count * shard.dtype.itemsize
    if size != expected:
        state = "truncated" if size < expected else "longer than its header says"
        raise AotError(
            f"token shard {str(path)!r} is {state}: {size:,} bytes where its header's {count:,} tokens need "
            f"{expected:,}; {fix}"
        )
    return shard


def open_shard(path: Path) -> np.memmap:
    """The tokens of shard ``path`` as a read-only memmap (header checked by :func:`read_header`)."""
    shard = read_header(path)
    if shard.count == 0:
        return np.zeros(0, dtype=shard.dtype)  # type: ignore[return-value]
    return np.memmap(path, dtype=shard.dtype, mode="r", offset=HEADER_BYTES, shape=(shard.count,))
