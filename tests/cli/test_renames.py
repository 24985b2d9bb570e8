"""Issue 45's names: training recipes (`aot train TASK --recipe`), the report's scale (`aot reproduce --scale`) and
readable model presets (`-l-cpu-wide`). Every old name still works for one release and says so in one line, once
(:func:`aot.errors.warn_renamed`); the suite itself uses the new names only (pyproject's filterwarnings makes a
RenamedWarning an error everywhere else)."""

from __future__ import annotations

import warnings
from pathlib import Path

import pytest
import yaml

import aot.errors
from aot.cli import main
from aot.errors import RenamedWarning
from aot.models.presets import PRESET_RENAMES, PRESETS, get_preset, preset_config
from aot.tasks import get_task
from aot.tasks.vision import VISION_RECIPE_RENAMES, VISION_RECIPES

pytestmark = pytest.mark.filterwarnings("always::aot.errors.RenamedWarning")


@pytest.fixture(autouse=True)
def fresh_notices(monkeypatch: pytest.MonkeyPatch) -> None:
    """Each test starts as a new process: no old name said yet."""
    monkeypatch.setattr(aot.errors, "_renamed_said", set())


def notices(err: str) -> list[str]:
    return [line for line in err.splitlines() if "is renamed" in line]


# -- model presets -----------------------------------------------------------------------------------------------


def test_the_w_cpu_presets_read_as_language_models_spent_on_width() -> None:
    assert PRESET_RENAMES == {
        "aot-mssa-w-cpu": "aot-mssa-l-cpu-wide",
        "aot-mhsa-w-cpu": "aot-mhsa-l-cpu-wide",
        "aot-mssa-tied-w-cpu": "aot-mssa-tied-l-cpu-wide",
        "crate-res-w-cpu": "crate-res-l-cpu-wide",
    }
    for old, new in PRESET_RENAMES.items():
        assert new in PRESETS and old not in PRESETS and PRESETS[new].fields["task"] == "lm"
        assert all("-w-" not in name for name in PRESETS)


@pytest.mark.parametrize(("old", "new"), sorted(PRESET_RENAMES.items()))
def test_an_old_preset_name_is_the_new_preset_said_once_in_one_line(old: str, new: str) -> None:
    with pytest.warns(RenamedWarning) as said:
        first = preset_config(old, n_layer=2)
        again = get_preset(old)  # said once per process
        by_key = PRESETS[old]  # the table finds it too
    assert first == preset_config(new, n_layer=2)
    assert again is by_key is PRESETS[new]
    assert len(said) == 1
    message = str(said[0].message)
    assert message.startswith(f"{old} is renamed {new} (") and message.endswith("goes in the next release")
    assert "\n" not in message


def test_aot_models_lists_the_new_names_and_how_a_name_reads(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["models", "--task", "lm"]) == 0
    out = capsys.readouterr().out
    assert "| aot-mssa-l-cpu-wide |" in out and "| crate-res-l-cpu-wide |" in out and "-w-cpu" not in out
    assert "BLOCK[-VARIANT]-KIND-SIZE[-wide]" in out and "l a language model" in out
    assert main(["models", "aot-mssa-w-cpu"]) == 0  # an old name still prints its config, with one line
    captured = capsys.readouterr()
    assert '"n_embd": 384' in captured.out
    assert notices(captured.err) == [
        "aot: aot-mssa-w-cpu is renamed aot-mssa-l-cpu-wide (model presets: -l- a language model, -wide the "
        "width-over-depth CPU variant); the old name goes in the next release"
    ]


def test_a_run_recorded_with_an_old_model_preset_name_still_loads() -> None:
    """A run config (kept in every checkpoint and results.json) that names an old preset builds the same model."""
    task = get_task("lm")
    new = task.build_run("cpu-mssa")
    recorded = new.to_dict()
    recorded["model"]["preset"] = "aot-mssa-w-cpu"
    with pytest.warns(RenamedWarning):
        old = task.run_cls.from_dict(recorded)
    assert old.model_config(vocab_size=256) == new.model_config(vocab_size=256)


# -- training recipes --------------------------------------------------------------------------------------------


