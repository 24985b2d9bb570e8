"""Why, from the inside (issue 29): where the heads of the trained recall models attend. For every finished run of a
recall grid (benchmarks/recall/run.py's run folders), on the run's own held-out MQAR sequences, every head's mean
weight from a query to its matching key, to the value after it (what a solved MQAR copies: Zoology's recall, the
second step of Olsson et al.'s induction mechanism) and to itself, and its previous-token weight
(`aot.analysis.recall_attention`); and the previous-token and induction scores on repeated random tokens of the
run's vocabulary (`aot.analysis.circuits`, as `aot analyze` reports them) — beside the run's test accuracy.
docs/math.md, "What MSSA can and cannot express for recall", says why these: Q = K makes the matching key easy to
land on and the value after it hard.

    PYTHONPATH=src python benchmarks/recall/inside.py            # runs/bench-recall -> benchmarks/recall/inside.*
    PYTHONPATH=src python benchmarks/recall/inside.py --runs /tmp/recall-runs --out /tmp/inside.json

Writes inside.json (the machine, the date, the command; one row per run: block, width, sequence length, pairs, lr,
seed, val and test accuracy, every score as a layers x heads list, and the max over heads of each) and inside.md
beside it (per block, width, length and pairs, at the lr whose runs reach the best mean val accuracy: the best head's
value weight and previous-token scores beside the test accuracy, means over the seeds). Rows already in the output file
for runs whose folder is not under --runs are kept. A run that has not finished
(no complete results.json) is skipped, as is a folder that holds no recall run; blocks without attention patterns
(linear attention, Mamba) get no scores (None, "—" in the table). The labels come from benchmarks/recall/results.json
(the row whose run_dir has the folder's name) when the run is there, else from the run's block.
"""

from __future__ import annotations

import argparse
import json
import shlex
import sys
from collections import defaultdict
from pathlib import Path
from typing import Any

import torch

from aot.analysis.analyze import recall_config
from aot.analysis.circuits import head_scores, repeated_random_tokens
from aot.analysis.recall_attention import SCORES, pattern_names, recall_head_scores
from aot.data.mqar import held_out
from aot.errors import AotError
from aot.loader import load_run
from aot.run_folder import read_results, write_text_atomic
from aot.runinfo import machine_info

HERE = Path(__file__).resolve().parent
#: the per-run maxima over heads the table shows: (row key, column title)
BEST = (
    ("value", "value weight"),
    ("value_to_key", "value → its key"),
    ("previous_token", "prev. token (MQAR)"),
    ("repeated_previous_token", "prev. token (repeated)"),
    ("induction", "induction"),
)


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--runs", type=Path, default=Path("runs/bench-recall"), help="folder of the grid's runs")
    parser.add_argument("--results", type=Path, default=HERE / "results.json", help="the grid's rows, for labels")
    parser.add_argument("--out", type=Path, default=HERE / "inside.json", help="the JSON (and .md beside it)")
    parser.add_argument("--split", default="val", choices=["val", "test"], help="the held-out MQAR sequences")
    parser.add_argument("--sequences", type=int, default=64, help="sequences per run (default 64)")
    parser.add_argument("--batch-size", type=int, default=32)
    parser.add_argument("--induction-length", type=int, default=32, help="n of the repeated sequences [r, r]")
    parser.add_argument("--device", default="cpu")
    return parser


def labels_of(store_path: Path) -> dict[str, dict[str, Any]]:
    """The grid's rows by their run folder's name (unique: it ends in the run's key; the recorded run_dir is relative
    to where the grid ran): ``model`` (the block's label in the study) and ``tag``."""
    if not store_path.is_file():
        return {}
    rows = json.loads(store_path.read_text()).get("runs", [])
    return {Path(r["run_dir"]).name: r for r in rows if "run_dir" in r}


