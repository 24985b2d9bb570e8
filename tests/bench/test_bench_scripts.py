"""The candidates timed by the scripts in benchmarks/bench/ compute what they claim (float64, against the
explicit reference attention), so that their recorded timings compare equal computations."""

from __future__ import annotations

import importlib.util
import json
import sys
from pathlib import Path
from types import ModuleType

import pytest
import torch

from aot.nn.attention import causal_mask, reference_attention

BENCH = Path(__file__).resolve().parents[2] / "benchmarks" / "bench"


def load_benchmark(name: str, path: Path) -> ModuleType:
    """A benchmark script as a module (registered, so its dataclasses find their module)."""
    spec = importlib.util.spec_from_file_location(name, path)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module
    spec.loader.exec_module(module)
    return module


def load_script(name: str) -> ModuleType:
    return load_benchmark(f"bench_{name}", BENCH / f"{name}.py")


@pytest.mark.parametrize("T", [1, 5, 16, 37])
@pytest.mark.parametrize("shared_values", [True, False])
def test_blocked_causal_attention_equals_the_reference_with_gradients(T, shared_values):
    paths = load_script("attention_paths")
    torch.manual_seed(T)
    x = torch.randn(2, 3, T, 8, dtype=torch.float64, requires_grad=True)
    v = x if shared_values else torch.randn(2, 3, T, 8, dtype=torch.float64, requires_grad=True)
    inputs = [x] if shared_values else [x, v]
    out = paths.blocked_causal_attention(x, v, scale=0.3, block=8)
    expected, _ = reference_attention(x, x, v, scale=0.3, mask=causal_mask(T, T, x.device))
    torch.testing.assert_close(out, expected, rtol=1e-12, atol=1e-12)
    grad = torch.randn_like(out)
    for a, b in zip(torch.autograd.grad(out, inputs, grad), torch.autograd.grad(expected, inputs, grad)):
        torch.testing.assert_close(a, b, rtol=1e-10, atol=1e-12)
    torch.testing.assert_close(
        paths.blocked_autograd(x, 8),
        reference_attention(x, x, x, scale=paths.SCALE, mask=causal_mask(T, T, x.device))[0],
        rtol=1e-12,
        atol=1e-12,
    )


def test_symmetric_noncausal_attention_equals_the_reference_with_gradients():
    paths = load_script("attention_paths")
    torch.manual_seed(0)
    x = torch.randn(2, 3, 11, 8, dtype=torch.float64, requires_grad=True)
    out = paths.SymmetricNonCausal.apply(x)
    expected, _ = reference_attention(x, x, x, scale=paths.SCALE, mask=None)
    torch.testing.assert_close(out, expected, rtol=1e-12, atol=1e-12)
    grad = torch.randn_like(out)
    (a,) = torch.autograd.grad(out, x, grad)
    (b,) = torch.autograd.grad(expected, x, grad)
    torch.testing.assert_close(a, b, rtol=1e-10, atol=1e-12)


def test_recorded_attention_paths_table_is_generated_from_its_json():
    paths = load_script("attention_paths")
    record = json.loads((BENCH / "attention_paths.json").read_text())
    assert (BENCH / "attention_paths.md").read_text() == paths.markdown(record)
    assert record["omp_num_threads"] == "1" and record["machine"]["torch_threads"] == 1


@pytest.mark.parametrize("batch", [1, 3])
def test_generation_bench_our_greedy_tokens_equal_hf_generate(batch):
    """benchmarks/bench/generation.py times two generations of the same tokens: our cached greedy decoding and
    HF's GPT2LMHeadModel.generate with our weights (end-of-text switched off) agree token by token."""
    pytest.importorskip("transformers")
    generation = load_script("generation")
    ours, theirs = generation.gpt2_pair(block_size=40, n_layer=2, n_embd=32, n_head=2)
    prompt = torch.randint(0, ours.cfg.vocab_size, (batch, 5), generator=torch.Generator().manual_seed(1))
    mine = generation.generate_ours(ours, prompt, 30)
    assert mine.shape == (batch, 35)
    assert torch.equal(mine, generation.generate_hf(theirs, prompt, 30))


def test_recorded_generation_table_is_generated_from_its_json():
    generation = load_script("generation")
    record = json.loads((BENCH / "generation.json").read_text())
    assert (BENCH / "generation.md").read_text() == generation.markdown(record)
    assert all(r["same_tokens_as_hf"] for r in record["rows"] if r["model"] == "aot GPT-2")


def test_recorded_rope_cache_table_is_generated_from_its_json():
    rope = load_script("rope_cache")
    record = json.loads((BENCH / "rope_cache.json").read_text())
    assert (BENCH / "rope_cache.md").read_text() == rope.markdown(record)
    for row in record["rows"]:
        assert row["speedup"] == pytest.approx(row["step_seconds"]["recomputed"] / row["step_seconds"]["cached"])


