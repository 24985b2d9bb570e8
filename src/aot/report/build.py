"""Assemble the report from the parts' outcomes and ``results.json`` files: ``DIR/report.md``, the self-contained
``DIR/index.html`` and ``DIR/report.json`` (the outcomes, machine and command, for programs)."""

from __future__ import annotations

import json
from dataclasses import asdict
from pathlib import Path
from typing import Any

from aot.report.document import Block, Bullets, Code, Document, Paragraph, Section, Table, to_html, to_markdown
from aot.report.execute import RESULTS, Outcome, format_seconds
from aot.report.paper_numbers import CITATION, PAPER_ITEMS, URL
from aot.report.part import PRESET_HELP, Part
from aot.run_folder import WriteFailed, write_text_atomic

STATE_WORDS = {
    "done": "done",
    "skipped": "done (finished before, reused)",
    "failed": "FAILED",
    "planned": "not run here (listed)",
    "interrupted": "interrupted (runs again next time)",
    "not selected": "not run (not selected by --only)",
    "not reached": "not run (stopped before it)",
    "earlier": "from an earlier code or plan version (not re-run by this --only; run the part to refresh it)",
}


def _machine_line(machine: dict[str, Any]) -> str:
    gpu = f", GPU {machine['gpu']}" if machine.get("gpu") else ", no GPU"
    return (
        f"{machine['processor']}, {machine['cpu_count']} CPU cores{gpu}; {machine['platform']}; "
        f"Python {machine['python']}, torch {machine['torch']}"
    )


def _part_blocks(part: Part, outcome: Outcome, part_dir: Path) -> list[Block]:
    blocks: list[Block] = []
    when = f", finished {outcome.finished}" if outcome.finished else ""
    took = f"; its commands took {format_seconds(outcome.command_seconds)}" if outcome.command_seconds else ""
    blocks.append(Paragraph(f"Status: **{STATE_WORDS.get(outcome.state, outcome.state)}**{took}{when}."))
    if outcome.has_results:
        try:
            results = json.loads((part_dir / RESULTS).read_text())
            blocks += part.render(results, part_dir)
            blocks.append(Paragraph(f"Every number above is read from `{part.name}/{RESULTS}`."))
        except Exception as exc:  # a renderer's bug shows in its section, not as a missing report
            blocks.append(Paragraph("Rendering this part failed:"))
            blocks.append(Code(f"{type(exc).__name__}: {exc}"))
    if outcome.state == "failed":
        blocks.append(Paragraph("The error (the other parts are unaffected; fix it and run the command again):"))
        blocks.append(Code(outcome.error))
    if outcome.missing:
        blocks.append(Paragraph("Not run on this machine because:"))
        blocks.append(Bullets(outcome.missing))
    if outcome.commands:
        verb = "would run" if outcome.state in ("planned", "not selected") else "ran"
        blocks.append(Paragraph(f"The commands this part {verb} (each writes its own `results.json`):"))
        blocks.append(Code("\n".join(outcome.commands)))
    return blocks


def build_document(
    parts: list[Part],
    outcomes: list[Outcome],
    *,
    preset: str,
    out: Path,
    command: str,
    machine: dict[str, Any],
    code: str,
    commit: str | None,
) -> Document:
    by_name = {o.name: o for o in outcomes}
    shown = [p for p in parts if p.name in by_name]
    total = sum(o.seconds for o in outcomes if o.state == "done")
    commands_total = sum(o.command_seconds for o in outcomes if o.has_results)
    load = machine.get("load_average")
    intro: list[Block] = [
        Paragraph(
            f"Produced by `{command}` — scale **{preset}** ({PRESET_HELP[preset]}). Every table and figure is read "
            f"from a part's `results.json`; the paper's numbers beside ours come from `aot.report.paper_numbers` "
            f"({CITATION}, {URL})."
        ),
        Paragraph(
            f"Written {machine['date']} on {_machine_line(machine)}. Code: aot {code}"
            + (f", git {commit}" if commit else "")
            + f". The commands behind this report took {format_seconds(commands_total)} in all"
            + (f" (this invocation: {format_seconds(total)})" if total < commands_total - 1 else "")
            + (
                f"; load average when written {load[0]:.1f} / {load[1]:.1f} / {load[2]:.1f} (1 / 5 / 15 min)"
                if load
                else ""
            )
            + "."
        ),
        Table(
            "The parts of this report",
            ["part", "beside the paper's", "status", "time", "finished"],
            [
                [
                    f"{p.title} (`{p.name}`)",
                    "; ".join(i.title for i in PAPER_ITEMS if i.key in p.paper_items),
                    STATE_WORDS.get(by_name[p.name].state, by_name[p.name].state),
                    format_seconds(by_name[p.name].command_seconds) if by_name[p.name].command_seconds else "—",
                    by_name[p.name].finished or "—",
                ]
                for p in shown
            ],
        ),
    ]
    registered = {p.name for p in parts}
    uncovered = [item.title for item in PAPER_ITEMS if item.part not in registered]
    if uncovered:
        intro.append(Paragraph("Not reproduced by this version of the report (no part for them yet):"))
        intro.append(Bullets(uncovered))
    sections = [Section(p.name, p.title, _part_blocks(p, by_name[p.name], out / p.name)) for p in shown]
    return Document("Attention-Only Transformers: the paper's experiments, reproduced", intro, sections)


def write_report(
    parts: list[Part],
    outcomes: list[Outcome],
    *,
    preset: str,
    out: Path,
    command: str,
    machine: dict[str, Any],
    code: str,
    commit: str | None,
) -> Document:
    """Write ``report.md``, ``index.html`` and ``report.json`` into ``out``, each replaced in one step
    (:func:`aot.run_folder.write_text_atomic`): a failed write (full disk, read-only folder) is one line,
    :class:`aot.run_folder.WriteFailed`, that leaves the earlier file whole and no scratch file."""
    doc = build_document(
        parts, outcomes, preset=preset, out=out, command=command, machine=machine, code=code, commit=commit
    )
    summary = {
        "command": command,
        "preset": preset,
        "machine": machine,
        "code": code,
        "git": commit,
        "parts": [asdict(o) for o in outcomes],
    }
    for name, text in (
        ("report.md", to_markdown(doc, out)),
        ("index.html", to_html(doc)),
        ("report.json", json.dumps(summary, indent=1) + "\n"),
    ):
        try:
            write_text_atomic(out / name, text)
        except OSError as exc:  # a full disk, a read-only folder: one line; the earlier report files are whole
            raise WriteFailed(exc, f"cannot write the report {str(out / name)!r} (the earlier one is kept)") from None
    return doc


def rewrite_report(parts: list[Part], out: Path) -> Document:
    """Write ``report.md`` and ``index.html`` of the report in ``out`` again from what it recorded (its
    ``report.json`` and each part's results), running nothing: how a committed report's page is built without
    keeping the page itself in git. The date, machine and command stay those of the run that wrote the record."""
    from aot.errors import AotError

    path = out / "report.json"
    try:
        summary = json.loads(path.read_text(encoding="utf-8"))
        outcomes = [Outcome(**o) for o in summary["parts"]]
        fields = {k: summary[k] for k in ("preset", "command", "machine", "code")}
    except (OSError, ValueError, KeyError, TypeError) as exc:
        raise AotError(
            f"--render needs the report.json that `aot reproduce --out {out}` writes ({path}: {exc}); run the "
            "report first"
        ) from None
    return write_report(parts, outcomes, out=out, commit=summary.get("git"), **fields)
