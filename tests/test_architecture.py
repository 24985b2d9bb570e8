"""The architecture holds: the layers contract of pyproject.toml names every top-level module of aot, the module
import graph (imports inside functions included) has no cycle, and nothing outside aot.cli imports aot.cli."""

from __future__ import annotations

import pkgutil
import sys
from pathlib import Path

import pytest

import aot

grimp = pytest.importorskip("grimp")

if sys.version_info >= (3, 11):
    import tomllib
else:  # pragma: no cover
    tomllib = pytest.importorskip("tomli")

PYPROJECT = Path(__file__).resolve().parents[1] / "pyproject.toml"


@pytest.fixture(scope="module")
def graph():  # type: ignore[no-untyped-def]
    return grimp.build_graph("aot", cache_dir=None)


def contract_layers() -> list[list[str]]:
    config = tomllib.loads(PYPROJECT.read_text())["tool"]["importlinter"]
    (layers,) = [c for c in config["contracts"] if c["type"] == "layers"]
    return [[name.strip() for name in line.split("|")] for line in layers["layers"]]


def test_the_layers_contract_names_every_top_level_module_once() -> None:
    named = [name for line in contract_layers() for name in line]
    on_disk = sorted(m.name for m in pkgutil.iter_modules(aot.__path__) if m.name != "__main__")
    assert sorted(named) == on_disk  # a new module or package must be given its layer


def strongly_connected(edges: dict[str, set[str]]) -> list[list[str]]:
    """Tarjan's strongly connected components with more than one module (iterative: the graph is deep)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    on_stack: set[str] = set()
    stack: list[str] = []
    found: list[list[str]] = []
    counter = 0
    for root in sorted(edges):
        if root in index:
            continue
        work = [(root, iter(sorted(edges[root])))]
        index[root] = low[root] = counter
        counter += 1
        stack.append(root)
        on_stack.add(root)
        while work:
            node, children = work[-1]
            child = next(children, None)
            if child is not None:
                if child not in index:
                    index[child] = low[child] = counter
                    counter += 1
                    stack.append(child)
                    on_stack.add(child)
                    work.append((child, iter(sorted(edges.get(child, ())))))
                elif child in on_stack:
                    low[node] = min(low[node], index[child])
                continue
            work.pop()
            if work:
                low[work[-1][0]] = min(low[work[-1][0]], low[node])
            if low[node] == index[node]:
                component = []
                while True:
                    member = stack.pop()
                    on_stack.discard(member)
                    component.append(member)
                    if member == node:
                        break
                if len(component) > 1:
                    found.append(sorted(component))
    return found


def test_strongly_connected_finds_a_planted_cycle() -> None:
    edges = {"a": {"b"}, "b": {"c"}, "c": {"a"}, "d": {"a"}, "e": set()}
    assert strongly_connected(edges) == [["a", "b", "c"]]
    assert strongly_connected({"a": {"b"}, "b": set()}) == []


def test_the_module_import_graph_has_no_cycle(graph) -> None:  # type: ignore[no-untyped-def]
    edges = {m: set(graph.find_modules_directly_imported_by(m)) for m in graph.modules}
    assert strongly_connected(edges) == []


def test_nothing_below_the_face_imports_it(graph) -> None:  # type: ignore[no-untyped-def]
    importers = {m for m in graph.find_modules_that_directly_import("aot.cli")}
    for module in graph.find_children("aot.cli"):
        importers |= set(graph.find_modules_that_directly_import(module))
    assert sorted(m for m in importers if m != "aot.cli" and not m.startswith("aot.cli.")) == []


def test_the_layer_picture_in_docs_is_the_contract() -> None:
    import re

    text = (PYPROJECT.parent / "docs" / "architecture.md").read_text()
    picture = text.split("## Layers", 1)[1].split("```", 2)[1]
    drawn = [
        [name.strip() for name in re.split(r"\s{2,}", line.strip())[0].split("|")]
        for line in picture.strip().splitlines()
    ]
    assert drawn == contract_layers()
