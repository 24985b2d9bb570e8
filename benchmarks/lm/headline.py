"""The language benchmark's headline, rendered from results.json: every model with rotary positions at its best lr,
mean (min-max) over seeds, its gap to GPT-2 (at GPT-2's best lr, same tokenizer, positions and budget), how far
below the bigram it is, the same model at 4x the tokens where recorded, and the command that reproduces the row.

    PYTHONPATH=src python benchmarks/lm/headline.py            # print the table
    PYTHONPATH=src python benchmarks/lm/headline.py --write    # and rewrite the <!-- lm:headline --> blocks of
                                                               # README.md and benchmarks/lm/README.md, the
                                                               # <!-- lm:along --> block of the latter, and
                                                               # draw quality_per_compute-headline.png

The rows are the seed summaries (``run.seed_summary``) of the tags in ``TAGS``; nothing here is typed by hand, so
a seed that lands changes the table the next time this runs.
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path[:0] = [str(HERE)]
from run import (  # noqa: E402  (benchmarks/lm/run.py)
    REFERENCE,
    draw_quality_per_compute,
    mean_evals,
    model_shape,
    recipe_overrides,
    seed_summary,
    summary_reference,
    summary_reference_entry,
    summary_runs,
)

from aot.runinfo import replace_marked_block  # noqa: E402

#: tags whose rows make the headline (all with rotary positions, 1.02 M tokens); ``rope-4x`` fills the 4x column
TAGS = ("rope", "rope-wide", "tied-recipe")
LONGER = "rope-4x"
#: how a preset reads in the table, in the order the rows appear
NAMES = {
    "gpt2-cpu": "GPT-2",
    "llama-l-cpu": "Llama",
    "aot-mhsa-l-cpu": "AoT-MHSA",
    "aot-mssa-l-cpu": "AoT-MSSA, learned W_O",
    "aot-mssa-tied-l-cpu": "AoT-MSSA, tied (the paper's operator)",
    "crate-res-l-cpu": "CRATE, ISTA as an increment",
    "crate-l-cpu": "CRATE",
    "crate-alpha-l-cpu": "CRATE-α, overcomplete dictionary",
}
BLOCK = "lm:headline"
ALONG_BLOCK = "lm:along"
FIGURE = "quality_per_compute-headline.png"


def lr_text(lr: float) -> str:
    """1e-3, 3e-3, 1e-2 as written on a command line."""
    return f"{lr:.0e}".replace("e-0", "e-")


def command(s: dict) -> str:
    """The run.py command that trains (or, when done, skips) every run behind summary row ``s``."""
    parts = [
        "python benchmarks/lm/run.py",
        f"--tag {s['tag']}",
        f"--tokenizers {s['tokenizer']}",
        f"--models {s['model']}",
    ]
    if s["position"]:
        parts.append(f"--positions {s['position']}")
    parts.append("--lrs " + " ".join(lr_text(lr) for lr in s["lrs_tried"]))
    parts.append("--seeds " + " ".join(str(seed) for seed in s["seeds"]))
    steps = s["tokens"] // (16 * 256)
    if steps != 250:
        parts.append(f"--steps {steps}")
    parts += [f"--set {o}" for o in s["extra"]]
    return " ".join(parts)


def headline_rows(store: dict) -> list[dict]:
    """One dict per headline row, in table order: the summary row and what the table shows of it."""
    summary = seed_summary(store)
    longer = {(s["tokenizer"], s["model"], tuple(s["extra"])): s for s in summary if s["tag"] == LONGER}
    rows = []
    for s in summary:
        if s["tag"] not in TAGS or s["position"] != "rope":
            continue
        ref = summary_reference(summary, s)
        layers, width = model_shape(s)
        head_dim = [o.split("=", 1)[1] for o in s["extra"] if o.startswith("model.head_dim=")]
        more = longer.get((s["tokenizer"], s["model"], tuple(s["extra"])))
        more_ref = summary_reference(summary, more) if more else None
        rows.append(
            {
                "summary": s,
                "name": NAMES.get(s["model"], s["model"]),
                "width": width,
                "shape": f"{layers} × {width}" + "".join(f" (p = {p})" for p in head_dim),
                "recipe": " ".join(recipe_overrides(s["extra"])),
                "gap": None if ref is None or s["model"] == REFERENCE else (s["val_mean"] - ref) / ref,
                "longer": more,
                "longer_gap": None
                if more is None or more_ref is None or s["model"] == REFERENCE
                else (more["val_mean"] - more_ref) / more_ref,
                "command": command(s),
            }
        )
    order = list(NAMES)
    rows.sort(
        key=lambda r: (
            r["summary"]["tokenizer"] != "bytes",
            r["summary"]["tokenizer"],
            order.index(r["summary"]["model"]) if r["summary"]["model"] in order else len(order),
            r["width"],
            r["recipe"],
        )
    )
    return rows


def spread(s: dict) -> str:
    if len(s["seeds"]) == 1:
        return f"{s['val_mean']:.3f} (1 seed)"
    return f"{s['val_mean']:.3f} ({s['val_min']:.3f}-{s['val_max']:.3f}, {len(s['seeds'])} seeds)"


def markdown(store: dict, commands: bool = True) -> str:
    """The headline table (``commands``: with the command of each row, for benchmarks/lm/README.md)."""
    head = "| tokenizer | model | layers × width | recipe | lrs tried: best | val loss, 1 M tokens | gap to GPT-2 | "
    head += "below bigram by | 4 M tokens (gap) |"
    lines = [head + (" command |" if commands else ""), "|---" * (9 + commands) + "|"]
    for r in headline_rows(store):
        s = r["summary"]
        gap = "—" if r["gap"] is None else f"{100 * r['gap']:+.1f} %"
        longer = "—"
        if r["longer"] is not None:
            longer = spread(r["longer"])
            if r["longer_gap"] is not None:
                longer += f", {100 * r['longer_gap']:+.1f} %"
        lrs = " / ".join(lr_text(lr) for lr in s["lrs_tried"]) + f": {lr_text(s['lr'])}"
        cells = [
            s["tokenizer"],
            r["name"],
            r["shape"],
            r["recipe"] or "—",
            lrs,
            spread(s),
            gap,
            f"{s['bigram'] - s['val_mean']:+.3f}",
            longer,
        ]
        if commands:
            cells.append(f"`{r['command']}`")
        lines.append("| " + " | ".join(cells) + " |")
    return "\n".join(lines)


def along_rows(store: dict) -> list[dict]:
    """The gap to GPT-2 along the longer runs (tag ``LONGER``): for each contender, its mean periodic val loss
    over seeds against that of its GPT-2 (:func:`run.summary_reference_entry`: same tokenizer, positions, budget and
    recipe) at every token count both evaluated."""
    summary = [s for s in seed_summary(store) if s["tag"] == LONGER]
    rows = []
    for s in summary:
        if s["model"] == REFERENCE or not (runs := summary_runs(store, s, with_evals=True)):
            continue
        ref = summary_reference_entry(summary, s)
        if ref is None or not (ref_runs := summary_runs(store, ref, with_evals=True)):
            continue
        tokens, val = mean_evals(runs)
        ref_at = dict(zip(*mean_evals(ref_runs), strict=True))
        layers, width = model_shape(s)
        rows.append(
            {
                "summary": s,
                "shape": f"{layers} × {width}",
                "gaps": {t: (v - ref_at[t]) / ref_at[t] for t, v in zip(tokens, val, strict=True) if t in ref_at},
            }
        )
    return rows


def along_markdown(store: dict) -> str:
    """The gap-along-the-way table: a row per longer contender, a column per evaluated token count."""
    rows = along_rows(store)
    points = sorted({t for r in rows for t in r["gaps"]})
    head = "| tokenizer | model | layers × width | recipe | " + " | ".join(f"{t / 1e6:.1f} M" for t in points) + " |"
    lines = [head, "|---" * (4 + len(points)) + "|"]
    for r in rows:
        s = r["summary"]
        recipe = " ".join(recipe_overrides(s["extra"])) or "—"
        cells = [s["tokenizer"], NAMES.get(s["model"], s["model"]), r["shape"], recipe]
        cells += [f"{100 * r['gaps'][t]:+.1f} %" if t in r["gaps"] else "—" for t in points]
        lines.append("| " + " | ".join(cells) + " |")
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--write", action="store_true", help="rewrite the lm:headline blocks of both READMEs")
    args = parser.parse_args(argv)
    store = json.loads((HERE / "results.json").read_text())
    print(markdown(store))
    if args.write:
        for path, commands in ((HERE.parents[1] / "README.md", False), (HERE / "README.md", True)):
            text = path.read_text()
            text = replace_marked_block(text, BLOCK, markdown(store, commands), path.name)
            if commands:
                text = replace_marked_block(text, ALONG_BLOCK, along_markdown(store), path.name)
            path.write_text(text)
            print(f"wrote the {BLOCK} block of {path}")
        print(f"wrote {draw_quality_per_compute(store, list(TAGS), HERE / FIGURE)}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
