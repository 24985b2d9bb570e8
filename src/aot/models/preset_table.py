"""The preset table: one row per model preset with its exact parameter counts (what `aot models` prints, and what
the table in docs/presets.md is rendered from)."""

from __future__ import annotations

from typing import Any

import torch

from aot.blockspec import output_tying
from aot.errors import AotError
from aot.models.factory import build_model
from aot.models.presets import PRESETS


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
                tied_output=output_tying(cfg),
                params=params,
                non_embedding=non_embedding,
                paper_params=preset.paper_params,
                note=preset.note,
            )
        )
    return rows


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
