"""Every `aot` command under bad input and damaged runs (issue 30, "Must show"): a corrupt, truncated, list-shaped
or key-less results.json / config.json in a run folder, a checkpoint that fails its checksum, a non-UTF-8 text file,
a folder or /dev/null where a file is expected, absurd numbers for every numeric option (0, -1, 10**12; NaN and
infinity for floats), and an OUT that is an existing run or its checkpoint/. Each refusal is exit status 2, one
line ``aot: error: ...`` on stderr, no traceback, within a time limit, and leaves every file as it was (the sha256
of every file in the case's sandbox before and after). What legitimately succeeds is said in the case table.

The commands come from ``aot.cli.build_parser()`` and their numeric options from their parsers, so a new command
or option is covered as soon as it exists; a command without an entry in :data:`COMMANDS` fails
:func:`test_every_command_has_a_case_table_entry` with what to add.

The runs (a 1-layer lm, vision-on-digits and icl model, 2 steps, and an ``aot export hf`` / ``safetensors`` of
the lm run) are built once per module; each case works on its own copy. Commands run in this process
(``aot.cli.main``) under a timer and an address-space cap; ``aot reproduce``, which starts processes, runs in a
subprocess whose process group is killed past its time.
"""

from __future__ import annotations

import argparse
import fnmatch
import json
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

import pytest
from cli_harness import (
    TINY,
    Outcome,
    Sandbox,
    changes,
    checkpoints,
    declared_number,
    environment,
    flip_byte,
    is_measurement,
    leaf_commands,
    numeric_options,
    one_line_error,
    resign,
    run_in_process,
    run_in_subprocess,
    sandbox_copy,
    shared_runs,
    snapshot,
)

Argv = Callable[[Sandbox], list[str]]
PathArgv = Callable[[Sandbox, str], list[str]]

# -- the case table ---------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class Command:
    """How to run one `aot` command in each case.

    ``good``: a valid, cheap invocation that starts no process (it must succeed and change no file it did not
    create). ``reads``: the
    sandbox folders it reads as RUN_DIR, and ``on_run(sb, path)`` the command reading ``path``. ``texts``: each text
    input's name and ``argv(sb, path)`` reading ``path``. ``out(sb, path)``: the command writing into OUT =
    ``path`` (None: no output folder); ``own_out``: OUT targets that are the command's own default (success).
    Numbers: every numeric option of the parser gets 0, -1, 10**12 (and nan, inf for floats) added to ``numbers``
    (default ``good``); all are refused except ``accept`` (must succeed) and ``either`` (success or refusal);
    ``dump``: accepted values are checked with ``--dump-config`` (a training would run 10**12 steps).
    ``results``: what it does with a run's results.json: ``needs`` its fields (every damage refused), ``reads`` it
    (malformed refused; a key-less ``{}``, an unfinished run's, may succeed), ``ignores`` it (success allowed);
    ``config``: ``ignores`` when the checkpoints' config.json is not what the model is built from (``--resume``
    builds it from the run config and checks the weights against it).
    ``costly``: a success takes seconds: its accepted numbers are slow cases (the good invocation stays).
    ``subprocess``: run in a subprocess (the command starts processes of its own)."""

    good: Argv
    reads: tuple[str, ...] = ()
    on_run: PathArgv | None = None
    texts: dict[str, PathArgv] = field(default_factory=dict)
    out: PathArgv | None = None
    own_out: tuple[str, ...] = ()
    numbers: PathArgv | None = None
    accept: dict[str, tuple[str, ...]] = field(default_factory=dict)
    either: dict[str, tuple[str, ...]] = field(default_factory=dict)
    dump: bool = False
    results: str = "reads"
    config: str = "reads"
    costly: bool = False
    subprocess: bool = False
    timeout: float = 10


SEED: dict[str, tuple[str, ...]] = {"--seed": ("0", "1000000000000")}  # a seed is any integer in [0, 2**63)


