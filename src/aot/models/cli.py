"""`aot models`: list the presets with their exact parameter counts, or show one preset's config."""

from __future__ import annotations

import argparse
import json
from typing import Any

import torch

from aot.errors import AotError
from aot.models.factory import build_model
from aot.models.presets import PRESETS, get_preset


def register(subparsers: argparse._SubParsersAction) -> None:
    parser = subparsers.add_parser(
        "models",
        help="list model presets with parameter counts",
        description="List every named preset with its block, depth, width, heads and exact parameter count "
        "(non-embedding too), beside the count the paper reports. Give a NAME to print its config.",
    )
    parser.add_argument("name", nargs="?", help="a preset name: print its full config as JSON")
    parser.add_argument("--task", choices=["lm", "image", "icl"], help="only presets of this task")
    parser.add_argument("--json", action="store_true", help="machine-readable output")
    parser.set_defaults(func=run)


def preset_rows(task: str | None = None) -> list[dict[str, Any]]:
    """One row per preset; models are built on the meta device, so even 182M costs nothing."""
    rows = []
    for name, preset in PRESETS.items():
        cfg = preset.config()
        if task and cfg.task != task:
            continue
        params: int | None = None
        non_embedding: int | None = None
        try:
            with torch.device("meta"):
                model = build_model(cfg)
            params, non_embedding = model.num_params(), model.num_params(non_embedding=True)
        except AotError:  # an optional block whose package is not installed (mamba without mambapy): no counts
            pass
        rows.append(
            dict(
                name=name,
                task=cfg.task,
                block=cfg.block,
                n_layer=cfg.n_layer,
                n_embd=cfg.n_embd,
                n_head=cfg.n_head,
                tied_output=cfg.tied_output if "mssa" in cfg.block else None,
                params=params,
                non_embedding=non_embedding,
                paper_params=preset.paper_params,
                note=preset.note,
            )
        )
    return rows


def run(args: argparse.Namespace) -> int:
    if args.name:
        print(json.dumps(get_preset(args.name).config().to_dict(), indent=2))
        return 0
    rows = preset_rows(args.task)
    if args.json:
        print(json.dumps(rows, indent=2))
        return 0
    print(markdown_table(rows))
    return 0


def markdown_table(rows: list[dict[str, Any]]) -> str:
    lines = [
        "| preset | task | block | layers | width | heads | params | non-emb. | paper | why this size |",
        "|---|---|---|---|---|---|---|---|---|---|",
    ]
    for r in rows:
        block = str(r["block"]) + (" (tied)" if r["tied_output"] else "")
        if r["params"] is None:
            lines.append(
                f"| {r['name']} | {r['task']} | {block} | {r['n_layer']} | {r['n_embd']} | {r['n_head']} | "
                f"needs aot[mamba] | — | {r['paper_params'] or '—'} | {r['note']} |"
            )
            continue
        lines.append(
            f"| {r['name']} | {r['task']} | {block} | {r['n_layer']} | {r['n_embd']} | {r['n_head']} | "
            f"{r['params'] / 1e6:.2f}M | {r['non_embedding'] / 1e6:.2f}M | {r['paper_params'] or '—'} | {r['note']} |"
        )
    return "\n".join(lines)
