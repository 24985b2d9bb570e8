"""The `aot` command. Each subcommand lives in its own module with a ``register(subparsers)`` function.

Every experiment command follows one convention (see :func:`add_experiment_args`): ``--config FILE``
(YAML/JSON; an example per command in configs/), ``--seed``, ``--device`` and ``--out DIR``, which receives a
``results.json`` plus its figures. Input errors print one line, ``aot: error: ...``, and exit with status 2.
"""

from __future__ import annotations

import argparse
import importlib
import sys
import warnings
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from typing import Any, NoReturn

from aot.errors import AotError, RenamedWarning, os_error_line
from aot.validation import check_seed

# modules that add subcommands, in the order `aot --help` lists them
COMMAND_MODULES = [
    "aot.cli.models",
    "aot.cli.data",
    "aot.cli.train",
    "aot.cli.sweep",
    "aot.cli.scaling",
    "aot.cli.eval",
    "aot.cli.viz",
    "aot.cli.analyze",
    "aot.cli.export",
    "aot.cli.sample",
    "aot.cli.denoise",
    "aot.cli.bench",
    "aot.cli.reproduce",
]


class OneLineParser(argparse.ArgumentParser):
    """argparse with the package's error convention: a bad command line (an unknown option, ``--lr x``, a missing
    argument) is one line, ``aot: error: COMMAND: PROBLEM (see `aot COMMAND --help`)``, exit status 2 — not
    argparse's usage block. Sub-commands inherit the class (``add_subparsers`` uses the parent's type)."""

    def error(self, message: str) -> NoReturn:
        command = self.prog.removeprefix("aot").strip()
        where = f"{command}: " if command else ""
        self.exit(2, f"aot: error: {where}{message} (see `{self.prog} --help`)\n")


def build_parser() -> argparse.ArgumentParser:
    from aot import __version__

    parser = OneLineParser(
        prog="aot",
        description="Attention-Only Transformers (AoT): build, train, analyse and benchmark AoT-MSSA / "
        "AoT-MHSA and their baselines (GPT-2, ViT, CRATE, Llama).",
        epilog="Run `aot COMMAND --help` for the options of each command.",
    )
    parser.add_argument("--version", action="version", version=f"aot {__version__}")
    subparsers = parser.add_subparsers(dest="command", metavar="COMMAND")
    for name in COMMAND_MODULES:
        importlib.import_module(name).register(subparsers)
    return parser


@contextmanager
def renames_as_one_line() -> Iterator[None]:
    """While the command runs, a :class:`aot.errors.RenamedWarning` (an old flag or name) is one line on stderr,
    ``aot: OLD is renamed NEW ...``, not Python's two-line warning; other warnings are shown as usual."""
    with warnings.catch_warnings():
        shown = warnings.showwarning

        def show(message: Any, category: type[Warning], *rest: Any, **kwargs: Any) -> None:
            if issubclass(category, RenamedWarning):
                print(f"aot: {message}", file=sys.stderr, flush=True)
            else:
                shown(message, category, *rest, **kwargs)

        warnings.showwarning = show
        yield


def main(argv: Sequence[str] | None = None) -> int:
    with renames_as_one_line():
        return _main(argv)


def _main(argv: Sequence[str] | None) -> int:
    parser = build_parser()
    args = parser.parse_args(argv)
    if not getattr(args, "func", None):
        parser.print_help()
        return 0
    status = 1
    try:
        if getattr(args, "seed", None) is not None:
            check_seed(args.seed)
        status = int(args.func(args) or 0)
    except AotError as exc:
        print(f"aot: error: {exc}", file=sys.stderr)
        status = 2
    except OSError as exc:  # a full disk, a read-only folder, ...: one line, never a traceback
        print(f"aot: error: {os_error_line(exc)}", file=sys.stderr)
        status = 2
    except KeyboardInterrupt:
        print("aot: interrupted", file=sys.stderr)
        status = 130
    finally:  # under torchrun: leave the process group before exit (a no-op in one process)
        from aot.train.distributed import shutdown_distributed

        shutdown_distributed(clean=status == 0)
    return status
