"""`aot bench`: parameters, FLOPs, memory, time per pass, MFU, scaling, decoding and the HF peer, side by side."""

from __future__ import annotations

import argparse
import json

from aot.bench.suite import SUITE_SECTIONS, BenchSettings
from aot.cli.options import add_config_number, add_experiment_args, add_set_option
from aot.devices import resolve_device
from aot.errors import AotError
from aot.layering import layered
from aot.run_folder import check_output_dir

EPILOG = """\
examples:
  aot bench                                  # the default suite (about 12 minutes on 2 CPU cores)
  aot bench --quick --out runs/bench-quick   # a tiny smoke run (seconds)
  aot bench --only models,peer --dtype bf16  # just the model table and the HF peer, in bf16 autocast
  aot bench --out runs/bench                 # the full suite: run it with no other heavy process on the machine
  aot bench --device cuda --dtype bf16 --config benchmarks/bench/gpu.yaml   # GPT-2-small width on a GPU
  aot bench --quick --set bench.n_embd=128 --out runs/bench-128   # any field: defaults < --config < flags < --set

Sections: models (every block type at matched width/depth and at matched non-embedding parameters),
seq (training cost as T grows, batch × T fixed), depth (as layers grow), decode (512 tokens with and
without the KV cache, cache bytes per token), peer (HuggingFace GPT2LMHeadModel on our GPT-2's config;
needs `pip install aot[hf]`, skipped otherwise). The models section also profiles (torch.profiler) where
each training step's time goes at matched width/depth: dense matmuls, the fused attention kernel, the rest.
Writes results.json, table.md (every table) and bench.png into --out; the terminal gets the headline
columns only. --config takes a YAML/JSON file with a bench: section whose keys are the fields of
aot.bench.suite.BenchSettings (e.g. n_embd, seq_len, batch, depth, repeat, seq_lens; see configs/bench.yaml);
--set bench.FIELD=VALUE sets one of them."""


def register(subparsers: argparse._SubParsersAction) -> None:
    parser = subparsers.add_parser(
        "bench",
        help="measure parameters, FLOPs, memory, time, MFU of every block type side by side",
        description="Benchmark every block type (AoT-MSSA tied / W_O, AoT-MHSA, GPT-2, CRATE, Llama) at the same "
        "width and depth and at matched parameters: parameters; FLOPs per token (analytic, checked against "
        "torch.utils.flop_counter); peak training memory; median forward and training-step time; tokens/s; "
        "MFU against a matmul peak measured in the same run. Also scaling with sequence length and depth, "
        "cached vs uncached decoding, and HuggingFace's GPT-2 as a peer. Default size: d=256, 4 heads, "
        "T=256, batch 16, 6 layers, fp32.",
        epilog=EPILOG,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    add_experiment_args(parser, default_out="runs/bench")
    parser.add_argument("--quick", action="store_true", help="tiny sizes for a smoke test (seconds)")
    parser.add_argument(
        "--only", metavar="SECTIONS", help=f"comma-separated subset of: {', '.join(SUITE_SECTIONS)} (default: all)"
    )
    parser.add_argument(
        "--dtype", choices=["fp32", "bf16", "fp16"], help="compute dtype (default fp32; bf16 = autocast)"
    )
    add_config_number(parser, "--threads", BenchSettings, "threads", "torch intra-op threads (0: torch's default)")
    add_config_number(
        parser, "--repeat", BenchSettings, "repeat", "timed calls per model in each of the 3 interleaved rounds "
        "(the median of all)",
    )  # fmt: skip
    parser.add_argument("--no-memory", action="store_true", help="skip the peak-memory subprocesses")
    parser.add_argument(
        "--no-breakdown", action="store_true", help="skip profiling where each training step's time goes"
    )
    parser.add_argument(
        "--refresh-peak",
        action="store_true",
        help="measure this machine's CPU matmul peaks (fp32, bf16) again, store them in the machine cache that "
        "training MFU divides by, print them and exit; run it when the machine is quiet",
    )
    add_set_option(parser)
    parser.set_defaults(func=run)


def settings_from_args(args: argparse.Namespace) -> BenchSettings:
    """The defaults (or ``--quick``'s) < the config file's ``bench:`` section < the flags < ``--set``."""
    flags = {name: getattr(args, name) for name in ("dtype", "threads", "repeat") if getattr(args, name) is not None}
    if args.no_memory:
        flags["memory"] = False
    if args.no_breakdown:
        flags["breakdown"] = False
    if args.only:
        wanted = [part.strip() for part in args.only.split(",") if part.strip()]
        unknown = [w for w in wanted if w not in SUITE_SECTIONS]
        if unknown:
            raise AotError(f"--only: unknown section {unknown[0]!r}; choose from {', '.join(SUITE_SECTIONS)}")
        flags["sections"] = wanted
    flags["device"] = str(resolve_device(args.device))
    base = {"bench": dict(BenchSettings.QUICK)} if args.quick else {}
    settings: BenchSettings = layered({"bench": BenchSettings}, base, args.config, {"bench": flags}, args.set)["bench"]
    return settings


def refresh_peaks() -> int:
    import torch

    from aot.bench.peaks import cpu_peak_flops

    for dtype in (torch.float32, torch.bfloat16):
        entry = cpu_peak_flops(dtype, refresh=True)
        busy = " (machine busy: refresh when quiet)" if entry["busy"] else ""
        print(f"{dtype}: {entry['peak'] / 1e9:.0f} GFLOP/s, load {entry['load_1min']:.1f}, {entry['date']}{busy}")
    return 0


def run(args: argparse.Namespace) -> int:
    import torch

    if args.refresh_peak:
        return refresh_peaks()
    from aot.bench.report import markdown_report, plot_report, terminal_summary
    from aot.bench.suite import run_suite

    settings = settings_from_args(args)
    out = check_output_dir(args.out)  # before minutes of measuring
    torch.manual_seed(args.seed)
    results = run_suite(settings)
    out.mkdir(parents=True, exist_ok=True)
    (out / "results.json").write_text(json.dumps(results, indent=2) + "\n")
    table = markdown_report(results)
    (out / "table.md").write_text(table)
    plot_report(results, out / "bench.png")
    print(terminal_summary(results), end="")
    print(f"wrote table.md (every table), results.json and bench.png into {out}")
    return 0
