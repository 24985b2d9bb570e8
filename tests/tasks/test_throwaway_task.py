"""A task in one module (tests/tasks/throwaway_task.py) plus its registration: `aot train` trains it (with the
trainer's MFU), `aot sweep` sweeps it (its own metric, its own store row; `--plan` prices it from its model) and its
run folder's checkpoint loads, with no other file changed. docs/extending.md walks through the same task."""

from __future__ import annotations

import json

import pytest
import torch
from throwaway_task import FirstTokenTask

from aot.cli import main
from aot.loader import load_run
from aot.tasks import TASKS, register_task


@pytest.fixture
def registered():
    task = register_task(FirstTokenTask())
    try:
        yield task
    finally:
        TASKS.pop(task.name)  # registered for the test only


def smoke_sets(task) -> list[str]:
    preset, sets = task.smoke
    return ["--recipe", preset, "--device", "cpu", *(a for s in sets for a in ("--set", s))]


def test_a_throwaway_task_trains_sweeps_is_priced_and_its_checkpoint_loads(registered, tmp_path, capsys):
    task = registered
    run = tmp_path / "run"
    assert main(["train", task.name, *smoke_sets(task), "--set", "train.steps=6", "--out", str(run)]) == 0
    results = json.loads((run / "results.json").read_text())
    assert 0.0 <= results["val"]["accuracy"] <= 1.0 and results["train"]["steps"] == 6
    assert results["train"]["mfu"] > 0  # the trainer priced its steps from the task's planned model

    loaded = load_run(run, tokenizer=False)  # its checkpoint, verified, as every command loads a run
    assert loaded.source.path.name == "checkpoint"
    tokens = torch.randint(0, 16, (2, 8))
    logits, _ = loaded.model(tokens)
    assert logits.shape == (2, 8, 16)

    sweep = tmp_path / "sweep"
    argv = ["sweep", task.name, *smoke_sets(task), "--set", "train.lr=1e-3,3e-3", "--seeds", "0", "1"]
    assert main([*argv, "--out", str(sweep)]) == 0
    store = json.loads((sweep / "results.json").read_text())
    assert len(store["runs"]) == 3 and all("val_accuracy" in row for row in store["runs"])
    assert "val accuracy" in (sweep / "table.md").read_text()  # its own metric heads the table
    capsys.readouterr()
    assert main([*argv, "--out", str(sweep), "--plan"]) == 0
    assert "3 runs, 0 to train" in capsys.readouterr().out
    assert main([*argv, "--out", str(tmp_path / "fresh"), "--plan"]) == 0
    assert "FLOPs, " in capsys.readouterr().out  # priced from the task's planned model


def test_a_taken_name_is_one_line(registered):
    from aot.errors import ConfigError

    with pytest.raises(ConfigError, match="already registered"):
        register_task(FirstTokenTask())
