"""Bad input to ``aot data prepare``: each refusal is one line (``aot: error: ...``, exit status 2, no traceback),
leaves no partial file, and keeps the shards finished before it whole; stray non-text files are skipped and
counted, or refused with --strict; a full disk keeps the finished shards and a rerun resumes; a second prepare into
a busy folder is refused; a rerun into a finished folder is a no-op with the same options and refused otherwise."""

from __future__ import annotations

import errno
import gzip
import json
import os
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest
from prepare_fixtures import (
    SPLITS,
    assert_one_line,
    expected_documents,
    folder_bytes,
    make_documents,
    read_llmc,
    shard_names,
    split_tokens,
    write_jsonl,
    write_parquet,
)

from aot.data import llmc
from aot.data import prepare as prep
from aot.data.prepare import PrepareOptions, prepare
from aot.data.sources import resolve
from aot.data.tokenizers import get_tokenizer
from aot.errors import AotError
from conftest import run_cli

ROOT = Path(__file__).resolve().parents[2]
VAL, TEST = 0.15, 0.1
FLAGS = ["--tokenizer", "bytes", "--workers", "0", "--val-fraction", str(VAL), "--test-fraction", str(TEST),
         "--no-progress"]  # fmt: skip


def cli_prepare(sources: list[str | Path], out: Path, capsys, *extra: str) -> tuple[int, str, str]:
    return run_cli(["data", "prepare", *map(str, sources), "--out", str(out), *FLAGS, *extra], capsys)


def assert_nothing_partial(out: Path) -> None:
    """No unfinished shard, and every file named like a shard is whole."""
    if out.exists():
        assert not list(out.glob(".*.tmp")), sorted(p.name for p in out.iterdir())
        for name in shard_names(out):
            llmc.read_header(out / name)
            read_llmc(out / name)


# -- stray files: skipped and counted, or refused with --strict -------------------------------------------------


def text_folder(root: Path, bad_first: bool = False) -> tuple[Path, list[str]]:
    """A folder of .txt documents with a binary file and a Latin-1 file among them (first in sorted order with
    ``bad_first``); returns it and its good documents in reading order."""
    docs = [d.replace("\x00", "0") for d in make_documents(60, seed=11, min_words=20)]
    folder = root / "texts"
    folder.mkdir()
    for i, doc in enumerate(docs):
        (folder / f"doc-{i:03d}.txt").write_bytes(doc.encode("utf-8"))
    prefix = "a" if bad_first else "doc-030"
    (folder / f"{prefix}-image.txt").write_bytes(b"\x89PNG\r\n\x1a\n\x00\x00\x00\rIHDR")
    (folder / f"{prefix}-latin1.txt").write_bytes("caf\xe9 cr\xe8me na\xefve\n".encode("latin-1"))
    return folder, docs


def test_binary_and_latin1_files_are_skipped_and_counted(tmp_path, capsys):
    folder, docs = text_folder(tmp_path)
    out = tmp_path / "out"
    code, stdout, err = cli_prepare([folder], out, capsys, "--shard-tokens", "800")
    assert code == 0, err
    assert "2 file(s) skipped as not text" in stdout
    meta = json.loads((out / "meta.json").read_text())
    skipped = meta["source"]["skipped"]
    assert skipped["count"] == 2 and meta["source"]["documents"] == len(docs)
    assert any("image.txt" in s and "binary" in s for s in skipped["first"])
    assert any("latin1.txt" in s and "not UTF-8" in s for s in skipped["first"])
    records: list[str | None] = [*docs[:30], None, None, *docs[30:]]  # the skipped files keep their numbers
    expected = expected_documents(records, get_tokenizer("bytes"), VAL, TEST)
    for split in SPLITS:
        np.testing.assert_array_equal(split_tokens(out, split), expected[split])


def test_strict_refuses_a_binary_file_and_leaves_nothing(tmp_path, capsys):
    folder, _ = text_folder(tmp_path, bad_first=True)
    out = tmp_path / "out"
    code, _, err = cli_prepare([folder], out, capsys, "--strict")
    assert_one_line(code, err, "a-image.txt", "binary", "--strict")
    assert not out.exists()


