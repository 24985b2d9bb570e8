"""What a part of the report is: the commands it runs at a preset's size, how it gathers their outputs into
one ``results.json``, and how it renders that file into tables and figures beside the paper's numbers.

A part never computes anything itself: each :class:`Step` is an ``aot`` command (the same one a user would
type, shown verbatim in the report), run as a subprocess into ``DIR/PART/STEP``. ``collect`` reads the steps'
own ``results.json`` files and writes the part's; ``render`` reads only the part's ``results.json``.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from aot.errors import AotError
from aot.interpreter import module_argv, torchrun_argv
from aot.report.document import Block

#: the report's scales (``aot reproduce --scale``; ``preset`` in the code and in report.json, its old name)
PRESETS = ("tiny", "quick", "full", "paper")
PRESET_HELP = {
    "tiny": "for tests: seconds per part, numbers mean nothing",
    "quick": "every part at a small size: 11 minutes measured from a fresh clone on a quiet 2-core CPU "
    "(benchmarks/report)",
    "full": "a few CPU hours: the recorded CPU-scale benchmarks",
    "paper": "the paper's scale: 102M-182M models on OpenWebText / ImageNet with torchrun on GPUs",
}


@dataclass
class Context:
    """What a part's plan may depend on: the preset, the data sets the user named (``--data NAME=PATH``),
    the GPUs present, and the part's folder."""

    preset: str
    part_dir: Path
    data: dict[str, str] = field(default_factory=dict)
    cuda_devices: int = 0


@dataclass
class Step:
    """One command: ``aot ARGV`` (prefixed by ``launcher``, e.g. torchrun) writing into ``PART/out``.

    ``argv`` holds the options after ``aot``; ``--out PART/NAME`` is added. ``resumable``: an interrupted step
    of the same config is continued (the command gets ``--resume auto``: from its checkpoint when there is one, else
    from the start) rather than restarted. ``results``: the
    file the command writes, relative to its ``--out`` (the step counts as finished when it exists).
    """

    name: str
    argv: list[str]
    launcher: list[str] = field(default_factory=list)
    resumable: bool = False
    results: str = "results.json"  # where the command writes its results, inside its --out

    def results_path(self, part_dir: Path) -> Path:
        return self.out_dir(part_dir) / self.results

    def out_dir(self, part_dir: Path) -> Path:
        return part_dir / self.name

    def options(self, part_dir: Path) -> list[str]:
        """The options after ``aot``: the step's own, then ``--out PART/NAME`` (and ``--resume auto``)."""
        return [*self.argv, "--out", str(self.out_dir(part_dir)), *(["--resume", "auto"] if self.resumable else [])]

    def command(self, part_dir: Path) -> list[str]:
        """The command as a user would type it (``aot ...`` or ``torchrun ... -m aot.cli ...``)."""
        if self.launcher:
            return [*self.launcher, "-m", "aot.cli", *self.options(part_dir)]
        return ["aot", *self.options(part_dir)]

    def process_argv(self, part_dir: Path) -> list[str]:
        """What :func:`aot.report.execute.run_step` starts for :meth:`command`: this interpreter, with the working
        directory kept off ``sys.path`` (:mod:`aot.interpreter`), so a module lying in the folder ``aot reproduce``
        was started in is never imported. The only launcher is ``torchrun``."""
        if not self.launcher:
            return [*module_argv("aot.cli"), *self.options(part_dir)]
        if Path(self.launcher[0]).name != "torchrun":
            raise AotError(f"step {self.name!r}: unknown launcher {self.launcher[0]!r}; the only one is torchrun")
        return [*torchrun_argv(self.launcher[1:], "aot.cli"), *self.options(part_dir)]


@dataclass
class Plan:
    """A part's work at one preset. ``settings``: what the preset chose (sizes, models), part of the key;
    ``files``: name → text written into the part folder before the steps run (configs the steps read);
    ``missing``: why it cannot run here (no GPU, data not given) — then the report lists the commands only;
    ``needs``: the same for outputs of an earlier part that are not there (that part failed or has not run): the
    part is not run either, but ``--dry-run`` does not count it, since a whole run makes those outputs first."""

    steps: list[Step]
    settings: dict[str, Any] = field(default_factory=dict)
    files: dict[str, str] = field(default_factory=dict)
    missing: list[str] = field(default_factory=list)
    needs: list[str] = field(default_factory=list)

    @property
    def blockers(self) -> list[str]:
        """Every reason the part does not run now."""
        return [*self.missing, *self.needs]


@dataclass(frozen=True)
class Part:
    """One section of the report.

    name: folder and ``--only`` name; title: the section's heading; paper_items: keys of
    :data:`aot.report.paper_numbers.PAPER_ITEMS` it sits beside; plan(ctx): the steps at a preset;
    collect(part_dir, plan) → the part's results dict (written to ``PART/results.json``); render(results,
    part_dir) → the section's blocks (tables beside the paper's numbers, figures, what differs from the paper);
    data: the ``--data NAME=PATH`` names its plan reads (``ctx.data``; `aot reproduce` refuses any other name);
    data_checks: for some of them, what checks a value before any part starts (it raises a one-line error), so a
    bad ``--data text=FILE`` is refused up front rather than failing a part minutes later.
    """

    name: str
    title: str
    paper_items: tuple[str, ...]
    plan: Callable[[Context], Plan]
    collect: Callable[[Path, Plan], dict[str, Any]]
    render: Callable[[dict[str, Any], Path], list[Block]]
    data: tuple[str, ...] = ()
    data_checks: dict[str, Callable[[str], None]] = field(default_factory=dict)