def train(task: str, extra: tuple[str, ...] = ()) -> Command:
    """``aot train TASK``: a tiny run into a new OUT; resume / init-from read a run."""
    base = ["train", task, *TINY[task], *extra]
    accept = {**SEED, "--steps": ("1000000000000",), "--lr": ("1000000000000.0",)}
    if task == "vision":
        accept["--label-smoothing"] = ("0",)
        accept["--workers"] = ("0",)  # decode in the training loop
    texts: dict[str, PathArgv] = {"--config": lambda sb, p: [*base, "--out", sb.path("new"), "--config", p]}
    if task == "lm":
        texts["--corpus"] = lambda sb, p: [*base, "--out", sb.path("new"), "--corpus", p]
    if task == "vision":
        texts["--data"] = lambda sb, p: [*base, "--out", sb.path("new"), "--data", p]
    reads: tuple[str, ...] = ()
    on_run: PathArgv | None = None
    if task == "vision":  # fine-tuning reads another run
        reads, on_run = ("vision",), lambda sb, p: [*base, "--out", sb.path("new"), "--init-from", p]
    elif task == "lm":  # --resume reads the run's checkpoints
        reads, on_run = ("lm",), lambda sb, p: [*base, "--out", p, "--resume"]

    def numbers(sb: Sandbox, option: str) -> list[str]:  # without the --set that would override the flag
        return [*_drop_set(base, option[2:].replace("-", "_")), "--out", sb.path("new")]

    return Command(
        good=lambda sb: [*base, "--out", sb.path("new")],
        numbers=numbers,
        config="ignores" if task == "lm" else "reads",
        reads=reads,
        on_run=on_run,
        texts=texts,
        out=lambda sb, p: [*base, "--out", p],
        accept=accept,
        dump=True,
    )


def _drop_set(argv: list[str], name: str) -> list[str]:
    """``argv`` without the ``--set SECTION.FIELD=...`` pairs that set what option ``--NAME`` sets: a field called
    ``name`` or ending in ``_name`` (``--pairs`` sets data.n_pairs, ``--steps`` train.steps)."""
    kept: list[str] = []
    for item in argv:
        field = item.partition("=")[0].rpartition(".")[2]
        if kept and kept[-1] == "--set" and (field == name or field.endswith(f"_{name}")):
            kept.pop()
        else:
            kept.append(item)
    return kept


def sample_argv(sb: Sandbox, run: str, *extra: str) -> list[str]:
    return ["sample", run, "--prompt", "Shall I", "--max-new-tokens", "4", *extra]


def eval_lm(sb: Sandbox, run: str, data: str | None = None) -> list[str]:
    data = data if data is not None else sb.path("text")
    return ["eval", "lm", run, "--task", "ptb", "--data", f"ptb={data}", "--batch-size", "4", "--out", sb.path("new")]


HARNESS_TASK = Path(__file__).resolve().parents[1] / "fixtures" / "harness" / "aot_tiny.yaml"  # local: no download


def eval_harness(sb: Sandbox, run: str) -> list[str]:
    return ["eval", "harness", run, "--tasks", str(HARNESS_TASK), "--limit", "1", "--device", "cpu"]


def eval_icl(sb: Sandbox, run: str, *extra: str) -> list[str]:
    return ["eval", "icl", run, "--prompts", "16", "--out", sb.path("new"), *extra]


def analyze(sb: Sandbox, run: str, *extra: str) -> list[str]:
    small = ["--batches", "1", "--batch-size", "2", "--seq-len", "8", "--device", "cpu"]
    return ["analyze", run, *small, "--out", sb.path("new"), *extra]


