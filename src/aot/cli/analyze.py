"""`aot analyze`: look inside a trained model — layer-by-layer denoising (energy shares, subspace SNR, coding
rates), circuits (QK/OV spectra, composition, previous-token and induction heads) and subspace geometry."""

from __future__ import annotations

import argparse
import json
import textwrap
from dataclasses import asdict
from pathlib import Path

import torch

from aot.analysis.config import AnalyzeConfig
from aot.cli.options import add_config_number, add_experiment_args, add_set_option
from aot.devices import resolve_device
from aot.errors import AotError
from aot.layering import layered
from aot.run_folder import check_output_dir, folder_lock
from aot.runinfo import machine_info

DEFAULT_OUT = "RUN_DIR/analysis"

EPILOG = """\
examples:
  aot analyze runs/lm                        # the val split, 8 batches x 8 windows of 128 tokens
  aot analyze runs/lm --data test --batches 16 --out runs/lm-inside
  aot analyze runs/lm --data notes.txt       # any text file, encoded with the run's tokenizer
  aot analyze runs/vision                    # an `aot train vision` run: adds class-token entropy
  aot analyze runs/recall --data test        # an `aot train recall` run on its MQAR test set: adds recall.png
  aot analyze --calibrate --out runs/calib   # Definition 1 data through the true unrolled denoiser
  aot analyze runs/lm --config configs/analyze.yaml --set analyze.induction_length=64

outputs (in --out, default RUN_DIR/analysis): results.json with, per layer, the heads' energy
shares, the subspace SNR of the tokens the layer reads and of its output (bands over batches and
tokens), their ratio (Theorem 1's factor), the coding rate R and compression term R_c; composition
scores, QK/OV singular values, previous-token and induction scores per head; principal-angle
overlaps and the orthogonality gap. Figures: denoising.png, circuits.png, spectra.png,
geometry.png. A recall run (`aot train recall`) is read on its held-out MQAR sequences (--data val
or test) and adds a recall section and recall.png: per head, the weight each query puts on its
matching key, on the value after it, on itself, and the previous-token weight. With --calibrate:
calibration.json and calibration.png (Theorem 1's thresholded operator and plain softmax).
Definitions: docs/math.md, sections "Inside trained models" and "What MSSA can and cannot express
for recall".
"""


