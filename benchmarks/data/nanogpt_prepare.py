"""nanoGPT's OpenWebText preparation, re-implemented here for comparison with ``aot data prepare`` (written from a
description of nanoGPT's ``data/openwebtext/prepare.py``, not copied from it): HuggingFace ``datasets`` loads the
JSON lines into its Arrow cache, splits off a 0.05 % validation set (seed 2357), tokenizes every document with
tiktoken's GPT-2 ``encode_ordinary`` plus the end-of-text token in ``num_proc`` processes (``Dataset.map``), then
writes each split into one uint16 ``.bin`` memmap in 1,024 contiguous batches.

    python benchmarks/data/nanogpt_prepare.py CORPUS.jsonl --out DIR --cache-dir DIR [--num-proc 2]

Differences from nanoGPT: the data come from a local JSON-lines file (``load_dataset("json", ...)``) instead of the
hub's ``openwebtext``; the GPT-2 encoding is the package's offline one (byte-identical to tiktoken's ``gpt2``); a
split of fewer than 1,024 documents (the validation split of a small corpus) is written in one batch per document,
since ``Dataset.shard`` refuses more shards than rows. Prints one JSON line: the phases' seconds, documents and
tokens per split.

Run it with ``HF_DATASETS_CACHE`` (and ``HF_HOME``) pointed at a scratch folder: ``benchmarks/data/run.py`` does, and
deletes the folder afterwards.
"""

from __future__ import annotations

import argparse
import json
import time
from pathlib import Path
from typing import Any

import numpy as np

from aot.data.tokenizers import GPT2Tokenizer

enc = GPT2Tokenizer().encoding  # module level, as nanoGPT's script holds it; datasets pickles it into the workers
WRITE_BATCHES = 1024


def process(example: dict[str, Any]) -> dict[str, Any]:
    ids = enc.encode_ordinary(example["text"])
    ids.append(enc.eot_token)
    return {"ids": ids, "len": len(ids)}


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("corpus", type=Path, help="a .jsonl file with a text field")
    parser.add_argument("--out", type=Path, required=True, help="where train.bin and val.bin go")
    parser.add_argument("--cache-dir", type=Path, required=True, help="the datasets cache (Arrow files)")
    parser.add_argument("--num-proc", type=int, default=2, help="processes of the map (nanoGPT: 8)")
    args = parser.parse_args(argv)

    from datasets import disable_progress_bars, load_dataset

    disable_progress_bars()
    seconds: dict[str, float] = {}
    start = time.perf_counter()
    dataset = load_dataset("json", data_files=str(args.corpus), cache_dir=str(args.cache_dir))
    seconds["load"] = time.perf_counter() - start

    mark = time.perf_counter()
    splits = dataset["train"].train_test_split(test_size=0.0005, seed=2357, shuffle=True)
    splits["val"] = splits.pop("test")
    seconds["split"] = time.perf_counter() - mark

    mark = time.perf_counter()
    tokenized = splits.map(process, remove_columns=["text"], num_proc=args.num_proc)
    seconds["map"] = time.perf_counter() - mark

    mark = time.perf_counter()
    args.out.mkdir(parents=True, exist_ok=True)
    documents: dict[str, int] = {}
    tokens: dict[str, int] = {}
    for name, dset in tokenized.items():
        total = int(np.sum(dset.with_format("numpy")["len"], dtype=np.uint64))
        arr = np.memmap(args.out / f"{name}.bin", dtype=np.uint16, mode="w+", shape=(total,))
        index = 0
        batches = min(WRITE_BATCHES, len(dset))
        for batch in range(batches):
            piece = dset.shard(num_shards=batches, index=batch, contiguous=True).with_format("numpy")
            ids = np.concatenate(piece["ids"])
            arr[index : index + len(ids)] = ids
            index += len(ids)
        arr.flush()
        del arr
        documents[name], tokens[name] = len(dset), total
    seconds["write"] = time.perf_counter() - mark
    seconds["total"] = time.perf_counter() - start
    rounded = {k: round(v, 2) for k, v in seconds.items()}
    print(json.dumps({"seconds": rounded, "documents": documents, "tokens": tokens}))


if __name__ == "__main__":
    main()