DENOISE = ["denoise", "--no-sweeps", "--deltas", "0.2", "--p", "4", "--clusters", "2", "--tokens-per-cluster", "8"]
DENOISE += ["--layers", "2", "--device", "cpu"]
BENCH = ["bench", "--quick", "--only", "models", "--no-memory", "--no-breakdown", "--repeat", "1", "--threads", "1"]
BENCH += ["--device", "cpu", "--set", "bench.n_embd=16", "--set", "bench.n_head=2", "--set", "bench.seq_len=16"]
BENCH += ["--set", "bench.peak_sizes=[64]"]
REPRODUCE = ["reproduce", "--scale", "tiny", "--only"]
PREPARE = ["data", "prepare", "--tokenizer", "bytes", "--workers", "0", "--no-progress"]  # in this process
PACK = ["data", "pack-images"]
SWEEP = ["sweep", "icl", "--plan", *(item for item in TINY["icl"] if item not in ("--device", "cpu"))]
SCALING_RUNS = Path(__file__).resolve().parents[1] / "fixtures" / "scaling" / "runs.json"  # synthetic runs
SCALING = ["scaling", "fit", "--reference", "gpt2", "--starts", "1", "--bootstrap", "2", "--boot-starts", "1"]

COMMANDS: dict[str, Command] = {
    "models": Command(good=lambda sb: ["models", "--json"]),
    "data fetch": Command(good=lambda sb: ["data", "fetch", "digits"]),
    "data info": Command(
        good=lambda sb: ["data", "info", sb.path("text")],
        texts={"CORPUS": lambda sb, p: ["data", "info", p], "--images": lambda sb, p: ["data", "info", "--images", p]},
    ),
    "data prepare": Command(
        good=lambda sb: [*PREPARE, sb.path("text"), "--out", sb.path("new")],
        texts={"SOURCE": lambda sb, p: [*PREPARE, p, "--out", sb.path("new")]},
        out=lambda sb, p: [*PREPARE, sb.path("text"), "--out", p],
        accept={"--workers": ("0",), "--split-seed": ("0", "-1", "1000000000000")},
    ),
    "data pack-images": Command(
        good=lambda sb: [*PACK, sb.path("images"), "--out", sb.path("new")],
        texts={"ROOT": lambda sb, p: [*PACK, p, "--out", sb.path("new")]},
        out=lambda sb, p: [*PACK, sb.path("images"), "--out", p],
        accept=SEED,
    ),
    "train lm": train("lm"),
    "train vision": train("vision"),
    "train icl": train("icl"),
    "train recall": train("recall"),
    "sweep": Command(
        good=lambda sb: [*SWEEP, "--out", sb.path("new")],
        texts={"--config": lambda sb, p: [*SWEEP, "--out", sb.path("new"), "--config", p]},
        out=lambda sb, p: [a for a in SWEEP if a != "--plan"] + ["--device", "cpu", "--out", p],
        accept={"--seeds": ("0", "1000000000000"), "--gpus": ("0",)},  # --gpus 0: a CPU trial
    ),
    "scaling fit": Command(
        good=lambda sb: [*SCALING, str(SCALING_RUNS), "--out", sb.path("new")],
        texts={"RESULTS": lambda sb, p: [*SCALING, p, "--out", sb.path("new")]},
        out=lambda sb, p: [*SCALING, str(SCALING_RUNS), "--out", p],
        accept={**SEED, "--bootstrap": ("0",)},
        costly=True,
    ),
    "eval lm": Command(
        good=lambda sb: eval_lm(sb, sb.path("lm")),
        reads=("lm", "hf"),
        on_run=eval_lm,
        texts={"--data": lambda sb, p: eval_lm(sb, sb.path("lm"), p)},
        out=lambda sb, p: [*eval_lm(sb, sb.path("lm")), "--out", p],
        accept={"--limit": ("1000000000000",)},
        either={"--batch-size": ("1000000000000",)},
    ),
    "eval harness": Command(  # a success is lm-eval's whole run (seconds: it indexes its own tasks): slow cases
        good=lambda sb: eval_harness(sb, sb.path("lm")),
        reads=("lm", "hf"),
        on_run=eval_harness,
        costly=True,
        timeout=120,
    ),
    "eval icl": Command(
        good=lambda sb: eval_icl(sb, sb.path("icl")),
        reads=("icl",),
        results="needs",
        on_run=eval_icl,
        out=lambda sb, p: [*eval_icl(sb, sb.path("icl")), "--out", p],
        numbers=lambda sb, option: eval_icl(sb, sb.path("icl"), "--x", "scaled"),
        either={"--x-scale": ("1000000000000.0",)},
    ),
    "viz attention": Command(
        good=lambda sb: ["viz", "attention", sb.path("vision"), "--images", "2", "--out", sb.path("new")],
        reads=("vision",),
        results="needs",
        on_run=lambda sb, p: ["viz", "attention", p, "--images", "2", "--out", sb.path("new")],
        texts={"--data": lambda sb, p: ["viz", "attention", sb.path("vision"), "--images", "2", "--data", p]},
        out=lambda sb, p: ["viz", "attention", sb.path("vision"), "--images", "2", "--out", p],
        own_out=("vision",),
        accept={"--layer": ("0", "-1")},
    ),
    "analyze": Command(
        good=lambda sb: analyze(sb, sb.path("lm")),
        reads=("lm", "vision"),
        results="needs",
        on_run=analyze,
        texts={
            "--data": lambda sb, p: analyze(sb, sb.path("lm"), "--data", p),
            "--config": lambda sb, p: analyze(sb, sb.path("lm"), "--config", p),
        },
        out=lambda sb, p: [*analyze(sb, sb.path("lm")), "--out", p],
        accept=SEED,
        either={"--eps": ("1000000000000.0",)},
        costly=True,
    ),
    "export safetensors": Command(
        good=lambda sb: ["export", "safetensors", sb.path("lm"), sb.path("new")],
        reads=("lm", "vision", "icl"),
        results="ignores",
        on_run=lambda sb, p: ["export", "safetensors", p, sb.path("new")],
        out=lambda sb, p: ["export", "safetensors", sb.path("lm"), p],
    ),
    "export hf": Command(
        good=lambda sb: ["export", "hf", sb.path("lm"), sb.path("new")],
        reads=("lm",),
        on_run=lambda sb, p: ["export", "hf", p, sb.path("new")],
        out=lambda sb, p: ["export", "hf", sb.path("lm"), p],
    ),
    "sample": Command(
        good=lambda sb: sample_argv(sb, sb.path("lm")),
        reads=("lm", "hf"),
        on_run=sample_argv,
        texts={"--prompt": lambda sb, p: sample_argv(sb, sb.path("lm"), "--prompt", p)},
        accept={**SEED, "--temperature": ("0",)},
        either={
            "--max-new-tokens": ("0",),
            "--temperature": ("1000000000000.0",),
            "--top-k": ("0", "1000000000000"),
        },
    ),
    "denoise": Command(
        good=lambda sb: [*DENOISE, "--out", sb.path("new")],
        texts={"--config": lambda sb, p: [*DENOISE, "--out", sb.path("new"), "--config", p]},
        out=lambda sb, p: [*DENOISE, "--out", p],
        accept={**SEED, "--deltas": ("0",)},
        either={"--deltas": ("1000000000000.0",), "--eta": ("1000000000000.0",), "--seeds": ("1000000000000",)},
    ),
    "bench": Command(
        good=lambda sb: [*BENCH, "--out", sb.path("new")],
        texts={"--config": lambda sb, p: [*BENCH, "--out", sb.path("new"), "--config", p]},
        out=lambda sb, p: [*BENCH, "--out", p],
        accept={**SEED, "--threads": ("0",)},  # 0: torch's default
        costly=True,
    ),
    "reproduce": Command(
        good=lambda sb: ["reproduce", "--scale", "tiny", "--dry-run", "--out", sb.path("new")],
        texts={"--data text=": lambda sb, p: [*REPRODUCE, "lm", "--data", f"text={p}", "--out", sb.path("new")]},
        out=lambda sb, p: [*REPRODUCE, "theory", "--out", p],
        subprocess=True,
        timeout=60,
    ),
}

