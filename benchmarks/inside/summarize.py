"""Summarise the recorded `aot analyze` results under benchmarks/inside/ into table.md and summary.json.

    PYTHONPATH=src python benchmarks/inside/summarize.py [MODEL_DIR ...]

Each MODEL_DIR (default: every folder here with a results.json) holds the output of `aot analyze`.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Any

import numpy as np

HERE = Path(__file__).resolve().parent


def summarize(folder: Path) -> dict[str, Any]:
    results = json.loads((folder / "results.json").read_text())
    layers = results["denoising"]["layers"]
    circuits = results["circuits"]
    vision = "cls_attention_entropy" in circuits  # image models: class-token attention instead of token circuits
    previous = None if vision else np.array(circuits["previous_token"])
    induction = None if vision else np.array(circuits["induction"])
    geometry = results["geometry"]
    training = results.get("training", {})
    val = (training.get("val") or {}).get("nats_per_byte")
    top = lambda scores: [*divmod(int(scores.argmax()), scores.shape[1]), float(scores.max())]  # noqa: E731
    return {
        "name": folder.name,
        "model": results["model"],
        "run": results["run"],
        "vision": vision,
        "val_nats_per_byte": val,
        "val_top1": (training.get("val") or {}).get("top1"),
        "val_bigram_nats_per_byte": training.get("val_bigram_nats_per_byte"),
        "training_steps": training.get("steps"),
        "training_tokens": training.get("tokens"),
        "snr_in": [row["snr_in"]["mean"] for row in layers],
        "snr_random": [row["snr_in_random_subspaces"]["mean"] for row in layers],
        "gain": [row["gain"]["mean"] for row in layers],
        "layers_with_gain_above_1": sum(row["gain"]["mean"] > 1 for row in layers),
        "R_in": [row["R_in"]["mean"] for row in layers],
        "Rc_in": [row["Rc_in"]["mean"] for row in layers],
        "copying_per_layer": np.mean(results["circuits"]["copying"], axis=1).tolist()
        if results["circuits"].get("copying")
        else None,
        "top_previous_token_head": None if previous is None else top(previous),
        "top_induction_head": None if induction is None else top(induction),
        "cls_attention_entropy_per_layer": np.mean(circuits["cls_attention_entropy"], axis=1).tolist()
        if vision
        else None,
        "uniform_entropy": circuits.get("uniform_entropy"),
        "mean_orthogonality_gap": float(np.mean([row["orthogonality_gap"] for row in geometry["layers"]])),
        "random_overlap": geometry["random_overlap"],
        "mean_overlap": float(np.mean([row["mean_overlap"] for row in geometry["layers"]])),
        "date": results["machine"]["date"],
        "processor": results["machine"]["processor"],
    }


def fmt(values: list[float]) -> str:
    return " ".join(f"{v:.2f}" for v in values)


def table(rows: list[dict[str, Any]]) -> str:
    lines = [
        "| model | layers × d | steps | val nats/byte (bigram) | layers with gain > 1 | top prev-token head (score) | "
        "top induction head (score) | mean overlap of heads (random p/d) | orthogonality gap |",
        "|---|---|---|---|---|---|---|---|---|",
    ]
    for r in rows:
        m = r["model"]
        val = "–"
        if r["val_nats_per_byte"] is not None:
            val = f"{r['val_nats_per_byte']:.3f} ({r['val_bigram_nats_per_byte']:.3f})"
        elif r.get("val_top1") is not None:
            val = f"val top-1 {100 * r['val_top1']:.1f} %"
        head = lambda h: "– (image model)" if h is None else f"{h[0]}.{h[1]} ({h[2]:.2f})"  # noqa: E731
        lines.append(
            f"| {r['name']} ({m['block']}) | {m['n_layer']} × {m['n_embd']} | {r['training_steps']} | {val} | "
            f"{r['layers_with_gain_above_1']}/{m['n_layer']} | {head(r['top_previous_token_head'])} | "
            f"{head(r['top_induction_head'])} | {r['mean_overlap']:.3f} ({r['random_overlap']:.3f}) | "
            f"{r['mean_orthogonality_gap']:.3f} |"
        )
    lines += ["", "Per layer (layer 0 first):", ""]
    lines += ["| model | quantity | per layer |", "|---|---|---|"]
    for r in rows:
        lines.append(f"| {r['name']} | subspace SNR of the layer input | {fmt(r['snr_in'])} |")
        lines.append(f"| {r['name']} | same tokens, random subspaces | {fmt(r['snr_random'])} |")
        lines.append(f"| {r['name']} | gain SNR(out)/SNR(in) | {fmt(r['gain'])} |")
        lines.append(f"| {r['name']} | R(Z) / R_c(Z\\|U) of the input | {fmt(r['R_in'])} / {fmt(r['Rc_in'])} |")
        if r.get("cls_attention_entropy_per_layer") is not None:
            lines.append(
                f"| {r['name']} | class-token attention entropy, head mean (uniform {r['uniform_entropy']:.2f}) | "
                f"{fmt(r['cls_attention_entropy_per_layer'])} |"
            )
        if r["copying_per_layer"] is not None:
            lines.append(f"| {r['name']} | OV copying score, mean over heads | {fmt(r['copying_per_layer'])} |")
    return "\n".join(lines) + "\n"


def main(argv: list[str]) -> int:
    folders = [Path(a) for a in argv] or sorted(p.parent for p in HERE.glob("*/results.json"))
    rows = [summarize(folder) for folder in folders]
    (HERE / "summary.json").write_text(json.dumps(rows, indent=1) + "\n")
    (HERE / "table.md").write_text(table(rows))
    print(table(rows))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
