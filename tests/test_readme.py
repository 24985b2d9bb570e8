"""The README's Python snippet runs as printed, and its loss at initialisation is that of a uniform guess."""

from __future__ import annotations

import math
import re
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


def readme_python_blocks() -> list[str]:
    return re.findall(r"```python\n(.*?)```", (ROOT / "README.md").read_text(), flags=re.S)


def test_readme_python_snippet_runs_and_its_initial_loss_is_near_ln_vocab(tmp_path, monkeypatch):
    blocks = readme_python_blocks()
    assert len(blocks) == 1, "the README has one Python snippet; update this test if that changes"
    monkeypatch.chdir(tmp_path)  # it saves "my-model" into the working directory
    namespace: dict = {}
    exec(compile(blocks[0], "README.md", "exec"), namespace)
    vocab = namespace["model"].cfg.vocab_size
    loss = namespace["loss"].item()
    assert abs(loss - math.log(vocab)) < 0.3, f"loss at init {loss:.3f}, ln(vocab) = {math.log(vocab):.3f}"
    assert (tmp_path / "my-model" / "model.safetensors").is_file()
    assert namespace["run"].model.num_params() == namespace["model"].num_params()  # load_run read it back


def use_it_from_python() -> str:
    text = (ROOT / "README.md").read_text()
    return text[text.index("## Use it from Python") :].split("\n## ", 1)[0]


def test_the_package_and_the_readme_name_the_same_entry_points():
    """help(aot) and the README's "Use it from Python" name how to load a run, build a model, and reach each library
    (HF, TransformerLens, lm-eval, timm); each named module exists and `aot eval harness` is a command."""
    import importlib.util

    import aot
    from aot.cli import build_parser

    names = ["load_run", "build_model", "preset_config", "aot.hf", "aot.lens", "aot eval harness"]
    names += ["aot.eval.lm_eval_model", "aot.models.timm_models", "docs/integrations.md"]
    section = use_it_from_python()
    for name in names:
        assert name in (aot.__doc__ or ""), f"aot's docstring does not name {name}"
        assert name in section, f"the README's 'Use it from Python' does not name {name}"
    for module in ("aot.hf", "aot.lens", "aot.eval.lm_eval_model", "aot.models.timm_models"):
        assert importlib.util.find_spec(module) is not None, module
    assert build_parser().parse_args(["eval", "harness", "runs/lm"]).run_dir == "runs/lm"


# -- the main job's numbers come from benchmarks/main_job/results.json ---------------------------------------

MAIN_JOB = ROOT / "benchmarks" / "main_job"


