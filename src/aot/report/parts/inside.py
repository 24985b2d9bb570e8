"""Part ``inside``: ``aot analyze`` on the lm part's trained GPT-2, AoT-MHSA and AoT-MSSA models (and the vision
part's AoT-MSSA-V model when that part finished): per-layer subspace SNR and its gain (Theorem 1's factor, measured
in trained models), previous-token and induction scores per head; and ``aot analyze --calibrate``, the same
measurement on Definition 1 data through the true unrolled denoiser, against 1 + ητ.

The paper proves the denoising rate and shows it on synthetic data only; this part measures it in trained models
(what its reviewers asked for). It reads the lm (and vision) parts' run folders: the hashes of their
``results.json`` are in this part's plan files, so its key changes when their runs do.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from aot.report.document import Block, Table
from aot.report.paper_numbers import THEOREM1_LAYERS
from aot.report.part import (
    Context,
    Part,
    Plan,
    Step,
    differences_blocks,
    existing_figures,
    figure_blocks,
    read_step_results,
    upstream,
)
from aot.report.parts.zeroshot import lm_run_folders

LM_MODELS = ("GPT-2 Base", "AoT-MHSA-L Base", "AoT-MSSA-L Base")  # Medium adds nothing here
VISION_MODEL = ("AoT-MSSA-V", "aot-mssa-v")  # (name, the vision part's step)
OPTIONS: dict[str, list[str]] = {
    "tiny": ["--batches", "2", "--batch-size", "2"],
    "quick": ["--batches", "4"],
    "full": [],
    "paper": ["--device", "auto"],
}
LM_OPTIONS = {"tiny": ["--seq-len", "16"]}


def _slug(name: str) -> str:
    return name.lower().replace(" ", "-")


def plan(ctx: Context) -> Plan:
    lm_part, vision_part = upstream(ctx, "lm"), upstream(ctx, "vision")
    usable = lm_part.usable(ctx.preset)
    needs = [] if usable else [lm_part.problem("inside", ctx.preset)]
    folders = lm_run_folders(ctx, lm_part.results if usable else None)
    options = OPTIONS[ctx.preset]
    steps = [
        Step(_slug(name), ["analyze", str(folder), *options, *LM_OPTIONS.get(ctx.preset, [])])
        for name, folder in folders.items()
        if name in LM_MODELS
    ]
    names = {step.name: name for step, name in zip(steps, [n for n in folders if n in LM_MODELS])}
    vision_run = ctx.part_dir.parent / "vision" / VISION_MODEL[1]
    vision_runs = vision_part.results["runs"] if vision_part.results and vision_part.usable(ctx.preset) else []
    if any(r["step"] == VISION_MODEL[1] for r in vision_runs):
        steps.append(Step("vision-" + VISION_MODEL[1], ["analyze", str(vision_run), *options]))
        names[steps[-1].name] = VISION_MODEL[0]
    steps.append(Step("calibration", ["analyze", "--calibrate"], results="calibration.json"))
    files = {"upstream.json": json.dumps({"lm": lm_part.fingerprint, "vision": vision_part.fingerprint}) + "\n"}
    return Plan(steps, {"models": names}, files, needs=needs)


def _top(scores: list[list[float]]) -> dict[str, Any]:
    """The highest score of a (layer, head) table and where it is."""
    layer, head = max(
        ((i, j) for i, row in enumerate(scores) for j in range(len(row))), key=lambda ij: scores[ij[0]][ij[1]]
    )
    return {"layer": layer, "head": head, "score": scores[layer][head]}


def summarize_model(results: dict[str, Any]) -> dict[str, Any]:
    """What the report shows of one `aot analyze` results.json."""
    layers = results["denoising"]["layers"]
    circuits = results["circuits"]
    row: dict[str, Any] = {
        "block": results["model"]["block"],
        "n_layer": results["model"]["n_layer"],
        "n_embd": results["model"]["n_embd"],
        "snr_in": [layer["snr_in"]["mean"] for layer in layers],
        "snr_in_random": [layer["snr_in_random_subspaces"]["mean"] for layer in layers],
        "gain": [layer["gain"]["mean"] for layer in layers],
    }
    row["layers_gain_above_1"] = sum(g > 1 for g in row["gain"])
    row["mean_gain"] = sum(row["gain"]) / len(row["gain"])
    if "induction" in circuits:
        row["previous_token"] = _top(circuits["previous_token"])
        row["induction"] = _top(circuits["induction"])
    if "cls_attention_entropy" in circuits:
        per_layer = [sum(h) / len(h) for h in circuits["cls_attention_entropy"]]
        row["cls_entropy_first_last"] = [per_layer[0], per_layer[-1]]
    return row


def collect(part_dir: Path, plan: Plan) -> dict[str, Any]:
    models = []
    for step, name in plan.settings["models"].items():
        models.append({"name": name, "step": step, **summarize_model(read_step_results(part_dir, plan, step))})
    calib = read_step_results(part_dir, plan, "calibration")
    calibration = {}
    for phi in ("threshold", "softmax"):
        run = calib[phi]
        gains = [layer["gain"]["mean"] for layer in run["profile"]["layers"]]
        calibration[phi] = {
            "setting": run["setting"],
            "gain_min": min(gains),
            "gain_max": max(gains),
            "gain_mean": sum(gains) / len(gains),
            "max_relative_difference": run["max_relative_difference"],
            "gains": gains,
        }
    results: dict[str, Any] = {"models": models, "calibration": calibration}
    plot_layers(results, part_dir / "snr_per_layer.png")
    mssa = next((m["step"] for m in models if m["name"] == "AoT-MSSA-L Base"), None)
    figures = {"snr_per_layer.png": "Subspace SNR of each layer's input and its gain per layer, every model; "
               "calibration: Definition 1 data through the true denoiser"}  # fmt: skip
    candidates = {"calibration/calibration.png": "aot analyze --calibrate: the analysis against aot.theory"}
    if mssa:
        candidates[f"{mssa}/denoising.png"] = "AoT-MSSA-L Base: energy shares, SNR and coding rates per layer"
        candidates[f"{mssa}/circuits.png"] = "AoT-MSSA-L Base: previous-token and induction scores per head"
    figures.update(existing_figures(part_dir, candidates))
    results["figures"] = figures
    return results


def plot_layers(results: dict[str, Any], path: Path) -> Path:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    from matplotlib.ticker import MaxNLocator

    fig, (left, right) = plt.subplots(1, 2, figsize=(9, 3.8))
    for m in results["models"]:
        (line,) = left.plot(range(len(m["snr_in"])), m["snr_in"], marker="o", ms=3, label=m["name"])
        right.plot(range(len(m["gain"])), m["gain"], marker="o", ms=3, color=line.get_color(), label=m["name"])
    threshold = results["calibration"]["threshold"]
    right.plot(range(len(threshold["gains"])), threshold["gains"], "k--", lw=1, label="calibration (true denoiser)")
    right.axhline(threshold["setting"]["predicted_factor"], color="grey", ls=":", lw=1, label="1 + ητ (calibration)")
    right.axhline(1.0, color="grey", lw=0.5)
    left.set_xlabel("layer")
    left.set_ylabel("subspace SNR of the layer input")
    right.set_xlabel("layer")
    right.set_ylabel("gain SNR(out) / SNR(in)")
    for ax in (left, right):
        ax.grid(alpha=0.3)
        ax.xaxis.set_major_locator(MaxNLocator(integer=True))
    right.legend(fontsize=7)
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)
    return path


def _head(top: dict[str, Any] | None) -> str:
    return "—" if top is None else f"L{top['layer']} H{top['head']}"


def render(results: dict[str, Any], part_dir: Path) -> list[Block]:
    rows = []
    for m in results["models"]:
        prev, ind = m.get("previous_token"), m.get("induction")
        rows.append(
            [
                m["name"],
                f"{m['block']} {m['n_layer']} × {m['n_embd']}",
                f"{m['snr_in'][0]:.3f} → {m['snr_in'][-1]:.3f}",
                f"{m['mean_gain']:.3f}",
                f"{m['layers_gain_above_1']}",
                "—" if prev is None else f"{prev['score']:.3f}",
                _head(prev),
                "—" if ind is None else f"{ind['score']:.3f}",
                _head(ind),
            ]
        )
    table = Table(
        "Inside the trained models: subspace SNR of the first and last layers' inputs (each head's own subspace), "
        "the mean gain per layer (Theorem 1's factor, measured), and the strongest previous-token and induction heads",
        ["model", "ours", "SNR first → last layer", "mean gain per layer", "layers with gain > 1",
         "previous-token score", "previous-token head", "induction score", "induction head"],
        rows,
    )  # fmt: skip
    cal = results["calibration"]
    calibration = Table(
        "aot analyze --calibrate: Definition 1 data through the unrolled denoiser with the true bases",
        ["φ", "layers", "1 + ητ (Theorem 1)", "gain per layer min → max", "mean gain", "analysis vs aot.theory"],
        [
            [
                phi,
                str(c["setting"]["layers"]),
                f"{c['setting']['predicted_factor']:.3f}",
                f"{c['gain_min']:.3f} → {c['gain_max']:.3f}",
                f"{c['gain_mean']:.3f}",
                f"{c['max_relative_difference']:.1e}",
            ]
            for phi, c in cal.items()
        ],
    )
    differences = [
        "The paper proves the rate (Theorem 1) and shows it on synthetic data with the true subspaces "
        f"({THEOREM1_LAYERS} layers, the theory part); it measures nothing inside trained models. Here the SNR is "
        "measured in trained models against each head's own learned subspace, so it tests whether training finds "
        "the denoising the theorem describes; the calibration checks the measurement on the theorem's own setting.",
        "The models are the lm part's (small, briefly trained, one seed): read the gains and head scores as a "
        "snapshot early in training, not as the paper's 100M-parameter models.",
    ]
    return [
        table,
        calibration,
        *figure_blocks(results, part_dir),
        *differences_blocks(differences),
    ]


PART = Part(
    name="inside",
    title="Inside trained models: denoising per layer and induction heads",
    paper_items=("denoising-trained",),
    plan=plan,
    collect=collect,
    render=render,
)