def register(subparsers: argparse._SubParsersAction) -> None:
    parser = subparsers.add_parser(
        "analyze",
        help="look inside a trained model: per-layer denoising, circuits, induction heads, subspace geometry",
        description=textwrap.fill(
            "Read a run folder written by `aot train lm`, `aot train vision` or `aot train recall` (its checkpoint/ "
            "and results.json) through the model's hook points and measure whether its layers denoise as Theorem 1 "
            "says (energy in the heads' subspaces, subspace SNR per layer, coding rates), its circuits and the "
            "geometry of its heads' subspaces; for a recall run, also where its heads attend on MQAR.",
            width=100,
        ),
        epilog=EPILOG,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    parser.add_argument(
        "run_dir",
        nargs="?",
        metavar="RUN_DIR",
        help="a run folder written by `aot train lm`, `aot train vision` or `aot train recall`",
    )
    parser.add_argument(
        "--data",
        help="val (default), test, train, or a text file to encode with the run's tokenizer (a recall run: val, test)",
    )
    for flag, name, text in (
        ("--batches", "batches", "number of batches"),
        ("--batch-size", "batch_size", "windows per batch"),
        ("--seq-len", "seq_len", "tokens per window, at most the model's block size (the default is cut to it)"),
        ("--eps", "eps", "precision ε of the coding rates"),
    ):
        add_config_number(parser, flag, AnalyzeConfig, name, text)
    parser.add_argument("--calibrate", action="store_true", help="run on Definition 1 data instead of RUN_DIR")
    add_experiment_args(parser, default_out=DEFAULT_OUT)
    add_set_option(parser)
    parser.set_defaults(func=run)


def settings_from_args(args: argparse.Namespace) -> AnalyzeConfig:
    """The defaults < the config file's ``analyze:`` section < the flags < ``--set``."""
    names = ("data", "batches", "batch_size", "seq_len", "eps")
    flags = {name: getattr(args, name) for name in names if getattr(args, name) is not None}
    cfg: AnalyzeConfig = layered({"analyze": AnalyzeConfig}, {}, args.config, {"analyze": flags}, args.set)["analyze"]
    return cfg


def run(args: argparse.Namespace) -> int:
    cfg = settings_from_args(args)
    if args.calibrate:
        from aot.analysis.calibration import calibrate
        from aot.analysis.figures import plot_calibration

        out = check_output_dir("runs/analysis-calibration" if args.out == DEFAULT_OUT else args.out)
        result = {
            "machine": machine_info(),
            # Theorem 1's operator (φ = h∘softmax patched into the pattern hook) inside its conditions ...
            "threshold": calibrate(
                tokens_per_cluster=256, delta=0.2, eta=0.055, n_layers=13, batches=2, phi="threshold", tau=0.8,
                eps=cfg.eps, seed=args.seed,
            ),
            # ... and the plain softmax of the trained models (no threshold: the SNR rises, then falls)
            "softmax": calibrate(eps=cfg.eps, seed=args.seed),
        }  # fmt: skip
        out.mkdir(parents=True, exist_ok=True)
        (out / "calibration.json").write_text(json.dumps(result, indent=1) + "\n")
        plot_calibration(result, out / "calibration.png")
        for phi in ("threshold", "softmax"):
            run = result[phi]
            gains = [row["gain"]["mean"] for row in run["profile"]["layers"]]
            print(
                f"calibration ({phi}): analysis SNR = aot.theory SNR to {run['max_relative_difference']:.1e}; "
                f"gains {min(gains):.3f}-{max(gains):.3f} (1 + ητ = {run['setting']['predicted_factor']:.3f})"
            )
        print(f"Wrote {out / 'calibration.json'}")
        return 0
    if not args.run_dir:
        raise AotError(
            "give a RUN_DIR (a run folder written by `aot train lm`, `aot train vision` or `aot train recall`) or "
            "--calibrate"
        )
    from aot.analysis.analyze import analyze_run

    out = check_output_dir(Path(args.run_dir) / "analysis" if args.out == DEFAULT_OUT else args.out)  # before work
    torch.manual_seed(args.seed)
    options = asdict(cfg)
    data = options.pop("data")
    with folder_lock(out):  # one writer per output folder: a second `aot analyze` into it refuses in one line
        results = analyze_run(
            args.run_dir, out, data=data, seed=args.seed, device=resolve_device(args.device), **options
        )
    layers = results["denoising"]["layers"]
    gains = [row["gain"]["mean"] for row in layers]
    circuits = results["circuits"]
    if "induction" in circuits:
        induction = torch.tensor(circuits["induction"])
        layer, head = divmod(int(induction.argmax()), induction.shape[1])
        heads = f"top induction head {layer}.{head} ({float(induction.max()):.2f})"
        if results.get("recall", {}).get("value") is not None:
            value = torch.tensor(results["recall"]["value"])
            layer, head = divmod(int(value.argmax()), value.shape[1])
            heads += f"; top value-position head {layer}.{head} ({float(value.max()):.2f}) on MQAR"
    else:
        entropy = torch.tensor(circuits["cls_attention_entropy"]).mean(dim=1)
        heads = f"class-token attention entropy {float(entropy[0]):.2f} -> {float(entropy[-1]):.2f} nats"
    if "snr_undefined" in results["denoising"]:
        snr = "subspace SNR undefined (one head spanning the whole width: head_dim = n_embd)"
    else:
        snr = f"input SNR {layers[0]['snr_in']['mean']:.3f} -> {layers[-1]['snr_in']['mean']:.3f} (layer "
        snr += f"{len(layers) - 1}); layers with gain > 1: {sum(g > 1 for g in gains)}/{len(gains)}"
    print(f"{results['model']['block']} L={len(layers)}: {snr}; {heads}. Wrote {out / 'results.json'}")
    return 0