def test_long_context_memory_fit_and_recorded_table():
    memory = load_script("long_context_memory")
    gib = 1024**3
    # 1 GiB at T = 1000 and 2 GiB at T = 2000: 16 GiB at T = 16000 on that line
    assert memory.fits_up_to([(500, 7 * gib), (1000, gib), (2000, 2 * gib)]) == 16000
    assert memory.fits_up_to([(1000, gib)]) is None
    record = json.loads((BENCH / "long_context_memory.json").read_text())
    assert (BENCH / "long_context_memory.md").read_text() == memory.markdown(record)
    by_model: dict[str, dict[int, int]] = {}
    for row in record["rows"]:
        if row.get("kind", "train") == "train":
            by_model.setdefault(row["model"], {})[row["T"]] = row["peak_bytes"]
    for T, gpt2 in by_model["GPT-2"].items():  # the recorded claim: MSSA needs less than GPT-2 at every length
        assert by_model["AoT-MSSA (tied)"][T] < by_model["AoT-MHSA"][T] < gpt2
    cache = {(r["model"], r["T"]): r["cache_bytes"] for r in record["rows"] if r.get("kind") == "generate"}
    assert cache, "no generation rows recorded"
    for (model, T), nbytes in cache.items():  # MSSA caches P only: exactly half of MHSA's K and V
        if model == "AoT-MSSA (tied)":
            assert 2 * nbytes == cache[("AoT-MHSA", T)] == cache[("GPT-2", T)] == 2 * 6 * 256 * 4 * T


def test_readme_speed_rows_are_rendered_from_the_records():
    rows = load_script("readme_rows")
    readme = rows.README.read_text()  # docs/guide/bench.md
    assert f"<!-- {rows.MARKER} -->\n{rows.block()}\n<!-- /{rows.MARKER} -->" in readme


def test_readme_model_rows_are_rendered_from_the_bench_record():
    rows = load_script("readme_rows")
    readme = rows.README.read_text()  # docs/guide/bench.md
    assert f"<!-- {rows.MODELS_MARKER} -->\n{rows.models_block()}\n<!-- /{rows.MODELS_MARKER} -->" in readme
    record = json.loads((BENCH / "results.json").read_text())
    gpt2 = next(r for r in record["models"] if (r["group"], r["label"]) == ("matched width/depth", "GPT-2"))
    assert (
        f"| GPT-2 | {gpt2['n_layer']} | {gpt2['flops_training'] / 1e6:.1f} M | {gpt2['train_tokens_per_s']:,.0f} |"
        in (rows.models_block())
    )


@pytest.mark.slow
def test_compiled_models_compute_the_eager_loss_and_gradients():
    """benchmarks/bench/compiled.py times torch.compile'd models against eager ones: the compiled AoT-MSSA and
    GPT-2 give the eager loss and gradients (fp32, 1e-5), so the two timings compare equal computations."""
    compiled = load_script("compiled")
    settings = compiled.BenchSettings.quick()
    for label in compiled.MODELS:
        eager, other = compiled.build(label, settings), compiled.build(label, settings)
        idx = torch.randint(0, settings.vocab_size, (2, settings.seq_len))
        losses = []
        for model in (eager, torch.compile(other)):
            _, loss = model(idx, labels=idx)
            loss.backward()
            losses.append(loss.detach())
        torch.testing.assert_close(losses[1], losses[0], rtol=1e-5, atol=1e-5)
        for (name, a), b in zip(eager.named_parameters(), other.parameters(), strict=True):
            torch.testing.assert_close(b.grad, a.grad, rtol=1e-4, atol=1e-5, msg=name)


def test_readme_vision_table_is_rendered_from_the_vision_record():
    """The vision guide's table (docs/guide/vision.md: test top-1 per model, data set and budget) is exactly what
    benchmarks/vision/run.py renders from benchmarks/vision/results.json."""
    vision = load_benchmark("vision_run", BENCH.parent / "vision" / "run.py")
    store = json.loads((BENCH.parent / "vision" / "results.json").read_text())
    table = vision.readme_table(store)
    assert f"<!-- {vision.README_MARKER} -->\n{table}\n<!-- /{vision.README_MARKER} -->" in vision.README.read_text()
    main = [r for r in store["runs"] if r["tag"] == "main"]
    for model in {r["preset"] for r in main}:  # every model of the main runs has a row
        assert f"| {vision.NAMES[model]} |" in table


