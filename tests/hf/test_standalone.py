"""An `aot export hf` folder carries its own modelling code (aot.hf.standalone): aot's source for the exported block,
needing torch and transformers only, so that transformers loads it with trust_remote_code=True where aot is not
installed. Here the shipped code itself (not aot.hf's registered classes) gives aot's logits and aot's greedy
tokens, also past the context, for every block an export supports; and in a Python that cannot import aot it loads
an AoT-MSSA and an AoT-MHSA run, generates as `aot sample` does and runs transformers' pipeline."""

from __future__ import annotations

import ast
import inspect
import json
import subprocess
import sys
import sysconfig
from collections.abc import Iterator
from pathlib import Path

import pytest
import torch
from hf_runs import export, lm_run

from aot.errors import AotError
from aot.eval.lm_folder import load_lm_run
from aot.eval.sampling import sample
from aot.nn.attention import MultiHeadSubspaceSelfAttention

transformers = pytest.importorskip("transformers")
dynamic = pytest.importorskip("transformers.dynamic_module_utils")

#: block -> (preset, changes): every block an export writes code for; both MSSA outputs (tied, learned W_O)
CASES = {
    "aot-mssa-tied": ("aot-mssa-tied-l-cpu", {"position": "rope"}),
    "aot-mssa-w_o": ("aot-mssa-l-cpu", {"residual_scale": "scalar"}),
    "aot-mssa-token-shift": ("aot-mssa-l-cpu", {"token_shift": "channel"}),
    "aot-mhsa": ("aot-mhsa-l-cpu", {"residual_scale": "channel"}),
    "gpt2": ("gpt2-cpu", {}),
    "aot-mssa-aligned-vocab": ("aot-mssa-l-cpu", {"vocab_multiple": 96}),  # 256 rows padded to 288
    "llama": ("llama-l-cpu", {}),
    "crate": ("crate-l-cpu", {}),
    "crate-alpha": ("crate-alpha-l-cpu", {}),
    "linear-attn": ("aot-mhsa-l-cpu", {"block": "linear-attn"}),
    "mamba": ("aot-mhsa-l-cpu", {"block": "mamba"}),
}
PROMPT = "Shall I compare"


class LocalMixer(MultiHeadSubspaceSelfAttention):
    """A mixer defined in this test file, which no installed package provides."""


NEW = 40  # past the context of 32 tokens: the window slides


