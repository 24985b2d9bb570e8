"""Run the parts of a report one after another, each command as a subprocess into ``DIR/PART/STEP``.

- A part is keyed by a hash of its plan (commands, files, settings) and the package's code (:func:`code_version`);
  a part whose ``status.json`` holds the same key and ``done`` is skipped. Each step is keyed by its command and
  the code the commands run (the package without ``aot.report``), so an interrupted part keeps its finished
  steps (a resumable step continues from its checkpoint), and a change to the report's own code only collects
  and renders again, in seconds.
- A failing step or part is recorded (``status.json``: ``failed`` with the error) and the next part runs.
- After every part the report is rewritten, so Ctrl-C (or a crash) leaves the finished parts and a report of
  them; the interrupted part is marked ``interrupted`` and runs again next time.
"""

from __future__ import annotations

import hashlib
import json
import os
import shutil
import signal
import subprocess
import time
from collections.abc import Callable
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

import aot
from aot.errors import AotError
from aot.report.part import PRESETS, Context, Part, Plan, Step
from aot.run_folder import WriteFailed, as_os_error, folder_lock, write_text_atomic

STATUS = "status.json"
RESULTS = "results.json"
STEP_MARKER = ".reproduce-step.json"


def code_version(exclude: tuple[str, ...] = ()) -> str:
    """``VERSION+HASH``: a hash of every source file of the installed package (a git-independent code version),
    leaving out the subpackages named in ``exclude`` (e.g. ``report``: the steps do not run its code)."""
    root = Path(aot.__file__).parent
    digest = hashlib.sha256()
    for path in sorted(root.rglob("*.py")):
        if path.relative_to(root).parts[0] in exclude:
            continue
        digest.update(path.relative_to(root).as_posix().encode())
        digest.update(path.read_bytes())
    return f"{aot.__version__}+{digest.hexdigest()[:10]}"


def git_commit() -> str | None:
    """The checkout's commit (with ``-dirty`` when the package's tracked sources changed), or None outside a git
    checkout. Other files (a report being rewritten, docs) do not make it dirty."""
    root = Path(aot.__file__).resolve().parents[2]
    try:
        head = subprocess.run(
            ["git", "-C", str(root), "rev-parse", "--short=10", "HEAD"], capture_output=True, text=True, timeout=10
        )
        if head.returncode != 0:
            return None
        dirty = subprocess.run(
            [
                "git",
                "-C",
                str(root),
                "status",
                "--porcelain",
                "--untracked-files=no",
                "--",
                str(Path(aot.__file__).parent),
            ],
            capture_output=True,
            text=True,
            timeout=10,
        ).stdout.strip()
    except (OSError, subprocess.SubprocessError):
        return None
    return head.stdout.strip() + ("-dirty" if dirty else "")


def cuda_device_count() -> int:
    import torch

    return torch.cuda.device_count() if torch.cuda.is_available() else 0


def _hash(obj: Any) -> str:
    return hashlib.sha256(json.dumps(obj, sort_keys=True, default=str).encode()).hexdigest()[:12]


def _portable_text(text: str, part_dir: Path) -> str:
    """``text`` with the part's folder written as ``PART`` and the report's folder (where the other parts' folders
    are, e.g. the lm part's runs that zeroshot evaluates) as ``REPORT``, so that a moved report keeps its keys."""
    return text.replace(str(part_dir), "PART").replace(str(part_dir.parent), "REPORT")


def _portable(command: list[str], part_dir: Path) -> list[str]:
    return [_portable_text(arg, part_dir) for arg in command]


def part_key(part: Part, preset: str, plan: Plan, part_dir: Path, code: str) -> str:
    commands = [_portable(step.command(part_dir), part_dir) for step in plan.steps]
    files = {name: _portable_text(text, part_dir) for name, text in plan.files.items()}
    return _hash({"part": part.name, "preset": preset, "commands": commands, "files": files,
                  "settings": plan.settings, "code": code})  # fmt: skip


@dataclass
class Outcome:
    """What happened to a part: ``done`` (ran now), ``skipped`` (finished before, same key), ``failed``,
    ``planned`` (cannot run here; commands listed), ``interrupted``, ``not reached`` (stopped before it),
    ``not selected`` (``--only``) or ``earlier`` (not selected, and its results come from an earlier plan or code
    version: shown, marked so)."""

    name: str
    state: str
    key: str = ""
    seconds: float = 0.0  # wall time of this part in the invocation that ran it
    command_seconds: float = 0.0  # what its commands took when they ran (kept steps count their recorded time)
    finished: str = ""
    error: str = ""
    missing: list[str] = field(default_factory=list)
    commands: list[str] = field(default_factory=list)

    @property
    def has_results(self) -> bool:
        return self.state in ("done", "skipped", "earlier")


