"""`aot eval icl RUN_DIR...`: the figure of Garg et al. — normalised squared error against the number of
in-context examples, for every trained run and every classical baseline, with bootstrap 5–95 % bands.

All runs must share the task and d (they are evaluated on the same held-out prompts, drawn from the first run's
data config, optionally out of distribution). Writes ``results.json`` (every curve, band and the error at
k = d/2, d, 2d) and ``icl.png`` into ``--out``.
"""

from __future__ import annotations

import argparse
import json
import textwrap
from pathlib import Path

from aot.cli.options import add_number
from aot.data.icl import X_DISTRIBUTIONS
from aot.errors import AotError
from aot.eval.icl import BASELINES
from aot.eval.icl_runs import ICL_EVAL_OPTIONS, evaluate_runs, plot_curves, summary_table
from aot.run_folder import check_output_dir


def register(subparsers: argparse._SubParsersAction) -> None:
    parser = subparsers.add_parser(
        "icl",
        help="in-context regression curves of trained runs beside least squares, averaging, 3-NN, Lasso",
        description=textwrap.fill(
            "Evaluate runs of `aot train icl` on one set of held-out prompts: the squared error of the prediction "
            "at each number k of in-context examples, divided by E[(w.x)^2] (d; k non-zeros for sparse), with "
            "bootstrap 5-95 % bands, beside the classical baselines (least squares, averaging, 3-nearest "
            "neighbours, Lasso for sparse tasks, zero). Out-of-distribution prompts: --x scaled|skewed|orthant. "
            "Writes results.json and icl.png into --out.",
            width=100,
        ),
        epilog="Examples:\n"
        "  aot eval icl runs/icl                              # one run against the baselines\n"
        "  aot eval icl runs/icl/mhsa runs/icl/gpt2 --out runs/icl/compare\n"
        "  aot eval icl runs/icl/mhsa --x scaled --x-scale 3  # prompts with x scaled by 3",
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    parser.add_argument("runs", nargs="+", metavar="RUN_DIR", help="run folders written by `aot train icl`")
    parser.add_argument("--out", default="runs/icl-eval", help="folder for results.json and icl.png")
    add_number(
        parser, "--prompts", ICL_EVAL_OPTIONS["--prompts"], "held-out prompts; memory is checked too", default=1000
    )
    parser.add_argument("--x", default="gaussian", help=f"distribution of x: {', '.join(X_DISTRIBUTIONS)}")
    add_number(parser, "--x-scale", ICL_EVAL_OPTIONS["--x-scale"], "the factor of --x scaled", default=2.0)
    parser.add_argument("--baselines", help=f"comma-separated subset of: {', '.join(BASELINES)}")
    parser.add_argument("--labels", help="comma-separated names of the runs in the figure (default: folder names)")
    parser.set_defaults(func=run_command)


def run_command(args: argparse.Namespace) -> int:
    labels = args.labels.split(",") if args.labels else None
    if labels is not None and len(labels) != len(args.runs):
        raise AotError(f"--labels has {len(labels)} names for {len(args.runs)} runs; give one per run")
    baselines = args.baselines.split(",") if args.baselines else None
    out = check_output_dir(args.out)  # before any work
    results = evaluate_runs(
        [Path(r) for r in args.runs], args.prompts, args.x, args.x_scale, baselines=baselines, labels=labels
    )
    out.mkdir(parents=True, exist_ok=True)
    (out / "results.json").write_text(json.dumps(results, indent=2) + "\n")
    plot_curves(results, out / "icl.png")
    print(summary_table(results))
    print(f"Wrote {out / 'results.json'} and {out / 'icl.png'}")
    return 0
