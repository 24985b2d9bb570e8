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