def read_status(part_dir: Path) -> dict[str, Any]:
    try:
        return json.loads((part_dir / STATUS).read_text())
    except (OSError, ValueError):
        return {}


def _write_json(path: Path, obj: Any) -> None:
    """Write through a temporary file and rename, so an interrupted write never leaves half a file."""
    _write_text(path, json.dumps(obj, indent=1, default=str) + "\n")


def _write_text(path: Path, text: str) -> None:
    """Replace ``path`` in one step; a full disk or a read-only folder is one line naming it, the old file whole."""
    try:
        write_text_atomic(path, text)
    except OSError as exc:
        raise WriteFailed(exc, f"cannot write {str(path)!r}") from None


class StepFailed(AotError):
    pass


def _package_path_env() -> dict[str, str]:
    """The environment for a step: the package this process runs comes first on PYTHONPATH, so the commands run
    the same code (a source checkout or an installed package alike)."""
    env = dict(os.environ)
    src = str(Path(aot.__file__).resolve().parents[1])
    env["PYTHONPATH"] = src + (os.pathsep + env["PYTHONPATH"] if env.get("PYTHONPATH") else "")
    return env


def _last_error_line(log: Path) -> str:
    try:
        lines = [line.strip() for line in log.read_text(errors="replace").splitlines() if line.strip()]
    except OSError:
        return ""
    errors = [line for line in lines if line.startswith("aot: error:") or "Error" in line]
    return (errors or lines or [""])[-1][:500]


def run_step(step: Step, part_dir: Path, key: str, echo: Callable[[str], None], label: str) -> float:
    """Run one step unless its marker says it finished with this key; returns the seconds the command took
    (for a kept step, the time recorded when it ran).

    The step's folder is ours only if it holds our marker: a folder there without one is an error, not
    something to overwrite. A folder with another key is removed (stale); a resumable step with the same key
    keeps its folder and continues from its checkpoint."""
    out = step.out_dir(part_dir)
    marker_path = out / STEP_MARKER
    command = step.command(part_dir)
    if out.exists():
        if not marker_path.is_file():
            raise AotError(f"{out} exists and was not written by aot reproduce; move it away or choose another --out")
        marker = json.loads(marker_path.read_text())
        if marker.get("key") == key and marker.get("state") == "done" and step.results_path(part_dir).is_file():
            echo(f"  {label}: {step.name} finished before, kept")
            return float(marker.get("seconds", 0.0))
        if marker.get("key") != key or not step.resumable:
            shutil.rmtree(out)
    out.mkdir(parents=True, exist_ok=True)
    _write_json(marker_path, {"key": key, "state": "running", "command": command})
    logs = part_dir / "logs"
    logs.mkdir(exist_ok=True)
    log = logs / f"{step.name}.log"
    argv = step.process_argv(part_dir)
    echo(f"  {label}: {' '.join(command)}  (log: {log})")
    start = time.perf_counter()
    with open(log, "w") as handle:
        proc = subprocess.Popen(argv, stdout=handle, stderr=subprocess.STDOUT, env=_package_path_env())
        try:
            rc = proc.wait()
        except KeyboardInterrupt:
            proc.send_signal(signal.SIGINT)
            try:
                proc.wait(timeout=30)
            except subprocess.TimeoutExpired:
                proc.kill()
            raise
    seconds = time.perf_counter() - start
    if rc != 0:
        raise StepFailed(f"`{' '.join(command)}` exited with status {rc}: {_last_error_line(log)} (log: {log})")
    if not step.results_path(part_dir).is_file():
        raise StepFailed(f"`{' '.join(command)}` wrote no {step.results_path(part_dir)} (log: {log})")
    _write_json(marker_path, {"key": key, "state": "done", "command": command, "seconds": seconds})
    return seconds


def _step_key(step: Step, part_dir: Path, plan: Plan, code: str) -> str:
    files = {name: _portable_text(text, part_dir) for name, text in plan.files.items()}
    return _hash({"command": _portable(step.command(part_dir), part_dir), "files": files, "code": code})


