"""`aot eval lm RUN_DIR... --task ...`: the paper's zero-shot protocols on trained language models; writes
``results.json`` and ``results.md`` (one row per run) into ``--out``."""

from __future__ import annotations

import argparse
import json
import textwrap

from aot.cli.options import add_number
from aot.devices import resolve_device
from aot.eval.zeroshot_runs import EVAL_OPTIONS, ZEROSHOT_TASKS, evaluate_runs, headline, markdown_table
from aot.run_folder import check_output_dir


def register(subparsers: argparse._SubParsersAction) -> None:
    parser = subparsers.add_parser(
        "lm",
        help="zero-shot LAMBADA, CBT, PTB / WikiText perplexity (and Austen-built sets) on LM runs",
        description=textwrap.fill(
            "Evaluate language-model runs (folders of `aot train lm`, or `aot export hf`) with the paper's zero-shot "
            "protocols. The real data sets are not bundled with the package (nor fetched by it): give their files with "
            "--data in their published formats. The austen-* sets are built from Jane Austen's novels (`aot data "
            "fetch austen` first), held out from the Shakespeare the models train on. Writes results.json (every "
            "metric, the sets' hashes, machine and date) and results.md (one row per run) into --out.",
            width=100,
        ),
        epilog="Tasks:\n"
        + "".join(f"  {t.name:<15} {t.what}\n" for t in ZEROSHOT_TASKS.values())
        + "  austen          all four austen-* sets (the default)\n"
        "Examples:\n"
        "  aot eval lm runs/lm                                  # the Austen sets\n"
        "  aot eval lm runs/a runs/b --task lambada --data lambada_test.jsonl\n"
        "  aot eval lm runs/lm --task ptb,wikitext --data ptb=ptb.test.txt --data wikitext=wiki.test.raw\n"
        "Contexts longer than the model's context lose their oldest tokens (left truncation).",
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    parser.add_argument("runs", nargs="+", metavar="RUN_DIR", help="run or export folders")
    parser.add_argument("--task", action="append", help="task(s), comma-separated or repeated (default: austen)")
    parser.add_argument("--data", action="append", default=[], metavar="[TASK=]PATH", help="a data set's file")
    parser.add_argument("--out", default="runs/eval-lm", help="folder for results.json / results.md")
    parser.add_argument("--device", default="cpu", help="cpu, cuda, cuda:N or auto (default: cpu)")
    add_number(parser, "--batch-size", EVAL_OPTIONS["--batch-size"], "windows per forward pass", default=16)
    add_number(
        parser, "--stride", EVAL_OPTIONS["--stride"], "perplexity: new tokens per window, at most block_size - 1 "
        "(default: block_size // 2)",
    )  # fmt: skip
    add_number(parser, "--limit", EVAL_OPTIONS["--limit"], "use only the first N examples of each set (quick checks)")
    parser.set_defaults(func=run_command)


def run_command(args: argparse.Namespace) -> int:
    out = check_output_dir(args.out)  # before any work
    device = str(resolve_device(args.device))
    results = evaluate_runs(
        args.runs, args.task or ["austen"], args.data, device, args.batch_size, args.stride, args.limit
    )
    out.mkdir(parents=True, exist_ok=True)
    (out / "results.json").write_text(json.dumps(results, indent=2) + "\n")
    table = markdown_table(results)
    (out / "results.md").write_text(table)
    for name, row in results["runs"].items():
        cells = "  ".join(f"{t}: {headline(t, row[t])}" for t in results["sets"])
        print(textwrap.fill(f"{name}: {cells}", width=100, subsequent_indent="    "))
    print(f"wrote {out / 'results.json'} and {out / 'results.md'}")
    return 0
