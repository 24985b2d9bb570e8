"""`aot export hf RUN_DIR OUT_DIR`: a language-model run as a HuggingFace folder (:mod:`aot.hf`; extra ``aot[hf]``)."""

from __future__ import annotations

import argparse
import importlib.util
import textwrap

from aot.errors import AotError


def register(subparsers: argparse._SubParsersAction) -> None:
    parser = subparsers.add_parser(
        "hf",
        help="a language-model run as a HuggingFace folder (AutoModelForCausalLM, AutoTokenizer)",
        description=textwrap.fill(
            "Write OUT_DIR with config.json + model.safetensors of AotForCausalLM (a transformers PreTrainedModel "
            "that wraps the run's model), the tokenizer as a PreTrainedTokenizerFast (bytes: a 256-token byte-level "
            "vocabulary, id = byte value; gpt2: GPT-2's BPE; bpe-N: the run's trained BPE) and a README. After "
            "`import aot.hf`, AutoModelForCausalLM.from_pretrained(OUT_DIR) and generate() (greedy, sampling, "
            "beam) work; `aot sample` and `aot eval lm` read the folder too. Needs aot[hf].",
            width=100,
        ),
        epilog="Example:\n  aot export hf runs/lm exports/lm",
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    parser.add_argument("run", metavar="RUN_DIR", help="run folder of `aot train lm`")
    parser.add_argument("out", metavar="OUT_DIR", help="folder to write (new or empty, or an earlier export)")
    parser.set_defaults(func=run_command)


def run_command(args: argparse.Namespace) -> int:
    if importlib.util.find_spec("transformers") is None:
        raise AotError("aot export hf needs transformers: pip install 'aot[hf]'")
    from aot.hf import export_hf

    out = export_hf(args.run, args.out)
    print(f"wrote {out} (config.json, model.safetensors, tokenizer files, README.md)")
    return 0
