"""lm-evaluation-harness as its users run it: the aot model's arguments where they put them (``batch_size`` as
``--batch_size`` or in ``--model_args``, no "multiple values"; ``pretrained``, or ``run_dir``, for the folder; CUDA
asked for where there is none is the CPU), ``aot eval harness RUN_DIR ...`` standing for ``lm-eval run`` with that
model and ``pretrained=RUN_DIR`` (lm-eval names its output folder after it), a bad run
refused in one line before lm-eval starts; and (slow) lm-eval's own command line with its ``hf`` model on an export
and ``aot eval harness`` on the run, each loglikelihood against aot's scorer (benchmarks/integrations/record.py)."""

from __future__ import annotations

import importlib.util
import json
from pathlib import Path

import pytest
import torch

from aot.cli import main
from aot.errors import AotError
from aot.eval.harness import harness_device, lm_eval_argv, model_arguments, parse_batch_size, parse_dtype
from aot.models import build_model, preset_config

ROOT = Path(__file__).resolve().parents[2]


def lm_run(folder: Path) -> Path:
    torch.manual_seed(0)
    build_model(preset_config("aot-mssa-l-cpu", n_layer=1, n_embd=16, n_head=2, block_size=16)).save_pretrained(
        folder / "checkpoint"
    )
    (folder / "results.json").write_text(json.dumps({"config": {"data": {"tokenizer": "bytes"}}}))
    return folder


def test_model_arguments_are_taken_where_lm_eval_users_put_them() -> None:
    command_line = {"batch_size": 1, "max_batch_size": None, "device": "cuda:0"}  # what lm-eval's CLI always adds
    merged = model_arguments({"pretrained": "runs/lm", "batch_size": 8}, command_line)
    assert merged == {"pretrained": "runs/lm", "batch_size": 8, "device": "cuda:0"}  # --model_args win
    alias = model_arguments({"run_dir": "exports/lm"}, {"batch_size": "4"})  # the older name for the folder
    assert alias == {"pretrained": "exports/lm", "batch_size": "4"}
    for args, says in [({}, "needs one folder"), ({"run_dir": "a", "pretrained": "b"}, "got both")]:
        with pytest.raises(AotError, match=says) as error:
            model_arguments(args)
        assert "\n" not in str(error.value)


def test_dtype_is_taken_as_lm_evals_hf_model_takes_it() -> None:
    assert parse_dtype(None) is None and parse_dtype("auto") is None  # the run's own
    assert parse_dtype("float64") is parse_dtype("torch.float64") is parse_dtype(torch.float64) is torch.float64
    with pytest.raises(AotError, match="is not one of auto, float32") as error:
        parse_dtype("double")
    assert "\n" not in str(error.value)


def test_batch_size_and_device_are_checked_in_one_line(capsys: pytest.CaptureFixture[str]) -> None:
    assert parse_batch_size("16") == parse_batch_size(16) == 16
    for bad in ("auto", "0", -1, "1.5", True, None):
        with pytest.raises(AotError, match="is not a positive integer") as error:
            parse_batch_size(bad)
        assert "\n" not in str(error.value)
    assert harness_device(None) == ("cuda:0" if torch.cuda.is_available() else "cpu")
    assert harness_device("cpu") == "cpu"
    if not torch.cuda.is_available():  # lm-eval's default cuda:0 on a machine without one
        assert harness_device("cuda:0") == "cpu"
        assert "runs on the CPU" in capsys.readouterr().err


def test_aot_eval_harness_stands_for_lm_eval_run_with_the_aot_model() -> None:
    argv, device = lm_eval_argv("runs/lm", ["--tasks", "hellaswag", "--batch_size", "8"])
    expected = "cuda:0" if torch.cuda.is_available() else "cpu"
    assert device == expected
    ours = ["run", "--model", "aot", "--model_args", "pretrained=runs/lm"]  # lm-eval's name: its folder's name
    assert argv == [*ours, "--tasks", "hellaswag", "--batch_size", "8", "--device", expected]
    argv, device = lm_eval_argv("runs/lm", ["--device", "cuda", "--tasks", "x", "--device=cpu"])  # the last one counts
    assert device == "cpu" and argv[-2:] == ["--device", "cpu"]
    with pytest.raises(AotError, match="drop --model") as error:
        lm_eval_argv("runs/lm", ["--model", "hf"])
    assert "\n" not in str(error.value)


