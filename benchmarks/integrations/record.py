"""The integrations as their own users run them (issue 26), each against aot's own numbers, on two tiny untrained
runs (AoT-MSSA with the tied output and rotary positions, AoT-MHSA; bytes, 2 layers x 32, context 64):

- transformers alone: `aot export hf`, then in a Python that cannot import aot (``python -I -S``, the venv's
  site-packages added by hand) ``AutoModelForCausalLM.from_pretrained(EXPORT, trust_remote_code=True)``: logits
  against aot's forward, greedy ``generate`` past the context against ``aot sample --temperature 0``, the
  ``pipeline("text-generation")``, and what transformers says without ``trust_remote_code``;
- lm-eval's command line, its ``hf`` model on the export, and on the run ``lm_eval --model aot`` (the console
  script as installed: aot-plugins.pth registers the model) and ``aot eval harness``, on the local task
  tests/fixtures/harness/aot_tiny.yaml: each loglikelihood against aot's scorer (``aot.eval.scoring``);
- TransformerLens: ``aot.lens.to_hooked_transformer`` — logits, and greedy ``generate`` against aot's;
- and what ``import aot`` and ``import aot.hf`` take in a fresh Python (median of 3).

    python benchmarks/integrations/record.py              # writes results.json and table.md here
    python benchmarks/integrations/record.py --out DIR    # elsewhere (the slow test in tests/eval/test_harness_cli.py)
"""

from __future__ import annotations

import argparse
import importlib.metadata
import json
import os
import subprocess
import sys
import sysconfig
import tempfile
from pathlib import Path
from typing import Any

import torch

from aot.cli import main as aot_main
from aot.eval.lm_folder import LMRunFolder, load_lm_run
from aot.eval.sampling import sample
from aot.eval.scoring import score_requests
from aot.models import build_model, preset_config
from aot.runinfo import machine_info

HERE = Path(__file__).parent
ROOT = HERE.parents[1]
TASK = ROOT / "tests" / "fixtures" / "harness" / "aot_tiny.yaml"
LOADER = ROOT / "tests" / "hf" / "load_without_aot.py"
RUNS = {"aot-mssa (tied, rope)": ("aot-mssa-tied-l-cpu", {"position": "rope"}), "aot-mhsa": ("aot-mhsa-l-cpu", {})}
LIBRARIES = ("torch", "transformers", "lm_eval", "transformer_lens")
PROMPT, NEW = "Shall I compare", 80  # 15 + 80 tokens: past the context of 64, so the window slides
COMMANDS = {
    "lm_eval": "lm_eval --model hf --model_args pretrained=EXPORT,trust_remote_code=True --tasks {task} "
    "--device cpu --output_path OUT --log_samples",
    "lm_eval --model aot": "lm_eval --model aot --model_args pretrained=RUN --tasks {task} --device cpu "
    "--batch_size 2 --output_path OUT --log_samples",
    "aot eval harness": "aot eval harness RUN --tasks {task} --batch_size 2 --output_path OUT --log_samples",
    "export": "aot export hf RUN EXPORT",
    "transformers": "python -I -S tests/hf/load_without_aot.py SITE_PACKAGES REQUEST RESULT",
}


def make_run(folder: Path, preset: str, changes: dict[str, Any]) -> LMRunFolder:
    torch.manual_seed(0)
    cfg = preset_config(preset).replace(n_layer=2, n_embd=32, n_head=2, head_dim=None, block_size=64, **changes)
    build_model(cfg).save_pretrained(folder / "checkpoint")
    (folder / "results.json").write_text(json.dumps({"config": {"data": {"tokenizer": "bytes"}}}))
    return load_lm_run(folder)


def shell(argv: list[str], env: dict[str, str]) -> None:
    done = subprocess.run(argv, env=env, stdin=subprocess.DEVNULL, capture_output=True, text=True, timeout=900)
    if done.returncode != 0:
        raise SystemExit(f"{' '.join(argv)} failed ({done.returncode}):\n{done.stderr[-3000:]}")