def _now() -> str:
    return time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime())


def _commands_finished(part_dir: Path, plan: Plan) -> str:
    """When the part's last command finished (its step marker's time), else now."""
    stamps = [m.stat().st_mtime for s in plan.steps if (m := s.out_dir(part_dir) / STEP_MARKER).is_file()]
    return time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime(max(stamps))) if stamps else _now()


def run_part(part: Part, ctx: Context, code: str, step_code: str, echo: Callable[[str], None], label: str) -> Outcome:
    part_dir = ctx.part_dir
    try:
        plan = part.plan(ctx)
    except Exception as exc:  # a part that cannot even plan is reported, and the others still run
        return Outcome(part.name, "failed", error=f"planning failed: {type(exc).__name__}: {exc}")
    key = part_key(part, ctx.preset, plan, part_dir, code)
    commands = [" ".join(step.command(part_dir)) for step in plan.steps]
    outcome = Outcome(part.name, "", key=key, missing=plan.blockers, commands=commands)
    status = read_status(part_dir)
    if status.get("key") == key and status.get("state") == "done" and (part_dir / RESULTS).is_file():
        outcome.state, outcome.seconds, outcome.finished = "skipped", status.get("seconds", 0.0), status["finished"]
        outcome.command_seconds = status.get("command_seconds", outcome.seconds)
        echo(f"{label} {part.name}: finished before ({outcome.finished}, key {key}), skipped")
        return outcome
    part_dir.mkdir(parents=True, exist_ok=True)
    if plan.blockers:
        outcome.state = "planned"
        _write_json(part_dir / STATUS, asdict(outcome))
        echo(f"{label} {part.name}: not run here ({'; '.join(plan.blockers)}); it would run:")
        for command in commands:
            echo(f"    {command}")
        return outcome
    echo(f"{label} {part.name}: {len(plan.steps)} command(s)")
    _write_json(part_dir / STATUS, {**asdict(outcome), "state": "running"})
    start = time.perf_counter()
    try:
        for name, text in plan.files.items():
            _write_text(part_dir / name, text)
        for i, step in enumerate(plan.steps, 1):
            key_i = _step_key(step, part_dir, plan, step_code)
            outcome.command_seconds += run_step(step, part_dir, key_i, echo, f"{part.name} {i}/{len(plan.steps)}")
        results = part.collect(part_dir, plan)
        results.setdefault("commands", commands)
        results.setdefault("preset", ctx.preset)
        _write_json(part_dir / RESULTS, results)
        outcome.state = "done"
    except KeyboardInterrupt:
        outcome.state, outcome.seconds = "interrupted", time.perf_counter() - start
        _write_json(part_dir / STATUS, asdict(outcome))
        raise
    except Exception as exc:  # a failing part is reported and does not take the others down
        outcome.state = "failed"
        cause = None if isinstance(exc, AotError) else as_os_error(exc)
        if cause is not None:  # a full disk, a read-only folder: one line, as everywhere
            outcome.error = str(WriteFailed(cause, f"the {part.name} part could not write its files"))
        else:
            outcome.error = str(exc) if isinstance(exc, AotError) else f"{type(exc).__name__}: {exc}"
    outcome.seconds = time.perf_counter() - start
    outcome.finished = _commands_finished(part_dir, plan) if outcome.state == "done" else _now()
    _write_json(part_dir / STATUS, asdict(outcome))
    verdict = "done" if outcome.state == "done" else f"FAILED: {outcome.error}"
    echo(f"{label} {part.name}: {verdict} ({format_seconds(outcome.seconds)})")
    return outcome


def stored_outcome(part: Part, ctx: Context, code: str) -> Outcome:
    """A part not selected by ``--only``: its earlier results count if they match the current plan and code;
    results of an earlier plan or code version are still shown, as ``earlier``."""
    try:
        plan = part.plan(ctx)
    except Exception:
        return Outcome(part.name, "not selected")
    key = part_key(part, ctx.preset, plan, ctx.part_dir, code)
    status = read_status(ctx.part_dir)
    commands = [" ".join(step.command(ctx.part_dir)) for step in plan.steps]
    if status.get("key") == key and status.get("state") == "done" and (ctx.part_dir / RESULTS).is_file():
        seconds = status.get("seconds", 0.0)
        return Outcome(
            part.name,
            "skipped",
            key,
            seconds,
            status.get("command_seconds", seconds),
            status.get("finished", ""),
            commands=commands,
        )
    if status.get("state") == "done" and (ctx.part_dir / RESULTS).is_file():  # finished under another key
        seconds = status.get("seconds", 0.0)
        return Outcome(
            part.name,
            "earlier",
            status.get("key", ""),
            seconds,
            status.get("command_seconds", seconds),
            status.get("finished", ""),
            commands=commands,
        )
    return Outcome(part.name, "not selected", key, commands=commands, missing=plan.blockers)


