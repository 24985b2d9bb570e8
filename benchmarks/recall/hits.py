"""The recall-hit decomposition of language models' gaps (Zoology, Arora et al. 2023): for each trained `aot train lm`
run, the loss on the tokens that complete a bigram already seen in their window ("recall hits") and on all other
tokens, on the same windows of the same split; then, against a reference run, the share of each gap the hits explain
(`aot.analysis.recall_hits`: Δ_hits · n_hits / (Δ_all · n_all)).

    PYTHONPATH=src python benchmarks/recall/hits.py RUN_GPT2 RUN_MSSA RUN_MHSA --reference RUN_GPT2 \\
        --labels GPT-2,AoT-MSSA,AoT-MHSA                        # the benchmarks/lm headline runs (their run_dir)

Every run must be of the same corpus, tokenizer, split and context (the windows and the hits are then the same for
all). Writes benchmarks/recall/hits.json (the machine, the date, the command, every run's losses and every gap) and
hits.md beside it; `--out` puts them elsewhere.
"""

from __future__ import annotations

import argparse
import json
import shlex
import sys
from pathlib import Path
from typing import Any

from aot.analysis.analyze import lm_tokens
from aot.analysis.recall_hits import BigramTable, HitLosses, gap_share, hit_losses
from aot.loader import load_run
from aot.run_folder import write_text_atomic
from aot.runinfo import machine_info

HERE = Path(__file__).resolve().parent
#: what must agree between the runs for their windows (and hits) to be the same
SAME = ("corpus", "tokenizer", "val_fraction", "test_fraction")


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("runs", nargs="+", help="`aot train lm` run folders")
    parser.add_argument("--reference", required=True, help="the run the gaps are read against (one of RUNS)")
    parser.add_argument("--labels", help="comma-separated names of RUNS (default: the folder names)")
    parser.add_argument("--split", default="val", choices=["val", "test", "train"])
    parser.add_argument("--windows", type=int, help="windows spread evenly over the split (default: all of them)")
    parser.add_argument(
        "--below",
        type=float,
        default=0.1,
        help="also split off the hits whose bigram the train split's bigram model gives p < this (default 0.1)",
    )
    parser.add_argument("--batch-size", type=int, default=16)
    parser.add_argument("--device", default="cpu")
    parser.add_argument("--out", type=Path, default=HERE / "hits.json", help="the JSON (and .md beside it)")
    return parser


def fail(message: str) -> None:
    raise SystemExit(f"hits.py: error: {message}")


def footing(config: dict[str, Any], block_size: int) -> tuple[Any, ...]:
    """What makes two runs' windows the same: their data section's corpus, tokenizer and split, and the context."""
    data = config.get("data", {})
    return (*(data.get(name) for name in SAME), block_size)


def main(argv: list[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    runs = [Path(r) for r in args.runs]
    labels = args.labels.split(",") if args.labels else [r.name for r in runs]
    if len(labels) != len(runs):
        fail(f"--labels names {len(labels)} runs, {len(runs)} are given")
    if Path(args.reference) not in runs:
        fail(f"--reference {args.reference} is not one of the runs")
    rows, grounds = [], set()
    tokens = None
    for label, path in zip(labels, runs):
        run = load_run(path, task="lm", purpose="the recall-hit decomposition", tokenizer=False)
        config = run.need("config")
        grounds.add(footing(config, run.config.block_size))
        if len(grounds) > 1:
            fail(f"{path} is not on the footing of the runs before it ({', '.join(SAME)}, block_size must agree)")
        if tokens is None:
            tokens = lm_tokens(config, args.split)
            bigrams = BigramTable(lm_tokens(config, "train"), run.config.vocab_size)
        model = run.model.to(args.device)
        losses = hit_losses(
            model, tokens, run.config.block_size, args.batch_size, args.windows, args.device, bigrams, args.below
        )
        size = {"block": run.config.block, "params": run.model.num_params()}
        rows.append({"label": label, "run_dir": str(path), **size, **losses.to_dict()})
        print(f"{label}: hit loss {losses.hit_loss:.4f} ({losses.hits:,} hits), other {losses.other_loss:.4f}")
    reference = rows[runs.index(Path(args.reference))]
    gaps = [
        {"label": row["label"], "reference": reference["label"], **gap_share(as_losses(row), as_losses(reference))}
        for row in rows
        if row is not reference
    ]
    record = {
        "machine": machine_info(),
        "command": "python benchmarks/recall/hits.py " + shlex.join(argv if argv is not None else sys.argv[1:]),
        "split": args.split,
        "windows": args.windows,
        "unpredicted_below": args.below,
        "runs": rows,
        "gaps": gaps,
    }
    write_text_atomic(args.out, json.dumps(record, indent=2) + "\n")
    write_text_atomic(args.out.with_suffix(".md"), markdown(record))
    print(f"wrote {args.out} and {args.out.with_suffix('.md')}")
    return 0


def as_losses(row: dict[str, Any]) -> HitLosses:
    unpredicted = (row.get("unpredicted_hit_nats", 0.0), row.get("unpredicted_hits", 0))
    return HitLosses(row["hit_nats"], row["hits"], row["other_nats"], row["others"], *unpredicted)


def markdown(record: dict[str, Any]) -> str:
    """The runs' hit / other losses, then each gap and the share the hits explain."""
    machine = record["machine"]
    when = f"{machine['date']}, {machine['processor']}"
    lines = [
        f"Recall hits on the {record['split']} split (`{record['command']}`, {when}).",
        "",
        f"Unpredicted hits: the hits whose bigram the train split's bigram model gives p < "
        f"{record.get('unpredicted_below', 0.1):g} (they need the earlier occurrence looked up).",
        "",
        "| model | params | hits | hit share | unpredicted hits (share) | hit loss | unpredicted hit loss | "
        "other loss | loss |",
        "|---|---|---|---|---|---|---|---|---|",
    ]
    for r in record["runs"]:
        n = r["hits"] + r["others"]
        unpredicted = r.get("unpredicted_hits", 0)
        lines.append(
            f"| {r['label']} | {r['params']:,} | {r['hits']:,} | {r['hits'] / n:.3f} | {unpredicted:,} "
            f"({unpredicted / n:.3f}) | {r['hit_loss']:.4f} | {r.get('unpredicted_hit_loss', float('nan')):.4f} | "
            f"{r['other_loss']:.4f} | {r['loss']:.4f} |"
        )
    lines += [
        "",
        "| gap | Δ hits | Δ unpredicted hits | Δ other | Δ all | share of the gap on hits | on unpredicted hits |",
        "|---|---|---|---|---|---|---|",
    ]
    for g in record["gaps"]:
        share = "—" if g["hit_share_of_gap"] is None else f"{100 * g['hit_share_of_gap']:.1f} %"
        rare = g.get("unpredicted_hit_share_of_gap")
        lines.append(
            f"| {g['label']} − {g['reference']} | {g['delta_hits']:+.4f} | "
            f"{g.get('delta_unpredicted_hits', float('nan')):+.4f} | {g['delta_other']:+.4f} | "
            f"{g['delta_all']:+.4f} | {share} | {'—' if rare is None else f'{100 * rare:.1f} %'} |"
        )
    return "\n".join(lines) + "\n"


if __name__ == "__main__":
    sys.exit(main())