def fallback_label(model: dict[str, Any]) -> str:
    """A label from a run's own model summary: the block, its output tying and token shift when they are set."""
    label = model["block"]
    if model.get("tied_output") is not None and model["block"] in ("aot-mssa", "crate"):
        label += " (tied)" if model["tied_output"] else " (W_O)"
    if model.get("token_shift") not in (None, "none"):
        label += f" + token shift {model['token_shift']}"
    return label


def maximum(scores: list[list[float]] | None) -> float | None:
    return None if scores is None else max(max(row) for row in scores)


def as_lists(scores: dict[str, torch.Tensor | None]) -> dict[str, list | None]:
    return {name: None if value is None else value.tolist() for name, value in scores.items()}


def analyse(folder: Path, results: dict[str, Any], args: argparse.Namespace) -> dict[str, Any]:
    """One finished recall run: its point, accuracies, every head's scores and their maxima."""
    run = load_run(folder, task="lm", purpose="benchmarks/recall/inside.py", tokenizer=False)
    cfg = recall_config(folder, results["config"])
    model = run.model.to(args.device)
    seqs = held_out(cfg, args.split, args.sequences)
    recall = as_lists(recall_head_scores(model, seqs.tokens, seqs.targets, cfg.n_pairs, args.batch_size))
    length = min(args.induction_length, model.cfg.block_size // 2)
    repeated: dict[str, list | None] = {"previous_token": None, "induction": None}
    if pattern_names(model) is not None:
        generator = torch.Generator().manual_seed(0)
        ids = repeated_random_tokens(args.batch_size, length, model.cfg.vocab_size, generator).to(args.device)
        with torch.no_grad():
            repeated = as_lists(dict(head_scores(model, ids)))
    return {
        "block": run.config.block,
        "n_layer": run.config.n_layer,
        "n_head": run.config.n_head,
        "width": run.config.n_embd,
        "seq_len": cfg.seq_len,
        "pairs": cfg.n_pairs,
        "vocab_size": cfg.vocab_size,
        "lr": results["config"]["train"]["lr"],
        "seed": results.get("seed"),
        "val_accuracy": results["val"]["accuracy"],
        "test_accuracy": results["test"]["accuracy"],
        "recall": recall,
        "repeated": {"sequence_length": length, **repeated},
        "best": {
            **{name: maximum(recall[name]) for name in SCORES},
            "repeated_previous_token": maximum(repeated["previous_token"]),
            "induction": maximum(repeated["induction"]),
        },
    }


def collect(args: argparse.Namespace) -> tuple[list[dict[str, Any]], list[dict[str, str]]]:
    """Every run folder under ``args.runs``: the analysed rows, and what was skipped with the reason."""
    if not args.runs.is_dir():
        raise SystemExit(f"inside.py: error: --runs {args.runs} is not a folder; give the grid's run folder")
    known = labels_of(args.results)
    rows, skipped = [], []
    for folder in sorted(p for p in args.runs.iterdir() if p.is_dir()):
        results = read_results(folder)
        if results is None:
            skipped.append({"run_dir": str(folder), "why": "not finished (no complete results.json)"})
            continue
        if "n_pairs" not in results.get("config", {}).get("data", {}):
            skipped.append({"run_dir": str(folder), "why": "not an `aot train recall` run"})
            continue
        try:
            row = analyse(folder, results, args)
        except AotError as exc:
            skipped.append({"run_dir": str(folder), "why": str(exc)})
            continue
        store = known.get(folder.name, {})
        label = store.get("model") or fallback_label(results["model"])
        rows.append({"label": label, "tag": store.get("tag"), "run_dir": str(folder), **row})
        best = row["best"]
        shown = "—" if best["value"] is None else f"{best['value']:.3f}"
        print(f"{label} w{row['width']} T{row['seq_len']} p{row['pairs']}: value weight {shown}", flush=True)
    return rows, skipped


def kept_rows(out: Path, analysed: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """The rows ``out`` already holds for runs not analysed now (their folders are on another machine: runs/ is not
    in git), so that analysing the runs of a new sitting adds to the record instead of replacing it."""
    if not out.is_file():
        return []
    fresh = {row["run_dir"] for row in analysed}
    return [row for row in json.loads(out.read_text())["runs"] if row["run_dir"] not in fresh]


def mean(values: list[float | None]) -> float | None:
    known = [v for v in values if v is not None]
    return sum(known) / len(known) if known else None


def table_rows(rows: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """One line per (tag, block, width, length, pairs): the runs at the lr with the best mean val accuracy, their
    mean test accuracy and mean best-head scores."""
    groups: dict[tuple, list[dict[str, Any]]] = defaultdict(list)
    for row in rows:
        groups[(row["tag"] or "", row["label"], row["width"], row["seq_len"], row["pairs"])].append(row)
    lines = []
    for key in sorted(groups, key=lambda k: (k[0], k[1], k[3], k[4], k[2])):
        by_lr: dict[float, list[dict[str, Any]]] = defaultdict(list)
        for row in groups[key]:
            by_lr[row["lr"]].append(row)
        lr = max(by_lr, key=lambda x: sum(r["val_accuracy"] for r in by_lr[x]) / len(by_lr[x]))
        chosen = by_lr[lr]
        lines.append(
            {
                "tag": key[0],
                "label": key[1],
                "width": key[2],
                "seq_len": key[3],
                "pairs": key[4],
                "lr": lr,
                "seeds": len(chosen),
                "test_accuracy": mean([r["test_accuracy"] for r in chosen]),
                **{name: mean([r["best"].get(name) for r in chosen]) for name, _ in BEST},  # older rows lack some
            }
        )
    return lines


def markdown(record: dict[str, Any]) -> str:
    machine = record["machine"]
    lines = [
        f"Where the recall models' heads attend (`{record['command']}`, {machine['date']}, {machine['processor']}; "
        f"{record['sequences']} {record['split']} sequences per run). Each score is the best head's (max over layers "
        "and heads); value weight: the mean weight a query puts on the value after its matching key; prev. token: "
        "the mean A[t, t−1] on the MQAR sequences and on repeated random tokens; induction: on [r, r]. At each "
        "point's best lr (mean val accuracy), means over seeds; — : no attention pattern.",
        "",
        "| tag | block | width | tokens | pairs | lr | seeds | test accuracy | "
        + " | ".join(title for _, title in BEST)
        + " |",
        "|---|---|---|---|---|---|---|---|" + "---|" * len(BEST),
    ]

    def number(value: float | None) -> str:
        return "—" if value is None else f"{value:.3f}"

    for r in record["table"]:
        scores = " | ".join(number(r[name]) for name, _ in BEST)
        lines.append(
            f"| {r['tag'] or '—'} | {r['label']} | {r['width']} | {r['seq_len']} | {r['pairs']} | {r['lr']:g} | "
            f"{r['seeds']} | {number(r['test_accuracy'])} | {scores} |"
        )
    if record["skipped"]:
        lines += ["", f"Skipped {len(record['skipped'])} folders (not finished, or not recall runs): see inside.json."]
    return "\n".join(lines) + "\n"


def main(argv: list[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    args.out.parent.mkdir(parents=True, exist_ok=True)  # before the work: a folder that cannot be made fails first
    rows, skipped = collect(args)
    rows = kept_rows(args.out, rows) + rows
    record = {
        "machine": machine_info(),
        "command": "python benchmarks/recall/inside.py " + shlex.join(argv if argv is not None else sys.argv[1:]),
        "split": args.split,
        "sequences": args.sequences,
        "runs": rows,
        "table": table_rows(rows),
        "skipped": skipped,
    }
    write_text_atomic(args.out, json.dumps(record, indent=2) + "\n")
    write_text_atomic(args.out.with_suffix(".md"), markdown(record))
    print(f"{len(rows)} runs analysed, {len(skipped)} skipped; wrote {args.out} and {args.out.with_suffix('.md')}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
