"""The modelling code an export ships (``aot export hf``): :mod:`aot.hf.modeling_aot` with the lines between its
``aot:`` marks replaced by the source of what they import, so that the file needs torch and transformers only
(``AutoModelForCausalLM.from_pretrained(EXPORT, trust_remote_code=True)`` where aot is not installed).

Each name the marked lines import is pasted together with what it needs, found by following the globals its source
reads (``symtable``) down to what is not aot's:

- a class or function of aot: its source as it is (``inspect.getsource``), after the sources it needs. Methods that
  import aot inside (``AotModel.save_pretrained`` / ``from_pretrained``: aot's own files and checks) are left out;
  the HF wrapper saves and loads.
- a module, or a class or function of another package: an import line.
- a constant: its value (``MIN_CAPACITY = 256``).
- two stand-ins where aot reads what an export cannot carry: :mod:`aot.hf.inner_standalone` for :mod:`aot.hf.inner`
  (the saved config read as attributes instead of aot's validated ``ModelConfig``), and ``make_block`` written out
  for the exported block (aot's reads the block registry of :mod:`aot.nn.specs`).

So nothing is written twice: the file is aot's code for the exported block, assembled per export. Before anything
is written the result is checked: it compiles, every global it reads is defined, and it imports no aot module;
the packages it imports besides the standard library are the export's requirements (torch and transformers; a
block whose code needs another package, ``mamba``, names it too: mambapy).
"""

from __future__ import annotations
import __future__

import ast
import builtins
import importlib
import importlib.metadata
import inspect
import symtable
import sys
import textwrap
import types
from pathlib import Path
from typing import Any

from aot.blockspec import block_spec
from aot.errors import AotError
from aot.hf import inner, inner_standalone
from aot.nn import blocks

HERE = Path(__file__).parent
MODELING, CONFIGURATION = HERE / "modeling_aot.py", HERE / "configuration_aot.py"
BEGIN, END = "# --- aot: begin", "# --- aot: end"
#: the aot modules an export carries a stand-in for
STAND_INS: dict[str, types.ModuleType] = {inner.__name__: inner_standalone}


def modeling_source(block: str) -> tuple[str, list[str]]:
    """The text of an export's ``modeling_aot.py`` for a model of ``block``, and the packages it imports (besides
    the standard library)."""
    text = MODELING.read_text(encoding="utf-8")
    head, rest = text.split(BEGIN, 1)
    marked, tail = rest.split(END, 1)
    paste = Paste({id(blocks.make_block): make_block_source(block)})
    for node in ast.parse(marked.split("\n", 1)[1]).body:
        assert isinstance(node, ast.ImportFrom) and node.module, "the marked lines hold `from aot... import` lines"
        module = STAND_INS.get(node.module) or importlib.import_module(node.module)
        for alias in node.names:
            paste.add(alias.asname or alias.name, getattr(module, alias.name))
    from aot import __version__ as version

    pasted = (
        f"# aot {version}'s model for block {block!r}, pasted from its modules by `aot export hf` (aot.hf.standalone)\n"
        + "".join(f"{line}\n" for line in sorted(set(paste.imports.values())))
        + "".join(f"\n\n{source.rstrip()}\n" for source in paste.sources)
        + "\n# --- end of aot's model ---\n\n"
    )
    source = head + pasted + tail.split("\n", 1)[1]
    return source, check_source(source)


def configuration_source() -> str:
    """The text of an export's ``configuration_aot.py``: :mod:`aot.hf.configuration_aot` as it is."""
    return CONFIGURATION.read_text(encoding="utf-8")


def make_block_source(block: str) -> tuple[str, dict[str, Any]]:
    """``make_block`` for one block type, written out from its spec, and the names it reads."""
    spec = block_spec(block)
    parts = {"block": spec.block, "mixer": spec.mixer, "feedforward": spec.feedforward}
    needs = {part.__name__: part for part in parts.values() if part is not None}
    args = {role: "None" if part is None else part.__name__ for role, part in parts.items()}
    source = (
        "def make_block(cfg):\n"
        f'    """One layer of block {block!r}, as aot.nn.blocks.make_block builds it from the block\'s spec."""\n'
        f"    return {args['block']}(cfg, mixer={args['mixer']}, feedforward={args['feedforward']})\n"
    )
    return source, needs


def is_aot(module_name: str | None) -> bool:
    return module_name is not None and (module_name == "aot" or module_name.startswith("aot."))


