"""`aot eval harness RUN_DIR [LM_EVAL_OPTION ...]`: lm-evaluation-harness's own command line (``lm-eval run``) on a
run through aot's harness model (:mod:`aot.eval.lm_eval_model`), with ``--model aot --model_args pretrained=RUN_DIR``:
``lm_eval --model aot`` itself where lm-eval reads no entry point (0.4.13; later ones find aot's ``lm_eval.models``
entry point)."""

from __future__ import annotations

import argparse
import importlib.util
import textwrap

from aot.errors import AotError

EPILOG = """\
Examples:
  aot eval harness runs/lm --tasks lambada_openai,hellaswag --batch_size 16 --output_path results/
  aot eval harness exports/lm --tasks my_task.yaml --limit 100 --log_samples --output_path results/
  aot eval harness runs/lm --model_args batch_size=8 --tasks arc_easy --device cpu

Every option after RUN_DIR is lm-eval's (`lm-eval run --help`); this command adds `--model aot --model_args
pretrained=RUN_DIR` (lm-eval names its output folder after it), which is `lm_eval --model aot --model_args
pretrained=RUN_DIR` where lm-eval discovers aot's entry point. batch_size may be given as --batch_size or in
--model_args (which wins); 'auto' is lm-eval's for its HF model only. lm-eval reads its data sets from the
HuggingFace hub (or its cache); offline, give a task YAML that reads local files. The same model from the HF side,
request for request: `aot export hf RUN_DIR EXPORT`, then
`lm_eval --model hf --model_args pretrained=EXPORT,trust_remote_code=True ...`."""


def register(subparsers: argparse._SubParsersAction) -> None:
    parser = subparsers.add_parser(
        "harness",
        help="lm-evaluation-harness (lm-eval run) on an LM run, through aot's own model",
        description=textwrap.fill(
            "Run lm-evaluation-harness's `lm-eval run` on RUN_DIR (a folder of `aot train lm` or `aot export hf`) "
            "with aot's harness model, which scores every request as lm-eval's HF model scores the run's "
            "`aot export hf` folder. The device is --device "
            "when given, else cuda when the machine has one, else cpu. Needs aot[eval].",
            width=100,
        ),
        epilog=EPILOG,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    parser.add_argument(
        "run_dir", metavar="RUN_DIR", help="a run folder of `aot train lm` or an `aot export hf` folder"
    )
    parser.add_argument(
        "options", nargs=argparse.REMAINDER, metavar="LM_EVAL_OPTION", help="options of `lm-eval run`, as they are"
    )
    parser.set_defaults(func=run_command)


def run_command(args: argparse.Namespace) -> int:
    if importlib.util.find_spec("lm_eval") is None:
        raise AotError("aot eval harness needs lm-evaluation-harness: pip install 'aot[eval]'")
    from aot.eval.harness import lm_eval_argv
    from aot.eval.lm_folder import load_lm_run

    argv, device = lm_eval_argv(args.run_dir, args.options)
    run = load_lm_run(args.run_dir, device)  # a folder without a good model: one line, before lm-eval starts

    from aot.eval.lm_eval_model import run_command_line

    return run_command_line(argv, run, args.run_dir, device)
