"""`aot denoise`: Theorem 1 of the paper (docs/paper.md §3) measured — SNR per layer and cluster of the unrolled
MSSA denoiser with the true bases on Definition 1 data, against the predicted factor 1 + ητ; sweeps over
δ, τ, p, N, η and φ; and (``--learn``) the same network with per-layer bases learned by backprop."""

from __future__ import annotations

import argparse
import json
import shlex
import time
from typing import Any

import torch

from aot.cli.options import add_config_number, add_experiment_args, add_number, add_set_option
from aot.devices import resolve_device
from aot.models.budget import Need, check_fits, machine_memory
from aot.run_folder import check_output_dir
from aot.runinfo import machine_info
from aot.theory.config import DenoiseConfig, DenoiseSettings, load_settings
from aot.theory.tables import condition_status, main_runs, markdown, per_layer_rows, summary_rows
from aot.validation import integer

EPILOG = """\
examples:
  aot denoise                                  # main run + sweeps into runs/denoise (~1 min, 1 core)
  aot denoise --out benchmarks/denoise         # the recorded run
  aot denoise --deltas 0.2 0.5 --eta 0.1 --tau 0.6 --no-sweeps
  aot denoise --learn --out runs/denoise-learn # learn the bases by backprop, 5 seeds (212 s recorded)
  aot denoise --learn --seeds 1                # one seed
  aot denoise --config configs/denoise.yaml    # sections denoise:, sweep:, learn:
  aot denoise --learn --set learn.steps=200    # any field: defaults < --config < flags < --set

outputs (in --out): results.json (per δ, layer and cluster: SNR, measured factor, predicted 1+ητ, the
condition check), results.md (tables), snr_per_layer.png (the paper's figure), factors_per_layer.png,
sweep_heatmaps.png and phi_eta.png (where the rate holds and where it fails). With --learn:
learned/results.json (every seed, and mean ± std across seeds), learned/results.md and
learned/learned_bases.png (the first seed). Progress bars go to stderr.

what the conditions mean here: the paper's (p ≳ log N, δ ≲ √(log N/p), τ in (1/2, 1/(1+N e^(−9p/32))])
taken with constant 1, checked at the input; "through the layers" also asks δ(1+ητ)^(L−1) ≤ √(log N/p),
since the signal grows layer by layer. The recorded sweeps show the paper's conditions are neither necessary
(the rate holds well outside them) nor, with constant 1, sufficient; see benchmarks/denoise/results.md.
"""


#: the options that are not config fields, with their ranges
DENOISE_OPTIONS = {"--seeds": integer(1, 1000), "--threads": integer(1, 1024)}