def test_strict_refusal_midway_keeps_the_finished_shards_whole(tmp_path, capsys, monkeypatch):
    monkeypatch.setattr(prep, "BATCH_CHARS", 500)  # documents before the bad file are tokenized and written first
    folder, _ = text_folder(tmp_path)
    out = tmp_path / "out"
    code, _, err = cli_prepare([folder], out, capsys, "--strict", "--shard-tokens", "300")
    assert_one_line(code, err, "doc-030-image.txt", "binary")
    assert shard_names(out) and not (out / "meta.json").exists()
    recorded = json.loads((out / "progress.json").read_text())["shards"]
    assert sorted(s["file"] for s in recorded) == shard_names(out)
    assert_nothing_partial(out)


# -- empty sources ----------------------------------------------------------------------------------------------


def test_an_empty_folder_is_refused(tmp_path, capsys):
    (tmp_path / "empty").mkdir()
    out = tmp_path / "out"
    code, _, err = cli_prepare([tmp_path / "empty"], out, capsys)
    assert_one_line(code, err, "holds no")
    assert not out.exists()


@pytest.mark.parametrize("kind", ["empty text files", "empty jsonl", "blank jsonl", "empty parquet"])
def test_sources_without_a_document_are_refused_and_leave_nothing(tmp_path, capsys, kind):
    src = tmp_path / "src"
    src.mkdir()
    if kind == "empty text files":
        for name in ("a.txt", "b.txt", "sub/c.txt"):
            (src / name).parent.mkdir(exist_ok=True)
            (src / name).write_bytes(b"")
    elif kind == "empty jsonl":
        (src / "a.jsonl").write_bytes(b"")
    elif kind == "blank jsonl":
        (src / "a.jsonl").write_text("\n  \n\n")
    else:
        write_parquet(src / "a.parquet", [])
    out = tmp_path / "out"
    out.mkdir()  # an --out made beforehand stays, empty
    for tokenizer in ("bytes", "bpe-300"):
        code, _, err = cli_prepare([src], out, capsys, "--tokenizer", tokenizer)
        assert_one_line(code, err, "hold no documents")
        assert list(out.iterdir()) == [], kind


def test_a_split_without_documents_is_refused_and_leaves_nothing(tmp_path, capsys, monkeypatch):
    monkeypatch.setattr(prep, "BATCH_CHARS", 300)  # train shards are finished before the check
    src = write_jsonl(tmp_path / "docs.jsonl", make_documents(40, seed=28))
    out = tmp_path / "out"
    code, _, err = run_cli(
        ["data", "prepare", str(src), "--out", str(out), "--tokenizer", "bytes", "--workers", "0", "--no-progress",
         "--val-fraction", "0.0001", "--test-fraction", "0.0001", "--shard-tokens", "200"],
        capsys,
    )  # fmt: skip
    assert_one_line(code, err, "split got no documents", "40 documents", "fraction")
    assert not out.exists()


# -- a wrong field or column ------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("line", "fragment"),
    [
        ('{"id": 3, "body": "hello"}', "the field 'text' is missing (the line has: id, body)"),
        ('{"text": 17}', "the field 'text' is not a string"),
        ('{"text": "unterminated', "is not JSON"),
        ('["text", "a list"]', "the field 'text' is missing"),
    ],
)
def test_a_bad_jsonl_line_is_refused_naming_file_and_line(tmp_path, capsys, line, fragment):
    docs = make_documents(200, seed=12)
    src = write_jsonl(tmp_path / "docs.jsonl", docs)
    with open(src, "a", encoding="utf-8") as handle:
        handle.write("\n" + line + "\n")  # a blank line is skipped but counted: this is line 202
    out = tmp_path / "out"
    code, _, err = cli_prepare([src], out, capsys, "--shard-tokens", "2000")
    assert_one_line(code, err, f"{src}:202", fragment)
    assert_nothing_partial(out)


def test_a_text_field_that_names_nothing_is_refused_on_the_first_line(tmp_path, capsys):
    src = write_jsonl(tmp_path / "docs.jsonl", make_documents(5, seed=13))
    code, _, err = cli_prepare([src], tmp_path / "out", capsys, "--text-field", "content")
    assert_one_line(code, err, f"{src}:1", "'content' is missing", "--text-field")
    assert not (tmp_path / "out").exists()


