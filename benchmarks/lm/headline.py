"""The language benchmark's headline, rendered from results.json: every model with rotary positions at its best lr,
mean (min-max) over seeds, its gap to GPT-2 (at GPT-2's best lr, same tokenizer, positions and budget), how far
below the bigram it is, the same model at 4x the tokens where recorded, and the command that reproduces the row.

    PYTHONPATH=src python benchmarks/lm/headline.py            # print the table
    PYTHONPATH=src python benchmarks/lm/headline.py --write    # and rewrite the <!-- lm:headline --> blocks of
                                                               # docs/guide/language.md and
                                                               # benchmarks/lm/README.md, the
                                                               # <!-- lm:along --> block of the latter, and
                                                               # draw quality_per_compute-headline.png

The rows are the seed summaries of the tags in ``TAGS``, read from results.json the way its ``sweep`` entry
declares (`aot.sweep`: the best lr is the seed-0 sweep winner; gaps to GPT-2 on the same footing); nothing here is
typed by hand, so a seed that lands changes the table the next time this runs.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from aot.runinfo import replace_marked_block
from aot.sweep import Reference, Summary, SweepSpec, read_store, store_spec
from aot.sweep.figures import draw_quality_per_compute
from aot.sweep.reference import gap, reference_summary
from aot.sweep.selection import mean_curve
from aot.sweep.training import build_run

HERE = Path(__file__).resolve().parent
GUIDE = HERE.parents[1] / "docs" / "guide" / "language.md"  # the language guide, whose headline is this table
#: tags whose rows make the headline (all with rotary positions, 1.02 M tokens); ``rope-4x`` fills the 4x column
TAGS = ("rope", "rope-wide", "tied-recipe")
LONGER = "rope-4x"
#: the headline rows retrained with the final val loss over every window of the split (the rows of ``TAGS`` score
#: a 128-window sample, recorded before full-split scoring was the default); fills the full-split column
FULL = "full-split"
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
#: run.py's --steps default (a row's command names --steps only when it differs)
DEFAULT_STEPS = 250
BLOCK = "lm:headline"
FULL_BLOCK = "lm:full-split"
ALONG_BLOCK = "lm:along"
FIGURE = "quality_per_compute-headline.png"


def lr_text(lr: float) -> str:
    """1e-3, 3e-3, 1e-2 as written on a command line."""
    return f"{lr:.0e}".replace("e-0", "e-")


def read_spec(store: dict) -> tuple[SweepSpec, Reference]:
    """How results.json is read (its ``sweep`` entry, written by run.py) and its GPT-2 reference."""
    spec = store_spec(store)
    assert spec.reference is not None, "benchmarks/lm/results.json declares no reference"
    return spec, spec.reference


def steps_of(tokens: int, preset: str) -> int:
    """The optimizer steps of a run of ``tokens`` training tokens at ``preset`` (batch x context)."""
    run = build_run("lm", preset)
    return tokens // (run.train.batch_size * run.model_config().block_size)


def command(s: Summary, preset: str) -> str:
    """The run.py command that trains (or, when done, skips) every run behind summary row ``s``."""
    c = s.config
    parts = [
        "python benchmarks/lm/run.py",
        f"--tag {c['tag']}",
        f"--tokenizers {c['tokenizer']}",
        f"--models {c['model']}",
    ]
    if c["position"]:
        parts.append(f"--positions {c['position']}")
    parts.append("--lrs " + " ".join(lr_text(lr) for lr in s.lrs_tried))
    parts.append("--seeds " + " ".join(str(seed) for seed in s.seeds))
    steps = steps_of(s.get("tokens"), preset)
    if steps != DEFAULT_STEPS:
        parts.append(f"--steps {steps}")
    parts += [f"--set {o}" for o in c["extra"]]
    return " ".join(parts)


#: the overrides the layers × width column shows
SHAPE = ("model.n_layer=", "model.n_embd=", "model.n_head=", "model.head_dim=")


def recipe_text(s: Summary) -> str:
    """A row's overrides other than its shape: the recipe (the init, shared with its GPT-2) and block options of
    its own (a token shift)."""
    return " ".join(o for o in s.get("extra") if not o.startswith(SHAPE))


def shape(s: Summary) -> tuple[int, int]:
    """(layers, width) of a summary row's model, as its runs recorded them."""
    return s.get("n_layer"), s.get("n_embd")