def checkout_record(*parts: str) -> Path | None:
    """A benchmark's recorded results in the aot checkout this package runs from (``benchmarks/PARTS``), or None when
    the package is installed (a wheel carries no benchmark records: a part then takes them through ``--data``)."""
    root = Path(__file__).resolve().parents[3]  # src/aot/report/part.py -> the checkout
    path = root.joinpath("benchmarks", *parts)
    return path if (root / "pyproject.toml").is_file() and path.is_file() else None


def check_data(parts: list[Part], data: dict[str, str]) -> None:
    """Every ``--data`` name must be one a part reads (:attr:`Part.data`; a one-line error names the known ones),
    and its value pass that part's check (:attr:`Part.data_checks`)."""
    known = sorted({name for part in parts for name in part.data})
    for name in data:
        if name not in known:
            raise AotError(
                f"--data {name}={data[name]}: no part reads a data set named {name!r}; the names are {', '.join(known)}"
            )
        for part in parts:
            if name in part.data_checks:
                try:
                    part.data_checks[name](data[name])
                except AotError as exc:
                    raise AotError(f"--data {name}={data[name]}: {exc}") from None


@dataclass(frozen=True)
class Upstream:
    """Another part's outputs in the same report folder, for a part that reads them (``zeroshot`` and ``inside``
    evaluate the ``lm`` part's trained models). ``fingerprint`` is a hash of its ``results.json``: the reading part
    puts it in its plan's files, so that its key, and its steps' keys, change whenever the other part's runs do."""

    name: str
    folder: Path
    state: str  # from its status.json ("" when it never ran here)
    results: dict[str, Any] | None  # its results.json when it finished
    fingerprint: str

    def usable(self, preset: str) -> bool:
        return self.results is not None and self.results.get("preset") == preset

    def problem(self, reader: str, preset: str) -> str:
        """One line: why ``reader`` cannot use this part's outputs, and what to run."""
        again = f"`aot reproduce --scale {preset} --only {self.name} {reader}` with the same --out"
        if self.state == "failed":
            return f"the {self.name} part failed, so there is nothing to read (see its section); fix it, then {again}"
        if self.state == "planned":
            return f"the {self.name} part did not run on this machine (see its section), so there is nothing to read"
        if self.results is not None:
            return (
                f"the {self.name} part's results in {self.folder} are of scale {self.results.get('preset')!r}, "
                f"not {preset!r}: run {again}"
            )
        return (
            f"needs the {self.name} part's outputs, not in {self.folder} yet (a run of every part makes them first; "
            f"alone: {again})"
        )


def upstream(ctx: Context, name: str) -> Upstream:
    """The outputs of part ``name`` in the report folder of ``ctx`` (its sibling folder)."""
    import hashlib
    import json

    folder = ctx.part_dir.parent / name
    try:
        status = json.loads((folder / "status.json").read_text())
    except (OSError, ValueError):
        status = {}
    results_path = folder / "results.json"
    if status.get("state") == "done" and results_path.is_file():
        raw = results_path.read_bytes()
        return Upstream(name, folder, "done", json.loads(raw), hashlib.sha256(raw).hexdigest()[:12])
    return Upstream(name, folder, status.get("state", ""), None, "")


def read_step_results(part_dir: Path, plan: Plan, name: str) -> dict[str, Any]:
    """The ``results.json`` a step of ``plan`` wrote."""
    import json

    step = next(s for s in plan.steps if s.name == name)
    return json.loads(step.results_path(part_dir).read_text())


def existing_figures(part_dir: Path, candidates: dict[str, str]) -> dict[str, str]:
    """``{relative path: caption}`` of the candidate figures that exist (relative to ``part_dir``)."""
    return {rel: caption for rel, caption in candidates.items() if (part_dir / rel).is_file()}


def figure_blocks(results: dict[str, Any], part_dir: Path) -> list[Block]:
    """The figures a part's ``collect`` listed in ``results["figures"]`` (relative path → caption)."""
    from aot.report.document import Figure

    return [Figure(part_dir / rel, caption) for rel, caption in results.get("figures", {}).items()]


def differences_blocks(differences: list[str]) -> list[Block]:
    """The section every part ends with: what differs from the paper (data, scale, protocol), one bullet each."""
    from aot.report.document import Bullets, Paragraph

    return [Paragraph("What differs from the paper:"), Bullets(differences)]


def fmt_count(n: float) -> str:
    """A count for a table cell: 1.58M, 614k, 96."""
    if abs(n) >= 1e9:
        return f"{n / 1e9:.2f}B"
    if abs(n) >= 1e6:
        return f"{n / 1e6:.2f}M"
    if abs(n) >= 1e3:
        return f"{n / 1e3:.1f}k"
    return f"{n:g}"