# -- cases that wait for a fix on main: xfail(strict=True), naming the rule ----------------------------------------

# Each rule: fnmatch patterns of case ids -> the reason, naming the rule that is missing and where. Re-run as the fixes
# land and drop a rule when its cases pass (strict: a case that passes under its xfail fails the suite).
XFAIL: list[tuple[tuple[str, ...], str]] = []  # none wait now

# slow (excluded by default, `-m slow`): what repeats a default case at the cost of seconds
SLOW = (
    "reproduce|--data text=|a folder", "reproduce|--data text=|/dev/null", "*|OUT=a vision run",
    "reproduce|OUT=a run's checkpoint/", "eval harness", "eval harness|*|weights flipped, checkpoint.prev good",
    "eval harness|*|results.json key-less",
)  # fmt: skip


def param(case_id: str, *values: object, slow: bool = False) -> object:
    marks = [
        pytest.mark.xfail(strict=True, reason=reason)
        for patterns, reason in XFAIL
        if any(fnmatch.fnmatchcase(case_id, p) for p in patterns)
    ][:1]
    if slow or any(fnmatch.fnmatchcase(case_id, p) for p in SLOW):
        marks.append(pytest.mark.slow)
    return pytest.param(*values, id=case_id, marks=marks)


# -- the runs, once per module; a copy per case ---------------------------------------------------------------


