"""One source of truth for results: benchmarks/README.md, docs/results.md and the ``<!-- results:... -->`` blocks of
the README and docs/ are what scripts/results_index.py (`make results`) writes from the records, every folder of
benchmarks/ is in the index, and no number with a unit is typed by hand in the README, docs/*.md or docs/guide/*.md.

The last check extends tests/test_readme.py's quotes (the main job's blocks, the bigram figures) to every number with
a unit, a percent, a × or a ±: outside generated blocks and code such a number must come from a record.
"""

from __future__ import annotations

import importlib.util
import re
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
SCRIPT = ROOT / "scripts" / "results_index.py"


def load_index_module():
    spec = importlib.util.spec_from_file_location("results_index", SCRIPT)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules.setdefault("results_index", module)
    spec.loader.exec_module(module)
    return module


@pytest.fixture(scope="module")
def index():
    return load_index_module()


def test_regenerating_gives_the_committed_files(index):
    """A hand edit of a generated file, or a record that changed without `make results`, fails here."""
    stale = [
        str(path.relative_to(ROOT))
        for path, text in index.outputs().items()
        if not path.is_file() or path.read_text(encoding="utf-8") != text
    ]
    assert not stale, f"{stale} differ from what `python scripts/results_index.py` writes: run `make results`"


def test_every_benchmarks_folder_is_in_the_index(index):
    folders = {path.name for path in (ROOT / "benchmarks").iterdir() if path.is_dir() and not path.name.startswith(".")}
    listed = [folder.name for folder in index.FOLDERS]
    assert len(listed) == len(set(listed)), "a folder is listed twice in FOLDERS"
    assert folders == set(listed), f"not indexed: {folders - set(listed)}; gone: {set(listed) - folders}"
    text = (ROOT / "benchmarks" / "README.md").read_text(encoding="utf-8")
    with_readme = sorted(name for name in folders if (ROOT / "benchmarks" / name / "README.md").is_file())
    assert with_readme, "no benchmarks folder has a README"
    for name in with_readme:
        assert f"[{name}/]({name}/README.md)" in text, f"benchmarks/README.md does not link {name}/README.md"
    for name in folders:
        assert f"[{name}/](" in text, f"benchmarks/README.md has no row for {name}/"


def test_every_indexed_command_names_files_that_exist(index):
    """The index's commands run something that is there."""
    missing = []
    for folder in index.FOLDERS:
        commands = [*index.record_commands(folder), *folder.render]
        assert commands, f"{folder.name}: no command"
        for command in commands:
            for name in index.command_files(command):
                if not (ROOT / name).exists():
                    missing.append(f"{folder.name}: {command} ({name})")
    assert not missing, "commands naming files that do not exist:\n" + "\n".join(missing)


def documents() -> list[Path]:
    return [ROOT / "README.md", *sorted((ROOT / "docs").glob("*.md")), *sorted((ROOT / "docs" / "guide").glob("*.md"))]


def test_no_number_with_a_unit_is_typed_by_hand_in_the_readme_or_docs(index):
    found = [
        f"{path.relative_to(ROOT)}:{line}: {number}"
        for path in documents()
        for line, number in index.hand_typed_numbers(path)
    ]
    assert not found, (
        "numbers typed by hand (put them in a generated block written by scripts/results_index.py, link the record, "
        "or, for a setting or a fact of a data set, add them to NOT_RESULTS with the reason):\n" + "\n".join(found)
    )


def test_the_number_check_catches_each_kind(index, tmp_path):
    caught = [
        "took 4.07 s in a fresh Python",
        "AoT-MSSA is +10.8 % above",
        "trains 3.41× faster",
        "1.24x faster",
        "85.82 ± 0.60",
        "peak 567 MiB",
        "at 16,472 tok/s",
        "in 2.5 min",
        "96-148 MB/s",
        "540-570 MB",
    ]
    passed = [
        "6 × 256 and 124M parameters, 1.64 M tokens",
        "`--steps 300 --timeout 5s` and [a link](../x/10%.md)",
        "the paper: +11.6 % and 71.7 %",
        "sha256s of the shards, 0.5x(1 + tanh(x))",
        "<!-- results:demo -->\nrecorded +3.5 % and 12 s\n<!-- /results:demo -->",
        "```\nmake run   # 3 min\n```",
        "\n    indented code: 3.4 s\n",
    ]
    page = tmp_path / "page.md"
    for text in caught:
        page.write_text(text + "\n")
        assert index.hand_typed_numbers(page), f"not caught: {text!r}"
    for text in passed:
        page.write_text(text + "\n")
        assert not index.hand_typed_numbers(page), f"caught: {text!r}: {index.hand_typed_numbers(page)}"
    page.write_text("line one\nthe bench ran at 3.0× GPT-2\n")
    assert index.hand_typed_numbers(page) == [(2, "3.0×")]  # the line and the number, for the message


def test_the_allow_list_is_short_and_each_entry_is_used(index):
    assert len(index.NOT_RESULTS) <= 25, "NOT_RESULTS is meant for a few settings and facts, not for results"
    for file, number, why in index.NOT_RESULTS:
        assert why, f"{file}: {number} has no reason"
        text = (ROOT / file).read_text(encoding="utf-8")
        assert re.search(rf"(?<![\w.]){re.escape(number)}", text), f"{file} no longer has {number}: drop the entry"


def test_the_index_states_date_and_machine_for_every_folder(index):
    for folder in index.FOLDERS:
        provenance = index.provenance(ROOT / "benchmarks" / folder.name)
        assert provenance.files, f"benchmarks/{folder.name} has no JSON record with a machine or a date"
        assert provenance.dates, f"benchmarks/{folder.name}: no record states a date"
        assert provenance.cpus or provenance.gpus, f"benchmarks/{folder.name}: no record names the machine"
