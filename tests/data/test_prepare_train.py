"""``aot train lm --data``: it trains from llm.c shards written by an independent numpy writer (FineWeb's names; a
folder or a glob) and from a prepared folder, and refuses damaged shards (truncated, changed bytes, a count that
differs from meta.json, missing) and token ids outside the vocabulary in one line before training starts."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest
from prepare_fixtures import assert_one_line, make_documents, write_jsonl, write_llmc

from aot.data.prepare import PrepareOptions, prepare
from aot.data.sources import resolve
from conftest import run_cli

TINY = [
    "--device", "cpu", "--set", "train.steps=2", "--set", "train.warmup_steps=1", "--set", "train.progress=false",
    "--set", "train.eval_every=0", "--set", "train.precision=fp32", "--set", "model.n_layer=1",
    "--set", "model.n_embd=16", "--set", "model.n_head=2", "--set", "model.block_size=16",
    "--set", "train.batch_size=4", "--set", "eval.final_windows=4", "--set", "eval.batch_size=2",
]  # fmt: skip
NOTE = "the data has no test shards: the test split is the val split"


@pytest.fixture
def data_root(tmp_path, monkeypatch):
    monkeypatch.setenv("AOT_DATA", str(tmp_path / "cache"))
    return tmp_path / "cache"


def train(data: str | Path, out: Path, capsys, *extra: str) -> tuple[int, str, str]:
    return run_cli(["train", "lm", "--data", str(data), "--out", str(out), *TINY, *extra], capsys)


def assert_not_trained(out: Path) -> None:
    """Refused before training: no metrics, no checkpoint, no results in the run folder."""
    if out.exists():
        assert not {"metrics.jsonl", "checkpoint", "results.json"} & {p.name for p in out.iterdir()}


def fineweb(folder: Path, seed: int = 0, train_tokens=(3000, 2000), val_tokens: int = 1500) -> Path:
    """FineWeb-style shards (fineweb_val_000000.bin, fineweb_train_000001.bin, ...) of byte ids, and a file that
    is not a shard."""
    rng = np.random.default_rng(seed)
    folder.mkdir(parents=True)
    write_llmc(folder / "fineweb_val_000000.bin", rng.integers(0, 256, val_tokens))
    for k, n in enumerate(train_tokens, 1):
        write_llmc(folder / f"fineweb_train_{k:06d}.bin", rng.integers(0, 256, n))
    (folder / "README.md").write_text("shards\n")
    return folder


@pytest.mark.parametrize("spec", ["folder", "glob"])
def test_foreign_shards_train_and_test_is_val(tmp_path, capsys, data_root, spec):
    folder = fineweb(tmp_path / "fw")
    data = folder if spec == "folder" else folder / "fineweb_*.bin"
    out = tmp_path / "run"
    code, stdout, err = train(data, out, capsys, "--tokenizer", "bytes")
    assert code == 0, err
    results = json.loads((out / "results.json").read_text())
    info = results["data"]
    assert info["notes"] == [NOTE] and NOTE in stdout
    assert info["tokenizer"] == "bytes" and info["vocab_size"] == 256
    assert info["tokens"] == {"train": 5000, "val": 1500, "test": 1500}
    assert info["shards"] == {"train": 2, "val": 1, "test": 1}
    assert results["test"]["loss"] == pytest.approx(results["val"]["loss"])


def test_a_prepared_folder_trains_with_its_own_tokenizer(tmp_path, capsys, data_root):
    docs = make_documents(150, seed=30, min_words=10)
    src = write_jsonl(tmp_path / "docs.jsonl", docs)
    folder = tmp_path / "prepared"
    options = PrepareOptions(tokenizer="bytes", val_fraction=0.2, test_fraction=0.2, shard_tokens=1500)
    result = prepare(resolve([str(src)]), folder, options, workers=0, progress=False)
    out = tmp_path / "run"
    code, _, err = train(folder, out, capsys)  # no --tokenizer: meta.json names it
    assert code == 0, err
    info = json.loads((out / "results.json").read_text())["data"]
    assert info["tokenizer"] == "bytes" and "notes" not in info
    for split in ("train", "val", "test"):
        assert info["tokens"][split] == result.meta["splits"][split]["tokens"]
        assert info["shards"][split] == len(result.meta["splits"][split]["shards"])
        assert info["bytes"][split] == result.meta["splits"][split]["bytes"]


@pytest.fixture
def prepared(tmp_path):
    docs = make_documents(150, seed=31, min_words=10)
    src = write_jsonl(tmp_path / "docs.jsonl", docs)
    folder = tmp_path / "prepared"
    options = PrepareOptions(tokenizer="bytes", val_fraction=0.2, test_fraction=0.2, shard_tokens=1500)
    prepare(resolve([str(src)]), folder, options, workers=0, progress=False)
    assert (folder / "train_000002.bin").is_file()
    return folder


def test_a_truncated_shard_is_refused_before_training(tmp_path, capsys, data_root, prepared):
    shard = prepared / "train_000001.bin"
    shard.write_bytes(shard.read_bytes()[:-3])
    code, _, err = train(prepared, tmp_path / "run", capsys)
    assert_one_line(code, err, "train_000001.bin", "truncated")
    assert_not_trained(tmp_path / "run")


def test_a_changed_shard_fails_its_sha256_before_training(tmp_path, capsys, data_root, prepared):
    shard = prepared / "val_000000.bin"
    raw = bytearray(shard.read_bytes())
    raw[2000] = (raw[2000] + 1) % 256  # a token changed, the size and header as they were
    shard.write_bytes(bytes(raw))
    code, _, err = train(prepared, tmp_path / "run", capsys)
    assert_one_line(code, err, "val_000000.bin", "sha256")
    assert_not_trained(tmp_path / "run")


def test_a_shard_replaced_by_another_whole_one_and_a_missing_one_are_refused(tmp_path, capsys, data_root, prepared):
    write_llmc(prepared / "test_000000.bin", np.arange(100) % 256)  # whole, but not the one meta.json lists
    code, _, err = train(prepared, tmp_path / "run", capsys)
    assert_one_line(code, err, "test_000000.bin", "holds 100 tokens, meta.json says")
    assert_not_trained(tmp_path / "run")
    (prepared / "test_000000.bin").unlink()
    code, _, err = train(prepared, tmp_path / "run", capsys)
    assert_one_line(code, err, "test_000000.bin", "missing")
    assert_not_trained(tmp_path / "run")


def test_an_unfinished_prepare_is_refused_before_training(tmp_path, capsys, data_root, prepared):
    meta = json.loads((prepared / "meta.json").read_text())
    (prepared / "meta.json").unlink()
    (prepared / "progress.json").write_text(json.dumps({"options": meta["options"], "shards": []}))
    code, _, err = train(prepared, tmp_path / "run", capsys)
    assert_one_line(code, err, "unfinished `aot data prepare`")
    assert_not_trained(tmp_path / "run")


def test_a_token_id_outside_the_vocabulary_is_refused_before_training(tmp_path, capsys, data_root):
    folder = fineweb(tmp_path / "fw")
    tokens = np.random.default_rng(1).integers(0, 256, 2000)
    tokens[700] = 300
    write_llmc(folder / "fineweb_train_000002.bin", tokens)
    code, _, err = train(folder, tmp_path / "run", capsys, "--tokenizer", "bytes")
    assert_one_line(code, err, "token id 300", "vocabulary of 256", "--tokenizer")
    assert_not_trained(tmp_path / "run")


def test_an_id_outside_the_vocabulary_past_the_first_million_tokens_is_refused_before_training(
    tmp_path, capsys, data_root
):
    folder = fineweb(tmp_path / "fw", val_tokens=16)
    val = np.random.default_rng(2).integers(0, 256, (1 << 20) + 4000)
    val[-200:] = 300
    write_llmc(folder / "fineweb_val_000000.bin", val)
    code, _, err = train(folder, tmp_path / "run", capsys, "--tokenizer", "bytes")
    assert_not_trained(tmp_path / "run")
    assert_one_line(code, err, "token id 300")


def test_a_bpe_folder_without_its_tokenizer_is_one_line(tmp_path, capsys, data_root):
    src = write_jsonl(tmp_path / "docs.jsonl", make_documents(150, seed=32, min_words=10))
    folder = tmp_path / "prepared"
    options = PrepareOptions(tokenizer="bpe-300", val_fraction=0.2, test_fraction=0.2)
    prepare(resolve([str(src)]), folder, options, workers=0, progress=False)
    (folder / "tokenizer.json").unlink()
    code, _, err = train(folder, tmp_path / "run", capsys)
    assert_one_line(code, err, "tokenizer.json")
    assert_not_trained(tmp_path / "run")