class Paste:
    """The import lines and sources pasted so far, each name once (see the module docstring)."""

    def __init__(self, generated: dict[int, tuple[str, dict[str, Any]]]) -> None:
        self.generated = generated  # id(object) -> (source written in its place, the names that source reads)
        self.objects: dict[str, Any] = {}
        self.imports: dict[str, str] = {}
        self.sources: list[str] = []

    def add(self, name: str, obj: Any) -> None:
        """``obj``, read as ``name``, after what it needs."""
        if name in self.objects:
            if self.objects[name] is not obj:
                raise AotError(f"aot export hf: two different objects are named {name!r} in aot's model; rename one")
            return
        self.objects[name] = obj
        home = getattr(obj, "__module__", None)
        if id(obj) in self.generated:
            source, needs = self.generated[id(obj)]
            for needed, value in needs.items():
                self.add(needed, value)
            self.sources.append(source)
        elif isinstance(obj, types.ModuleType):
            self.imports[name] = import_line(name, obj)
        elif isinstance(obj, type | types.FunctionType) and is_aot(home):
            if obj.__name__ != name:  # an alias (MSSA = MultiHeadSubspaceSelfAttention)
                self.add(obj.__name__, obj)
                self.sources.append(f"{name} = {obj.__name__}\n")
                return
            module = sys.modules[obj.__module__]
            if getattr(module, "annotations", None) is not __future__.annotations:
                raise AotError(f"aot export hf: {module.__name__} must use `from __future__ import annotations`")
            source = own_source(obj)
            for needed in read_globals(source):
                if needed in vars(module):
                    self.add(needed, vars(module)[needed])
                elif not hasattr(builtins, needed):
                    raise AotError(f"aot export hf: {obj.__qualname__} reads {needed!r}, which {module.__name__} lacks")
            self.sources.append(f"# {module.__name__}.{obj.__qualname__}\n{source}")
        elif (
            home
            and not is_aot(home)
            and getattr(sys.modules.get(home), own_name := getattr(obj, "__name__", ""), None) is obj
        ):
            alias = "" if own_name == name else f" as {name}"
            self.imports[name] = f"from {home} import {own_name}{alias}"
        elif is_literal(obj):
            self.sources.append(f"{name} = {obj!r}\n")
        else:
            raise AotError(
                f"aot export hf: {name!r} ({type(obj).__name__}) is neither aot's code nor importable from a module, "
                "so the export's modelling code cannot carry it"
            )


def import_line(name: str, module: types.ModuleType) -> str:
    """The line that makes ``module`` readable as ``name``."""
    full = module.__name__
    if is_aot(full):
        raise AotError(f"aot export hf: aot's model reads the module {full} as a whole; import names from it instead")
    parent, _, last = full.rpartition(".")
    if full == name:
        return f"import {full}"
    return f"from {parent} import {name}" if parent and last == name else f"import {full} as {name}"


def is_literal(value: Any) -> bool:
    try:
        return bool(ast.literal_eval(repr(value)) == value)
    except (ValueError, SyntaxError):
        return False


def imports_aot(node: ast.AST) -> bool:
    """Whether ``node`` holds an import of an aot module."""
    for child in ast.walk(node):
        if isinstance(child, ast.Import) and any(is_aot(alias.name) for alias in child.names):
            return True
        if isinstance(child, ast.ImportFrom) and child.level == 0 and is_aot(child.module):
            return True
    return False


def own_source(obj: type | types.FunctionType) -> str:
    """The source of ``obj`` without its methods that import aot (they read or write aot's own files)."""
    source = textwrap.dedent(inspect.getsource(obj))
    (node,) = ast.parse(source).body
    if not isinstance(node, ast.ClassDef):
        if imports_aot(node):
            raise AotError(f"aot export hf: {obj.__qualname__} imports aot inside; it cannot go into the export")
        return source
    lines = source.splitlines(keepends=True)
    for method in reversed(node.body):
        if isinstance(method, ast.FunctionDef | ast.AsyncFunctionDef) and imports_aot(method):
            start = min([method.lineno, *(d.lineno for d in method.decorator_list)])
            del lines[start - 1 : method.end_lineno]
    return "".join(lines)


def _symbol_tables(table: symtable.SymbolTable) -> list[symtable.SymbolTable]:
    return [table, *(t for child in table.get_children() for t in _symbol_tables(child))]


def read_globals(source: str) -> list[str]:
    """The global names ``source`` reads (annotations are not read: aot's modules postpone them), in order of
    first use, without the names it defines itself."""
    module = symtable.symtable("from __future__ import annotations\n" + source, "<aot>", "exec")
    defined = {s.get_name() for s in module.get_symbols() if s.is_assigned() or s.is_imported()}
    names = [
        s.get_name() for t in _symbol_tables(module) for s in t.get_symbols() if s.is_global() and s.is_referenced()
    ]
    return [name for name in dict.fromkeys(names) if name not in defined]


def check_source(source: str) -> list[str]:
    """Check the assembled file (it compiles, reads only names it defines or builtins, imports no aot module and
    nothing that is not an installed package) and return the distributions it needs, the standard library left out."""
    compile(source, "modeling_aot.py", "exec")
    undefined = [name for name in read_globals(source) if not hasattr(builtins, name)]
    if undefined:
        raise AotError(f"aot export hf: the modelling code reads undefined names {undefined}")
    packages: set[str] = set()
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, ast.Import):
            packages.update(alias.name.split(".")[0] for alias in node.names)
        elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
            packages.add(node.module.split(".")[0])
    if "aot" in packages:
        raise AotError("aot export hf: the modelling code still imports aot")
    installed = importlib.metadata.packages_distributions()
    needed = sorted(packages - set(sys.stdlib_module_names) - {"__future__"})
    loose = [name for name in needed if name not in installed]
    if loose:
        raise AotError(
            f"aot export hf: the model's code imports {', '.join(map(repr, loose))}, which no installed package "
            "provides, so the export could not be loaded anywhere else; define the block in an installed package"
        )
    return sorted({installed[name][0] for name in needed})