def test_a_parquet_without_the_text_column_is_refused(tmp_path, capsys):
    src = write_parquet(tmp_path / "docs.parquet", make_documents(20, seed=14), column="body")
    code, _, err = cli_prepare([src], tmp_path / "out", capsys)
    assert_one_line(code, err, "has no column 'text'", "columns: id, body", "--text-field")
    assert not (tmp_path / "out").exists()


def test_a_file_that_is_not_parquet_or_not_gzip_is_refused(tmp_path, capsys):
    (tmp_path / "fake.parquet").write_bytes(b"PAR1 but not really")
    code, _, err = cli_prepare([tmp_path / "fake.parquet"], tmp_path / "out", capsys)
    assert_one_line(code, err, "not a readable parquet file")
    good = gzip.compress(("".join(json.dumps({"text": d}) + "\n" for d in make_documents(50, seed=15))).encode())
    (tmp_path / "cut.jsonl.gz").write_bytes(good[: len(good) // 2])
    code, _, err = cli_prepare([tmp_path / "cut.jsonl.gz"], tmp_path / "out2", capsys)
    assert_one_line(code, err, "cut.jsonl.gz")
    assert_nothing_partial(tmp_path / "out2")


@pytest.mark.parametrize(
    ("extra", "fragment"),
    [
        (["--val-fraction", "0"], "val fraction 0"),
        (["--val-fraction", "0.6", "--test-fraction", "0.5"], "sum below 1"),
        (["--shard-tokens", "0"], "shard size 0"),
        (["--workers", "-1"], "--workers -1"),
        (["--tokenizer", "bpe-12"], "[257, 65535]"),
        (["--tokenizer", "bpe-x"], "unknown tokenizer"),
    ],
)
def test_bad_options_are_one_line(tmp_path, capsys, extra, fragment):
    src = write_jsonl(tmp_path / "docs.jsonl", make_documents(30, seed=16))
    code, _, err = cli_prepare([src], tmp_path / "out", capsys, *extra)
    assert_one_line(code, err, fragment)
    assert not (tmp_path / "out").exists()


def test_an_out_that_is_a_file_and_a_missing_source_are_one_line(tmp_path, capsys):
    src = write_jsonl(tmp_path / "docs.jsonl", make_documents(30, seed=17))
    (tmp_path / "file").write_text("x")
    code, _, err = cli_prepare([src], tmp_path / "file", capsys)
    assert_one_line(code, err, "is a file, not a folder")
    code, _, err = cli_prepare([tmp_path / "nope.jsonl"], tmp_path / "out", capsys)
    assert_one_line(code, err, "does not exist")
    code, _, err = cli_prepare([str(tmp_path / "*.parquet")], tmp_path / "out", capsys)
    assert_one_line(code, err, "matches no")


# -- a full disk ------------------------------------------------------------------------------------------------


class FullDisk:
    """The shard writer's files (``open`` as aot.data.prepare sees it): writes fail with ENOSPC once ``full``."""

    def __init__(self) -> None:
        self.full = False

    def open(self, file, mode="r", *args, **kwargs):
        handle = open(file, mode, *args, **kwargs)  # noqa: SIM115
        return _Handle(handle, self) if "w" in mode else handle


class _Handle:
    def __init__(self, handle, disk: FullDisk) -> None:
        self._handle, self._disk = handle, disk

    def write(self, data):
        if self._disk.full:
            raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC))
        return self._handle.write(data)

    def __getattr__(self, name):
        return getattr(self._handle, name)


