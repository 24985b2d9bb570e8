"""docs/math.md names real functions and real tests; the README's presets table is current."""

from __future__ import annotations

import ast
import importlib
import re
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


def test_readme_presets_table_matches_aot_models():
    pytest.importorskip("mambapy", reason="the table lists the mamba presets, which need aot[mamba] to build")
    from aot.models.cli import markdown_table, preset_rows

    assert markdown_table(preset_rows()) in (ROOT / "README.md").read_text()
