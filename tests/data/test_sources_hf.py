"""``hf:`` sources for `aot data prepare`: a dataset saved with ``save_to_disk`` (real HuggingFace ``datasets``, no
hub), one document per row, and a hub name read through ``datasets.load_dataset`` (a stand-in module: no network)."""

from __future__ import annotations

import sys
import types

import numpy as np
import pytest

from aot.data.prepare import PrepareOptions, prepare, split_of
from aot.data.shardset import open_shards
from aot.data.sources import iter_documents, resolve
from aot.errors import AotError

ROWS = [f"Row {i}: a short document about the number {i * i}." for i in range(200)]


def test_a_saved_dataset_folder_prepares_one_document_per_row(tmp_path):
    datasets = pytest.importorskip("datasets")
    folder = tmp_path / "saved"
    datasets.Dataset.from_dict({"text": ROWS, "id": list(range(len(ROWS)))}).save_to_disk(str(folder))
    sources = resolve([f"hf:{folder}"])
    assert list(iter_documents(sources)) == ROWS
    options = PrepareOptions(tokenizer="bytes", val_fraction=0.1, test_fraction=0.1)
    prepare(sources, tmp_path / "out", options, workers=0, progress=False)
    shards = open_shards(tmp_path / "out")
    for split in ("train", "val", "test"):  # NUL before each document of the split, in row order
        expected = [b"\0" + row.encode() for i, row in enumerate(ROWS) if split_of(i, 0.1, 0.1) == split]
        assert bytes(np.asarray(shards.splits[split]).astype(np.uint8)) == b"".join(expected)


def test_a_saved_dataset_without_the_text_column_is_one_line(tmp_path):
    datasets = pytest.importorskip("datasets")
    folder = tmp_path / "saved"
    datasets.Dataset.from_dict({"body": ROWS}).save_to_disk(str(folder))
    with pytest.raises(AotError, match=r"has no column 'text' \(columns: \['body'\]\); give --text-field"):
        list(iter_documents(resolve([f"hf:{folder}"])))
    assert list(iter_documents(resolve([f"hf:{folder}"]), text_field="body")) == ROWS


def test_a_hub_name_streams_the_train_split_when_online(monkeypatch):
    calls = []

    class Stream:  # an IterableDataset: rows as dicts, no column_names until iterated
        column_names = None

        def __iter__(self):
            yield from ({"text": row} for row in ROWS[:3])

    def load_dataset(name, config, **kwargs):
        calls.append((name, config, kwargs))
        return Stream()

    online = types.SimpleNamespace(HF_HUB_OFFLINE=False)
    monkeypatch.setitem(sys.modules, "datasets", types.SimpleNamespace(load_dataset=load_dataset, config=online))
    monkeypatch.setattr("aot.data.hub.require_hub", lambda *args, **kwargs: None)  # the hub "answers"
    monkeypatch.delenv("HF_HUB_OFFLINE", raising=False)
    assert list(iter_documents(resolve(["hf:openwebtext:plain"]))) == ROWS[:3]
    assert calls == [("openwebtext", "plain", {"split": "train", "streaming": True})]
