"""`aot reproduce --scale paper`'s language steps are commands the data layer serves: OpenWebText given as text is
prepared into GPT-2 shards by a step of its own, and every training step reads those shards (``--data``)."""

from __future__ import annotations

import json

import pytest

from aot.cli import main
from aot.report.part import Context
from aot.report.parts import lm as lm_part

pytest.importorskip("tiktoken")


def _train_data(step) -> str:  # type: ignore[no-untyped-def]
    return step.argv[step.argv.index("--data") + 1]


def test_text_source_is_prepared_first_and_the_runs_read_its_shards(tmp_path):
    docs = tmp_path / "owt.jsonl"
    docs.write_text("".join(json.dumps({"text": f"Document {i} says hello to the world."}) + "\n" for i in range(300)))
    steps, _ = lm_part._paper_steps(Context("paper", tmp_path / "part", {"openwebtext": str(docs)}))
    prepare, *runs = steps
    assert prepare.argv[:3] == ["data", "prepare", str(docs)] and prepare.results == "meta.json"
    assert {_train_data(r) for r in runs} == {str(prepare.out_dir(tmp_path / "part"))}
    assert all("--corpus" not in r.argv for r in runs) and len(runs) == 4
    # the printed prepare command runs as it is (one worker here, small fractions for 300 documents)
    options = prepare.options(tmp_path / "part")
    assert main([*options, "--workers", "0", "--val-fraction", "0.1", "--test-fraction", "0.1", "--no-progress"]) == 0
    assert prepare.results_path(tmp_path / "part").is_file()
    # now given as shards, the plan has no prepare step and trains from them directly
    shards = str(prepare.out_dir(tmp_path / "part"))
    steps, _ = lm_part._paper_steps(Context("paper", tmp_path / "other", {"openwebtext": shards}))
    assert len(steps) == 4 and {_train_data(s) for s in steps} == {shards}