def test_icl_script_reuses_a_finished_run_and_records_it_under_its_tag_task_model_key(tmp_path):
    """benchmarks/icl/run.py goes through the sweep engine: a run whose folder holds a finished results.json is
    recorded without training, as a row keyed tag/task/model with its command; every recorded row's command
    trains into the folder its key names (so a rerun of that command finds and reuses it)."""
    from aot.sweep import Execution, read_store

    icl = load_benchmark("icl_run", BENCH.parent / "icl" / "run.py")
    args = icl.build_parser().parse_args(["--models", "gpt2-icl-cpu", "--tag", "lanes"])
    (run,) = icl.plan_runs(args, "linear")
    runs = tmp_path / "runs"
    run.folder(runs).mkdir(parents=True)
    result = {
        "task": "icl",
        "model": {"block": "transformer", "params": 1},
        "train": {"steps": 1000, "prompts": 64000, "train_seconds": 40.0, "final_train_loss": 3.8, "curve": []},
        "eval": {"n_prompts": 1000, "error_by_k": [1.0], "k=d/2": 0.8, "k=d": 0.7, "k=2d": 0.6},
    }
    (run.folder(runs) / "results.json").write_text(json.dumps(result))
    status, store = Execution(runs, tmp_path / "results.json", icl.entry, icl.SPEC, keep_recorded=False).run_trial(run)
    assert status == "finished"
    (row,) = store["runs"]
    assert row["key"] == "lanes/linear/gpt2-icl-cpu" and row["eval"] == {"n_prompts": 1000, "k=d/2": 0.8,
                                                                          "k=d": 0.7, "k=2d": 0.6}  # fmt: skip
    assert row["command"].startswith(f"aot train icl --recipe cpu-quick --model gpt2-icl-cpu --out {run.folder(runs)} ")
    recorded = read_store(BENCH.parent / "icl" / "results.json")
    assert recorded["sweep"]["task"] == "icl"
    for r in recorded["runs"]:
        tag, task, model = r["key"].split("/")
        assert f"--model {model} --out runs/bench-icl/{tag}-{task}-{model} " in r["command"], r["key"]


def test_recorded_precision_ab_table_is_generated_from_its_json():
    """precision_ab.md is the JSON's table, and each row's ratio is the chosen precision's step time over the
    rejected one's."""
    script = load_script("precision_ab")
    record = json.loads((BENCH / "precision_ab.json").read_text())
    assert (BENCH / "precision_ab.md").read_text() == script.markdown(record)
    for row in record["rows"]:
        rejected = "fp32" if row["chosen"] == "bf16" else "bf16"
        seconds = row["step_seconds"]
        assert row["chosen_over_rejected"] == pytest.approx(seconds[row["chosen"]] / seconds[rejected])


def test_recorded_compiled_table_is_generated_from_its_json():
    """compiled.md is the JSON's table; every model has an eager and a compiled row, and the compiled row's
    speed-up is the eager step time over the compiled one."""
    script = load_script("compiled")
    record = json.loads((BENCH / "compiled.json").read_text())
    assert (BENCH / "compiled.md").read_text() == script.markdown(record)
    by_mode = {(r["model"], r["mode"]): r for r in record["rows"]}
    for model in {r["model"] for r in record["rows"]}:
        eager, compiled = by_mode[(model, "eager")], by_mode[(model, "compiled")]
        assert compiled["speedup_from_compile"] == pytest.approx(eager["step_seconds"] / compiled["step_seconds"])


def test_every_timing_script_records_through_aot_bench_record():
    """Each timing script of benchmarks/bench/ declares a RecordedBenchmark (its JSON written by aot.bench.record,
    with the machine and the date); readme_rows.py only renders the README from the records."""
    from aot.bench.record import RecordedBenchmark

    scripts = sorted(p.stem for p in BENCH.glob("*.py") if p.stem != "readme_rows")
    assert len(scripts) == 7
    for name in scripts:
        assert isinstance(load_script(name).BENCH, RecordedBenchmark), name


def test_a_recorded_benchmark_writes_its_record_with_the_machine_and_its_table(tmp_path, capsys):
    from aot.bench.record import RecordedBenchmark, count, run_recorded

    def measure(args):  # type: ignore[no-untyped-def]
        return {"rows": [{"rounds": args.rounds, "size": args.size}]}

    def add_size(parser):  # type: ignore[no-untyped-def]
        parser.add_argument("--size", type=count, default=3)

    table = lambda r: f"# x\n\n{r['rows']}\n"  # noqa: E731
    bench = RecordedBenchmark(str(tmp_path / "x.py"), "doc", measure, table, options=add_size)
    assert run_recorded(bench, ["--rounds", "2", "--size", "5", "--note", "quiet"]) == 0
    record = json.loads((tmp_path / "x.json").read_text())
    assert record["rows"] == [{"rounds": 2, "size": 5}] and record["note"] == "quiet"
    assert {"date", "processor", "cpu_count", "torch_threads"} <= set(record["machine"])
    assert (tmp_path / "x.md").read_text() == "# x\n\n[{'rounds': 2, 'size': 5}]\n" and "# x" in capsys.readouterr().out
    (tmp_path / "x.md").unlink()
    assert run_recorded(bench, ["--markdown-only"]) == 0 and (tmp_path / "x.md").is_file()
    for bad, message in ((["--size", "0"], "0 is not at least 1"), (["--rounds", "x"], "invalid int value: 'x'")):
        with pytest.raises(SystemExit):
            run_recorded(bench, bad)
        assert message in capsys.readouterr().err