def format_seconds(seconds: float) -> str:
    seconds = round(seconds)
    return f"{seconds // 60}m{seconds % 60:02d}s" if seconds >= 60 else f"{seconds}s"


def select_parts(parts: list[Part], only: list[str] | None) -> list[Part]:
    if not only:
        return parts
    names = [p.name for p in parts]
    unknown = [name for name in only if name not in names]
    if unknown:
        raise AotError(f"--only: unknown part {unknown[0]!r}; choose from {', '.join(names)}")
    return [p for p in parts if p.name in only]


def dry_run_lines(parts: list[Part], preset: str, out: Path, data: dict[str, str]) -> list[str]:
    """What ``--dry-run`` prints: each part's commands at ``preset`` and why it could not run here (outputs of an
    earlier part that are not there yet do not count: the run makes them first)."""
    cuda = cuda_device_count()
    lines = []
    for part in parts:
        plan = part.plan(Context(preset, out / part.name, dict(data), cuda))
        lines.append(f"{part.name}:" + (f" (not here: {'; '.join(plan.missing)})" if plan.missing else ""))
        lines += [f"  {' '.join(step.command(out / part.name))}" for step in plan.steps]
    return lines


def parse_data(items: list[str] | None) -> dict[str, str]:
    """``["openwebtext=hf:Skylion007/openwebtext", "imagenet=/data/imagenet"]`` → a dict."""
    data = {}
    for item in items or []:
        name, sep, value = item.partition("=")
        if not sep or not name or not value:
            raise AotError(f"--data {item!r} must look like NAME=PATH (e.g. openwebtext=hf:Skylion007/openwebtext)")
        data[name] = value
    return data


def run_parts(
    parts: list[Part],
    preset: str,
    out: Path,
    only: list[str] | None = None,
    data: dict[str, str] | None = None,
    echo: Callable[[str], None] = print,
    on_progress: Callable[[list[Outcome]], None] | None = None,
) -> list[Outcome]:
    """Run the selected parts (all by default) and return one outcome per part, unselected ones included.

    ``on_progress`` is called with the outcomes so far after every part (and on Ctrl-C), e.g. to rewrite the
    report; on Ctrl-C it is called and the KeyboardInterrupt propagates. ``out`` is locked meanwhile
    (:func:`aot.run_folder.folder_lock`): a second `aot reproduce` into it is refused in one line."""
    if preset not in PRESETS:
        raise AotError(f"unknown scale {preset!r}; use one of {', '.join(PRESETS)}")
    selected = select_parts(parts, only)
    with folder_lock(out):
        return _run_selected(parts, selected, preset, out, data or {}, echo, on_progress)


def _run_selected(
    parts: list[Part],
    selected: list[Part],
    preset: str,
    out: Path,
    data: dict[str, str],
    echo: Callable[[str], None],
    on_progress: Callable[[list[Outcome]], None] | None,
) -> list[Outcome]:
    code, step_code = code_version(), code_version(exclude=("report",))
    cuda = cuda_device_count()

    def context(part: Part) -> Context:
        return Context(preset, out / part.name, dict(data), cuda)

    outcomes = {p.name: stored_outcome(p, context(p), code) for p in parts if p not in selected}
    outcomes.update({p.name: Outcome(p.name, "not reached") for p in selected})
    ordered = lambda: [outcomes[p.name] for p in parts if p.name in outcomes]  # noqa: E731
    try:
        for i, part in enumerate(selected, 1):
            outcomes[part.name] = Outcome(part.name, "interrupted")
            outcomes[part.name] = run_part(part, context(part), code, step_code, echo, f"[{i}/{len(selected)}]")
            if on_progress:
                on_progress(ordered())
    except KeyboardInterrupt:
        if on_progress:
            on_progress(ordered())
        raise
    return ordered()