def test_a_full_disk_keeps_the_finished_shards_and_a_rerun_resumes(tmp_path, monkeypatch):
    docs = make_documents(200, seed=18)
    src = write_jsonl(tmp_path / "docs.jsonl", docs)
    options = PrepareOptions(tokenizer="bytes", val_fraction=VAL, test_fraction=TEST, shard_tokens=700)
    prepare(resolve([str(src)]), tmp_path / "ref", options, workers=0, progress=False)
    disk = FullDisk()
    monkeypatch.setattr(prep, "open", disk.open, raising=False)
    out = tmp_path / "out"

    def fill(record: prep.ShardRecord) -> None:
        disk.full = True  # after the first shard is recorded, the next write fails

    with pytest.raises(AotError) as info:
        prepare(resolve([str(src)]), out, options, workers=0, progress=False, on_shard=fill)
    message = str(info.value)
    assert "\n" not in message and "No space left on device" in message
    assert "1 finished shard(s) are kept" in message and "free some space" in message and "again" in message
    assert shard_names(out) == ["train_000000.bin"]
    assert_nothing_partial(out)
    assert len(json.loads((out / "progress.json").read_text())["shards"]) == 1
    monkeypatch.setattr(prep, "open", open, raising=False)
    result = prepare(resolve([str(src)]), out, options, workers=0, progress=False)
    assert result.resumed_shards == 1
    assert folder_bytes(out) == folder_bytes(tmp_path / "ref")


def test_a_full_disk_through_the_command_is_one_line(tmp_path, monkeypatch, capsys):
    src = write_jsonl(tmp_path / "docs.jsonl", make_documents(200, seed=19))
    disk = FullDisk()
    monkeypatch.setattr(prep, "open", disk.open, raising=False)
    finish = prep._finish_shard

    def finish_then_fill(writer, state, out, on_shard):
        finish(writer, state, out, on_shard)
        disk.full = disk.full or len(state.shards) >= 2

    monkeypatch.setattr(prep, "_finish_shard", finish_then_fill)
    out = tmp_path / "out"
    code, _, err = cli_prepare([src], out, capsys, "--shard-tokens", "700")
    assert_one_line(code, err, "No space left on device", "2 finished shard(s) are kept")
    assert len(shard_names(out)) == 2
    assert_nothing_partial(out)


# -- one folder, one prepare --------------------------------------------------------------------------------------

HOLDER = """
import sys
from aot.run_folder import folder_lock
with folder_lock(sys.argv[1]):
    print("locked", flush=True)
    sys.stdin.read()
"""


def test_a_second_prepare_into_a_busy_folder_is_refused(tmp_path, capsys):
    """Another process holds the folder's lock (as a running prepare does): a prepare into it is one line, and
    writes nothing there."""
    src = write_jsonl(tmp_path / "docs.jsonl", make_documents(50, seed=20))
    out = tmp_path / "out"
    env = {**os.environ, "PYTHONPATH": str(ROOT / "src"), "OMP_NUM_THREADS": "1"}
    holder = subprocess.Popen(
        [sys.executable, "-c", HOLDER, str(out)], stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True, env=env
    )
    try:
        assert holder.stdout is not None and holder.stdout.readline().strip() == "locked"
        code, _, err = cli_prepare([src], out, capsys)
        assert_one_line(code, err, f"(pid {holder.pid})", str(out), "--out")
        with pytest.raises(AotError):
            prepare(resolve([str(src)]), out, PrepareOptions(tokenizer="bytes"), workers=0, progress=False)
        assert sorted(p.name for p in out.iterdir()) == [".aot.lock"]
    finally:
        holder.communicate(input="", timeout=30)
    assert holder.returncode == 0
    code, _, err = cli_prepare([src], out, capsys)  # free again
    assert code == 0, err


# -- a rerun into a finished folder -------------------------------------------------------------------------------


def test_a_rerun_is_a_no_op_with_the_same_options_and_refused_with_others(tmp_path, capsys):
    src = write_jsonl(tmp_path / "docs.jsonl", make_documents(80, seed=21))
    out = tmp_path / "out"
    assert cli_prepare([src], out, capsys, "--shard-tokens", "900")[0] == 0
    before = {p.name: (p.stat().st_mtime_ns, p.read_bytes()) for p in out.iterdir()}
    code, stdout, err = cli_prepare([src], out, capsys, "--shard-tokens", "900")
    assert code == 0, err
    assert "kept from an earlier run" in stdout
    assert {p.name: (p.stat().st_mtime_ns, p.read_bytes()) for p in out.iterdir()} == before
    for extra in (["--shard-tokens", "901"], ["--tokenizer", "gpt2"], ["--split-seed", "1"], ["--text-field", "x"]):
        code, _, err = cli_prepare([src], out, capsys, "--shard-tokens", "900", *extra)
        assert_one_line(code, err, "already holds data prepared from other sources or options", "another --out")
    other = write_jsonl(tmp_path / "other.jsonl", make_documents(80, seed=22))
    code, _, err = cli_prepare([other], out, capsys, "--shard-tokens", "900")
    assert_one_line(code, err, "already holds data prepared")
    # the same path with changed content: another fingerprint
    write_jsonl(src, make_documents(81, seed=21))
    code, _, err = cli_prepare([src], out, capsys, "--shard-tokens", "900")
    assert_one_line(code, err, "already holds data prepared")
    assert {p.name: (p.stat().st_mtime_ns, p.read_bytes()) for p in out.iterdir()} == before


