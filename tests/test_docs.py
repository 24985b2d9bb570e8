"""docs/math.md names real functions and real tests; the presets table (docs/presets.md) is current; no file points
outside the repository."""

from __future__ import annotations

import ast
import importlib
import re
import subprocess
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
MATH = (ROOT / "docs" / "math.md").read_text()
CODE_REFS = sorted(set(re.findall(r"`(aot[\w.]*:[\w.]+)`", MATH)))
TEST_REFS = sorted(set(re.findall(r"`(tests/[\w/]+\.py)::(\w+)`", MATH)))


def test_math_md_has_references():
    assert len(CODE_REFS) >= 8 and len(TEST_REFS) >= 8


@pytest.mark.parametrize("ref", CODE_REFS)
def test_math_md_code_reference_exists(ref):
    module_name, _, attr_path = ref.partition(":")
    obj = importlib.import_module(module_name)
    for part in attr_path.split("."):
        obj = getattr(obj, part)  # raises AttributeError if the doc names something that is gone


@pytest.mark.parametrize(("path", "name"), TEST_REFS)
def test_math_md_test_reference_exists(path, name):
    tree = ast.parse((ROOT / path).read_text())
    names = {node.name for node in ast.walk(tree) if isinstance(node, ast.FunctionDef)}
    assert name in names, f"{path} has no test {name}"


def test_presets_page_table_matches_aot_models():
    pytest.importorskip("mambapy", reason="the table lists the mamba presets, which need aot[mamba] to build")
    from aot.models.preset_table import markdown_table, preset_rows

    assert markdown_table(preset_rows()) in (ROOT / "docs" / "presets.md").read_text()


# Paths a clone does not have: the project's background folder, files that live only there, absolute paths of the
# machine the project was written on. Built from pieces so that this file does not match itself.
OUTSIDE = re.compile(
    "|".join(
        [
            r"\.\./" + "shared",
            r"(?<![\w.])/" + r"work/",
            r"\b" + "PAPER" + r"\.md",
            r"\b" + "DATA" + r"\.md",
            r"\b" + "PRIOR" + "_RUNS" + r"\.md",
            r"\b" + "DESIGN" + r"\.md",
        ]
    )
)
HISTORY = {"CHANGELOG.md"}  # history may name what was there before


def repository_files() -> list[Path]:
    """The tracked files (git), or every file under the root outside caches and virtual environments."""
    try:
        listed = subprocess.run(["git", "ls-files"], cwd=ROOT, capture_output=True, text=True, check=True).stdout
        return [ROOT / name for name in listed.splitlines()]
    except (OSError, subprocess.CalledProcessError):
        skip = {".git", ".venv", "runs", "__pycache__", ".mypy_cache", ".pytest_cache", ".ruff_cache"}
        return [p for p in ROOT.rglob("*") if p.is_file() and not skip & set(p.relative_to(ROOT).parts)]


def test_no_file_refers_to_a_path_outside_the_repository():
    offenders = []
    for path in repository_files():
        if path.name in HISTORY or not path.is_file():
            continue
        try:
            text = path.read_text(encoding="utf-8")
        except UnicodeDecodeError:  # images and other binary files
            continue
        for number, line in enumerate(text.splitlines(), 1):
            if OUTSIDE.search(line):
                offenders.append(f"{path.relative_to(ROOT)}:{number}: {line.strip()[:100]}")
    assert not offenders, "files that point outside the repository:\n" + "\n".join(offenders)


def test_the_outside_path_check_catches_each_kind():
    for line in ["see ../" + "shared/x", "/" + "work/main/README.md", "PAPER" + ".md §2", "(DATA" + ".md)"]:
        assert OUTSIDE.search(line), line
    for line in ["docs/paper.md §2", "docs/data.md", "src/aot/network/x.py", "benchmarks/lm/README.md"]:
        assert not OUTSIDE.search(line), line
