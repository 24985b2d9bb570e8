"""MSSA speed, before and after the performance changes, measured in the same process (A/B interleaved).

"before" is the MSSA forward and the block's attention step as they were in the core (commit dd8e429),
copied here verbatim; "after" is the code in src/. Each round times both variants (training step, forward,
and one cached decoding step at 256 cached tokens), alternating the order, and the medians over rounds are
reported. Run with the CPU lock:

    flock /tmp/aot-cpu.lock env PYTHONPATH=src python benchmarks/bench/mssa_before_after.py
"""

from __future__ import annotations

import datetime
import json
import os
import platform
import statistics
import sys
from pathlib import Path

import torch
import torch.nn.functional as F

from aot.bench.timing import forward_pass, make_optimizer, median_seconds, training_step
from aot.config import ModelConfig
from aot.models import build_model
from aot.nn.attention import MultiHeadSubspaceSelfAttention
from aot.nn.blocks import _Block


def mssa_forward_before(self, x, cache=None, need_weights=False):  # type: ignore[no-untyped-def]
    offset = cache.length if cache is not None else 0
    proj = self.hook_subspace(self._split(self.subspace_proj(x)))
    (proj_all,) = cache.extend(proj) if cache is not None else (proj,)
    q, k = self._rope(proj, proj_all, offset)
    out = self._merge(self.attend(q, k, proj_all, need_weights))
    if self.out_proj is not None:
        return self.out_proj(out)
    return F.linear(out, self.subspace_proj.weight.t())


def attention_step_before(self, x, cache):  # type: ignore[no-untyped-def]
    x = self.hook_resid_pre(x)
    branch = self.hook_attn_out(self.attn_scale(self.attn(self.attn_norm(x), cache)))
    return x + self.drop(branch)


VARIANTS = {
    "before": (mssa_forward_before, attention_step_before),
    "after": (MultiHeadSubspaceSelfAttention.forward, _Block.attention_step),
}


def use(name: str) -> None:
    forward, step = VARIANTS[name]
    MultiHeadSubspaceSelfAttention.forward = forward  # type: ignore[method-assign]
    _Block.attention_step = step  # type: ignore[method-assign]


def decode_step_seconds(model, n_cached: int = 256, steps: int = 64) -> float:  # type: ignore[no-untyped-def]
    import time

    cache = model.new_cache()
    with torch.no_grad():
        model(torch.randint(0, model.cfg.vocab_size, (1, n_cached)), cache=cache)
        token = torch.zeros(1, 1, dtype=torch.long)
        seconds = []
        for _ in range(steps):
            start = time.perf_counter()
            model(token, cache=cache)
            seconds.append(time.perf_counter() - start)
    return statistics.median(seconds)


def main(rounds: int = 5) -> dict:
    results: dict = {name: {"train": [], "forward": [], "decode_step": []} for name in VARIANTS}
    for tied in (True, False):
        cfg = ModelConfig(block="aot-mssa", n_layer=6, n_embd=256, n_head=4, tied_output=tied, block_size=512)
        torch.manual_seed(0)
        model = build_model(cfg)
        idx = torch.randint(0, 256, (16, 256))
        optimizer = make_optimizer(model)
        for r in range(rounds):
            for name in ("before", "after") if r % 2 == 0 else ("after", "before"):
                use(name)
                key = "tied" if tied else "untied"
                model.train()
                train = median_seconds(training_step(model, optimizer, idx), warmup=1, repeat=3)
                model.eval()
                forward = median_seconds(forward_pass(model, idx), warmup=1, repeat=3)
                decode = decode_step_seconds(model)
                results[name].setdefault(key, []).append(dict(train=train, forward=forward, decode_step=decode))
    use("after")
    summary = {}
    for key in ("tied", "untied"):
        for metric in ("train", "forward", "decode_step"):
            before = statistics.median(r[metric] for r in results["before"][key])
            after = statistics.median(r[metric] for r in results["after"][key])
            summary[f"{key}/{metric}"] = dict(before_ms=1e3 * before, after_ms=1e3 * after, speedup=before / after)
    return dict(
        date=datetime.datetime.now(datetime.timezone.utc).isoformat(timespec="seconds"),
        machine=dict(
            platform=platform.platform(),
            torch=torch.__version__,
            cpu_count=os.cpu_count(),
            threads=torch.get_num_threads(),
            load_average=os.getloadavg(),
        ),
        setup="aot-mssa, 6 layers, d=256, 4 heads, T=256, batch 16, fp32; decode: 1 token after 256 cached",
        rounds=rounds,
        summary=summary,
    )


if __name__ == "__main__":
    out = main(int(sys.argv[1]) if len(sys.argv) > 1 else 5)
    path = Path(__file__).with_name("mssa_before_after.json")
    path.write_text(json.dumps(out, indent=2) + "\n")
    for key, row in out["summary"].items():
        print(f"{key:22s} before {row['before_ms']:8.2f} ms  after {row['after_ms']:8.2f} ms  ×{row['speedup']:.3f}")