def test_a_rerun_of_an_unfinished_prepare_with_other_options_is_refused(tmp_path, capsys):
    src = write_jsonl(tmp_path / "docs.jsonl", make_documents(120, seed=23))
    out = tmp_path / "out"
    options = PrepareOptions(tokenizer="bytes", val_fraction=VAL, test_fraction=TEST, shard_tokens=600)

    def stop(record: prep.ShardRecord) -> None:
        raise KeyboardInterrupt

    with pytest.raises(KeyboardInterrupt):
        prepare(resolve([str(src)]), out, options, workers=0, progress=False, on_shard=stop)
    before = folder_bytes(out)
    code, _, err = cli_prepare([src], out, capsys, "--shard-tokens", "601")
    assert_one_line(code, err, "unfinished prepare of other sources or options")
    assert folder_bytes(out) == before


def test_a_folder_of_unrecorded_shards_is_not_an_out(tmp_path, capsys):
    src = write_jsonl(tmp_path / "docs.jsonl", make_documents(30, seed=24))
    out = tmp_path / "out"
    out.mkdir()
    (out / "fineweb_train_000001.bin").write_bytes(llmc.header(0, 256))
    code, _, err = cli_prepare([src], out, capsys)
    assert_one_line(code, err, "no prepare recorded", "choose an empty --out")
    assert sorted(p.name for p in out.iterdir()) == ["fineweb_train_000001.bin"]


# -- damaged inputs that still escape as a traceback (src bugs, see the reasons) ----------------------------------


def test_a_rerun_into_a_folder_with_a_damaged_meta_json_is_one_line(tmp_path, capsys):
    src = write_jsonl(tmp_path / "docs.jsonl", make_documents(60, seed=25))
    out = tmp_path / "out"
    assert cli_prepare([src], out, capsys)[0] == 0
    (out / "meta.json").write_text('{"format": "aot-llmc')
    code, _, err = cli_prepare([src], out, capsys)
    assert_one_line(code, err, "meta.json")


def test_a_corrupted_gzip_stream_is_one_line(tmp_path, capsys):
    plain = "".join(json.dumps({"text": d}) + "\n" for d in make_documents(300, seed=26)).encode()
    raw = bytearray(gzip.compress(plain))
    for i in range(200, 260):
        raw[i] ^= 0x55
    (tmp_path / "bad.jsonl.gz").write_bytes(bytes(raw))
    code, _, err = cli_prepare([tmp_path / "bad.jsonl.gz"], tmp_path / "out", capsys)
    assert_one_line(code, err, "bad.jsonl.gz")
    assert_nothing_partial(tmp_path / "out")


def test_a_parquet_text_column_of_bytes_is_decoded_or_refused(tmp_path, capsys):
    import pyarrow as pa
    import pyarrow.parquet as pq

    docs = make_documents(50, seed=27)
    pq.write_table(pa.table({"text": [d.encode("utf-8") for d in docs]}), tmp_path / "b.parquet")
    out = tmp_path / "out"
    code, _, err = cli_prepare([tmp_path / "b.parquet"], out, capsys)
    if code != 0:
        assert_one_line(code, err, "b.parquet")
        return
    expected = expected_documents(docs, get_tokenizer("bytes"), VAL, TEST)
    for split in SPLITS:
        np.testing.assert_array_equal(split_tokens(out, split), expected[split])
