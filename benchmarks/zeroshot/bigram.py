"""A reference row for benchmarks/zeroshot: an interpolated byte bigram, p(b | a) = 0.9 · count(a, b) / count(a)
+ 0.1 · p_unigram(b) (add-one unigram), counted on the same Shakespeare training split as the models, run
through the same protocols and scorer as `aot eval lm` on the same Austen sets. Writes bigram.json.

    python benchmarks/zeroshot/bigram.py
"""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import torch
from torch import nn

from aot.data.shards import prepare_lm_data
from aot.eval.austen_sets import build_austen_sets
from aot.eval.lm_folder import LMRunFolder
from aot.eval.scoring import model_scorer
from aot.eval.zeroshot_runs import AUSTEN_TASKS, ZEROSHOT_TASKS, score_task

HERE = Path(__file__).parent
LAMBDA = 0.9


class ByteBigram(nn.Module):
    """Logits = log p(next | current): the position's own token only."""

    def __init__(self, train: np.ndarray) -> None:
        super().__init__()
        train = np.asarray(train, dtype=np.int64)
        pairs = np.zeros((256, 256))
        np.add.at(pairs, (train[:-1], train[1:]), 1.0)
        unigram = (np.bincount(train, minlength=256) + 1.0) / (len(train) + 256)
        conditional = pairs / np.maximum(pairs.sum(1, keepdims=True), 1.0)
        self.register_buffer("table", torch.tensor(np.log(LAMBDA * conditional + (1 - LAMBDA) * unigram)))
        self.cfg = type("Cfg", (), {"block_size": 128, "block": "bigram", "n_layer": 0})()

    def forward(self, idx: torch.Tensor) -> tuple[torch.Tensor, None]:
        return self.table[idx], None


def main() -> dict:
    data = prepare_lm_data("shakespeare", "bytes")
    model = ByteBigram(data.splits["train"])
    run = LMRunFolder(Path("bigram"), model, data.tokenizer)  # type: ignore[arg-type]
    scorer = model_scorer(model, 128, batch_size=64)
    paths = build_austen_sets()
    results = {
        t: score_task(ZEROSHOT_TASKS[t], ZEROSHOT_TASKS[t].reader(paths[t]), run, scorer, None) for t in AUSTEN_TASKS
    }
    (HERE / "bigram.json").write_text(json.dumps(results, indent=2) + "\n")
    return results


if __name__ == "__main__":
    print(json.dumps(main(), indent=2))