def dump(argv: list[str], capsys: pytest.CaptureFixture[str]) -> tuple[dict, list[str]]:
    assert main([*argv, "--dump-config"]) == 0
    captured = capsys.readouterr()
    return yaml.safe_load(captured.out), notices(captured.err)


def test_recipe_is_the_flag_and_preset_still_works_with_one_line(capsys: pytest.CaptureFixture[str]) -> None:
    new, said = dump(["train", "lm", "--recipe", "cpu-quick"], capsys)
    assert said == [] and new["model"]["n_layer"] == 6
    old, said = dump(["train", "lm", "--preset", "cpu-quick"], capsys)
    assert old == new
    assert said == [
        "aot: --preset is renamed --recipe (training recipes; model presets are model.preset, `aot models`); "
        "the old flag goes in the next release"
    ]
    with pytest.raises(SystemExit):
        main(["train", "lm", "--help"])
    help_text = capsys.readouterr().out
    assert "--recipe RECIPE" in help_text and "--preset PRESET" not in help_text  # hidden: "was --preset" only


def test_the_vision_recipes_are_named_by_data_and_model_and_the_old_names_work(
    capsys: pytest.CaptureFixture[str],
) -> None:
    assert set(VISION_RECIPE_RENAMES.values()) <= set(VISION_RECIPES)
    assert not set(VISION_RECIPE_RENAMES) & set(VISION_RECIPES)
    assert get_task("vision").command.default_recipe == "fashion-mssa"
    new, said = dump(["train", "vision", "--recipe", "fashion-vit"], capsys)
    assert said == [] and new["model"]["preset"] == "vit-cpu"
    old, said = dump(["train", "vision", "--preset", "transformer"], capsys)  # old flag and old name: two lines
    assert old == new
    assert [line.split(" is renamed ")[0] for line in said] == ["aot: --preset", "aot: transformer"]


def test_the_old_python_names_of_the_recipes_still_answer() -> None:
    import aot.tasks.lm

    task = get_task("lm")
    with pytest.warns(RenamedWarning, match=r"aot.tasks.lm.LM_PRESETS is renamed aot.tasks.lm.LM_RECIPES"):
        assert aot.tasks.lm.LM_PRESETS is aot.tasks.lm.LM_RECIPES
    with pytest.warns(RenamedWarning, match="Task.presets is renamed Task.recipes"):
        assert task.presets is task.recipes


def test_sweep_takes_recipe_and_a_sweep_file_s_old_preset_field(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    from aot.sweep.sweep_file import read_sweep_file

    new = tmp_path / "new.yaml"
    new.write_text("task: lm\nrecipe: cpu-bench\ngrid: {train.lr: [1.0e-3, 3.0e-3]}\n")
    old = tmp_path / "old.yaml"
    old.write_text("task: lm\npreset: cpu-bench\ngrid: {train.lr: [1.0e-3, 3.0e-3]}\n")
    with warnings.catch_warnings():
        warnings.simplefilter("error", RenamedWarning)
        study = read_sweep_file(new).study
    with pytest.warns(RenamedWarning, match=r"preset: \(a sweep file's field\) is renamed recipe:"):
        assert read_sweep_file(old).study == study
    assert study.recipe == "cpu-bench"  # type: ignore[attr-defined]
    argv = ["sweep", "lm", "--preset", "cpu-bench", "--set", "train.lr=1e-3,3e-3", "--out", "unused", "--plan"]
    assert main(argv) == 0
    assert len(notices(capsys.readouterr().err)) == 1


# -- the report's scale ------------------------------------------------------------------------------------------


def test_reproduce_takes_scale_and_preset_still_works_with_one_line(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    argv = ["reproduce", "--out", str(tmp_path / "r"), "--dry-run", "--only", "theory"]
    assert main([*argv, "--scale", "tiny"]) == 0
    new = capsys.readouterr()
    assert notices(new.err) == [] and "theory" in new.out
    assert main([*argv, "--preset", "tiny"]) == 0
    old = capsys.readouterr()
    assert old.out == new.out
    assert notices(old.err) == [
        "aot: --preset is renamed --scale (the report's size; model presets are model.preset); the old flag goes "
        "in the next release"
    ]
    with pytest.raises(SystemExit):
        main([*argv, "--scale", "huge"])
    assert "invalid choice" in capsys.readouterr().err