@pytest.fixture(scope="module")
def built(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return shared_runs(tmp_path_factory)


@pytest.fixture
def sb(built: Path, tmp_path: Path):  # type: ignore[no-untyped-def]
    box = sandbox_copy(built, tmp_path / "sandbox")
    with environment(box.root):
        yield box


def run(name: str, argv: list[str], sb: Sandbox, in_process: bool = False) -> Outcome:
    """``aot ARGV`` in this process, or in a subprocess for a command that starts processes (unless
    ``in_process``: an invocation known to start none, such as ``--dry-run``)."""
    command = COMMANDS[name]
    if command.subprocess and not in_process:
        return run_in_subprocess(argv, sb.root, timeout=command.timeout)
    return run_in_process(argv, timeout=command.timeout)


def refused_and_unchanged(name: str, argv: list[str], sb: Sandbox) -> Outcome:
    before = snapshot(sb.root)
    outcome = run(name, argv, sb)
    problem = one_line_error(outcome)
    assert problem is None, f"{problem}\naot {' '.join(argv)}"
    changed = changes(before, snapshot(sb.root))
    assert not changed, f"refused but changed: {changed[:20]}\naot {' '.join(argv)}"
    return outcome


def succeeded(
    name: str, argv: list[str], sb: Sandbox, allowed_new: tuple[str, ...] = ("new-out",), in_process: bool = False
) -> Outcome:
    """Exit 0, no traceback, no file that existed changed (new files only under ``allowed_new``)."""
    before = snapshot(sb.root)
    outcome = run(name, argv, sb, in_process)
    assert outcome.status == 0 and "Traceback" not in outcome.stderr, f"expected success: {outcome.describe()}"
    changed = [c for c in changes(before, snapshot(sb.root)) if not _under(c, allowed_new) and not is_measurement(c)]
    assert not changed, f"succeeded but changed: {changed[:20]}\naot {' '.join(argv)}"
    return outcome


def either(name: str, argv: list[str], sb: Sandbox) -> Outcome:
    """A success (no file it had changed) or a clean refusal (nothing changed)."""
    before = snapshot(sb.root)
    outcome = run(name, argv, sb)
    changed = changes(before, snapshot(sb.root))
    if outcome.status == 0 and "Traceback" not in outcome.stderr:
        changed = [c for c in changed if not _under(c, ("new-out", "runs")) and not is_measurement(c)]
        assert not changed, f"succeeded but changed: {changed[:20]}\naot {' '.join(argv)}"
        return outcome
    problem = one_line_error(outcome)
    assert problem is None, f"{problem}\naot {' '.join(argv)}"
    assert not changed, f"refused but changed: {changed[:20]}\naot {' '.join(argv)}"
    return outcome


def _under(change: str, folders: tuple[str, ...]) -> bool:
    kind, _, path = change.partition(" ")
    return kind == "added" and any(path == f or path.startswith(f + "/") for f in folders)


# -- every command has an entry; its good invocation works --------------------------------------------------------

PARSERS = leaf_commands()
COMMAND_NAMES = sorted(PARSERS)


def test_every_command_has_a_case_table_entry() -> None:
    missing = [name for name in COMMAND_NAMES if name not in COMMANDS]
    assert not missing, (
        f"`aot {missing[0]}` has no entry in COMMANDS of tests/cli/test_every_command.py: add one (a good cheap "
        "invocation, the run folders and text files it reads, its OUT) so that it is put through every case"
    )
    stale = sorted(set(COMMANDS) - set(COMMAND_NAMES))
    assert not stale, f"COMMANDS names commands that `aot` no longer has: {stale}"


@pytest.mark.parametrize("name", [param(n, n) for n in COMMAND_NAMES if n in COMMANDS])
def test_the_good_invocation_succeeds_and_changes_no_file_it_had(name: str, sb: Sandbox) -> None:
    succeeded(name, COMMANDS[name].good(sb), sb, allowed_new=("new-out", "runs"), in_process=True)


# -- a damaged run folder ---------------------------------------------------------------------------------------


def _damage_results(kind: str) -> Callable[[Path], None]:
    def damage(run: Path) -> None:
        path = run / "results.json"
        whole = path.read_text()
        text = {
            "corrupt": '{"task": "lm", "config": {"model": ',
            "truncated": whole[: len(whole) // 2],
            "list-shaped": "[1, 2, 3]",
            "key-less": "{}",
            "wrong-typed": json.dumps({"task": 7, "config": [], "train": "x"}),
        }[kind]
        path.write_text(text)

    return damage


def _damage_config(kind: str) -> Callable[[Path], None]:
    texts = {
        "corrupt": '{"block": "aot-mssa", "n_layer": ',
        "list-shaped": "[1, 2, 3]",
        "key-less": "{}",
        "huge": None,  # n_embd 65536, n_layer 200000: the memory check before building
    }

    def damage(run: Path) -> None:
        folders = checkpoints(run) or [run]
        for folder in folders:
            path = folder / "config.json"
            if kind == "huge":
                doc = json.loads(path.read_text())
                fields = doc.get("aot", doc)  # an HF export keeps aot's config under "aot"
                fields.update(n_embd=65536, n_layer=200000, n_head=2, head_dim=32768)
                text = json.dumps(doc)
            else:
                text = texts[kind] or ""
            path.write_text(text)
            if (folder / "trainer.json").is_file():
                resign(folder)  # checksums verify: only reading the contents can catch it

    return damage


def _flip_weights(keep_prev: bool, both: bool = False) -> Callable[[Path], None]:
    def damage(run: Path) -> None:
        flip_byte(run / "checkpoint" / "model.safetensors")
        if both:
            flip_byte(run / "checkpoint.prev" / "model.safetensors")
        elif not keep_prev:
            import shutil

            shutil.rmtree(run / "checkpoint.prev")

    return damage


def _truncate_weights(run: Path) -> None:
    for folder in checkpoints(run) or [run]:
        path = folder / "model.safetensors"
        path.write_bytes(path.read_bytes()[:100])


RESULTS_DAMAGE = ("corrupt", "truncated", "list-shaped", "key-less", "wrong-typed")
RUN_DAMAGE: dict[str, Callable[[Path], None]] = {
    **{f"results.json {k}": _damage_results(k) for k in RESULTS_DAMAGE},
    **{f"config.json {k}": _damage_config(k) for k in ("corrupt", "list-shaped", "key-less", "huge")},
    "weights flipped, no checkpoint.prev": _flip_weights(keep_prev=False),
    "weights flipped in both checkpoints": _flip_weights(keep_prev=True, both=True),
    "weights truncated": _truncate_weights,
}
FALLBACK = "weights flipped, checkpoint.prev good"  # a success with one notice
EXPORT_DAMAGE: tuple[str, ...] = ("config.json corrupt", "config.json list-shaped", "config.json key-less")
EXPORT_DAMAGE += ("config.json huge", "weights truncated")
#: what every folder a command reads gets in the default run (its first folder gets every damage)
CORE_DAMAGE: tuple[str, ...] = ("results.json corrupt", "results.json key-less", "config.json corrupt")
CORE_DAMAGE += ("config.json huge",)
CORE_DAMAGE += ("weights flipped, no checkpoint.prev", FALLBACK)
NO_RESULTS = {"train lm"}  # --resume reads the checkpoints, not results.json


def run_cases() -> list[object]:
    cases: list[object] = []
    for name in COMMAND_NAMES:
        command = COMMANDS.get(name)
        if command is None:
            continue  # test_every_command_has_a_case_table_entry says what to add
        for folder in command.reads:
            is_export = folder in ("hf", "st")
            for damage in [*RUN_DAMAGE, FALLBACK]:
                if is_export and damage not in EXPORT_DAMAGE:
                    continue
                if damage.startswith("results.json") and name in NO_RESULTS:
                    continue
                case_id = f"{name}|{folder}|{damage}"
                again = folder != command.reads[0] and damage not in CORE_DAMAGE  # the first folder had it
                cases.append(param(case_id, name, folder, damage, slow=again))
    return cases


@pytest.mark.parametrize(("name", "folder", "damage"), run_cases())
def test_a_damaged_run_folder_is_one_line_and_changes_nothing(name: str, folder: str, damage: str, sb: Sandbox) -> None:
    command = COMMANDS[name]
    assert command.on_run is not None
    run_dir = getattr(sb, folder)
    argv = command.on_run(sb, str(run_dir))
    if damage == FALLBACK:  # the damaged latest checkpoint is passed over for the previous one, with a notice
        flip_byte(run_dir / "checkpoint" / "model.safetensors")
        if name == "train lm":  # --resume moves the damaged one aside and trains on: tests/train/test_guarantees.py
            outcome = run(name, argv, sb)
            assert outcome.status == 0, outcome.describe()
        else:
            outcome = succeeded(name, argv, sb)
        notices = [line for line in outcome.err_lines if "checkpoint.prev" in line]
        assert len(notices) == 1, f"expected one notice naming checkpoint.prev: {outcome.describe()}"
        return
    RUN_DAMAGE[damage](run_dir)
    if damage.startswith("config.json") and command.config == "ignores":  # --resume: the run is its own OUT
        outcome = run(name, argv, sb)
        assert outcome.status == 0 or one_line_error(outcome) is None, outcome.describe()
        return
    if damage.startswith("results.json") and (
        command.results == "ignores" or (command.results == "reads" and damage == "results.json key-less")
    ):
        either(name, argv, sb)
        return
    refused_and_unchanged(name, argv, sb)


# -- a text file that is not UTF-8, a folder, /dev/null ---------------------------------------------------------

TEXT_KINDS = ("latin-1 file", "a folder", "/dev/null")


def text_cases() -> list[object]:
    return [
        param(f"{name}|{text}|{kind}", name, text, kind)
        for name in COMMAND_NAMES
        for text in (COMMANDS[name].texts if name in COMMANDS else {})
        for kind in TEXT_KINDS
    ]


@pytest.mark.parametrize(("name", "text", "kind"), text_cases())
def test_a_bad_text_file_is_one_line_and_changes_nothing(name: str, text: str, kind: str, sb: Sandbox) -> None:
    """Refused in one line; a latin-1 file may instead be read with a stated decoding (a line saying so)."""
    if text == "--prompt":  # a command-line argument: a non-UTF-8 byte arrives as a lone surrogate
        value = {"latin-1 file": "caf\udce9", "a folder": sb.path("empty"), "/dev/null": "/dev/null"}[kind]
        if kind != "latin-1 file":  # a prompt is text, not a path: it is continued as written
            succeeded(name, COMMANDS[name].texts[text](sb, value), sb)
            return
    else:
        value = {"latin-1 file": sb.path("latin1"), "a folder": sb.path("empty"), "/dev/null": "/dev/null"}[kind]
    argv = COMMANDS[name].texts[text](sb, value)
    if kind == "latin-1 file":
        before = snapshot(sb.root)
        outcome = run(name, argv, sb)
        if outcome.status == 0 and "Traceback" not in outcome.stderr:
            said = [line for line in outcome.err_lines if "UTF-8" in line or "utf-8" in line]
            assert said, f"read a non-UTF-8 file without saying how it decoded it: {outcome.describe()}"
            return
        problem = one_line_error(outcome)
        assert problem is None, f"{problem}\naot {' '.join(argv)}"
        assert not changes(before, snapshot(sb.root))
        return
    refused_and_unchanged(name, argv, sb)


# -- absurd numbers ---------------------------------------------------------------------------------------------

INT_VALUES = ("0", "-1", "1000000000000")
FLOAT_VALUES = ("0", "-1", "1000000000000.0", "nan", "inf")


def number_cases() -> list[object]:
    cases: list[object] = []
    for name in COMMAND_NAMES:
        if name not in COMMANDS:
            continue
        for option, kind in numeric_options(PARSERS[name]).items():
            for value in INT_VALUES if kind is int else FLOAT_VALUES:
                costly = COMMANDS[name].costly and expected(name, option, value) != "refuse"
                cases.append(param(f"{name}|{option}={value}", name, option, value, slow=costly))
    return cases


def expected(name: str, option: str, value: str) -> str:
    """``refuse`` when the option's declared range (``aot.cli.options.Number``, said in ``--help``) excludes the
    value; else what the case table says (``accept``, ``either``), else ``refuse``."""
    declared = declared_number(PARSERS[name], option)
    if declared is not None:
        try:
            declared(value)
        except argparse.ArgumentTypeError:
            return "refuse"
    command = COMMANDS[name]
    if value in command.accept.get(option, ()):
        return "accept"
    if value in command.either.get(option, ()):
        return "either"
    return "refuse"


@pytest.mark.parametrize(("name", "option", "value"), number_cases())
def test_an_absurd_number_is_refused_in_one_line(name: str, option: str, value: str, sb: Sandbox) -> None:
    command = COMMANDS[name]
    base = command.numbers(sb, option) if command.numbers else command.good(sb)
    argv = [*base, f"{option}={value}"]
    verdict = expected(name, option, value)
    if verdict == "refuse":
        refused_and_unchanged(name, argv, sb)
        return
    if command.dump:
        argv.append("--dump-config")
    if verdict == "accept":
        succeeded(name, argv, sb, allowed_new=("new-out", "runs"))
        return
    either(name, argv, sb)


# -- OUT is an existing run, or its checkpoint/ -----------------------------------------------------------------

OUT_TARGETS = {"a run": "lm", "a run's checkpoint/": "lm/checkpoint", "a vision run": "vision"}


def out_cases() -> list[object]:
    return [
        param(f"{name}|OUT={label}", name, target)
        for name in COMMAND_NAMES
        if name in COMMANDS and COMMANDS[name].out is not None
        for label, target in OUT_TARGETS.items()
    ]


@pytest.mark.parametrize(("name", "target"), out_cases())
def test_an_out_holding_a_run_is_refused_and_the_run_is_untouched(name: str, target: str, sb: Sandbox) -> None:
    command = COMMANDS[name]
    assert command.out is not None
    argv = command.out(sb, str(sb.root / target))
    if target in command.own_out:  # the command's default OUT is the run it reads: it adds its files there
        succeeded(name, argv, sb, allowed_new=(target,))
        return
    refused_and_unchanged(name, argv, sb)
