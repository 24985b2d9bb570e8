"""`train.precision: auto` — the measured choice between bf16 autocast and fp32 (aot.bench.precision)."""

from __future__ import annotations

import json

import pytest
import torch

from aot.bench import precision as prec
from aot.config import ModelConfig

CFG = ModelConfig(block="aot-mssa", n_layer=1, n_embd=32, n_head=4, block_size=16)


def fake_timer(bf16_over_fp32: float, calls: list[str]):  # type: ignore[no-untyped-def]
    def timer(cfg: ModelConfig, rows: int, seq_len: int, precision: str) -> float:
        calls.append(precision)
        return 0.1 * (bf16_over_fp32 if precision == "bf16" else 1.0)

    return timer


@pytest.mark.parametrize(("ratio", "expected"), [(0.5, "bf16"), (0.97, "fp32"), (1.4, "fp32")])
def test_choice_follows_the_measurement_with_a_margin(tmp_path, ratio, expected):
    calls: list[str] = []
    choice = prec.choose_precision(CFG, 4, 16, cache_file=tmp_path / "p.json", timer=fake_timer(ratio, calls))
    assert choice.precision == expected
    assert choice.seconds == pytest.approx({"fp32": 0.1, "bf16": 0.1 * ratio})
    assert sorted(set(calls)) == ["bf16", "fp32"] and len(calls) == 6  # 3 interleaved rounds
    assert expected in choice.reason and not choice.cached


def test_the_measurement_is_cached_per_machine_and_shape(tmp_path, monkeypatch):
    path, calls = tmp_path / "p.json", []
    timer = fake_timer(0.5, calls)
    prec.choose_precision(CFG, 4, 16, cache_file=path, timer=timer)
    again = prec.choose_precision(CFG, 4, 16, cache_file=path, timer=timer)
    assert again.cached and again.precision == "bf16" and len(calls) == 6  # not measured twice
    prec.choose_precision(CFG, 8, 16, cache_file=path, timer=timer)  # another shape: measured
    assert len(calls) == 12
    prec.choose_precision(CFG, 4, 16, cache_file=path, timer=timer, refresh=True)
    assert len(calls) == 18
    monkeypatch.setattr("aot.bench.machine_cache.cpu_model", lambda: "another processor")
    other = prec.choose_precision(CFG, 4, 16, cache_file=path, timer=fake_timer(2.0, calls))
    assert other.precision == "fp32" and not other.cached  # another machine measures for itself
    saved = json.loads(path.read_text())
    assert len(saved) == 2 and all("date" in e for m in saved.values() for e in m.values())


def test_a_damaged_cache_is_measured_again(tmp_path):
    path = tmp_path / "p.json"
    path.write_bytes(b"\x00\xffnot json")
    choice = prec.choose_precision(CFG, 4, 16, cache_file=path, timer=fake_timer(0.5, []))
    assert choice.precision == "bf16" and json.loads(path.read_text())


def test_a_real_block_measurement_leaves_the_random_stream_alone(tmp_path):
    torch.manual_seed(7)
    expected = torch.rand(3)
    torch.manual_seed(7)
    choice = prec.choose_precision(CFG, 2, 16, cache_file=tmp_path / "p.json")
    assert torch.equal(torch.rand(3), expected)
    assert choice.seconds is not None and all(s > 0 for s in choice.seconds.values())
    assert choice.precision == ("bf16" if choice.seconds["bf16"] <= 0.95 * choice.seconds["fp32"] else "fp32")


def test_the_auto_choice_is_recorded_and_kept_on_resume(tmp_path, monkeypatch, tiny_trainer):
    """`train.precision: auto` trains with the measured choice, saves it in the checkpoint, and a resumed run
    keeps it even where a new measurement would choose otherwise."""
    import aot.bench.precision as precision_module
    from aot.run_folder import read_trainer_state

    def chooser(answer: str):  # type: ignore[no-untyped-def]
        def choose(cfg, rows, seq_len, device):  # type: ignore[no-untyped-def]
            assert (rows, seq_len, cfg.n_embd) == (4, 16, 16)  # the run's micro-batch shape and model
            return prec.PrecisionChoice(answer, f"{answer}: measured (fake)")

        return choose

    out = tmp_path / "run"
    monkeypatch.setattr(precision_module, "choose_precision", chooser("bf16"))
    first = tiny_trainer(out, steps=4, precision="auto")
    result = first.fit(stop_at=2)
    assert first.precision == "bf16" and result.precision["precision"] == "bf16"
    assert read_trainer_state(out / "checkpoint")["precision"]["precision"] == "bf16"
    monkeypatch.setattr(precision_module, "choose_precision", chooser("fp32"))
    resumed = tiny_trainer(out, steps=4, precision="auto")
    resumed.fit(resume=True)
    assert resumed.precision == "bf16" and "kept from the checkpoint" in resumed.precision_choice["reason"]
    fresh = tiny_trainer(tmp_path / "other", steps=1, precision="auto")
    fresh.fit()
    assert fresh.precision == "fp32"
