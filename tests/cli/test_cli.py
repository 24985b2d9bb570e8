"""The `aot` command: help, the presets table, and one-line errors for bad input."""

from __future__ import annotations

import argparse
import json
import re
import subprocess
import sys

import pytest

from aot.cli import build_parser, main
from aot.models import PRESETS


def test_models_table_lists_every_preset_with_counts(capsys):
    assert main(["models"]) == 0
    out = capsys.readouterr().out
    for name in PRESETS:
        assert f"| {name} |" in out
    assert "| gpt2-base | lm | transformer | 12 | 768 | 12 | 124.44M |" in out


def test_models_json_and_single_preset(capsys):
    assert main(["models", "--json", "--task", "image"]) == 0
    rows = json.loads(capsys.readouterr().out)
    assert {r["task"] for r in rows} == {"image"}
    assert main(["models", "aot-mssa-l-base"]) == 0
    assert json.loads(capsys.readouterr().out)["n_layer"] == 53


def test_unknown_preset_is_a_one_line_error(capsys):
    assert main(["models", "aot-mssa-l-bse"]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "did you mean 'aot-mssa-l-base'" in err


def test_console_script_help_runs_in_a_fresh_process():
    result = subprocess.run([sys.executable, "-m", "aot.cli", "--help"], capture_output=True, text=True, check=True)
    assert "models" in result.stdout


def _subcommands() -> list[str]:
    parser = build_parser()
    (action,) = [a for a in parser._actions if isinstance(a, argparse._SubParsersAction)]
    return sorted(action.choices)


@pytest.mark.parametrize("command", _subcommands())
def test_every_subcommand_has_a_useful_help(command, capsys):
    with pytest.raises(SystemExit) as info:
        main([command, "--help"])
    assert info.value.code == 0
    out = capsys.readouterr().out
    assert len(out) > 200 and "usage: aot " + command in out


@pytest.mark.parametrize(
    ("argv", "says", "helps"),
    [
        (["train", "lm", "--lr", "x"], "aot: error: train lm: argument --lr: invalid float value: 'x'", "aot train lm"),
        (["trainx"], "aot: error: argument COMMAND: invalid choice: 'trainx'", "aot"),
        (["data", "fetch"], "aot: error: data fetch: the following arguments are required: name", "aot data fetch"),
        (["sample", "--no-such-flag"], "aot: error: sample: ", "aot sample"),
        (["eval", "lm", "r", "--batch-size", "1.5"], "aot: error: eval lm: argument --batch-size: ", "aot eval lm"),
    ],
)
def test_a_bad_command_line_is_one_line_naming_the_command_and_its_help(argv, says, helps, capsys):
    with pytest.raises(SystemExit) as info:
        main(argv)
    assert info.value.code == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and err.startswith(says), err  # not argparse's usage block
    assert err.rstrip().endswith(f"(see `{helps} --help`)"), err


def _every_parser(parser: argparse.ArgumentParser, name: str = "aot"):
    yield name, parser
    for action in parser._actions:
        if isinstance(action, argparse._SubParsersAction):
            for sub, child in action.choices.items():
                yield from _every_parser(child, f"{name} {sub}")


# what only this repository's developers have: absolute paths on their machines, the sibling folders of a
# checkout, a CPU lock file, "here" for "this sandbox"
DEVELOPER_ONLY = re.compile(
    r"(?<![\w$~.])/(?:tmp|var|home|root|work|opt|mnt|srv)/|\.\./|aot-cpu\.lock|cannot be (?:downloaded|fetched) here"
)


def test_no_help_text_names_a_path_outside_the_repository():
    found = []
    for name, parser in _every_parser(build_parser()):
        text = parser.format_help()
        found += [f"{name}: {m.group(0)!r}" for m in DEVELOPER_ONLY.finditer(text)]
    assert not found, found
    assert DEVELOPER_ONLY.search("flock /tmp/aot-cpu.lock aot bench") and not DEVELOPER_ONLY.search("runs/bench")


def test_device_option_is_checked_once_for_every_command():
    import torch

    from aot.devices import resolve_device
    from aot.errors import AotError

    assert resolve_device("cpu") == torch.device("cpu")
    assert resolve_device("auto").type == ("cuda" if torch.cuda.is_available() else "cpu")
    with pytest.raises(AotError, match="is not a device"):
        resolve_device("tpu0")
    if not torch.cuda.is_available():
        with pytest.raises(AotError, match="no CUDA device is available"):
            resolve_device("cuda:0")
        assert main(["denoise", "--device", "cuda", "--no-sweeps"]) == 2


def test_models_blocks_lists_every_block_with_its_own_options(capsys):
    from aot.blockspec import block_specs

    assert main(["models", "--blocks", "--json"]) == 0
    rows = {row["block"]: row for row in json.loads(capsys.readouterr().out)}
    assert set(rows) == {spec.name for spec in block_specs()}
    for spec in block_specs():
        assert {k: v["default"] for k, v in rows[spec.name]["options"].items()} == spec.options.defaults()
    assert rows["crate"]["options"]["ista_expand"] == {"default": 1, "allowed": ">= 1"}
    assert rows["mamba"]["recurrent"] and rows["aot-mhsa"]["options"] == {}
    assert main(["models", "--blocks"]) == 0
    table = capsys.readouterr().out
    row = "| aot-mssa | AttentionOnlyBlock | MultiHeadSubspaceSelfAttention | nothing | KV cache |"
    assert f'{row} `subspace_init="normal"` (one of normal, orthogonal)' in table
