"""What tests/cli/test_every_command.py and tests/cli/test_command_properties.py share: the tiny run folders every
`aot` command reads (built once), a sandbox copy of them per case, the sha256 of every file before and after, the
damage done to a run folder, and two ways of running `aot`: in this process through ``aot.cli.main`` (fast; a
timer and an address-space cap stand in for a hang and a runaway allocation) and in a subprocess (for a command
that starts processes of its own, where a kill must reach them all)."""

from __future__ import annotations

import argparse
import contextlib
import hashlib
import io
import json
import os
import resource
import shutil
import signal
import subprocess
import sys
import time
import traceback
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path

import pytest

from aot.cli import build_parser, main
from aot.run_folder import file_sha256, state_digest
from aot.tasks import TASKS, get_task

ROOT = Path(__file__).resolve().parents[2]
FIXTURE = ROOT / "tests" / "fixtures" / "sonnets.txt"

#: what a task's smoke run reads from a file of the test suite (the others make their own data)
DATA = {"lm": ["--corpus", str(FIXTURE)]}


def tiny_argv(name: str) -> list[str]:
    """``aot train NAME``'s arguments for the task's smoke run (:attr:`aot.tasks.Task.smoke`: 1 layer, 2 steps,
    fp32) on the CPU, checkpointing at every step."""
    preset, sets = get_task(name).smoke
    pairs = [a for item in (*sets, "train.checkpoint_every=1") for a in ("--set", item)]
    return ["--recipe", preset, "--device", "cpu", *pairs, *DATA.get(name, [])]


#: the tiny training of every registered task (its smoke run), as `aot train TASK` arguments
TINY = {name: tiny_argv(name) for name in TASKS}
#: a second checkpoint needs a second step: checkpoint_every=1 with 2 steps leaves checkpoint/ and checkpoint.prev/
RUNS = ("lm", "vision", "icl")
EXPORTS = {"hf": ("hf", "lm"), "st": ("safetensors", "lm")}  # folder -> (format, run it exports)
TEXT = "Shall I compare thee to a summer's day?\nThou art more lovely and more temperate.\n" * 40
LATIN1 = ("Caf\xe9 cr\xe8me, na\xefve fa\xe7ade: \xe0 la carte.\n" * 40).encode("latin-1")


def leaf_commands(
    parser: argparse.ArgumentParser | None = None, prefix: tuple[str, ...] = ()
) -> dict[str, argparse.ArgumentParser]:
    """Every runnable `aot` command ("train lm", "export hf", "sample", ...) and its parser, from the parser itself:
    a command added to ``aot.cli`` appears here without a line changed."""
    parser = parser or build_parser()
    subs = [a for a in parser._actions if isinstance(a, argparse._SubParsersAction)]
    if not subs:
        return {" ".join(prefix): parser}
    found: dict[str, argparse.ArgumentParser] = {}
    for name, sub in subs[0].choices.items():
        found.update(leaf_commands(sub, (*prefix, name)))
    return found


def numeric_options(parser: argparse.ArgumentParser) -> dict[str, type]:
    """The options of ``parser`` that take a number, with its kind (``int`` or ``float``): the action's ``type`` is
    ``int`` / ``float`` or an object with a ``kind`` (``aot.cli.options.Number``)."""
    found: dict[str, type] = {}
    for action in parser._actions:
        kind = getattr(action.type, "kind", action.type)
        if action.option_strings and kind in (int, float):
            found[action.option_strings[-1]] = kind
    return found


def declared_number(parser: argparse.ArgumentParser, option: str) -> Callable[[str], object] | None:
    """The parser's ``type`` of ``option`` when it declares a range (``aot.cli.options.Number``: raises
    ``argparse.ArgumentTypeError`` for a value outside it), else None."""
    for action in parser._actions:
        if option in action.option_strings and hasattr(action.type, "limit"):
            return action.type  # type: ignore[return-value]
    return None


# -- the runs, built once; a sandbox copy per case -------------------------------------------------------------


def build_runs(root: Path) -> Path:
    """``root`` with the tiny runs ``lm/``, ``vision/`` (digits), ``icl/``, the exports ``hf/`` and ``st/`` of the lm
    run, the data cache ``data/`` ($AOT_DATA), text files: ``text.txt`` (UTF-8), ``latin1.txt``, ``empty/``, and an
    image folder in ImageNet's layout, ``images/``."""
    root.mkdir(parents=True, exist_ok=True)
    with environment(root):
        for name in RUNS:
            status = main(["train", name, "--out", str(root / name), *TINY[name]])
            assert status == 0, f"building the tiny {name} run failed"
        for folder, (fmt, run) in EXPORTS.items():
            assert main(["export", fmt, str(root / run), str(root / folder)]) == 0, f"aot export {fmt} failed"
    (root / "text.txt").write_text(TEXT, encoding="utf-8")
    (root / "latin1.txt").write_bytes(LATIN1)
    (root / "empty").mkdir()
    _image_folder(root / "images")
    return root


