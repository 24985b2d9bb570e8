"""`aot export FORMAT`: write a trained run's model in another format — ``safetensors`` (one file, also from an
FSDP-sharded checkpoint: :func:`aot.train.export_safetensors.export_safetensors`) or ``hf`` (a HuggingFace folder:
:func:`aot.hf.export_hf`). A new format adds a ``register_FORMAT`` function here and a line in ``FORMATS``."""

from __future__ import annotations

import argparse
import importlib.util
import textwrap

from aot.errors import AotError
from aot.train.export_safetensors import export_safetensors

EPILOG = """\
Example:
  {example}

OUT_DIR is written all at once: into a scratch folder beside it, then swapped in with one rename, so an
interrupted export leaves the old OUT_DIR or the whole new one. It holds aot_export.json (the format and the
source run), which marks it as an earlier export that the next export may replace."""


def register(subparsers: argparse._SubParsersAction) -> None:
    parser = subparsers.add_parser(
        "export",
        help="export a trained run's model (safetensors, HuggingFace, ...)",
        description="Export the model of a run folder written by `aot train TASK` into OUT_DIR. Pick a format.",
    )
    formats = parser.add_subparsers(dest="format", metavar="FORMAT")
    for add_format in FORMATS:
        add_format(formats)
    parser.set_defaults(func=lambda args: parser.print_help() or 0)


def add_force(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "--force",
        action="store_true",
        help="write OUT_DIR even when it holds a training run, a checkpoint (config.json, model.safetensors, "
        "trainer.json) or other files; what it held is moved to OUT_DIR.old-N, not deleted. Without it such an "
        "OUT_DIR is refused; an earlier export of the same format is always replaced",
    )


def register_safetensors(subparsers: argparse._SubParsersAction) -> None:
    parser = subparsers.add_parser(
        "safetensors",
        help="one model.safetensors + config.json from a run (also from FSDP's sharded checkpoints)",
        description=textwrap.fill(
            "Write the model of RUN_DIR's newest good checkpoint (sha256-verified; checkpoint.prev when the latest "
            "is damaged) as one model.safetensors plus config.json into OUT_DIR, loadable with "
            "AotModel.from_pretrained(OUT_DIR). Sharded checkpoints (FSDP in several processes) are gathered here "
            "in one process.",
            width=100,
        ),
        epilog=EPILOG.format(example="aot export safetensors runs/lm exported/lm"),
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    parser.add_argument("run_dir", metavar="RUN_DIR", help="a run folder (holding checkpoint/) or a checkpoint folder")
    parser.add_argument(
        "out_dir",
        metavar="OUT_DIR",
        help="folder to write model.safetensors and config.json into (new or empty, or an earlier export)",
    )
    add_force(parser)
    parser.set_defaults(func=run_safetensors)


def run_safetensors(args: argparse.Namespace) -> int:
    out = export_safetensors(args.run_dir, args.out_dir, force=args.force)
    print(f"wrote {out / 'model.safetensors'} and {out / 'config.json'}")
    return 0


def register_hf(subparsers: argparse._SubParsersAction) -> None:
    parser = subparsers.add_parser(
        "hf",
        help="a language-model run as a HuggingFace folder (AutoModelForCausalLM, AutoTokenizer)",
        description=textwrap.fill(
            "Write OUT_DIR with config.json + model.safetensors of AotForCausalLM (a transformers PreTrainedModel "
            "that wraps the run's model), its modelling code (modeling_aot.py and configuration_aot.py: aot's own "
            "code for the model, needing only torch and transformers, named by config.json's auto_map), the "
            "tokenizer as a PreTrainedTokenizerFast (bytes: a 256-token byte-level vocabulary, id = byte value; "
            "gpt2: GPT-2's BPE; bpe-N: the run's trained BPE; eos, bos and pad set, model_max_length the context) "
            "and a README. Where aot is not installed, AutoModelForCausalLM.from_pretrained(OUT_DIR, "
            "trust_remote_code=True) loads it; after `import aot.hf`, from_pretrained(OUT_DIR) does. generate() "
            "(greedy, sampling, beam, assisted and prompt-lookup decoding; batches padded with an attention mask, left "
            "or right) slides its window past the context as `aot sample` does; `aot sample`, "
            "`aot eval lm` and `aot eval harness` read the folder too. Needs aot[hf].",
            width=100,
        ),
        epilog=EPILOG.format(example="aot export hf runs/lm exports/lm"),
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    parser.add_argument("run", metavar="RUN_DIR", help="run folder of `aot train lm`")
    parser.add_argument("out", metavar="OUT_DIR", help="folder to write (new or empty, or an earlier export)")
    add_force(parser)
    parser.set_defaults(func=run_hf)


def run_hf(args: argparse.Namespace) -> int:
    if importlib.util.find_spec("transformers") is None:
        raise AotError("aot export hf needs transformers: pip install 'aot[hf]'")
    from aot.hf import export_hf

    out = export_hf(args.run, args.out, force=args.force)
    print(f"wrote {out} (config.json, model.safetensors, modeling_aot.py, tokenizer files, README.md)")
    return 0


FORMATS = (register_safetensors, register_hf)  # in the order `aot export --help` lists them
