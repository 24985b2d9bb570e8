"""What the tests of tests/hf share: tiny language-model runs, their `aot export hf` folders, the class an export
ships (its own modelling code, not aot.hf's), and transformers' cache of remote code kept in the test's folder."""

from __future__ import annotations

import json
import sys
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import pytest
import torch

from aot.cli import main
from aot.models import build_model, preset_config


def lm_run(folder: Path, preset: str, **changes: object) -> Path:
    """A 2-layer, 32-wide language-model run folder (bytes, context 32) with weights away from the init, so that
    biases, norms and step sizes all matter."""
    torch.manual_seed(0)
    fields = dict(n_layer=2, n_embd=32, n_head=2, head_dim=None, block_size=32)
    model = build_model(preset_config(preset).replace(**{**fields, **changes}))
    with torch.no_grad():
        for param in model.parameters():
            param.normal_(0.0, 0.3 if param.dim() > 1 else 0.1)
    model.save_pretrained(folder / "checkpoint")
    (folder / "results.json").write_text(json.dumps({"config": {"data": {"tokenizer": "bytes"}}}))
    return folder


def export(run_dir: Path, out: Path) -> Path:
    assert main(["export", "hf", str(run_dir), str(out)]) == 0
    return out


def shipped(folder: Path, name: str = "modeling_aot.AotForCausalLM") -> Any:
    """The class the export's own code file defines (what ``trust_remote_code=True`` loads)."""
    from transformers.dynamic_module_utils import get_class_from_dynamic_module

    cls = get_class_from_dynamic_module(name, str(folder))
    assert cls.__module__.startswith("transformers_modules.")  # the export's file, not aot.hf
    return cls


@contextmanager
def remote_code_cache(cache: Path) -> Iterator[Path]:
    """transformers' cache of remote code in ``cache`` (not the user's), and its modules forgotten after."""
    from transformers import dynamic_module_utils as dynamic

    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(dynamic, "HF_MODULES_CACHE", str(cache))
        try:
            yield cache
        finally:
            for name in [n for n in sys.modules if n.split(".")[0] == "transformers_modules"]:
                del sys.modules[name]
            if str(cache) in sys.path:
                sys.path.remove(str(cache))