def _image_folder(root: Path) -> None:
    """A tiny ImageNet-layout folder (train/ + val/, two classes of 8x8 PNGs) for the image-folder commands."""
    import numpy as np
    from PIL import Image

    for split, count in (("train", 3), ("val", 1)):
        for label in range(2):
            (root / split / f"c{label}").mkdir(parents=True)
            for i in range(count):
                pixels = np.full((8, 8, 3), 40 + 150 * label + i, dtype=np.uint8)
                Image.fromarray(pixels).save(root / split / f"c{label}" / f"{i}.png")


_BUILT: dict[str, Path] = {}


def shared_runs(factory: pytest.TempPathFactory) -> Path:
    """:func:`build_runs` once per test session (both modules read the same pristine copy; cases work on copies)."""
    if "root" not in _BUILT:
        _BUILT["root"] = build_runs(factory.mktemp("runs"))
    return _BUILT["root"]


@contextlib.contextmanager
def environment(root: Path) -> Iterator[None]:
    """$AOT_DATA in ``root/data`` and the working directory ``root`` (a command's default ``--out`` lands there)."""
    old_env, old_cwd = os.environ.get("AOT_DATA"), os.getcwd()
    os.environ["AOT_DATA"] = str(root / "data")
    os.chdir(root)
    try:
        yield
    finally:
        os.chdir(old_cwd)
        if old_env is None:
            os.environ.pop("AOT_DATA", None)
        else:
            os.environ["AOT_DATA"] = old_env


@dataclass
class Sandbox:
    """A private copy of the built runs for one case: ``sb.lm``, ``sb.vision``, ``sb.icl``, ``sb.hf``, ``sb.st``,
    ``sb.text``, ``sb.latin1``, ``sb.empty``, ``sb.images``, ``sb.new`` (a folder that does not exist yet) and
    ``sb.root``."""

    root: Path

    def __getattr__(self, name: str) -> Path:
        files = {"text": "text.txt", "latin1": "latin1.txt", "new": "new-out"}
        return self.root / files.get(name, name)

    def path(self, name: str) -> str:
        return str(getattr(self, name))


def sandbox_copy(built: Path, where: Path) -> Sandbox:
    shutil.copytree(built, where, symlinks=True)
    return Sandbox(where)


# -- nothing changed: every file's sha256 ----------------------------------------------------------------------

CACHE = "data"  # $AOT_DATA inside a sandbox: new cache files are allowed, changed or removed ones are not
#: the machine's measurement caches (aot.bench.machine_cache: precision and matmul peaks): a command that SUCCEEDS
#: may refresh them (a training measures the peak it divides MFU by); a refused one must leave them as they were
MEASUREMENTS = tuple(f"{CACHE}/{name}.json" for name in ("peaks", "precision"))


def is_measurement(change: str) -> bool:
    """A :func:`changes` entry that a success may make: a refreshed machine measurement (:data:`MEASUREMENTS`)."""
    return change.partition(" ")[2] in MEASUREMENTS


def snapshot(root: Path) -> dict[str, str]:
    """``relative path -> sha256`` of every file under ``root`` (``"folder"`` for a folder, the target for a link)."""
    state: dict[str, str] = {}
    for path in sorted(root.rglob("*")):
        name = str(path.relative_to(root))
        if path.is_symlink():
            state[name] = "link -> " + os.readlink(path)
        elif path.is_dir():
            state[name] = "folder"
        elif path.is_file():
            state[name] = file_sha256(path)
        else:
            state[name] = "other"
    return state


def changes(before: dict[str, str], after: dict[str, str]) -> list[str]:
    """What differs, one entry per path: files of the user's (outside the data cache) added, removed or changed;
    in the cache only removed or changed ones."""
    found = []
    for name in sorted(set(before) | set(after)):
        in_cache = name == CACHE or name.startswith(CACHE + "/")
        if name not in before:
            if not in_cache:
                found.append(f"added {name}")
        elif name not in after:
            found.append(f"removed {name}")
        elif before[name] != after[name]:
            found.append(f"changed {name}")
    return found


# -- damage ----------------------------------------------------------------------------------------------------


def flip_byte(path: Path, offset: int = -1) -> None:
    """Flip one byte of ``path`` (the last by default: inside a safetensors file's data, so it still parses)."""
    data = bytearray(path.read_bytes())
    data[offset] ^= 0xFF
    path.write_bytes(bytes(data))


def resign(folder: Path) -> None:
    """Make ``folder/trainer.json`` list the files as they are now (a checkpoint whose checksums verify but whose
    contents are wrong: what only the schema checks can catch)."""
    path = folder / "trainer.json"
    state = json.loads(path.read_text())
    state["files"] = {name: file_sha256(folder / name) for name in state["files"] if (folder / name).is_file()}
    state["state_sha256"] = state_digest(state)
    path.write_text(json.dumps(state, indent=2))


def checkpoints(run: Path) -> list[Path]:
    return [folder for folder in (run / "checkpoint", run / "checkpoint.prev") if folder.is_dir()]


# -- running `aot` ---------------------------------------------------------------------------------------------


