"""Write table.md of a zero-shot folder: its models on the Austen-built sets (from the folder's results.json, written
by `aot eval lm`, and the runs' own losses) beside the paper's zero-shot table (docs/paper.md, arXiv 2506.03790).

    python benchmarks/zeroshot/table.py                 # benchmarks/zeroshot (the 200-step models of train.sh)
    python benchmarks/zeroshot/table.py benchmarks/zeroshot/lm-bench-rope   # the benchmarks/lm models (lm_bench.py)
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

HERE = Path(__file__).parent
NAMES = {  # model preset -> table name; a run's name contains its preset (runs/bench-lm/TAG-TOKENIZER-PRESET-KEY)
    "gpt2-cpu": "GPT-2",
    "aot-mhsa-l-cpu": "AoT-MHSA",
    "aot-mssa-l-cpu": "AoT-MSSA (learned W_O)",
    "aot-mssa-tied-l-cpu": "AoT-MSSA (tied output)",
}
PAPER = [  # model, LAMBADA loss, PTB loss, WikiText loss, LAMBADA acc, CBT-CN acc, CBT-NE acc
    ("AoT-MSSA Base (102M)", 4.70, 6.03, 4.65, 0.25, 0.80, 0.74),
    ("AoT-MSSA Medium (182M)", 4.47, 5.08, 4.22, 0.29, 0.84, 0.77),
    ("AoT-MHSA Base (122M)", 4.42, 5.52, 4.19, 0.38, 0.86, 0.82),
    ("GPT-2 Base (124M)", 4.32, 5.75, 4.13, 0.40, 0.87, 0.84),
]


def display_name(run_name: str) -> str:
    return next((label for preset, label in NAMES.items() if preset in run_name), run_name)


def shakespeare_val(row: dict) -> float:
    """The run's val loss in nats/byte: recorded in the eval row (``training``) or read from the run folder."""
    if row.get("training"):
        return float(row["training"]["val_nats_per_byte"])
    return float(json.loads((Path(row["path"]) / "results.json").read_text())["val"]["nats_per_byte"])


def main(folder: Path = HERE) -> str:
    results = json.loads((folder / "results.json").read_text())
    lines = [
        f"Ours: {results['date']}, {results['machine']['processor']} "
        f"({results['machine']['cpu_count']} cores, shared); Austen-built sets "
        "(see README); losses in nats, accuracies as fractions; one seed.",
        "",
        "| model | layers | non-emb. params | Shakespeare val (nats/byte) | Austen-LAMBADA loss (nats/word) "
        "| Austen-LAMBADA acc (whole word) | all tokens | last token | Austen text (nats/byte) | (nats/word) "
        "| Austen-CBT-CN acc | Austen-CBT-NE acc |",
        "|---|---|---|---|---|---|---|---|---|---|---|---|",
    ]
    for name, row in results["runs"].items():
        lam, ppl = row["austen-lambada"], row["austen-ppl"]
        lines.append(
            f"| {display_name(name)} | {row['n_layer']} | {row['non_embedding_params'] / 1e6:.2f}M "
            f"| {shakespeare_val(row):.3f} | {lam['loss']:.2f} | {lam['acc_whole_word']:.3f} "
            f"| {lam['acc_all_tokens']:.3f} | {lam['acc_last_token']:.3f} | {ppl['nats_per_token']:.3f} "
            f"| {ppl['nats_per_word']:.2f} | {row['austen-cbt-cn']['accuracy']:.2f} "
            f"| {row['austen-cbt-ne']['accuracy']:.2f} |"
        )
    bigram_file = HERE / "bigram.json"
    if bigram_file.is_file():  # the reference row of bigram.py: same sets, protocols and scorer
        bigram = json.loads(bigram_file.read_text())
        lam, ppl = bigram["austen-lambada"], bigram["austen-ppl"]
        lines.append(
            f"| byte bigram (reference) | — | 65k counts | 2.529 (val bigram) | {lam['loss']:.2f} "
            f"| {lam['acc_whole_word']:.3f} | {lam['acc_all_tokens']:.3f} | {lam['acc_last_token']:.3f} "
            f"| {ppl['nats_per_token']:.3f} | {ppl['nats_per_word']:.2f} | {bigram['austen-cbt-cn']['accuracy']:.2f} "
            f"| {bigram['austen-cbt-ne']['accuracy']:.2f} |"
        )
    sets = results["sets"]
    lines += [
        "",
        f"Sets: austen-lambada {sets['austen-lambada']['items']} passages, austen-cbt-cn "
        f"{sets['austen-cbt-cn']['items']} and austen-cbt-ne {sets['austen-cbt-ne']['items']} questions "
        f"(chance 0.10), austen-ppl {sets['austen-ppl']['items']:,} words.",
        "",
        "The paper (OpenWebText, GPT-2 BPE, context 1024, 600k steps; losses as the paper reports them, unit not "
        "stated):",
        "",
        "| model | LAMBADA loss | PTB loss | WikiText loss | LAMBADA acc | CBT-CN acc | CBT-NE acc |",
        "|---|---|---|---|---|---|---|",
    ]
    lines += ["| " + " | ".join([name, *(f"{v:.2f}" for v in values)]) + " |" for name, *values in PAPER]
    table = "\n".join(lines) + "\n"
    (folder / "table.md").write_text(table)
    return table


if __name__ == "__main__":
    print(main(Path(sys.argv[1]) if len(sys.argv) > 1 else HERE), end="")