def register(subparsers: argparse._SubParsersAction) -> None:
    parser = subparsers.add_parser(
        "denoise",
        help="Theorem 1: SNR per layer of the unrolled MSSA denoiser on Definition 1 data",
        description="Sample the mixture of noisy low-rank Gaussians of Definition 1 (docs/paper.md §1), unroll "
        "Z+ = Z + η Σ_k U_k U_kᵀ Z φ(Zᵀ U_k U_kᵀ Z) with the true bases and φ = h∘softmax (hard threshold τ), "
        "and measure the SNR of every cluster after every layer against Theorem 1's factor 1 + ητ "
        "(docs/paper.md §3). Defaults: d=128, p=32, K=4, N=1024, η=0.055, τ=0.8, 13 layers, δ in 0.1 0.2 0.3 0.5.",
        epilog=EPILOG,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    add_experiment_args(parser, default_out="runs/denoise")
    add_set_option(parser)
    group = parser.add_argument_group("main run (override the config's denoise: section)")
    add_config_number(
        group, "--deltas", DenoiseConfig, "deltas", "noise levels, one panel each", nargs="+", metavar="δ"
    )
    for flag, name, text in (
        ("--eta", "eta", "step size η"),
        ("--tau", "tau", "threshold τ of h"),
        ("--p", "p", "subspace dimension p"),
        ("--clusters", "n_clusters", "number of subspaces K"),
        ("--tokens-per-cluster", "tokens_per_cluster", "tokens per cluster, N = K × this"),
        ("--dim", "d", "ambient dimension d (default K·p)"),
        ("--layers", "n_layers", "number of layers L"),
    ):
        add_config_number(group, flag, DenoiseConfig, name, text)
    mode = parser.add_argument_group("modes")
    mode.add_argument("--no-sweeps", action="store_true", help="only the main run (seconds)")
    mode.add_argument("--learn", action="store_true", help="run only the learned-bases experiment")
    add_number(
        mode, "--seeds", DENOISE_OPTIONS["--seeds"],
        "--learn: train this many seeds (--seed, --seed+1, ...) and report mean ± std", default=5,
    )  # fmt: skip
    add_number(
        mode, "--threads", DENOISE_OPTIONS["--threads"],
        "torch CPU threads (1: the operations are small, extra threads only add overhead)", default=1,
    )  # fmt: skip
    parser.set_defaults(func=run)


def settings_from_args(args: argparse.Namespace) -> DenoiseSettings:
    """The defaults < --config < the main-run flags < --set (:func:`aot.theory.config.load_settings`)."""
    flags = {
        "deltas": args.deltas,
        "eta": args.eta,
        "tau": args.tau,
        "p": args.p,
        "n_clusters": args.clusters,
        "tokens_per_cluster": args.tokens_per_cluster,
        "d": args.dim,
        "n_layers": args.layers,
    }
    given = {name: value for name, value in flags.items() if value is not None}
    return load_settings(args.config, {"denoise": given}, args.set)


def command_line(args: argparse.Namespace) -> str:
    """The `aot denoise` command that reproduces this run (the options that were given)."""
    parts = ["aot denoise"]
    for name in ("config", "deltas", "eta", "tau", "p", "clusters", "tokens_per_cluster", "dim", "layers"):
        value = getattr(args, name, None)
        if value is not None:
            value = " ".join(f"{v:g}" for v in value) if isinstance(value, list) else value
            parts.append(f"--{name.replace('_', '-')} {value}")
    parts.extend(f"--set {shlex.quote(item)}" for item in args.set)
    if args.seed:
        parts.append(f"--seed {args.seed}")
    if args.no_sweeps:
        parts.append("--no-sweeps")
    if args.learn:
        parts.append("--learn")
        if args.seeds != 5:
            parts.append(f"--seeds {args.seeds}")
    if args.threads != 1:
        parts.append(f"--threads {args.threads}")
    parts.append(f"--out {args.out}")
    return " ".join(parts)


def check_memory(cfg: DenoiseConfig) -> None:
    """The main run must fit in memory before it starts (one line naming the sizes to lower): every layer's
    tokens Z (N × d, float64, all kept for the SNR per layer), one step's K attention matrices (N × N, with the
    softmax and the threshold) and the bases."""
    d, n = cfg.d or cfg.n_clusters * cfg.p, cfg.n_clusters * cfg.tokens_per_cluster
    parts = {
        "tokens of every layer": (cfg.n_layers + 1) * n * d * 8,
        "attention": 3 * cfg.n_clusters * n * n * 8,
        "bases": 3 * d * cfg.n_clusters * cfg.p * 8,
    }
    need = Need(parts, f"N = {n:,} tokens in d = {d:,}, {cfg.n_layers:,} layers")
    check_fits(need, machine_memory(), "--tokens-per-cluster / --clusters / --p / --dim / --layers")


def run(args: argparse.Namespace) -> int:
    for flag in DENOISE_OPTIONS:  # the parser checks these; a Python caller's namespace is checked here
        DENOISE_OPTIONS[flag].named(flag).check(getattr(args, flag[2:]))
    settings = settings_from_args(args)
    check_memory(settings.denoise)
    device = str(resolve_device(args.device))
    torch.set_num_threads(args.threads)
    out = check_output_dir(args.out)  # before any work
    if args.learn:
        from aot.theory.learned import run_learned_cli

        seeds = list(range(args.seed, args.seed + args.seeds))
        return run_learned_cli(settings.learn, out / "learned", seeds, device, command_line(args))
    out.mkdir(parents=True, exist_ok=True)
    start = time.time()
    cfg = settings.denoise
    thresholded, softmax = main_runs(cfg, args.seed, device)
    first = thresholded[0]
    results: dict[str, Any] = {
        "command": command_line(args),
        "machine": machine_info(),
        "settings": settings.to_dict(),
        "main": {
            "params": {
                "d": first.d,
                "p": cfg.p,
                "K": cfg.n_clusters,
                "N": first.n_tokens,
                "tokens_per_cluster": cfg.tokens_per_cluster,
                "eta": cfg.eta,
                "tau": cfg.tau,
                "n_layers": cfg.n_layers,
                "seed": args.seed,
                "tolerance": cfg.tolerance,
            },
            "p_min": first.conditions.p_min,
            "delta_max": first.conditions.delta_max,
            "tau_max": first.conditions.tau_max,
            "summary": summary_rows(thresholded, softmax, cfg.tolerance),
            "per_layer": per_layer_rows(thresholded, cfg.tolerance),
            "runs": [r.to_dict() for r in thresholded],
            "softmax_runs": [r.to_dict() for r in softmax],
        },
    }
    from aot.theory import figures

    results["main"]["fitted_lines"] = figures.plot_snr_panels(thresholded, softmax, out / "snr_per_layer.png")
    figures.plot_factors(thresholded, out / "factors_per_layer.png")
    if not args.no_sweeps:
        from aot.theory.sweeps import run_sweeps

        sweeps = run_sweeps(settings.sweep, device=device)
        results["sweeps"] = sweeps
        figures.plot_sweep_heatmaps(sweeps, out / "sweep_heatmaps.png")
        figures.plot_phi_eta(sweeps, out / "phi_eta.png")
    results["seconds"] = time.time() - start
    (out / "results.json").write_text(json.dumps(results, indent=1))
    (out / "results.md").write_text(markdown(results))
    for r in results["main"]["summary"]:
        status = condition_status(r["conditions_hold"], r["conditions_hold_through_layers"], cfg.n_layers)
        print(
            f"δ={r['delta']:g} ({status}): SNR {r['snr_first']:.3f} -> {r['snr_last']:.3f}, "
            f"mean factor {r['mean_factor']:.4f} vs 1+ητ = {r['predicted_factor']:.4f}, "
            f"max deviation {100 * r['max_relative_deviation']:.2f} %"
        )
    print(f"wrote {out}/results.json, results.md and figures ({results['seconds']:.0f} s)")
    return 0
