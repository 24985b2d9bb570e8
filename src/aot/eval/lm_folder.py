"""A trained language model and its tokenizer from a run folder (``aot train lm --out DIR``) or an export folder
(``aot export hf``): what ``aot eval lm``, ``aot sample``, ``aot export hf`` and the harness adapter start from.

The reading itself — checkpoints verified (a damaged one falls back to ``checkpoint.prev``; none verifies: one
line), config.json and results.json schema-checked, the tokenizer from the folder's records — is
:func:`aot.loader.load_run`'s; this module asks it for a language model and keeps the shape its users take.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from aot.data.tokenizers import Tokenizer
from aot.loader import load_run
from aot.models.lm import CausalLM


@dataclass
class LMRunFolder:
    path: Path
    model: CausalLM
    tokenizer: Tokenizer

    @property
    def block_size(self) -> int:
        return self.model.cfg.block_size

    @property
    def name(self) -> str:
        return self.path.name


def load_lm_run(run_dir: str | Path, device: str = "cpu") -> LMRunFolder:
    """The model (eval mode, on ``device``) and tokenizer of a run or export folder (:func:`aot.loader.load_run`)."""
    run = load_run(run_dir, device, task="lm")
    assert isinstance(run.model, CausalLM) and run.tokenizer is not None  # task="lm" loads both
    return LMRunFolder(run.path, run.model, run.tokenizer)
