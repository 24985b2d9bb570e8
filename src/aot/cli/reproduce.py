"""`aot reproduce`: run the paper's experiments at one scale (``--scale tiny|quick|full|paper``; was ``--preset``)
and write one report, ours beside theirs."""

from __future__ import annotations

import argparse
import os
import shlex
import textwrap
from pathlib import Path

from aot.cli.options import RenamedFlag
from aot.report.part import PRESET_HELP, PRESETS

EPILOG = """\
examples:
  aot reproduce                                   # quick: every part on a 2-core CPU (11 min recorded)
  aot reproduce --scale quick --out benchmarks/report --screenshot
  aot reproduce --only theory lm                  # some parts; the others' earlier results are kept
  aot reproduce --scale full --dry-run            # print the commands, run nothing
  aot reproduce --scale full --out runs/report-full           # a few CPU hours
  aot reproduce --scale paper --data openwebtext=hf:Skylion007/openwebtext   # GPUs; lists what it can't run

outputs (in --out): report.md and index.html (one self-contained page, figures embedded), report.json
(each part's status), and one folder per part: PART/results.json (what the tables read), PART/STEP/ (each
command's own --out: its results.json, figures, checkpoint), PART/logs/STEP.log, PART/status.json.

Running it again skips every part whose config and code are unchanged (status.json holds the key) and
continues the others; a failing part is reported with its error and the other parts still run; Ctrl-C
leaves the finished parts and a report of them.
"""


def register(subparsers: argparse._SubParsersAction) -> None:
    from aot.report.parts import all_parts

    names = [p.name for p in all_parts()]
    parser = subparsers.add_parser(
        "reproduce",
        help="run the paper's experiments at one scale and write one report (report.md + index.html)",
        description=textwrap.fill(
            "Run each part of the paper's evaluation with the aot command that measures it, at one --scale, "
            "and write one report: every table beside the paper's numbers, every figure, the machine, the date, "
            "the command behind each number and what differs from the paper. Parts: " + ", ".join(names) + ".",
            width=100,
        )
        + "\n\nscales (--scale; was --preset):\n"
        + "\n".join(f"  {name:<6} {PRESET_HELP[name]}" for name in PRESETS),
        epilog=EPILOG,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    parser.add_argument("--scale", choices=PRESETS, default="quick", help="size of every part (default: quick)")
    parser.add_argument(
        "--preset",
        dest="scale",
        choices=PRESETS,
        action=RenamedFlag,
        new="--scale",
        why="the report's size; model presets are model.preset",
    )
    parser.add_argument("--out", metavar="DIR", default="runs/report", help="report folder (default: runs/report)")
    parser.add_argument("--only", nargs="+", metavar="PART", help=f"run only these parts ({', '.join(names)})")
    parser.add_argument(
        "--data",
        action="append",
        metavar="NAME=PATH",
        help="a data set a part needs: text=FILE (the CPU language corpus, default Shakespeare); "
        "lambada=FILE, cbt-cn=FILE, cbt-ne=FILE, ptb=FILE, wikitext=FILE (zeroshot: the real sets, beside the "
        "Austen ones); images=SPEC (vision: instead of Fashion-MNIST, e.g. mnist or a class folder); "
        "openwebtext=PATH|hf:NAME, imagenet=DIR (paper scale); lm-sweep=FILE (the recorded lm sweep whose lrs the "
        "lm part uses); repeatable; any other name is refused",
    )
    parser.add_argument(
        "--dry-run", action="store_true", help="print the commands each part would run at this scale, run nothing"
    )
    parser.add_argument(
        "--render",
        action="store_true",
        help="run nothing: write report.md and index.html of --out again from its report.json and the parts' "
        "recorded results (how the committed benchmarks/report's page is built)",
    )
    parser.add_argument(
        "--screenshot",
        action="store_true",
        help="render index.html in headless chromium to DIR/index.png and check that every image loads",
    )
    parser.set_defaults(func=run)


def command_line(args: argparse.Namespace) -> str:
    parts = ["aot", "reproduce", "--scale", args.scale, "--out", args.out]
    if args.only:
        parts += ["--only", *args.only]
    for item in args.data or []:
        parts += ["--data", item]
    return shlex.join(parts)


def run(args: argparse.Namespace) -> int:
    from aot.report.build import write_report
    from aot.report.execute import (
        code_version,
        dry_run_lines,
        format_seconds,
        git_commit,
        parse_data,
        run_parts,
        select_parts,
    )
    from aot.report.part import check_data
    from aot.report.parts import all_parts
    from aot.run_folder import refuse_as_output
    from aot.runinfo import machine_info

    parts = all_parts()
    out = Path(args.out)
    refuse_as_output(out)  # before any work: never a training run or a model folder
    data = parse_data(args.data)
    check_data(parts, data)
    command = command_line(args)
    code, commit = code_version(), git_commit()

    def report(outcomes: list) -> None:
        write_report(
            parts,
            outcomes,
            preset=args.scale,
            out=out,
            command=command,
            machine={**machine_info(), "load_average": list(os.getloadavg())},
            code=code,
            commit=commit,
        )

    if args.render:
        from aot.report.build import rewrite_report

        rewrite_report(parts, out)
        print(f"wrote {out / 'report.md'} and {out / 'index.html'} from {out / 'report.json'}; ran nothing")
        return 0
    if args.dry_run:
        for line in dry_run_lines(select_parts(parts, args.only), args.scale, out, data):
            print(line)
        return 0
    print(f"aot reproduce: scale {args.scale} -> {out}/report.md and index.html", flush=True)
    outcomes = run_parts(
        parts, args.scale, out, args.only, data, echo=lambda line: print(line, flush=True), on_progress=report
    )
    report(outcomes)
    total = sum(o.command_seconds for o in outcomes if o.has_results)
    failed = [o.name for o in outcomes if o.state == "failed"]
    print(f"wrote {out / 'report.md'} and {out / 'index.html'} (its commands took {format_seconds(total)})")
    if args.screenshot:
        from aot.report.browser import check_page

        check = check_page(out / "index.html", out / "index.png")
        print(f"screenshot {check.screenshot}: {check.images} images, all loaded; no console errors")
    if failed:
        print(f"aot reproduce: {len(failed)} part(s) failed: {', '.join(failed)} (see the report)")
        return 1
    return 0