def harness_logprobs(out: Path) -> list[float]:
    """The loglikelihoods lm-eval logged (``--log_samples``), in document order."""
    (samples,) = out.rglob("samples_aot_tiny_*.jsonl")
    rows = [json.loads(line) for line in samples.read_text().splitlines() if line.strip()]
    return [float(row["filtered_resps"][0][0]) for row in sorted(rows, key=lambda r: r["doc_id"])]


def record(out: Path) -> dict[str, Any]:
    sys.path.insert(0, str(TASK.parent))
    from aot_tiny_docs import DOCS  # the task's documents

    with tempfile.TemporaryDirectory(prefix="aot-integrations-") as scratch:
        work = Path(scratch)
        env = {**os.environ, "HF_HOME": str(work / "hf-home"), "HF_HUB_OFFLINE": "1", "HF_DATASETS_OFFLINE": "1"}
        runs, exports = {}, {}
        for i, (name, (preset, changes)) in enumerate(RUNS.items()):
            runs[name] = make_run(work / f"run-{i}", preset, changes)
            exports[name] = work / f"export-{i}"
            assert aot_main(["export", "hf", str(runs[name].path), str(exports[name])]) == 0
        request = work / "request.json"
        request.write_text(json.dumps({"exports": [str(e) for e in exports.values()], "text": PROMPT, "new": NEW}))
        site = sysconfig.get_paths()["purelib"]
        clean = {"HF_HOME": env["HF_HOME"], "HF_HUB_OFFLINE": "1", "PATH": "/usr/bin:/bin"}
        shell([sys.executable, "-I", "-S", str(LOADER), site, str(request), str(work / "loaded.json")], clean)
        loaded = json.loads((work / "loaded.json").read_text())
        results: dict[str, Any] = {}
        for name, run in runs.items():
            ids = torch.tensor([run.tokenizer.encode(PROMPT)])
            greedy = sample(run, PROMPT, NEW, temperature=0)[1]
            with torch.no_grad():
                logits = run.model(ids)[0][0]
            got = loaded[str(exports[name])]
            hf_out, native_out = work / f"lm-eval-hf-{name[:8]}", work / f"lm-eval-aot-{name[:8]}"
            model_args = f"pretrained={exports[name]},trust_remote_code=True"
            lm_eval = ["--model", "hf", "--model_args", model_args, "--tasks", str(TASK), "--device", "cpu"]
            shell([sys.executable, "-m", "lm_eval", *lm_eval, "--output_path", str(hf_out), "--log_samples"], env)
            plugin_out = work / f"lm-eval-plugin-{name[:8]}"
            plugin = ["--model", "aot", "--model_args", f"pretrained={run.path}", "--tasks", str(TASK), "--device"]
            plugin += ["cpu", "--batch_size", "2", "--output_path", str(plugin_out), "--log_samples"]
            shell([str(Path(sys.executable).parent / "lm_eval"), *plugin], {**env, "AOT_NO_PLUGINS": ""})
            native = ["eval", "harness", str(run.path), "--tasks", str(TASK), "--batch_size", "2"]
            shell([sys.executable, "-m", "aot.cli", *native, "--output_path", str(native_out), "--log_samples"], env)
            encode = run.tokenizer.encode
            scorer = score_requests(run.model, [(encode(d["context"]), encode(d["continuation"])) for d in DOCS], 64)
            logged = zip(harness_logprobs(hf_out), harness_logprobs(plugin_out), harness_logprobs(native_out))
            rows = [
                {**doc, "aot_scorer": s.logprob, "lm_eval_hf": hf, "lm_eval_aot": plug, "aot_eval_harness": aot}
                for doc, s, (hf, plug, aot) in zip(DOCS, scorer, logged)
            ]
            results[name] = {
                "transformers_without_aot": {
                    "max_abs_logit_diff": float((torch.tensor(got["logits"]) - logits).abs().max()),
                    "greedy_equals_aot_sample": got["greedy"] == greedy,
                    "new_tokens": NEW,
                    "pipeline_text": got["pipeline"],
                    "refusal_names_trust_remote_code": "trust_remote_code=True" in got.get("refusal", ""),
                    "module": got["module"].rsplit(".", 1)[-1],
                },
                "lm_eval": rows,
                "lm_eval_max_abs_diff": {
                    key: max(abs(row[key] - row["aot_scorer"]) for row in rows)
                    for key in ("lm_eval_hf", "lm_eval_aot", "aot_eval_harness")
                },
                "transformer_lens": lens_check(run, ids, logits, greedy),
            }
    record = {
        "machine": machine_info(),
        "versions": {name: importlib.metadata.version(name) for name in LIBRARIES},
        "commands": {key: command.format(task=TASK.relative_to(ROOT)) for key, command in COMMANDS.items()},
        "prompt": PROMPT,
        "import_seconds": {module: import_seconds(module) for module in ("aot", "aot.hf")},
        "runs": results,
    }
    out.mkdir(parents=True, exist_ok=True)
    (out / "results.json").write_text(json.dumps(record, indent=2) + "\n")
    (out / "table.md").write_text(table(record))
    return record


