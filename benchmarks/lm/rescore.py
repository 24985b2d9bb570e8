"""What the headline's 128-window val sample costs: every tag-``full-split`` run (the headline rows retrained, at
their best lr) scored both ways on the same trained model — the 128 windows spread over the val split that every
earlier tag recorded, and every window of the split (recorded by the run) — beside the 128-window value the
original tag recorded for that seed (the same command: the difference is the retraining, bf16 on this CPU).

    PYTHONPATH=src python benchmarks/lm/rescore.py          # writes benchmarks/lm/rescore.json and rescore.md

Runs whose folder is not on this machine are left out (runs/ is not in git), and the file keeps the rows it had.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import sys
from pathlib import Path
from typing import Any

import torch

from aot.analysis.analyze import lm_tokens
from aot.eval.lm import evaluate_lm
from aot.loader import load_run
from aot.run_folder import write_text_atomic
from aot.runinfo import machine_info
from aot.sweep import read_store
from aot.sweep.render import table

HERE = Path(__file__).resolve().parent
FULL = "full-split"
SAMPLE = 128  # the windows every tag before full-split scored its final val loss on
OUT = HERE / "rescore.json"


def sampled_loss(run_dir: Path, windows: int = SAMPLE) -> dict[str, Any]:
    """The final val loss of ``run_dir``'s model on ``windows`` windows spread over the val split, as the run's own
    final evaluation computes it (its context, the bf16 autocast when it trained in bf16)."""
    run = load_run(run_dir, task="lm", purpose="re-scoring")
    config = run.need("config")
    tokens = lm_tokens(config, "val")
    bf16 = run.results.get("train", {}).get("precision", {}).get("precision") == "bf16"
    autocast = torch.autocast("cpu", dtype=torch.bfloat16) if bf16 else contextlib.nullcontext()
    assert run.tokenizer is not None
    with torch.no_grad(), autocast:
        return evaluate_lm(
            run.model, tokens, run.config.block_size, run.tokenizer.token_byte_lengths(), 16, windows, "cpu"
        )


def original(store: dict, row: dict) -> dict | None:
    """The row of an earlier tag with the same tokenizer, model, overrides, lr and seed (the run retrained here)."""
    for other in store["runs"]:
        same = all(other[k] == row[k] for k in ("tokenizer", "model", "extra", "lr", "seed", "tokens", "position"))
        if same and other["tag"] in ("rope", "rope-wide", "tied-recipe"):  # headline.py's TAGS
            return other
    return None


HEADER = ["tokenizer", "model", "layers × width", "overrides", "seed", "128 windows", "full split ± SE", "full − 128",
          "recorded 128 windows (original run)"]  # fmt: skip


def cells(r: dict[str, Any]) -> list[Any]:
    """A rescore row's cells, in HEADER's order."""
    recorded = "—" if r["original_val_loss"] is None else f"{r['original_val_loss']:.4f} ({r['original_tag']})"
    full = f"{r['full_val_loss']:.4f} ± {r['full_val_loss_se']:.4f}"
    shape = f"{r['n_layer']} × {r['n_embd']}"
    sampled, difference = f"{r['sampled_val_loss']:.4f}", f"{r['full_val_loss'] - r['sampled_val_loss']:+.4f}"
    return [
        r["tokenizer"],
        r["model"],
        shape,
        " ".join(r["extra"]) or "—",
        r["seed"],
        sampled,
        full,
        difference,
        recorded,
    ]


def markdown(rows: list[dict[str, Any]]) -> str:
    return "\n".join(table(HEADER, [cells(r) for r in rows])) + "\n"


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--out", type=Path, default=OUT)
    args = parser.parse_args(argv)
    store = read_store(HERE / "results.json")
    kept = {r["run_dir"]: r for r in json.loads(args.out.read_text())["runs"]} if args.out.is_file() else {}
    for row in store["runs"]:
        if row["tag"] != FULL or row["run_dir"] in kept or not Path(row["run_dir"]).is_dir():
            continue
        sampled = sampled_loss(Path(row["run_dir"]))
        before = original(store, row)
        kept[row["run_dir"]] = {
            **{k: row[k] for k in ("tokenizer", "model", "extra", "lr", "seed", "n_layer", "n_embd", "run_dir")},
            "sampled_val_loss": sampled["loss"],
            "sampled_windows": sampled["windows"],
            "full_val_loss": row["val_loss"],
            "full_val_loss_se": row["val_loss_se"],
            "full_windows": row["val_windows"],
            "original_tag": None if before is None else before["tag"],
            "original_val_loss": None if before is None else before["val_loss"],
        }
        print(f"{row['model']} {' '.join(row['extra'])} seed {row['seed']}: 128 windows {sampled['loss']:.4f}, "
              f"full {row['val_loss']:.4f}", flush=True)  # fmt: skip
    rows = sorted(kept.values(), key=lambda r: (r["tokenizer"], r["model"], r["extra"], r["seed"]))
    record = {"machine": machine_info(), "what": __doc__.split("\n\n")[0], "runs": rows}
    write_text_atomic(args.out, json.dumps(record, indent=1) + "\n")
    write_text_atomic(args.out.with_suffix(".md"), markdown(rows))
    print(f"wrote {args.out} and {args.out.with_suffix('.md')}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
