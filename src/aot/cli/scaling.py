"""``aot scaling fit``: fit the scaling law L(N, D) = E + A/N^α + B/D^β of each family of a study's runs (an
``aot sweep`` results store, or any file of runs), with bootstrap intervals, the compute frontier, the gap to a
reference family and the extrapolation to given sizes; writes results.json, table.md and the figures."""

from __future__ import annotations

import argparse
from pathlib import Path

from aot.cli.options import SEED_NUMBER, add_number
from aot.sweep.scaling.folder import FRONTIER_FIGURE, GAP_FIGURE, POINT_FORM, TABLE_FILE, fit_runs_file
from aot.sweep.scaling.study import BOOT_STARTS, BOOTSTRAP, STARTS, FitSettings

DESCRIPTION = """\
Fit L(N, D) = E + A / N^alpha + B / D^beta to each family of RESULTS as Hoffmann et al. 2022 (approach 3): the
Huber loss (delta 1e-3) between log L and the law's log, L-BFGS from the --starts best points of the paper's grid
of initialisations, the best minimum kept; then --bootstrap resamples of the runs (with replacement) refitted,
for 95 % percentile intervals on every parameter and on what is read off the law. With --shared-e every family
has the same E (the loss at unlimited size and data belongs to the corpus, tokenizer and context): one joint fit,
the bootstrap resampling runs within each family. Where a family's own E is not determined by its runs (E at 0,
its size term then a pure power law), compare the two fits before reading an extrapolation.

RESULTS: a JSON file {"runs": [...]} with one object per finished run: its family ("family", or the field
--family names), "non_embedding_params" (N), "tokens" (D), the loss ("val_loss", or --loss), and optionally
"train_flops" or "training_flops" (else "train_flops_per_token" x tokens; else 6 N D), "<loss>_se" and "seed".
The results.json of `aot sweep lm ... --out DIR` is such a file (--family block); a store that declares its sweep
is read at each config's best lr. --where keeps some runs (benchmarks/scaling: --where kind=main,branch). A
family needs >= 5 runs at >= 2 sizes and >= 2 budgets.

Writes into --out: results.json (the fits, the compute frontier: the lowest fitted loss per training-FLOPs
budget over N; with --reference, the gap L_family / L_reference - 1 along it; the --at points), table.md (E, A,
alpha, B, beta per family with intervals; the points), frontier.png and, with --reference, gap.png and matched.png
(the gap to the reference at the same N and D read off the runs, no law: the reference interpolated in log N
between its sizes at that budget, never extrapolated).
"""

EXAMPLES = f"""\
examples:
  # a scaling grid: 2 families x 4 widths x 3 budgets, then its fit
  aot sweep lm --recipe cpu-bench --set model.block=transformer,aot-mhsa --set model.n_embd=64,128,192,256 \\
      --set train.steps=500,1000,2000 --out runs/scaling
  aot scaling fit runs/scaling/results.json --family block --reference transformer --out runs/scaling/fit
  # extrapolate to a size and budget ({POINT_FORM})
  aot scaling fit benchmarks/scaling/results.json --where kind=main,branch --reference gpt2 \\
      --at "GPT-2 Base=gpt2,85e6,2.95e11" --at "AoT-MHSA Base=aot-mhsa,82.7e6,2.95e11"
"""


def register(subparsers: argparse._SubParsersAction) -> None:
    parser = subparsers.add_parser(
        "scaling",
        help="scaling laws of a study's runs: fit L(N, D) per family, frontier, gaps, extrapolation",
        description="Scaling laws of a study's runs (a grid of `aot sweep` runs over sizes and budgets). Pick a "
        "sub-command.",
    )
    commands = parser.add_subparsers(dest="scaling_command", metavar="COMMAND")
    fit = commands.add_parser(
        "fit",
        help="fit L(N, D) = E + A/N^α + B/D^β per family with bootstrap intervals; frontier, gaps, figures",
        description=DESCRIPTION,
        epilog=EXAMPLES,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    fit.add_argument("results", metavar="RESULTS", help="JSON file of runs (an `aot sweep` results.json)")
    fit.add_argument("--family", metavar="FIELD", help="the run field naming its family (default: family, else block)")
    fit.add_argument("--loss", metavar="FIELD", default="val_loss", help="the run field fitted (default: val_loss)")
    fit.add_argument(
        "--where",
        action="append",
        default=[],
        metavar="FIELD=V1,V2",
        help="keep the runs with these values (repeatable)",
    )
    fit.add_argument("--reference", metavar="FAMILY", help="the family gaps are measured against (e.g. transformer)")
    fit.add_argument(
        "--at", action="append", default=[], metavar="LABEL=FAMILY,N,D", help="read the law at N, D (repeatable)"
    )
    defaults = FitSettings()
    add_number(fit, "--starts", STARTS, "L-BFGS starts: the best points of the paper's grid", default=defaults.starts)
    add_number(fit, "--bootstrap", BOOTSTRAP, "bootstrap resamples (0: no intervals)", default=defaults.bootstrap)
    add_number(fit, "--boot-starts", BOOT_STARTS, "starts per refit (the fit, then grid points)",
               default=defaults.boot_starts)  # fmt: skip
    add_number(fit, "--seed", SEED_NUMBER, "the bootstrap's seed", default=defaults.seed)
    fit.add_argument(
        "--shared-e",
        action="store_true",
        help="one E for every family, fitted jointly (E, the loss at infinite size and data, belongs to the corpus, "
        "tokenizer and context, not to the model); each family keeps its A, alpha, B, beta",
    )
    fit.add_argument(
        "--out", metavar="DIR", default="runs/scaling-fit", help="output folder (default: runs/scaling-fit)"
    )
    fit.set_defaults(func=run_fit)
    parser.set_defaults(func=lambda args: parser.print_help() or 0)


def run_fit(args: argparse.Namespace) -> int:
    settings = FitSettings(
        starts=args.starts, bootstrap=args.bootstrap, boot_starts=args.boot_starts, seed=args.seed,
        shared_e=args.shared_e,
    )  # fmt: skip
    results = fit_runs_file(
        args.results,
        args.out,
        family=args.family,
        loss=args.loss,
        reference=args.reference,
        points=args.at,
        where=args.where,
        settings=settings,
    )
    out = Path(args.out)
    print((out / TABLE_FILE).read_text(), end="")
    figures = [FRONTIER_FIGURE, *([GAP_FIGURE] if "gap" in results else [])]
    print(f"wrote {out / 'results.json'}, {out / TABLE_FILE}, " + ", ".join(str(out / f) for f in figures))
    return 0