def import_seconds(module: str, repeat: int = 3) -> float:
    """The median wall time of ``import module`` in a fresh Python (why ``import aot`` does not register with
    transformers: ``import aot.hf`` imports its model classes)."""
    code = f"import time; t = time.perf_counter(); import {module}; print(time.perf_counter() - t)"
    times = [float(subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout)
             for _ in range(repeat)]  # fmt: skip
    return round(sorted(times)[len(times) // 2], 2)


def lens_check(run: LMRunFolder, ids: torch.Tensor, logits: torch.Tensor, greedy: list[int]) -> dict[str, Any]:
    from aot.lens import to_hooked_transformer

    tl_model = to_hooked_transformer(run.model)
    n = run.block_size - ids.shape[1]  # the view generates within its context
    with torch.no_grad():
        diff = float((tl_model(ids)[0] - logits).abs().max())
    tokens = tl_model.generate(ids, max_new_tokens=n, do_sample=False, verbose=False)
    assert isinstance(tokens, torch.Tensor)  # token ids in, token ids out
    return {"max_abs_logit_diff": diff, "greedy_equals_aot_sample": tokens[0, ids.shape[1] :].tolist() == greedy[:n]}


def table(record: dict[str, Any]) -> str:
    lines = [
        "| run | transformers without aot: max \\|Δ logit\\| | greedy = `aot sample` | lm-eval hf: max \\|Δ loglik\\| "
        "| `lm_eval --model aot`: max \\|Δ loglik\\| | `aot eval harness`: max \\|Δ loglik\\| "
        "| TransformerLens: max \\|Δ logit\\| | TL greedy = aot |",
        "|---|---|---|---|---|---|---|---|",
    ]
    for name, run in record["runs"].items():
        hf, lens, diffs = run["transformers_without_aot"], run["transformer_lens"], run["lm_eval_max_abs_diff"]
        lines.append(
            f"| {name} | {hf['max_abs_logit_diff']:.1e} | {hf['greedy_equals_aot_sample']} ({hf['new_tokens']} new) "
            f"| {diffs['lm_eval_hf']:.1e} | {diffs['lm_eval_aot']:.1e} | {diffs['aot_eval_harness']:.1e} "
            f"| {lens['max_abs_logit_diff']:.1e} "
            f"| {lens['greedy_equals_aot_sample']} |"
        )
    return "\n".join(lines) + "\n"


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--out", type=Path, default=HERE, help="folder for results.json (default: this folder)")
    args = parser.parse_args()
    recorded = record(args.out)
    print(table(recorded), end="")