@dataclass
class Outcome:
    status: int | str  # the exit status, "traceback" or "hang"
    stdout: str
    stderr: str
    seconds: float

    @property
    def err_lines(self) -> list[str]:
        return [line for line in self.stderr.splitlines() if line.strip()]

    def describe(self) -> str:
        """The status, the last stderr line, then the whole stderr (its end)."""
        last = self.err_lines[-1][-300:] if self.err_lines else "(nothing)"
        return f"status {self.status} after {self.seconds:.1f}s, last stderr line: {last}\n{self.stderr[-3000:]}"


class Hang(BaseException):
    """Raised by the timer in a command that ran past its time (a BaseException: no ``except Exception`` eats it)."""


ADDRESS_HEADROOM = 3 << 30  # bytes a command run in this process may map beyond what the process has already


def _address_space() -> int:
    for line in Path("/proc/self/status").read_text().splitlines():
        if line.startswith("VmSize:"):
            return int(line.split()[1]) * 1024
    return 0


@contextlib.contextmanager
def guarded(timeout: float) -> Iterator[None]:
    """A timer that raises :class:`Hang` after ``timeout`` s and an address-space limit ``ADDRESS_HEADROOM`` above
    the current size (a 16 GiB allocation fails at once instead of swapping the machine); both undone after."""

    def on_alarm(signum: int, frame: object) -> None:
        raise Hang(f"still running after {timeout:.0f}s")

    old_handler = signal.signal(signal.SIGALRM, on_alarm)
    soft, hard = resource.getrlimit(resource.RLIMIT_AS)
    cap = _address_space() + ADDRESS_HEADROOM
    resource.setrlimit(resource.RLIMIT_AS, (cap if hard == resource.RLIM_INFINITY else min(cap, hard), hard))
    signal.setitimer(signal.ITIMER_REAL, timeout)
    try:
        yield
    finally:
        signal.setitimer(signal.ITIMER_REAL, 0)
        resource.setrlimit(resource.RLIMIT_AS, (soft, hard))
        signal.signal(signal.SIGALRM, old_handler)


def run_in_process(argv: Sequence[str], timeout: float = 30) -> Outcome:
    """``aot.cli.main(argv)`` with stdout / stderr captured; an escaping exception is ``status="traceback"`` with
    the traceback in ``stderr``, a run past ``timeout`` is ``status="hang"``."""
    out, err = io.StringIO(), io.StringIO()
    start = time.perf_counter()
    status: int | str
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
        try:
            with guarded(timeout):
                status = main(list(argv))
        except SystemExit as exc:  # argparse: --help, a usage error
            status = exc.code if isinstance(exc.code, int) else (0 if exc.code is None else 1)
            if isinstance(exc.code, str):
                err.write(exc.code + "\n")
        except Hang as exc:
            status = "hang"
            err.write(f"{exc}\n{traceback.format_exc()}")
        except BaseException:  # what we look for: anything that escapes main
            status = "traceback"
            err.write(traceback.format_exc())
    return Outcome(status, out.getvalue(), err.getvalue(), time.perf_counter() - start)


def run_in_subprocess(argv: Sequence[str], cwd: Path, timeout: float = 60, memory: int = 4 << 30) -> Outcome:
    """``python -m aot.cli ARGV`` in ``cwd`` under an address-space cap of ``memory`` bytes; past ``timeout`` the
    whole process group is killed (``status="hang"``); a Python traceback on stderr is ``status="traceback"``."""

    def limits() -> None:
        os.setsid()
        resource.setrlimit(resource.RLIMIT_AS, (memory, memory))

    env = {**os.environ, "PYTHONPATH": str(ROOT / "src"), "OMP_NUM_THREADS": "1", "AOT_DATA": str(cwd / CACHE)}
    start = time.perf_counter()
    proc = subprocess.Popen(
        [sys.executable, "-m", "aot.cli", *argv], cwd=cwd, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
        text=True, errors="replace", preexec_fn=limits,
    )  # fmt: skip
    try:
        stdout, stderr = proc.communicate(timeout=timeout)
        status: int | str = proc.returncode
    except subprocess.TimeoutExpired:
        os.killpg(proc.pid, signal.SIGKILL)
        stdout, stderr = proc.communicate()
        status = "hang"
    if "Traceback (most recent call last)" in stderr:
        status = "traceback"
    return Outcome(status, stdout, stderr, time.perf_counter() - start)


def one_line_error(outcome: Outcome) -> str | None:
    """Why ``outcome`` is not a clean refusal (exit 2, exactly one stderr line ``aot: error: ...``); None if it is."""
    lines = outcome.err_lines
    if outcome.status != 2:
        return f"expected exit status 2: {outcome.describe()}"
    if len(lines) != 1 or not lines[0].startswith("aot: error: "):
        return f"expected one line `aot: error: ...` on stderr, got {len(lines)}: {outcome.describe()}"
    return None


def clean(outcome: Outcome) -> str | None:
    """Why ``outcome`` is neither a success nor a clean refusal; None if it is one of them."""
    if outcome.status == 0 and "Traceback" not in outcome.stderr:
        return None
    return one_line_error(outcome)


def digest_text(text: str) -> str:
    return hashlib.sha256(text.encode()).hexdigest()[:12]
