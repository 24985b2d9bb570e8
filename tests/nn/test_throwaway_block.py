"""A block with its own hyperparameter, added in two files: its module and spec (tests/nn/throwaway_block.py) and
this registration. `aot train` trains it with its option set flat in the model section, `aot sweep` sweeps the
option, `aot bench` compares it, and the run's checkpoint loads with the option as it was trained; no other file
changes. docs/extending.md walks through the same block."""

from __future__ import annotations

import json

import pytest
import torch
from throwaway_block import LABEL, NAME, SPEC, TemperedOptions

from aot.blockspec import register_block, unregister_block
from aot.cli import main
from aot.config import ModelConfig
from aot.errors import ConfigError
from aot.loader import load_run
from aot.tasks import get_task


@pytest.fixture
def registered():
    spec = register_block(SPEC)
    try:
        yield spec
    finally:
        unregister_block(NAME)  # registered for the test only


def smoke_args(*sets: str) -> list[str]:
    preset, smoke = get_task("lm").smoke
    return ["--recipe", preset, "--device", "cpu", *(a for s in (*smoke, *sets) for a in ("--set", s))]


def test_its_option_is_a_config_field_with_its_range(registered) -> None:
    cfg = ModelConfig.from_dict({"block": NAME, "n_embd": 16, "n_head": 2, "score_temperature": 0.5})
    assert cfg.options == TemperedOptions(score_temperature=0.5) and cfg.score_temperature == 0.5
    assert cfg.to_dict()["score_temperature"] == 0.5  # written flat beside the shared fields
    assert ModelConfig.from_dict(cfg.to_dict()) == cfg
    with pytest.raises(ConfigError, match=r"model.score_temperature=0.0 must be > 0"):
        cfg.replace(score_temperature=0)
    with pytest.raises(ConfigError, match=f"is an option of block '{NAME}'; block='aot-mssa' has none"):
        ModelConfig.from_dict({"block": "aot-mssa", "score_temperature": 0.5})
    hot = torch.nn.Module()  # the option reaches the module: τ = 0.5 doubles the scale of MSSA's scores
    hot.attn = SPEC.mixer(cfg)
    assert hot.attn.scale == pytest.approx(2 / (cfg.p**0.5))


def test_a_throwaway_block_trains_sweeps_benches_and_its_checkpoint_loads(registered, tmp_path, capsys) -> None:
    block = ("model.block=" + NAME, "model.score_temperature=0.5")
    run = tmp_path / "run"
    assert main(["train", "lm", *smoke_args(*block), "--out", str(run)]) == 0
    results = json.loads((run / "results.json").read_text())
    assert results["config"]["model"]["score_temperature"] == 0.5
    assert results["train"]["mfu"] > 0  # the trainer priced its steps from the spec's FLOPs

    loaded = load_run(run, tokenizer=False)  # its checkpoint, verified, as every command loads a run
    assert loaded.model.cfg.block == NAME and loaded.model.cfg.options == TemperedOptions(0.5)
    assert loaded.model.backbone.blocks[0].attn.scale == pytest.approx(2 / (loaded.model.cfg.p**0.5))
    assert json.loads((run / "checkpoint" / "config.json").read_text())["score_temperature"] == 0.5

    sweep = tmp_path / "sweep"
    argv = ["sweep", "lm", *smoke_args(block[0], "model.score_temperature=0.5,2"), "--seeds", "0"]
    assert main([*argv, "--out", str(sweep)]) == 0
    store = json.loads((sweep / "results.json").read_text())
    swept = sorted(row["config"] for row in store["runs"])
    assert len(swept) == 2 and "score_temperature=0.5" in swept[0] and "score_temperature=2" in swept[1], swept
    capsys.readouterr()

    from aot.bench.suite import BenchSettings, run_suite

    settings = BenchSettings(
        n_embd=16, n_head=2, seq_len=8, batch=2, depth=1, warmup=0, repeat=1, rounds=1, memory=False,
        breakdown=False, peak_sizes=(64,), sections=("models",), scaling_blocks=(LABEL,), decode_blocks=(LABEL,),
    )  # fmt: skip
    rows = [row for row in run_suite(settings, log=lambda *_: None)["models"] if row["label"] == LABEL]
    assert rows and all(row["block"] == NAME for row in rows)
    assert all(row["flop_counter_agreement_forward"] == pytest.approx(1.0, rel=0.01) for row in rows)
