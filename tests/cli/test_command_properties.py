"""A property per `aot` command (issue 30): random values for its numeric options and random bytes in each file it
reads (a run folder's results.json, config.json, trainer.json, weights, tokenizer; a text or config file) give
either a success or one line ``aot: error: ...`` with exit status 2 — never a traceback, never a hang — and no file
that existed before the command is changed by it.

The commands, their good invocations and the files they read come from the case table of
tests/cli/test_every_command.py (``COMMANDS``); the numeric options from each command's parser. Examples are
derandomized (the same ones every run, so an xfail is stable) and few per command: the module runs in well under
a minute on one core. ``aot train TASK`` runs with ``--dump-config`` (the config and its numbers are checked; no
training of 10**13 steps), ``aot reproduce`` with ``--dry-run``.
"""

from __future__ import annotations

import shutil
import tempfile
from pathlib import Path

import pytest
from cli_harness import (
    Sandbox,
    changes,
    clean,
    environment,
    is_measurement,
    numeric_options,
    resign,
    run_in_process,
    sandbox_copy,
    shared_runs,
    snapshot,
)
from hypothesis import HealthCheck, Phase, given, settings
from hypothesis import strategies as st
from test_every_command import COMMAND_NAMES, COMMANDS, PARSERS

#: examples per command (default 8): fewer where a success costs a second or more
EXAMPLES = {"models": 1, "data fetch": 1, "viz attention": 5}
EXAMPLES.update({"train lm": 5, "train vision": 5, "train icl": 5, "train recall": 5})
#: commands whose every success takes seconds: their property is a slow case (with more examples); the default
#: run covers them through tests/cli/test_every_command.py
SLOW = {"analyze": 4, "bench": 3, "eval harness": 2}

#: the files of a run folder a command may read, relative to it (those that exist in the folder are used)
RUN_FILES = (
    "results.json", "checkpoint/config.json", "checkpoint/trainer.json", "checkpoint/model.safetensors",
    "checkpoint.prev/config.json", "aot_tokenizer.json", "config.json", "model.safetensors", "tokenizer.json",
    "aot_export.json",
)  # fmt: skip

XFAIL: dict[str, str] = {}  # command -> the rule its property waits for (xfail strict); none today

INTEGERS = st.one_of(
    st.integers(-(10**15), -1), st.just(0), st.integers(1, 4), st.integers(10**13, 10**18)
)  # never a large legitimate value: a success stays cheap
FLOATS = st.one_of(st.floats(allow_nan=True, allow_infinity=True), st.sampled_from([0.0, 0.5, 1.0, -1.0, 1e300, -0.0]))


@st.composite
def mutated(draw: st.DrawFn, original: bytes) -> bytes:
    """Random bytes, or the original truncated, with a byte flipped, or with bytes spliced in."""
    kind = draw(st.sampled_from(["random", "truncated", "flipped", "spliced"]))
    if kind == "random" or not original:
        return draw(st.binary(max_size=300))
    at = draw(st.integers(0, len(original) - 1))
    if kind == "truncated":
        return original[:at]
    if kind == "flipped":
        return original[:at] + bytes([original[at] ^ draw(st.integers(1, 255))]) + original[at + 1 :]
    return original[:at] + draw(st.binary(min_size=1, max_size=40)) + original[at:]


def base_argv(name: str, sb: Sandbox, data: st.DataObject) -> list[str]:
    """The command reading a damaged copy of its run folder, a random-bytes text file, or its good invocation."""
    command = COMMANDS[name]
    choices = ["good"]
    if command.reads and command.on_run is not None and not name.startswith("train "):
        choices.append("run")
    choices += [f"text {t}" for t in command.texts if t != "--prompt"]
    choice = data.draw(st.sampled_from(choices), label="input")
    if choice == "run":
        folder = sb.root / command.reads[0]
        files = [f for f in RUN_FILES if (folder / f).is_file()]
        target = folder / data.draw(st.sampled_from(files), label="file")
        target.write_bytes(data.draw(mutated(target.read_bytes()), label="bytes"))
        in_checkpoint = target.parent.name.startswith("checkpoint") and target.name != "trainer.json"
        if in_checkpoint and data.draw(st.booleans(), label="re-signed"):
            resign(target.parent)  # checksums verify: the contents must be checked
        assert command.on_run is not None
        return command.on_run(sb, str(folder))
    if choice.startswith("text "):
        path = sb.root / "random.txt"
        path.write_bytes(data.draw(mutated(sb.text.read_bytes()), label="text bytes"))
        return command.texts[choice[5:]](sb, str(path))
    return command.good(sb)


def numbers(name: str, data: st.DataObject) -> list[str]:
    """Up to three of the command's numeric options, each with a random value."""
    options = numeric_options(PARSERS[name])
    if not options:
        return []
    chosen = data.draw(st.lists(st.sampled_from(sorted(options)), max_size=3, unique=True), label="options")
    argv = []
    for option in chosen:
        value = data.draw(INTEGERS if options[option] is int else FLOATS, label=option)
        argv.append(f"{option}={value!r}" if isinstance(value, float) else f"{option}={value}")
    return argv


def property_cases() -> list[object]:
    cases: list[object] = []
    for name in COMMAND_NAMES:
        if name not in COMMANDS:
            continue  # test_every_command_has_a_case_table_entry says what to add
        reason = XFAIL.get(name)
        marks = [pytest.mark.xfail(strict=True, reason=reason)] if reason else []
        if name in SLOW:
            marks.append(pytest.mark.slow)
        cases.append(pytest.param(name, id=name, marks=marks))
    return cases


@pytest.mark.parametrize("name", property_cases())
def test_random_arguments_and_bytes_succeed_or_are_one_line(name: str, tmp_path_factory: pytest.TempPathFactory):
    built = shared_runs(tmp_path_factory)

    @settings(
        max_examples=SLOW.get(name, EXAMPLES.get(name, 8)),
        derandomize=True,
        database=None,
        deadline=None,
        suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large],
        phases=[Phase.explicit, Phase.reuse, Phase.generate],  # no shrinking: a failure is shown as drawn
    )
    @given(data=st.data())
    def holds(data: st.DataObject) -> None:
        where = Path(tempfile.mkdtemp(prefix="aot-prop-"))
        try:
            sb = sandbox_copy(built, where / "sandbox")
            with environment(sb.root):
                argv = [*base_argv(name, sb, data), *numbers(name, data)]
                if name.startswith("train "):
                    argv.append("--dump-config")
                if name == "reproduce":
                    argv.append("--dry-run")
                before = snapshot(sb.root)
                outcome = run_in_process(argv, timeout=COMMANDS[name].timeout)
                problem = clean(outcome)
                assert problem is None, f"{problem}\naot {' '.join(argv)}"
                succeeded = outcome.status == 0  # a success may add its output and refresh a machine measurement
                changed = [
                    c
                    for c in changes(before, snapshot(sb.root))
                    if not (succeeded and (_new_output(c) or is_measurement(c)))
                ]
                assert not changed, f"changed files it had: {changed[:10]}\naot {' '.join(argv)}"
        finally:
            shutil.rmtree(where, ignore_errors=True)

    holds()


def _new_output(change: str) -> bool:
    kind, _, path = change.partition(" ")
    return kind == "added" and (path.startswith("new-out") or path.startswith("runs/"))
