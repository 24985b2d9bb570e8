"""The parts of ``aot reproduce``, one module each, in the order the report shows them.

Adding a part takes one module and one line:

1. write ``aot/report/parts/NAME.py`` defining ``PART = Part(name, title, paper_items, plan, collect, render)``
   (:class:`aot.report.part.Part`):

   - ``plan(ctx)`` returns a :class:`~aot.report.part.Plan`: the ``aot`` commands (:class:`~aot.report.part.Step`)
     for ``ctx.preset`` in ``tiny`` / ``quick`` / ``full`` / ``paper``, the ``settings`` the preset chose, and
     ``missing`` reasons when the data (``ctx.data``, from ``--data NAME=PATH``) or the GPUs
     (``ctx.cuda_devices``) are not there — the report then lists the commands instead of running them;
   - ``collect(part_dir, plan)`` reads each step's ``results.json`` (in ``part_dir / step.name``) and returns
     the part's results (plain JSON: the rows its tables need, figure file names relative to ``part_dir``);
   - ``render(results, part_dir)`` returns the section's blocks (:mod:`aot.report.document`): tables with the
     paper's numbers beside ours, read from :mod:`aot.report.paper_numbers` (never typed in the part), the
     figures, and a ``Bullets`` list of what differs from the paper;
2. add ``"aot.report.parts.NAME"`` to :data:`PART_MODULES` below, and the paper item's ``part`` in
   :data:`aot.report.paper_numbers.PAPER_ITEMS` names it already;
3. give ``tests/report/test_report.py`` the part's tiny run (the parametrised checks then cover its section).

A part that reads another part's outputs (``zeroshot`` and ``inside`` evaluate the ``lm`` part's models) comes after
it here, finds them with :func:`aot.report.part.upstream` and puts the other part's ``fingerprint`` in its plan's
``files``, so that its key and its steps' keys change whenever the other part's runs change.
"""

from __future__ import annotations

import importlib

from aot.report.part import Part

# in report order
PART_MODULES = [
    "aot.report.parts.theory",
    "aot.report.parts.lm",
    "aot.report.parts.zeroshot",  # reads the lm part's models
    "aot.report.parts.vision",
    "aot.report.parts.icl",
    "aot.report.parts.inside",  # reads the lm (and vision) parts' models
    "aot.report.parts.efficiency",
    "aot.report.parts.scaling",  # fits benchmarks/scaling's recorded runs (trains nothing)
    "aot.report.parts.recall",  # MQAR across blocks (beyond the paper)
]


def all_parts() -> list[Part]:
    return [importlib.import_module(name).PART for name in PART_MODULES]