def reference_gap(summary: list[Summary], s: Summary | None, reference: Reference) -> float | None:
    """``s``'s mean val loss relative to its GPT-2's (None for GPT-2 itself, or without a GPT-2)."""
    if s is None or s.get(reference.field) == reference.value:
        return None
    ref = reference_summary(summary, s, reference)
    return None if ref is None else gap(s.mean, ref.mean)


def config_key(s: Summary) -> tuple[str, str, tuple[str, ...]]:
    """What a headline row and its retrainings in other tags share: tokenizer, model and overrides."""
    return s.get("tokenizer"), s.get("model"), tuple(s.get("extra"))


def in_tag(summary: list[Summary], tag: str) -> dict[tuple[str, str, tuple[str, ...]], Summary]:
    """The summary rows of ``tag``, by :func:`config_key`."""
    return {config_key(s): s for s in summary if s.get("tag") == tag}


def headline_rows(store: dict) -> list[dict]:
    """One dict per headline row, in table order: the summary row and what the table shows of it."""
    spec, reference = read_spec(store)
    summary = spec.summaries(store["runs"])
    longer, full = in_tag(summary, LONGER), in_tag(summary, FULL)
    rows = []
    for s in summary:
        if s.get("tag") not in TAGS or s.get("position") != "rope":
            continue
        layers, width = shape(s)
        head_dim = [o.split("=", 1)[1] for o in s.get("extra") if o.startswith("model.head_dim=")]
        more, rescored = longer.get(config_key(s)), full.get(config_key(s))
        if rescored is not None and rescored.lr != s.lr:
            rescored = None  # retrained at another lr: not this row re-scored
        rows.append(
            {
                "summary": s,
                "name": NAMES.get(s.get("model"), s.get("model")),
                "width": width,
                "shape": f"{layers} × {width}" + "".join(f" (p = {p})" for p in head_dim),
                "recipe": recipe_text(s),
                "gap": reference_gap(summary, s, reference),
                "longer": more,
                "longer_gap": reference_gap(summary, more, reference),
                "full": rescored,
                "full_gap": reference_gap(summary, rescored, reference),
                "command": command(s, spec.preset),
            }
        )
    order = list(NAMES)
    rows.sort(
        key=lambda r: (
            r["summary"].get("tokenizer") != "bytes",
            r["summary"].get("tokenizer"),
            order.index(r["summary"].get("model")) if r["summary"].get("model") in order else len(order),
            r["width"],
            r["recipe"],
        )
    )
    return rows


def spread(s: Summary) -> str:
    if len(s.seeds) == 1:
        return f"{s.mean:.3f} (1 seed)"
    return f"{s.mean:.3f} ({s.min:.3f}-{s.max:.3f}, {len(s.seeds)} seeds)"


def full_split_cell(s: Summary | None, gap_to_gpt2: float | None) -> str:
    """A row re-scored over the whole val split: one seed with its standard error over windows, more as a spread
    over seeds; then its gap to GPT-2 re-scored the same way."""
    if s is None:
        return "—"
    se = s.rows[0].get("val_loss_se")
    cell = f"{s.mean:.3f} ± {se:.3f} (1 seed)" if len(s.seeds) == 1 and se is not None else spread(s)
    return cell + ("" if gap_to_gpt2 is None else f", {100 * gap_to_gpt2:+.1f} %")


def markdown(store: dict, commands: bool = True) -> str:
    """The headline table (``commands``: with the command of each row, for benchmarks/lm/README.md)."""
    head = "| tokenizer | model | layers × width | recipe | lrs tried: best | val loss, 1 M tokens | gap to GPT-2 | "
    head += "below bigram by | 4 M tokens (gap) | full val split (gap) |"
    lines = [head + (" command |" if commands else ""), "|---" * (10 + commands) + "|"]
    for r in headline_rows(store):
        s = r["summary"]
        gap_cell = "—" if r["gap"] is None else f"{100 * r['gap']:+.1f} %"
        longer = "—"
        if r["longer"] is not None:
            longer = spread(r["longer"])
            if r["longer_gap"] is not None:
                longer += f", {100 * r['longer_gap']:+.1f} %"
        lrs = " / ".join(lr_text(lr) for lr in s.lrs_tried) + f": {lr_text(s.lr)}"
        cells = [
            s.get("tokenizer"),
            r["name"],
            r["shape"],
            r["recipe"] or "—",
            lrs,
            spread(s),
            gap_cell,
            f"{s.get('bigram_val_loss') - s.mean:+.3f}",
            longer,
            full_split_cell(r["full"], r["full_gap"]),
        ]
        if commands:
            cells.append(f"`{r['command']}`")
        lines.append("| " + " | ".join(cells) + " |")
    return "\n".join(lines)


