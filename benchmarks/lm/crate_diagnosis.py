"""Why does CRATE stay at the unigram level on text? Small, fast diagnostic runs (width 64, context 64, batch 16,
300 steps, one thread) of CRATE variants beside a GPT-2 of the same non-embedding size, on Shakespeare bytes.
Not the benchmark: a direction finder, cheap enough for a shared CPU (about 4 CPU-minutes for every variant).

    OMP_NUM_THREADS=1 PYTHONPATH=src python benchmarks/lm/crate_diagnosis.py            # every variant
    OMP_NUM_THREADS=1 PYTHONPATH=src python benchmarks/lm/crate_diagnosis.py --only gpt2 crate-8

Writes benchmarks/lm/crate_diagnosis.json (variants already there are skipped) and crate_diagnosis.md. A variant
is a set of model-config overrides and a learning rate; the loop uses ``aot.train``'s optimizer and schedule on
``aot.data``'s batches and ``aot.eval.lm`` for val loss and the n-gram baselines. The column "token share" is
how much of the final hidden state depends on the token: ‖H − mean‖ / ‖H‖ over the val tokens (0 = every token
mapped to one vector, so the model can do no better than the unigram).
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from pathlib import Path
from typing import Any

import numpy as np
import torch

from aot.config import ModelConfig
from aot.data.shards import LMBatches, LMData, eval_windows, prepare_lm_data
from aot.eval.lm import evaluate_lm, ngram_baselines
from aot.models import build_model
from aot.runinfo import machine_info
from aot.train.optim import build_optimizer
from aot.train.schedule import lr_at

HERE = Path(__file__).resolve().parent
D, HEADS, CONTEXT, BATCH, WARMUP = 64, 4, 64, 16, 30
BASE = dict(task="lm", n_embd=D, n_head=HEADS, vocab_size=256, block_size=CONTEXT)
GPT2 = dict(block="transformer", n_layer=2, activation="gelu_tanh")  # 2 x 12d² = 98k non-embedding parameters
CRATE = dict(block="crate", tied_output=False)  # 3d² a layer: 8 layers match GPT-2's 2
RESIDUAL = dict(ista_residual=True)

# name -> (model overrides, lr). Recipe otherwise: AdamW (0.9, 0.95), weight decay 0.1, warm-up 30, cosine to lr/10,
# clip 1.0, fp32, seed 0 for init and data.
VARIANTS: dict[str, tuple[dict[str, Any], float]] = {
    "gpt2": (GPT2, 3e-3),
    "gpt2 lr1e-3": (GPT2, 1e-3),
    "crate-8": ({**CRATE, "n_layer": 8}, 3e-3),
    "crate-8 lr1e-3": ({**CRATE, "n_layer": 8}, 1e-3),
    "crate-8 lr1e-2": ({**CRATE, "n_layer": 8}, 1e-2),
    "crate-8 no biases": ({**CRATE, "n_layer": 8, "bias": False}, 3e-3),
    "crate-8 eta0.01": ({**CRATE, "n_layer": 8, "ista_step": 0.01}, 3e-3),
    "crate-2": ({**CRATE, "n_layer": 2}, 3e-3),
    "crate-4": ({**CRATE, "n_layer": 4}, 3e-3),
    "crate-24": ({**CRATE, "n_layer": 24}, 3e-3),
    "crate-8 residual": ({**CRATE, "n_layer": 8, **RESIDUAL}, 3e-3),
    "crate-8 residual lr1e-3": ({**CRATE, "n_layer": 8, **RESIDUAL}, 1e-3),
    "crate-24 residual": ({**CRATE, "n_layer": 24, **RESIDUAL}, 3e-3),
    "crate-4 residual": ({**CRATE, "n_layer": 4, **RESIDUAL}, 3e-3),
    "crate-4 residual d88": ({**CRATE, "n_layer": 4, "n_embd": 88, **RESIDUAL}, 3e-3),  # 93k: width over depth
}


def _share(h: torch.Tensor) -> float:
    h = h.reshape(-1, h.shape[-1])
    return float((h - h.mean(0)).norm() / h.norm())


def _val_windows(data: LMData) -> torch.Tensor:
    val = data.splits["val"]
    return torch.from_numpy(np.stack([val[s : s + CONTEXT] for s in eval_windows(val, CONTEXT, 32)]).astype(np.int64))


def token_share(model: torch.nn.Module, data: LMData, per_layer: bool = False) -> float | list[float]:
    """‖H − mean(H)‖ / ‖H‖ for the final hidden states H of 32 val windows (``per_layer``: the residual stream
    after each block instead)."""
    with torch.no_grad():
        h, layers = model.backbone(model.embed(_val_windows(data)), return_intermediates=True)  # type: ignore[operator]
    return [_share(x) for x in layers] if per_layer else _share(h)


def run_variant(
    name: str, overrides: dict[str, Any], lr: float, steps: int, data: LMData, baselines: dict, trace: tuple = ()
) -> dict:
    torch.manual_seed(0)
    cfg = ModelConfig.from_dict({**BASE, **overrides})
    model = build_model(cfg)
    opt = build_optimizer(model, "adamw", lr, 0.1, (0.9, 0.95))
    batches = LMBatches(data.splits["train"], BATCH, CONTEXT, seed=0)
    token_bytes = data.tokenizer.token_byte_lengths()
    start = time.process_time()
    curve = []
    layer_share = {}
    for step in range(steps):
        if step in trace:
            layer_share[step] = token_share(model, data, per_layer=True)
        for group in opt.param_groups:
            group["lr"] = lr_at(step, lr, WARMUP, steps, lr / 10)
        (tokens,) = batches.get(step)
        _, loss = model(tokens, labels=tokens)
        opt.zero_grad(set_to_none=True)
        loss.backward()
        torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
        opt.step()
        if step % 50 == 0 or step == steps - 1:
            curve.append([step, float(loss.detach())])
    model.eval()
    with torch.no_grad():
        val = evaluate_lm(model, data.splits["val"], CONTEXT, token_bytes, 32, 128)
    return {
        "name": name,
        "overrides": overrides,
        "lr": lr,
        "steps": steps,
        "non_embedding_params": model.num_params(non_embedding=True),
        "val_loss": val["loss"],
        "token_share": token_share(model, data),
        "unigram": baselines["unigram"]["loss"],
        "bigram": baselines["bigram"]["loss"],
        "train_curve": curve,
        "layer_share": layer_share,
        "cpu_seconds": time.process_time() - start,
    }


def markdown(store: dict) -> str:
    m = store["machine"]
    runs = list(store["runs"].values())
    gpt2 = {r["steps"]: r["val_loss"] for r in runs if r["name"] == "gpt2"}
    lines = [
        "# Why CRATE stays at the unigram level: small diagnostic runs",
        "",
        f"{m['date']}, {m['processor']}; `OMP_NUM_THREADS=1 PYTHONPATH=src python "
        "benchmarks/lm/crate_diagnosis.py`. Shakespeare bytes, width 64, 4 heads, context 64, batch 16, AdamW "
        "(0.9, 0.95), weight decay 0.1, warm-up 30, cosine to lr/10, fp32, one seed (0). Val loss in nats/byte on "
        f"128 windows; unigram {runs[0]['unigram']:.3f}, bigram {runs[0]['bigram']:.3f}. Gap: to GPT-2 (2 layers, "
        "lr 3e-3) at the same steps. Token share: 0 = every token has the same final hidden state. One seed and "
        "a tiny model: read directions, not decimals. A row's command: `... crate_diagnosis.py --steps STEPS "
        "--only 'VARIANT'` (the rows at 100 steps add `--trace`); the variants' configs are in the script.",
        "",
        "| variant | layers | non-emb. params | lr | steps | val loss | gap to GPT-2 | token share | CPU s |",
        "|---|---|---|---|---|---|---|---|---|",
    ]
    for r in runs:
        ref = gpt2.get(r["steps"])
        gap = f"{100 * (r['val_loss'] - ref) / ref:+.1f} %" if ref else "—"
        layers = r["overrides"].get("n_layer", 2)
        lines.append(
            f"| {r['name']} | {layers} | {r['non_embedding_params'] / 1e3:.0f}k | {r['lr']:g} | {r['steps']} | "
            f"{r['val_loss']:.3f} | {gap} | {r['token_share']:.3f} | {r['cpu_seconds']:.0f} |"
        )
    traced = [r for r in runs if r.get("layer_share")]
    if traced:
        lines += [
            "",
            "Token share of the residual stream after each block, early in training (`--trace`): the first, the",
            "middle and the last block.",
            "",
            "| variant | step | after block 1 | middle | last | val loss at the end |",
            "|---|---|---|---|---|---|",
        ]
        for r in traced:
            for step, share in r["layer_share"].items():
                lines.append(
                    f"| {r['name']} | {step} | {share[0]:.3f} | {share[len(share) // 2]:.3f} | {share[-1]:.3f} | "
                    f"{r['val_loss']:.3f} ({r['steps']} steps) |"
                )
    return "\n".join(lines) + "\n"


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--only", nargs="+", choices=list(VARIANTS), metavar="VARIANT", help="run these only")
    parser.add_argument("--steps", type=int, default=300, help="optimizer steps (x 16 x 64 tokens; default 300)")
    parser.add_argument(
        "--trace", action="store_true", help="record the token share after every block at steps 0, 10, 20, 30, 60"
    )
    args = parser.parse_args(argv)
    path = HERE / "crate_diagnosis.json"
    store = json.loads(path.read_text()) if path.is_file() else {"runs": {}}
    data = prepare_lm_data("shakespeare", "bytes")
    token_bytes = data.tokenizer.token_byte_lengths()
    baselines = ngram_baselines(data.splits["train"], data.splits["val"], data.vocab_size, token_bytes)
    for name in args.only or list(VARIANTS):
        key = f"{name} @{args.steps}{' traced' if args.trace else ''}"
        if key in store["runs"]:
            continue
        overrides, lr = VARIANTS[name]
        trace = (0, 10, 20, 30, 60) if args.trace else ()
        store["runs"][key] = row = run_variant(name, overrides, lr, args.steps, data, baselines, trace)
        store["machine"] = machine_info()
        path.write_text(json.dumps(store, indent=2) + "\n")
        (HERE / "crate_diagnosis.md").write_text(markdown(store))
        print(f"{name:26s} val {row['val_loss']:.3f} share {row['token_share']:.3f} ({row['cpu_seconds']:.0f} cpu-s)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