def load_record_module():
    import importlib.util

    spec = importlib.util.spec_from_file_location("record_main_job", MAIN_JOB / "record.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def main_job_record() -> dict:
    """The recorded main job. A clone made by record.py before the first record has none: skip there."""
    import json

    import pytest

    path = MAIN_JOB / "results.json"
    if not path.is_file():
        pytest.skip("benchmarks/main_job/results.json not recorded yet: run benchmarks/main_job/record.py")
    return json.loads(path.read_text())


def minutes(seconds: float) -> str:
    return f"{seconds / 60:.0f} min"


def test_readme_quotes_the_recorded_main_job():
    record, readme = main_job_record(), (ROOT / "README.md").read_text()
    run = record["run_summary"]
    assert record["make_run"]["returncode"] == 0 and record.get("make_test", {}).get("returncode", 0) == 0
    quotes = [
        f"{run['val_nats_per_byte']:.3f}",
        f"{run['test_nats_per_byte']:.3f}",
        f"{run['bigram_val_nats_per_byte']:.3f}",
        f"{run['tokens_per_second']:,.0f} tok/s",
        minutes(record["make_run"]["seconds"]),
        record["machine"]["processor"],
        record["date"][:10],
    ]
    if "make_test" in record:
        quotes.append(minutes(record["make_test"]["seconds"]))
    for quoted in quotes:
        assert quoted in readme, f"the README does not quote {quoted!r} from benchmarks/main_job/results.json"


def test_every_bigram_figure_in_the_readme_and_the_guides_is_a_recorded_one():
    import json
    import re

    recorded = set()
    if (MAIN_JOB / "results.json").is_file():
        recorded.add(f"{main_job_record()['run_summary']['bigram_val_nats_per_byte']:.3f}")
    lm_runs = json.loads((ROOT / "benchmarks" / "lm" / "results.json").read_text())["runs"]
    recorded |= {f"{run['bigram_val_loss']:.3f}" for run in lm_runs}
    austen = json.loads((ROOT / "benchmarks" / "zeroshot" / "bigram.json").read_text())["austen-ppl"]
    recorded.add(f"{austen['nats_per_token']:.3f}")  # the byte bigram on held-out Austen text (zero-shot section)
    pages = [ROOT / "README.md", *sorted((ROOT / "docs" / "guide").glob("*.md"))]
    readme = "\n".join(page.read_text() for page in pages)
    quoted = re.findall(r"bigram[^0-9|]{0,30}?(\d\.\d{2,3})", readme)
    assert quoted and set(quoted) <= recorded, f"bigram figures {set(quoted) - recorded} are not recorded"


def test_help_and_makefile_state_no_unrecorded_time(capsys):
    """`aot train lm --help` and the Makefile point to the recorded main job instead of quoting a time."""
    import re

    import pytest

    from aot.cli import main

    with pytest.raises(SystemExit):
        main(["train", "lm", "--help"])
    help_text = " ".join(capsys.readouterr().out.split())
    makefile = (ROOT / "Makefile").read_text()
    for text in (help_text, makefile):
        assert "benchmarks/main_job" in text
        assert not re.search(r"\d+(\.\d+)?(-\d+)? ?(min|minutes|s)\b", text), "a time that is not from the record"


def test_record_script_reads_pytest_counts_and_writes_a_table():
    record_module = load_record_module()
    assert record_module.pytest_summary("x\n412 passed, 3 skipped, 20 deselected in 201.3s\n") == {
        "passed": 412,
        "skipped": 3,
        "deselected": 20,
    }
    table = record_module.markdown(main_job_record())
    assert "| `make run` |" in table and ("| `make test`" in table) == ("make_test" in main_job_record())
    readme = (ROOT / "README.md").read_text()
    for name, block in record_module.readme_blocks(main_job_record()).items():  # the README is up to date
        assert f"<!-- main_job:{name} -->\n{block}\n<!-- /main_job:{name} -->" in readme


# -- the guarantees table (docs/guarantees.md): a row per command, every test it names exists ----------------------


def guarantee_rows() -> list[tuple[str, str]]:
    """``(guarantee, tests)`` for each row of the "What is guaranteed" table (docs/guarantees.md)."""
    section = (ROOT / "docs" / "guarantees.md").read_text().split("\n", 1)[1]
    rows = []
    for line in section.splitlines():
        if line.startswith("| ") and not line.startswith(("| Guarantee |", "|---")):
            cells = [cell.strip() for cell in line.strip().strip("|").split(" | ")]
            rows.append((cells[0], cells[-1]))
    return rows


def defined_tests() -> dict[str, set[str]]:
    """Every ``tests/**.py`` file (relative path) -> the names of the test functions it defines."""
    import ast

    found = {}
    for path in sorted((ROOT / "tests").rglob("*.py")):
        tree = ast.parse(path.read_text())
        names = {n.name for n in ast.walk(tree) if isinstance(n, (ast.FunctionDef, ast.AsyncFunctionDef))}
        found[str(path.relative_to(ROOT))] = {name for name in names if name.startswith("test_")}
    return found


def named_tests(cell: str) -> list[tuple[str | None, str]]:
    """The tests a table cell names, as ``(file or None, name)``: `` `tests/x.py::test_a` `` is in tests/x.py;
    a bare `` `test_b` `` after a `` `tests/x.py` `` of the same cell is in that file, else in any test file; a
    parametrized id ``test_c[...]`` is the function ``test_c``."""
    import re

    named: list[tuple[str | None, str]] = []
    current: str | None = None
    for token in re.findall(r"`([^`]+)`", cell):
        path, sep, name = token.partition("::")
        if token.startswith("tests/") and token.endswith(".py"):
            current = token
        elif sep and path.startswith("tests/"):
            named.append((path, name.split("[")[0]))
        elif token.startswith("test_"):
            named.append((current, token.split("[")[0]))
    return named


def test_every_guarantee_names_tests_that_exist():
    functions = defined_tests()
    anywhere = set().union(*functions.values())
    rows = guarantee_rows()
    assert len(rows) >= 10
    for guarantee, cell in rows:
        named = named_tests(cell)
        assert named, f"the guarantee {guarantee[:80]!r}... names no test"
        for path, name in named:
            if path is None:
                assert name in anywhere, f"docs/guarantees.md names {name}, which no test file defines"
            else:
                assert path in functions, f"docs/guarantees.md names {path}, which does not exist"
                assert name in functions[path], f"docs/guarantees.md names {path}::{name}: not there"


def test_every_command_has_a_guarantee_row():
    """Each `aot` command (every sub-command of build_parser) is named in a row of the guarantees table."""
    from cli.cli_harness import leaf_commands

    guarantees = " ".join(guarantee for guarantee, _ in guarantee_rows())
    missing = [f"aot {command}" for command in leaf_commands() if f"`aot {command}`" not in guarantees]
    assert not missing, f"docs/guarantees.md has no row naming {missing}: add one with its test"
