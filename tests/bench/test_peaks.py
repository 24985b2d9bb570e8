"""An honest peak (aot.bench.peaks, aot.bench.mfu): a run never divides by a peak measured under load, and the MFU
it reports is never above 1, whatever the machine's cache holds."""

from __future__ import annotations

import json
import os

import pytest
import torch

from aot.bench import machine_cache, peaks
from aot.bench.mfu import bounded_mfu
from aot.train import read_metrics

CORES = os.cpu_count() or 1
KEY = "matmul-fp32"


@pytest.fixture
def measured(monkeypatch):
    """``measured(peak, load)``: the matmul measurement returns ``peak`` FLOP/s at a 1-minute load of ``load`` × the
    cores; returns the list of the sizes each measurement used."""
    calls: list[tuple[int, ...]] = []

    def fake(peak: float, load: float) -> list[tuple[int, ...]]:
        def measure(dtype, device, sizes=(1024, 2048), repeat=5):  # type: ignore[no-untyped-def]
            calls.append(tuple(sizes))
            return {"peak": peak}

        monkeypatch.setattr(peaks, "measure_matmul_peak", measure)
        monkeypatch.setattr(os, "getloadavg", lambda: (load * CORES, 0.0, 0.0))
        return calls

    return fake


def _cache(path, entry) -> None:  # type: ignore[no-untyped-def]
    path.write_text(json.dumps({machine_cache.machine_key(): {KEY: entry}}))


def test_a_measurement_at_high_load_is_not_cached(tmp_path, measured):
    path = tmp_path / "peaks.json"
    calls = measured(5e9, load=2.0)
    entry = peaks.cpu_peak_flops(torch.float32, path=path)
    assert entry["peak"] == 5e9 and entry["busy"] and entry["source"] == "fresh"
    assert calls == [peaks.SHORT_SIZES]  # under load only the short measurement: nothing worth caching
    assert not path.exists()
    peaks.cpu_peak_flops(torch.float32, path=path, refresh=True)  # aot bench --refresh-peak under load
    assert calls[-1] == (1024, 2048) and not path.exists()


def test_a_quiet_peak_is_cached_and_beats_a_fresh_one_taken_under_load(tmp_path, measured):
    path = tmp_path / "peaks.json"
    calls = measured(40e9, load=0.1)
    first = peaks.cpu_peak_flops(torch.float32, path=path)
    assert calls == [(1024, 2048)] and first["peak"] == 40e9 and not first["busy"]
    stored = json.loads(path.read_text())[machine_cache.machine_key()][KEY]
    assert stored["peak"] == 40e9 and stored["busy"] is False
    measured(10e9, load=3.0)  # later, on a loaded machine: the short one reads low
    again = peaks.cpu_peak_flops(torch.float32, path=path)
    assert again["peak"] == 40e9 and again["source"] == "cached" and calls[-1] == peaks.SHORT_SIZES
    measured(60e9, load=0.1)  # a quiet machine doing more than the cached peak: the fresh one wins and is kept
    assert peaks.cpu_peak_flops(torch.float32, path=path)["peak"] == 60e9
    assert json.loads(path.read_text())[machine_cache.machine_key()][KEY]["peak"] == 60e9


def test_a_cached_peak_measured_under_load_is_never_divided_by(tmp_path, measured):
    path = tmp_path / "peaks.json"
    _cache(path, {"peak": 1e6, "busy": True, "load_1min": 9.0, "date": "then"})
    measured(30e9, load=0.1)
    entry = peaks.cpu_peak_flops(torch.float32, path=path)
    assert entry["peak"] == 30e9 and entry["source"] == "fresh"


def test_bounded_mfu_raises_the_peak_to_the_achieved_rate():
    assert bounded_mfu(1e6, 1e3, 4e9) == (pytest.approx(0.25), 4e9)  # 1 GFLOP/s of 4
    utilisation, peak = bounded_mfu(1e6, 1e4, 4e9)  # 10 GFLOP/s against a peak of 4: the peak was wrong
    assert utilisation == 1.0 and peak == 1e10


@pytest.mark.parametrize("real_measurement", [False, True])
def test_mfu_is_never_above_one_whatever_peak_was_cached(tmp_path, monkeypatch, capsys, tiny_trainer, measured,
                                                         real_measurement):  # fmt: skip
    """A cache holding a tiny peak (1 kFLOP/s, as a loaded machine could leave one; marked quiet, so it is not
    simply ignored), and the run's own short measurement reading low too (faked) or the real one: the run's MFU,
    on every log row, is at most 1."""
    monkeypatch.setenv("AOT_DATA", str(tmp_path))
    _cache(tmp_path / "peaks.json", {"peak": 1e3, "busy": False, "load_1min": 0.0, "date": "then"})
    if not real_measurement:
        measured(1e3, load=4.0)
    trainer = tiny_trainer(tmp_path / "run", steps=4)
    trainer.flops_per_sample = 1e6  # 1 MFLOP a row: any real speed is far above 1 kFLOP/s
    result = trainer.fit()
    rows = [row for row in read_metrics(tmp_path / "run") if not row.get("eval")]
    assert rows and all(0 < row["mfu"] <= 1 for row in rows)
    assert 0 < result.mfu <= 1
    err = capsys.readouterr().err
    if real_measurement:  # the run's own short measurement beats the tiny cached peak
        assert result.peak_flops > 1e8 and not result.peak_raised
    else:  # both read low: the achieved rate is above them, so the peak is raised to it, said once
        assert result.peak_raised and result.peak_flops > 1e3
        assert "the peak is raised to the achieved rate" in err and err.count("peak is raised") == 1