@pytest.fixture
def modules_cache(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[Path]:
    """transformers' cache of remote code in ``tmp_path`` (not the user's), and its modules forgotten after."""
    cache = tmp_path / "hf-modules"
    monkeypatch.setattr(dynamic, "HF_MODULES_CACHE", str(cache))
    yield cache
    for name in [n for n in sys.modules if n == "transformers_modules" or n.startswith("transformers_modules.")]:
        del sys.modules[name]
    if str(cache) in sys.path:
        sys.path.remove(str(cache))


@pytest.mark.parametrize(
    "case",
    [pytest.param(c, marks=[pytest.mark.slow] if c == "mamba" else []) for c in CASES],  # mamba: 7 s
)
def test_the_shipped_code_computes_what_aot_computes(case: str, tmp_path: Path, modules_cache: Path) -> None:
    preset, changes = CASES[case]
    if changes.get("block") == "mamba":
        pytest.importorskip("mambapy")
    run_dir = lm_run(tmp_path / "run", preset, **changes)
    folder = export(run_dir, tmp_path / f"export-{case}")
    imported = set(dynamic.get_imports(folder / "modeling_aot.py")) - set(sys.stdlib_module_names)
    assert imported == {"torch", "transformers"}  # transformers' own reading of what the file needs
    needs = "mambapy, torch, transformers" if case == "mamba" else "torch, transformers"  # mamba's is optional there
    assert f"(needs {needs})" in (folder / "README.md").read_text()
    shipped = dynamic.get_class_from_dynamic_module("modeling_aot.AotForCausalLM", str(folder))
    assert shipped.__module__.startswith("transformers_modules.")  # the export's file, not aot.hf
    model = shipped.from_pretrained(folder).eval()
    ours = load_lm_run(run_dir)
    ids = torch.tensor([ours.tokenizer.encode(PROMPT)])
    with torch.no_grad():
        torch.testing.assert_close(model(ids).logits, ours.model(ids)[0], rtol=0, atol=1e-6)
    _, greedy, _ = sample(ours, PROMPT, NEW, temperature=0)  # what `aot sample --temperature 0` prints
    for use_cache in (True, False):
        generated = model.generate(ids, max_new_tokens=NEW, do_sample=False, use_cache=use_cache)
        assert generated[0, ids.shape[1] :].tolist() == greedy


def test_the_shipped_file_is_aots_source_and_imports_no_aot() -> None:
    from aot.hf.standalone import modeling_source
    from aot.nn.attention import reference_attention

    source, needs = modeling_source("aot-mssa")
    assert needs == ["torch", "transformers"]
    for obj in (MultiHeadSubspaceSelfAttention, reference_attention):  # pasted as they are, not written again
        assert f"# {obj.__module__}.{obj.__qualname__}\n{inspect.getsource(obj)}" in source
    assert "def save_pretrained" not in source  # AotModel's own file I/O imports aot: left out
    imports = [node for node in ast.walk(ast.parse(source)) if isinstance(node, ast.Import | ast.ImportFrom)]
    modules = {alias.name for node in imports if isinstance(node, ast.Import) for alias in node.names}
    modules |= {node.module or "" for node in imports if isinstance(node, ast.ImportFrom)}
    assert modules and not any(name == "aot" or name.startswith("aot.") for name in modules)


def test_a_block_whose_code_no_installed_package_holds_is_refused_in_one_line() -> None:
    from aot.blockspec import BlockSpec, register_block, unregister_block
    from aot.hf.standalone import modeling_source
    from aot.nn.blocks import AttentionOnlyBlock

    register_block(BlockSpec(name="local-mssa", block=AttentionOnlyBlock, mixer=LocalMixer))
    try:
        with pytest.raises(AotError, match="which no installed package provides") as error:
            modeling_source("local-mssa")
    finally:
        unregister_block("local-mssa")
    assert "\n" not in str(error.value)


@pytest.mark.slow
def test_an_export_loads_where_aot_cannot_be_imported(tmp_path: Path) -> None:
    """AoT-MSSA (tied) and AoT-MHSA exports in `python -I -S` with only the venv's site-packages on the path."""
    runs = {
        "mssa": lm_run(tmp_path / "mssa", "aot-mssa-tied-l-cpu", position="rope"),
        "mhsa": lm_run(tmp_path / "mhsa", "aot-mhsa-l-cpu"),
    }
    exports = {name: export(run, tmp_path / f"export-{name}") for name, run in runs.items()}
    request = tmp_path / "request.json"
    request.write_text(json.dumps({"exports": [str(e) for e in exports.values()], "text": PROMPT, "new": NEW}))
    script = Path(__file__).with_name("load_without_aot.py")
    site = sysconfig.get_paths()["purelib"]
    env = {"HF_HOME": str(tmp_path / "hf-home"), "HF_HUB_OFFLINE": "1", "PATH": "/usr/bin:/bin"}
    command = [sys.executable, "-I", "-S", str(script), site, str(request), str(tmp_path / "result.json")]
    done = subprocess.run(command, env=env, stdin=subprocess.DEVNULL, capture_output=True, text=True, timeout=600)
    assert done.returncode == 0, done.stderr[-3000:]
    results = json.loads((tmp_path / "result.json").read_text())
    for name, run_dir in runs.items():
        got = results[str(exports[name])]
        assert got["module"].startswith("transformers_modules.")
        assert "trust_remote_code=True" in got["refusal"]  # what transformers says without it
        ours = load_lm_run(run_dir)
        assert got["ids"] == ours.tokenizer.encode(PROMPT)
        with torch.no_grad():
            want = ours.model(torch.tensor([got["ids"]]))[0][0]
        torch.testing.assert_close(torch.tensor(got["logits"]), want, rtol=0, atol=1e-6)
        assert got["greedy"] == sample(ours, PROMPT, NEW, temperature=0)[1]
        assert got["pipeline"] == got["decoded"]  # the pipeline's greedy text is the prompt and those tokens
