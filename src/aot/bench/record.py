"""The command line shared by the timing scripts of ``benchmarks/bench/`` that record one JSON and its table:
``--rounds``, ``--note``, ``--quick``, ``--out`` and ``--markdown-only``."""

from __future__ import annotations

import argparse
import json
from collections.abc import Callable
from pathlib import Path
from typing import Any

from aot.runinfo import load_average, timing_record


def recorded_benchmark_main(
    argv: list[str] | None,
    doc: str | None,
    default_out: Path,
    measure: Callable[[bool, int], dict[str, Any]],
    markdown: Callable[[dict[str, Any]], str],
) -> int:
    """Parse the shared flags, then either rewrite the table from the recorded JSON (``--markdown-only``) or call
    ``measure(quick, rounds)`` (its fields join :func:`aot.runinfo.timing_record`'s header), write the JSON and
    ``markdown(record)`` beside it (same name, ``.md``) and print the table."""
    parser = argparse.ArgumentParser(description=doc, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--rounds", type=int, default=4, help="interleaved rounds (default: 4)")
    parser.add_argument("--note", default="", help="what else ran on the machine (recorded)")
    parser.add_argument("--quick", action="store_true", help="a tiny size for a smoke test (not a record)")
    parser.add_argument("--out", type=Path, default=default_out, help=f"the JSON record (default: {default_out.name})")
    parser.add_argument("--markdown-only", action="store_true", help="rewrite the .md from the JSON")
    args = parser.parse_args(argv)
    if args.rounds < 1:
        parser.error("--rounds must be at least 1")
    out: Path = args.out
    if args.markdown_only:
        out.with_suffix(".md").write_text(markdown(json.loads(out.read_text())))
        return 0
    before = load_average()
    record = timing_record(before, args.note, **measure(args.quick, 1 if args.quick else args.rounds))
    out.write_text(json.dumps(record, indent=2) + "\n")
    out.with_suffix(".md").write_text(markdown(record))
    print(markdown(record))
    return 0
