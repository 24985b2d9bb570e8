"""What an older aot wrote still loads and resumes (issue 45: renames and per-block options change no saved file).

tests/fixtures/legacy holds a run, its HF export and its logits written by aot at 0ffbd81, the last version whose
config held every block's options as flat fields and called the score scaling ``attn_scale``
(tests/fixtures/legacy/make_legacy.py says how they were made). Today's aot loads each without a notice, computes
the same logits, and resumes the run that was stopped at step 2 to the same weights the old version reached
without a stop.
"""

from __future__ import annotations

import json
import shutil
import warnings
from pathlib import Path

import pytest
import torch
from safetensors.torch import load_file

from aot.errors import RenamedWarning
from aot.loader import load_run
from aot.nn.specs import CrateOptions
from aot.tasks import get_task
from aot.tasks.pipeline import run_task

LEGACY = Path(__file__).parent / "fixtures" / "legacy"
TOKENS = torch.arange(16).view(1, 16)


def legacy_sets() -> list[str]:
    """make_legacy.py's settings in today's names."""
    import importlib.util

    spec = importlib.util.spec_from_file_location("make_legacy", LEGACY / "make_legacy.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return [s.replace("model.attn_scale=", "model.score_scale=") for s in module.SETS]


def test_the_fixture_is_in_the_old_form() -> None:
    saved = json.loads((LEGACY / "stopped" / "checkpoint" / "config.json").read_text())
    assert saved["attn_scale"] is False and "score_scale" not in saved
    assert saved["ista_residual"] is True and saved["mamba_d_state"] == 16 and saved["subspace_init"] == "normal"
    fingerprint = json.loads((LEGACY / "stopped" / "checkpoint" / "trainer.json").read_text())["fingerprint"]
    assert fingerprint["model"]["attn_scale"] is False and fingerprint["model"]["linear_attn_normalize"] is True


@pytest.mark.parametrize("folder", ["stopped", "export"])
def test_an_old_run_and_export_load_silently_with_the_same_logits(folder: str) -> None:
    with warnings.catch_warnings():
        warnings.simplefilter("error", RenamedWarning)  # a saved config is read without a notice
        model = load_run(LEGACY / folder, tokenizer=False).model.eval()
    cfg = model.cfg
    assert cfg.block == "crate" and cfg.score_scale is False
    assert cfg.options == CrateOptions(ista_residual=True)
    assert "mamba_d_state" not in cfg.to_dict()  # another block's options are dropped at their defaults
    with torch.no_grad():
        logits, _ = model(TOKENS)
    torch.testing.assert_close(logits, load_file(str(LEGACY / "logits.safetensors"))["logits"], rtol=0, atol=1e-6)


def test_an_old_stopped_run_resumes_to_the_old_versions_weights(tmp_path: Path) -> None:
    out = tmp_path / "run"
    shutil.copytree(LEGACY / "stopped", out)
    task = get_task("lm")
    results = run_task(task, task.build_run("cpu-quick", sets=legacy_sets()), out, "cpu", resume=True)
    assert results["train"]["steps"] == 4
    resumed = load_file(str(out / "checkpoint" / "model.safetensors"))
    finished = load_file(str(LEGACY / "finished.safetensors"))
    assert resumed.keys() == finished.keys()
    for name, tensor in finished.items():
        assert torch.equal(resumed[name], tensor), name  # bitwise: the old run without a stop


def test_a_changed_setting_is_still_refused_on_resume(tmp_path: Path) -> None:
    """The fingerprint is compared as read today, not switched off: another option value is named."""
    from aot.errors import AotError

    out = tmp_path / "run"
    shutil.copytree(LEGACY / "stopped", out)
    task = get_task("lm")
    run = task.build_run("cpu-quick", sets=[*legacy_sets(), "model.ista_step=0.2"])
    with pytest.raises(AotError, match=r"model.ista_step=0.1 there, 0.2 here"):
        run_task(task, run, out, "cpu", resume=True)