def test_the_adapter_takes_batch_size_from_either_place_without_multiple_values(tmp_path: Path) -> None:
    pytest.importorskip("lm_eval")
    from lm_eval.api.registry import get_model

    import aot.eval.lm_eval_model  # noqa: F401  (registers "aot" where lm-eval reads no entry point)

    run_dir = lm_run(tmp_path / "run")
    model = get_model("aot")
    extra = {"batch_size": 1, "max_batch_size": None, "device": "cpu"}  # what lm-eval's command line hands over
    assert model.create_from_arg_string(f"run_dir={run_dir},batch_size=3", extra).batch_size == 3
    assert model.create_from_arg_string(f"pretrained={run_dir}", extra).batch_size == 1
    assert model.create_from_arg_obj({"run_dir": str(run_dir)}, {"batch_size": "4"}).batch_size == 4


def test_a_folder_without_a_model_is_one_line_before_lm_eval_starts(tmp_path: Path, capsys) -> None:  # type: ignore[no-untyped-def]
    if importlib.util.find_spec("lm_eval") is None:
        pytest.skip("lm-eval is not installed")
    (tmp_path / "empty").mkdir()
    assert main(["eval", "harness", str(tmp_path / "empty"), "--tasks", "hellaswag"]) == 2
    err = capsys.readouterr().err
    assert err.startswith("aot: error: ") and err.count("\n") == 1 and "holds no model" in err


@pytest.mark.slow
def test_lm_eval_and_aot_eval_harness_from_the_shell_give_aots_loglikelihoods(tmp_path: Path) -> None:
    """The record of benchmarks/integrations/ made again: the three command lines run; every loglikelihood is aot's
    scorer's (the requests fit the context) to float32's rounding: lm-eval's hf model sums in float32, and the aot
    model feeds the input lm-eval's hf model feeds, one token shorter than the scorer's."""
    pytest.importorskip("lm_eval")
    spec = importlib.util.spec_from_file_location("record", ROOT / "benchmarks" / "integrations" / "record.py")
    assert spec is not None and spec.loader is not None
    record = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(record)
    results = record.record(tmp_path)
    for run in results["runs"].values():
        assert len(run["lm_eval"]) == 3
        assert run["lm_eval_max_abs_diff"]["aot_eval_harness"] < 1e-5
        # the lm_eval console script with --model aot (aot-plugins.pth registers it): aot eval harness's numbers
        assert [row["lm_eval_aot"] for row in run["lm_eval"]] == [row["aot_eval_harness"] for row in run["lm_eval"]]
        assert run["lm_eval_max_abs_diff"]["lm_eval_hf"] < 1e-5
        hf = run["transformers_without_aot"]
        assert hf["max_abs_logit_diff"] <= 1e-6 and hf["greedy_equals_aot_sample"]
        assert hf["refusal_names_trust_remote_code"] and hf["pipeline_text"].startswith(results["prompt"])
        assert run["transformer_lens"]["greedy_equals_aot_sample"]


def test_an_option_lm_eval_refuses_is_one_line(tmp_path: Path, capsys) -> None:  # type: ignore[no-untyped-def]
    pytest.importorskip("lm_eval")
    run_dir = lm_run(tmp_path / "run")
    assert main(["eval", "harness", str(run_dir), "--tasks", "x", "--no-such-option", "1"]) == 2
    err = capsys.readouterr().err
    assert err == "aot: error: lm-eval run: unrecognized arguments: --no-such-option 1 (see `lm-eval run --help`)\n"


@pytest.mark.slow
def test_simple_evaluate_runs_the_aot_model_from_python(tmp_path: Path) -> None:
    lm_eval = pytest.importorskip("lm_eval")
    import aot.eval.lm_eval_model  # noqa: F401  (registers "aot")

    run_dir = lm_run(tmp_path / "run")
    task = ROOT / "tests" / "fixtures" / "harness" / "aot_tiny.yaml"
    results = lm_eval.simple_evaluate(model="aot", model_args=f"pretrained={run_dir},batch_size=2", tasks=[str(task)])
    assert results["results"]["aot_tiny"]["sample_len"] == 3
