"""aot.data.shardset: a :class:`TokenSplit` of many shards reads as their concatenation (lengths, indices, slices
across shard boundaries), ``sample`` is bounded and deterministic, :class:`LMBatches` over it draws exactly the
batches it draws over the concatenated array (so a resumed run sees the same data), and ``open_shards`` reads
foreign llm.c shards (uint16 and uint32, FineWeb's names) and refuses what is not a usable set of them."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from prepare_fixtures import write_llmc

from aot.data import llmc
from aot.data.shards import LMBatches, eval_windows
from aot.data.shardset import TokenSplit, open_shards
from aot.errors import AotError

parts_strategy = st.lists(
    st.lists(st.integers(0, 65535), max_size=40).map(lambda xs: np.asarray(xs, dtype=np.uint16)), max_size=6
)


@settings(max_examples=150, deadline=None)
@given(
    parts=parts_strategy,
    start=st.integers(-60, 260) | st.none(),
    stop=st.integers(-60, 260) | st.none(),
    step=st.sampled_from([None, 1, 2, 3]),
)
def test_slices_equal_the_concatenation(parts, start, stop, step):
    whole = np.concatenate(parts) if parts else np.zeros(0, dtype=np.uint16)
    split = TokenSplit(parts)
    assert len(split) == len(whole)
    got = np.asarray(split[start:stop:step])
    np.testing.assert_array_equal(got, whole[start:stop:step])
    np.testing.assert_array_equal(np.asarray(split[start:]), whole[start:])
    np.testing.assert_array_equal(np.asarray(split[:stop]), whole[:stop])
    np.testing.assert_array_equal(np.asarray(split), whole)
    if whole.size:
        assert got.dtype == whole.dtype


def test_a_negative_step_slice_equals_the_concatenation():
    parts = [np.array([1, 2], dtype=np.uint16), np.array([3], dtype=np.uint16)]
    whole = np.concatenate(parts)
    for key in (slice(None, None, -1), slice(0, 1, -1), slice(2, 0, -1), slice(None, None, -2)):
        np.testing.assert_array_equal(np.asarray(TokenSplit(parts)[key]), whole[key], err_msg=str(key))


@settings(max_examples=100, deadline=None)
@given(parts=parts_strategy, index=st.integers(-300, 300))
def test_integer_indices_equal_the_concatenation(parts, index):
    whole = np.concatenate(parts) if parts else np.zeros(0, dtype=np.uint16)
    split = TokenSplit(parts)
    if -len(whole) <= index < len(whole):
        assert split[index] == whole[index]
        assert split[np.int64(index)] == whole[index]
    else:
        with pytest.raises(IndexError):
            split[index]


def test_a_slice_across_memmapped_shards(tmp_path):
    """Real shards on disk (memmaps): every window of every length that crosses a boundary."""
    rng = np.random.default_rng(0)
    arrays = [rng.integers(0, 50257, n) for n in (7, 1, 30, 2)]
    paths = [write_llmc(tmp_path / f"s{k}.bin", a) for k, a in enumerate(arrays)]
    split = TokenSplit([llmc.open_shard(p) for p in paths])
    whole = np.concatenate(arrays)
    for start in range(len(whole) + 1):
        for stop in range(start, len(whole) + 2):
            np.testing.assert_array_equal(split[start:stop], whole[start:stop])


@settings(max_examples=60, deadline=None)
@given(
    sizes=st.lists(st.integers(0, 400), min_size=1, max_size=5),
    max_tokens=st.integers(1, 600),
    pieces=st.integers(1, 80),
)
def test_sample_is_bounded_deterministic_and_made_of_runs_of_the_split(sizes, max_tokens, pieces):
    rng = np.random.default_rng(sum(sizes))
    parts = [rng.integers(0, 256, n).astype(np.uint16) for n in sizes]
    whole = np.concatenate(parts)
    split = TokenSplit(parts)
    sample = split.sample(max_tokens, pieces)
    assert len(sample) <= max_tokens
    np.testing.assert_array_equal(sample, TokenSplit(parts).sample(max_tokens, pieces))
    if len(whole) <= max_tokens:
        np.testing.assert_array_equal(sample, whole)
    else:
        run = max_tokens // pieces
        assert len(sample) == run * pieces
        starts = np.linspace(0, len(whole) - run, pieces).astype(np.int64)
        for k, s in enumerate(starts):
            np.testing.assert_array_equal(sample[k * run : (k + 1) * run], whole[s : s + run])


@pytest.mark.parametrize("seed", [0, 7])
def test_lm_batches_over_shards_equal_batches_over_the_array(seed):
    rng = np.random.default_rng(seed)
    parts = [rng.integers(0, 256, n).astype(np.uint16) for n in (50, 3, 200, 17, 90)]
    whole = np.concatenate(parts)
    over_split = LMBatches(TokenSplit(parts), batch_size=6, block_size=16, seed=seed, vocab_size=256)
    over_array = LMBatches(whole, batch_size=6, block_size=16, seed=seed, vocab_size=256)
    for step in [0, 1, 2, 5, 40, 1000]:  # the position in the data is the step: any step, in any order
        np.testing.assert_array_equal(over_split.offsets(step), over_array.offsets(step))
        (a,) = over_split.get(step)
        (b,) = over_array.get(step)
        assert a.dtype == b.dtype and a.shape == (6, 16)
        assert bool((a == b).all())
        (rows,) = over_split.get(step, 2, 5)  # one rank's rows of the global batch
        assert bool((rows == b[2:5]).all())
    np.testing.assert_array_equal(eval_windows(TokenSplit(parts), 16, 5), eval_windows(whole, 16, 5))


def test_lm_batches_refuse_a_split_shorter_than_a_window():
    with pytest.raises(AotError, match="fewer than block_size"):
        LMBatches(TokenSplit([np.zeros(10, np.uint16), np.zeros(7, np.uint16)]), 2, 16)


# -- open_shards ------------------------------------------------------------------------------------------------


def test_foreign_shards_by_name_in_sorted_order(tmp_path):
    rng = np.random.default_rng(1)
    train = [rng.integers(0, 70000, n) for n in (100, 60)]
    val = rng.integers(0, 70000, 40)
    test = rng.integers(0, 70000, 30)
    write_llmc(tmp_path / "web_train_000002.bin", train[1], wide=True)
    write_llmc(tmp_path / "web_train_000001.bin", train[0], wide=True)
    write_llmc(tmp_path / "web_val_000000.bin", val, wide=True)
    write_llmc(tmp_path / "web_test_000000.bin", test, wide=True)
    shards = open_shards(tmp_path)
    assert shards.tokenizer is None and shards.notes == []
    np.testing.assert_array_equal(np.asarray(shards.splits["train"]), np.concatenate(train))
    np.testing.assert_array_equal(np.asarray(shards.splits["val"]), val)
    np.testing.assert_array_equal(np.asarray(shards.splits["test"]), test)
    assert shards.splits["train"].dtype == np.dtype("<u4")
    assert shards.max_ids["train"] == int(np.concatenate(train).max())
    glob = open_shards(str(tmp_path / "web_*.bin"))
    np.testing.assert_array_equal(np.asarray(glob.splits["train"]), np.concatenate(train))
    with pytest.raises(AotError, match="no training shards"):  # one file, a val one
        open_shards(tmp_path / "web_val_000000.bin")


def test_foreign_shards_without_a_test_split_use_val(tmp_path):
    write_llmc(tmp_path / "fineweb_train_000001.bin", np.arange(300) % 256)
    write_llmc(tmp_path / "fineweb_val_000000.bin", np.arange(50) % 256)
    shards = open_shards(tmp_path)
    assert shards.notes == ["the data has no test shards: the test split is the val split"]
    np.testing.assert_array_equal(np.asarray(shards.splits["test"]), np.asarray(shards.splits["val"]))


@pytest.mark.parametrize(
    ("files", "fragment"),
    [
        ({}, "holds no .bin token shards"),
        ({"fineweb_val_000000.bin": 10}, "has no training shards"),
        ({"fineweb_train_000001.bin": 10}, "has no validation shards"),
    ],
)
def test_an_incomplete_foreign_set_is_one_line(tmp_path, files, fragment):
    for name, n in files.items():
        write_llmc(tmp_path / name, np.zeros(n))
    with pytest.raises(AotError, match=fragment) as info:
        open_shards(tmp_path)
    assert "\n" not in str(info.value)


@pytest.mark.parametrize(
    ("damage", "fragment"),
    [
        (lambda raw: raw[:-1], "truncated"),
        (lambda raw: raw + b"\0\0", "longer than its header says"),
        (lambda raw: raw[:100], "shorter than its header"),
        (lambda raw: b"\x01" + raw[1:], "not an llm.c token shard"),
    ],
)
def test_a_damaged_foreign_shard_is_one_line(tmp_path, damage, fragment):
    write_llmc(tmp_path / "x_val_000000.bin", np.arange(20))
    path = write_llmc(tmp_path / "x_train_000000.bin", np.arange(20))
    path.write_bytes(damage(path.read_bytes()))
    with pytest.raises(AotError, match=fragment) as info:
        open_shards(tmp_path)
    assert "\n" not in str(info.value) and "x_train_000000.bin" in str(info.value)


def test_a_missing_spec_is_one_line(tmp_path):
    with pytest.raises(AotError, match="does not exist"):
        open_shards(tmp_path / "nope")
    with pytest.raises(AotError, match=r"holds no \.bin"):
        open_shards(str(tmp_path / "*.bin"))
