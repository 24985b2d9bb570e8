"""The task protocol: every task goes through one run_task, which writes results.json atomically on the main
process only; a truncated results.json is not a finished run; aot train NAME is built from the task registry."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from aot import run_folder
from aot.cli import main
from aot.tasks import TASKS, get_task, run_task
from aot.train.distributed import DistEnv

FIXTURE = Path(__file__).resolve().parents[1] / "fixtures" / "sonnets.txt"
#: what a task's smoke run reads from a file of the test suite (the others make their own data)
DATA = {"lm": [f"data.corpus={FIXTURE}"]}


def tiny_run(name: str):  # type: ignore[no-untyped-def]
    task = get_task(name)
    preset, sets = task.smoke
    return task, task.build_run(preset, sets=[*sets, *DATA.get(name, [])])


def test_every_registered_task_declares_its_smoke_run_and_sweep_metric() -> None:
    """The registry is the one table: each task brings its smallest run and what its sweeps rank by."""
    for name, task in TASKS.items():
        preset, sets = task.smoke
        assert preset in task.recipes and "model.n_layer=1" in sets and "train.steps=2" in sets, name
        assert task.metric.goal in ("min", "max") and task.metric.field, name


@pytest.mark.parametrize("name", sorted(TASKS))
def test_run_task_writes_results_atomically_and_they_read_back_as_finished(name: str, tmp_path: Path, monkeypatch):
    written: list[Path] = []
    real = run_folder.write_text_atomic

    def spy(path: Path, text: str) -> None:
        written.append(path)
        real(path, text)

    monkeypatch.setattr(run_folder, "write_text_atomic", spy)
    task, run = tiny_run(name)
    results = run_task(task, run, tmp_path, "cpu")
    assert tmp_path / "results.json" in written  # through the atomic writer, not a plain write
    assert run_folder.read_results(tmp_path) == json.loads(json.dumps(results))
    assert results["task"] == run.task and results["train"]["steps"] == 2
    assert results["model"]["params"] > 0 and results["config"]["train"]["steps"] == 2
    assert (tmp_path / "loss_curve.png").is_file()


@pytest.mark.parametrize("name", sorted(TASKS))
def test_only_the_main_process_writes_results(name: str, tmp_path: Path, monkeypatch) -> None:
    import aot.tasks.pipeline as runner

    monkeypatch.setattr(runner, "init_distributed", lambda device: DistEnv(rank=1, world_size=1))
    task, run = tiny_run(name)
    assert run_task(task, run, tmp_path, "cpu") == {}
    assert not (tmp_path / "results.json").exists()


def test_a_truncated_or_foreign_results_file_is_not_a_finished_run(tmp_path: Path) -> None:
    task, run = tiny_run("icl")
    run_task(task, run, tmp_path, "cpu")
    whole = (tmp_path / "results.json").read_text()
    assert run_folder.read_results(tmp_path) is not None
    for text in (whole[: len(whole) // 2], "", "[1, 2]", '{"task": "icl"}', '{"train": {}}', "\xff"):
        (tmp_path / "results.json").write_text(text)
        assert run_folder.read_results(tmp_path) is None, text
    (tmp_path / "results.json").unlink()
    assert run_folder.read_results(tmp_path) is None


def test_aot_train_lists_every_registered_task_with_its_options(capsys) -> None:
    with pytest.raises(SystemExit):
        main(["train", "--help"])
    text = capsys.readouterr().out
    assert all(name in text for name in TASKS)
    for task in TASKS.values():
        with pytest.raises(SystemExit):
            main(["train", task.name, "--help"])
        text = capsys.readouterr().out
        assert all(option.flag in text for option in task.command.options)
        assert task.command.default_recipe in text


def test_a_task_option_sets_the_config_fields_it_names(capsys) -> None:
    assert main(["train", "icl", "--dims", "7", "--dump-config"]) == 0
    dumped = capsys.readouterr().out
    assert "n_dims: 7" in dumped and "n_points: 15" in dumped
    assert main(["train", "lm", "--no-fetch", "--tokenizer", "bpe-512", "--dump-config"]) == 0
    dumped = capsys.readouterr().out
    assert "fetch: false" in dumped and "tokenizer: bpe-512" in dumped


def test_an_unknown_task_is_one_line() -> None:
    from aot.errors import ConfigError

    with pytest.raises(ConfigError, match="unknown task 'speech'; use one of lm, vision, icl, recall"):
        get_task("speech")


@pytest.mark.parametrize("name", sorted(TASKS))
def test_a_non_finite_loss_is_called_divergence(name: str) -> None:
    task = get_task(name)
    section, key, what = task.finite_result
    assert task.diverged({section: {key: 1.5}}) is None
    message = task.diverged({section: {key: float("nan")}})
    assert message == f"training diverged (non-finite {what}); lower --lr"