def full_split_markdown(store: dict) -> str:
    """Tag ``FULL`` on its own: every model retrained there (the headline rows, and variants with no headline row
    such as issue 29's token shift), its non-embedding parameters, val loss over the whole split and gap to GPT-2
    retrained the same way."""
    spec, reference = read_spec(store)
    summary = spec.summaries(store["runs"])
    head = "| tokenizer | model | layers × width | recipe | non-emb. params | lr | val loss, full split | "
    head += "gap to GPT-2 |"
    lines = [head, "|---" * 8 + "|"]
    order = list(NAMES)
    rows = [s for s in summary if s.get("tag") == FULL]
    rows.sort(key=lambda s: (s.get("tokenizer") != "bytes", s.get("tokenizer"), order.index(s.get("model")),
                             shape(s), s.get("extra")))  # fmt: skip
    for s in rows:
        layers, width = shape(s)
        cells = [
            s.get("tokenizer"),
            NAMES.get(s.get("model"), s.get("model")),
            f"{layers} × {width}",
            recipe_text(s) or "—",
            "—" if s.get("non_embedding_params") is None else f"{s.get('non_embedding_params') / 1e6:.3f} M",
            lr_text(s.lr),
            full_split_cell(s, None),
            "—" if (g := reference_gap(summary, s, reference)) is None else f"{100 * g:+.1f} %",
        ]
        lines.append("| " + " | ".join(cells) + " |")
    return "\n".join(lines)


def along_rows(store: dict) -> list[dict]:
    """The gap to GPT-2 along the longer runs (tag ``LONGER``): for each contender, its mean periodic val loss
    over seeds against that of its GPT-2 (same tokenizer, positions, budget and recipe:
    :func:`aot.sweep.reference.reference_summary`) at every token count both evaluated."""
    spec, reference = read_spec(store)
    summary = [s for s in spec.summaries(store["runs"]) if s.get("tag") == LONGER]
    rows = []
    for s in summary:
        runs = [r for r in s.rows if r.get("evals")]
        if s.get(reference.field) == reference.value or not runs:
            continue
        ref = reference_summary(summary, s, reference)
        ref_runs = [] if ref is None else [r for r in ref.rows if r.get("evals")]
        if not ref_runs:
            continue
        tokens, val = mean_curve(runs)
        ref_at = dict(zip(*mean_curve(ref_runs), strict=True))
        layers, width = shape(s)
        rows.append(
            {
                "summary": s,
                "shape": f"{layers} × {width}",
                "recipe": recipe_text(s) or "—",
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
        cells = [s.get("tokenizer"), NAMES.get(s.get("model"), s.get("model")), r["shape"], r["recipe"]]
        cells += [f"{100 * r['gaps'][t]:+.1f} %" if t in r["gaps"] else "—" for t in points]
        lines.append("| " + " | ".join(cells) + " |")
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument(
        "--write", action="store_true", help="rewrite the lm:headline blocks of the guide and the README"
    )
    args = parser.parse_args(argv)
    store = read_store(HERE / "results.json")
    print(markdown(store))
    if args.write:
        for path, commands in ((GUIDE, False), (HERE / "README.md", True)):
            text = path.read_text()
            text = replace_marked_block(text, BLOCK, markdown(store, commands), path.name)
            if commands:
                text = replace_marked_block(text, ALONG_BLOCK, along_markdown(store), path.name)
                text = replace_marked_block(text, FULL_BLOCK, full_split_markdown(store), path.name)
            path.write_text(text)
            print(f"wrote the {BLOCK} block of {path}")
        summaries = [s for s in store_spec(store).summaries(store["runs"]) if s.get("tag") in TAGS]
        figure = draw_quality_per_compute(
            summaries,
            HERE / FIGURE,
            f"Quality per compute, tags {', '.join(TAGS)}",
            "val loss (nats / token, 16 windows)",
            solid={"tokenizer": "bytes"},
        )
        print(f"wrote {figure}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
