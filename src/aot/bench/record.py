"""How every timing script of ``benchmarks/bench/`` records what it measured: one JSON record and its table.

A record is :func:`aot.runinfo.timing_record`'s header — the machine (CPU model, core count, torch threads,
torch version, GPU if any), the date, ``OMP_NUM_THREADS``, the load average before and after the timing and the
caller's ``--note`` — then the script's own fields. It is written in one step beside the script (``--out``), and
``markdown(record)`` (the table, rendered from the record alone) beside it with the same name and ``.md``;
``--markdown-only`` rewrites the table from the recorded JSON without timing anything.

A script declares a :class:`RecordedBenchmark` (its flags, what it measures, its table) and calls
:func:`run_recorded`::

    BENCH = RecordedBenchmark(__file__, __doc__, measure, markdown, options=add_options)
    def main(argv=None): return run_recorded(BENCH, argv)

The record is the script's name with ``.json`` (``rope_cache.py`` → ``rope_cache.json``) unless ``--out`` says
otherwise; ``--help`` shows the script's docstring.
"""

from __future__ import annotations

import argparse
import json
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from aot.run_folder import write_text_atomic
from aot.runinfo import load_average, timing_record

Record = dict[str, Any]


@dataclass(frozen=True)
class RecordedBenchmark:
    """A timing script (``script``: its ``__file__``; its record goes beside it, named after it), its help
    (``doc``), what it measures (``measure(args)``: the record's own fields; ``args`` holds the shared flags and
    the script's ``options``; :func:`count` types a flag that must be at least 1), its table (``markdown``;
    None: the JSON only), the default of ``--rounds`` (None: no shared ``--rounds``; the script may add its
    own), and whether it has ``--quick`` (a tiny size for a smoke test)."""

    script: str
    doc: str | None
    measure: Callable[[argparse.Namespace], Record]
    markdown: Callable[[Record], str] | None = None
    options: Callable[[argparse.ArgumentParser], None] | None = None
    rounds: int | None = 4
    quick: bool = False

    @property
    def default_out(self) -> Path:
        return Path(self.script).resolve().with_suffix(".json")

    def parser(self) -> argparse.ArgumentParser:
        parser = argparse.ArgumentParser(
            prog=Path(self.script).name, description=self.doc, formatter_class=argparse.RawDescriptionHelpFormatter
        )
        if self.rounds is not None:
            parser.add_argument(
                "--rounds", type=count, default=self.rounds, help=f"interleaved rounds (default: {self.rounds})"
            )
        parser.add_argument("--note", default="", help="what else ran on the machine (recorded)")
        if self.quick:
            parser.add_argument("--quick", action="store_true", help="a tiny size for a smoke test (not a record)")
        parser.add_argument(
            "--out", type=Path, default=self.default_out, help=f"the JSON record (default: {self.default_out.name})"
        )
        if self.markdown is not None:
            parser.add_argument("--markdown-only", action="store_true", help="rewrite the .md from the JSON")
        if self.options is not None:
            self.options(parser)
        return parser


def count(text: str) -> int:
    """An argparse type: a whole number of at least 1 (rounds, repeats, tokens); a usage error otherwise."""
    try:
        value = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"invalid int value: {text!r}") from None
    if value < 1:
        raise argparse.ArgumentTypeError(f"{value} is not at least 1")
    return value


def timed_rounds(args: argparse.Namespace) -> int:
    """The rounds to time: ``--rounds``, or one with ``--quick``."""
    return 1 if getattr(args, "quick", False) else int(args.rounds)


def write_record(out: Path, record: Record, markdown: Callable[[Record], str] | None) -> None:
    """The record as JSON at ``out`` and, with ``markdown``, its table at ``out`` with ``.md``; each in one step."""
    write_text_atomic(out, json.dumps(record, indent=2) + "\n")
    if markdown is not None:
        write_text_atomic(out.with_suffix(".md"), markdown(record))


def run_recorded(bench: RecordedBenchmark, argv: list[str] | None = None) -> int:
    """Parse the flags, then either rewrite the table from the recorded JSON (``--markdown-only``) or measure,
    write the record (:func:`aot.runinfo.timing_record`'s header, then ``bench.measure(args)``'s fields) and its
    table, and print the table."""
    parser = bench.parser()
    args = parser.parse_args(argv)
    out: Path = args.out
    if getattr(args, "markdown_only", False):
        assert bench.markdown is not None
        write_text_atomic(out.with_suffix(".md"), bench.markdown(json.loads(out.read_text())))
        return 0
    before = load_average()
    record = timing_record(before, args.note, **bench.measure(args))
    write_record(out, record, bench.markdown)
    print(bench.markdown(record) if bench.markdown is not None else f"wrote {out}")
    return 0
