"""aot.run_folder's output rules: a command's output never lands on a training run, a checkpoint or a saved model
(or inside one), and a refused output leaves nothing behind. Folders are built by hand here (the marker files
each kind of folder holds), so that the rules are checked independently of the commands that write them."""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest

from aot.errors import AotError
from aot.report.part import Part, check_data
from aot.run_folder import check_output_dir, holds_training_run, inside_model, refuse_as_output
from aot.train.resume import RESUME_MODES, _plan_on_main


def tree(root: Path) -> dict[str, bytes]:
    return {str(p.relative_to(root)): p.read_bytes() if p.is_file() else b"/" for p in sorted(root.rglob("*"))}


def training_run(root: Path) -> Path:
    run = root / "run"
    (run / "checkpoint").mkdir(parents=True)
    (run / "metrics.jsonl").write_text('{"step": 1}\n')
    (run / "results.json").write_text(json.dumps({"task": "lm", "train": {}}))
    for name in ("config.json", "model.safetensors", "trainer.json"):
        (run / "checkpoint" / name).write_text("{}")
    return run


def saved_model(root: Path) -> Path:
    folder = root / "export"
    folder.mkdir()
    (folder / "config.json").write_text("{}")
    (folder / "model.safetensors").write_bytes(b"x")
    return folder


def test_a_training_run_a_checkpoint_and_a_saved_model_are_refused_as_output(tmp_path: Path) -> None:
    run, export = training_run(tmp_path), saved_model(tmp_path)
    before = tree(tmp_path)
    for out, says in [
        (run, "holds a training run"),
        (run / "checkpoint", "is a training checkpoint"),
        (run / "checkpoint" / "figures", "lies inside"),
        (export, "is a saved model"),
        (export / "deeper" / "still", "lies inside"),
    ]:
        with pytest.raises(AotError, match=says) as info:
            check_output_dir(out)
        assert "\n" not in str(info.value) and "pick a new folder" in str(info.value)
    assert tree(tmp_path) == before  # nothing created, nothing changed


def test_a_commands_own_earlier_output_and_a_new_folder_are_accepted_without_creating_anything(tmp_path: Path) -> None:
    earlier = tmp_path / "eval"
    earlier.mkdir()
    (earlier / "results.json").write_text(json.dumps({"runs": {}}))  # another command's results: no task / train
    assert not holds_training_run(earlier)
    assert check_output_dir(earlier) == earlier
    new = tmp_path / "a" / "b"
    assert check_output_dir(new) == new and not (tmp_path / "a").exists()  # created when the command writes


def test_the_run_a_command_reads_may_be_its_output_but_never_a_checkpoint(tmp_path: Path) -> None:
    run = training_run(tmp_path)
    assert check_output_dir(run, reads=run) == run  # aot viz attention RUN: figures beside the run
    with pytest.raises(AotError, match="training checkpoint"):
        check_output_dir(run / "checkpoint", reads=run / "checkpoint")


def test_an_output_under_a_file_is_refused_in_one_line(tmp_path: Path) -> None:
    (tmp_path / "file").write_text("x")
    with pytest.raises(AotError, match="not a folder"):
        check_output_dir(tmp_path / "file" / "out")


def test_inside_model_finds_the_nearest_model_folder(tmp_path: Path) -> None:
    run = training_run(tmp_path)
    assert inside_model(run) is None
    found = inside_model(run / "checkpoint" / "x")
    assert found is not None and found[0] == Path(os.path.abspath(run / "checkpoint"))


@pytest.mark.parametrize("force", [False, True])
@pytest.mark.parametrize("mode", RESUME_MODES)
def test_training_into_a_checkpoint_is_refused_whatever_the_mode_and_nothing_moves(
    tmp_path: Path, mode: str, force: bool
) -> None:
    run = training_run(tmp_path)
    before = tree(tmp_path)
    with pytest.raises(AotError, match="training checkpoint"):
        _plan_on_main(run / "checkpoint", mode, force)
    assert tree(tmp_path) == before


def test_reproduce_data_values_are_checked_before_any_part_runs() -> None:
    def refuse(value: str) -> None:
        raise AotError(f"corpus file {value!r} is not UTF-8")

    part = Part("p", "P", (), plan=None, collect=None, render=None, data=("text",), data_checks={"text": refuse})  # type: ignore[arg-type]
    with pytest.raises(AotError, match=r"^--data text=bad.txt: corpus file 'bad.txt' is not UTF-8$"):
        check_data([part], {"text": "bad.txt"})
    with pytest.raises(AotError, match="no part reads"):
        check_data([part], {"other": "x"})
    refuse_as_output(Path("never-made"))  # a fresh name passes and is not created
    assert not Path("never-made").exists()
