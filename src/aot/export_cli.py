"""`aot export FORMAT`: write a trained run's model in another format (one safetensors file from a sharded
checkpoint, a HuggingFace folder, ...). Each format lives in its own module with ``register(subparsers)``; add the
module to ``EXPORT_FORMAT_MODULES`` to give ``aot export`` a new format."""

from __future__ import annotations

import argparse
import importlib

EXPORT_FORMAT_MODULES: list[str] = [
    "aot.train.export_safetensors",
    "aot.export_hf_cli",
]


def register(subparsers: argparse._SubParsersAction) -> None:
    parser = subparsers.add_parser(
        "export",
        help="export a trained run's model (safetensors, HuggingFace, ...)",
        description="Export the model of a run folder written by `aot train TASK` into OUT_DIR. Pick a format.",
    )
    formats = parser.add_subparsers(dest="format", metavar="FORMAT")
    for name in EXPORT_FORMAT_MODULES:
        importlib.import_module(name).register(formats)
    parser.set_defaults(func=lambda args: parser.print_help() or 0)
