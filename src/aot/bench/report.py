"""The suite's results as a Markdown table and a PNG figure."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from aot.bench.breakdown import rest_seconds


def _si(x: float, unit: str = "") -> str:
    for factor, prefix in ((1e12, "T"), (1e9, "G"), (1e6, "M"), (1e3, "k")):
        if abs(x) >= factor:
            return f"{x / factor:.2f} {prefix}{unit}"
    return f"{x:.3g} {unit}".strip()


def _mib(x: float | None) -> str:
    return "—" if x is None else f"{x / 2**20:.0f} MiB"


def markdown_report(results: dict[str, Any]) -> str:
    env, peak = results["environment"], results["peak"]
    st = results["settings"]
    lines = [
        "# aot bench",
        "",
        f"{env['date']} · {env['processor']} · {env['platform']} · torch {env['torch']} · "
        f"{env['cpu_count']} CPUs, {env['threads']} threads · device {env['device']}"
        + (f" ({env['gpu']})" if env.get("gpu") else "")
        + f" · load average {env.get('load_average_start')} → {env.get('load_average_end')}",
        "",
        f"Default size: d = {st['n_embd']}, {st['n_head']} heads, T = {st['seq_len']}, batch {st['batch']}, "
        f"vocab {st['vocab_size']}, {st['dtype']}. Each figure is the median of {st.get('rounds', 1)} × {st['repeat']} "
        f"timings ({st.get('rounds', 1)} rounds over the models of a comparison, interleaved, "
        f"{st['repeat']} calls each; {st['warmup']} warm-up calls first; the scaling sweeps "
        f"{st.get('rounds', 1)} × {st['scaling_repeat']}). "
        f"Matmul peak ({peak['dtype']}, measured in this run, best of start/end): {_si(peak['used'], 'FLOP/s')}"
        + (f"; table peak of this GPU: {_si(peak['table'], 'FLOP/s')}" if peak.get("table") else "")
        + ".",
        "",
        "FLOPs count matrix products (2·m·n·k: linear layers, attention scores and values over the full T×T "
        "square, LM head), no element-wise work; training = 3× forward (model FLOPs). *MFU* counts only the "
        "attention a causal model needs (keys at or before each query; the useful work, never above 100 %); "
        "*MFU full square* counts the whole T×T square, as the PaLM / nanoGPT formula does. *flop_counter* is "
        "`torch.utils.flop_counter` (training includes the score product the fused backward "
        "recomputes) divided by the analytic count.",
    ]
    if "models" in results:
        lines += ["", "## Every block type", ""]
        lines += [
            "| group | model | layers | params (non-emb.) | FLOPs/token fwd · train | flop_counter | "
            "fwd ms | train ms | train tok/s | train FLOP/s | MFU | MFU full square | peak mem | vs GPT-2 tok/s |",
            "|---|---|---|---|---|---|---|---|---|---|---|---|---|---|",
        ]
        base = {r["group"]: r for r in results["models"] if r["label"] == "GPT-2"}
        for r in results["models"]:
            agree = r.get("flop_counter_agreement_training")
            ratio = r["train_tokens_per_s"] / base[r["group"]]["train_tokens_per_s"] if r["group"] in base else None
            lines.append(
                f"| {r['group']} | {r['label']} | {r['n_layer']} | {r['params'] / 1e6:.2f}M "
                f"({r['non_embedding_params'] / 1e6:.2f}M) | {_si(r['flops_forward'])} · {_si(r['flops_training'])} | "
                + ("—" if agree is None else f"{r['flop_counter_agreement_forward']:.3f} · {agree:.3f}")
                + f" | {r['forward_seconds'] * 1e3:.1f} | {r['train_seconds'] * 1e3:.1f} | "
                f"{r['train_tokens_per_s']:,.0f} | {_si(r['train_flops_per_s'], 'FLOP/s')} | "
                f"{100 * r['train_mfu_causal']:.1f} % | {100 * r['train_mfu']:.1f} % | "
                f"{_mib(r.get('train_peak_bytes'))} | " + ("—" if ratio is None else f"{ratio:.2f}×") + " |"
            )
    lines += _breakdown_table(results.get("models", []), peak["used"])
    for key, title, var in (("seq_scaling", "Sequence length", "seq_len"), ("depth_scaling", "Depth", "n_layer")):
        if key not in results:
            continue
        lines += [
            "",
            f"## {title} scaling (training step"
            + (f"; batch × T = {st['scaling_tokens']})" if key == "seq_scaling" else ")"),
            "",
            f"| model | {var} | batch | FLOPs/token train | attention share | train ms | µs/token | train FLOP/s | MFU "
            "| MFU full square | peak mem |",
            "|---|---|---|---|---|---|---|---|---|---|---|",
        ]
        for r in results[key]:
            lines.append(
                f"| {r['label']} | {r[var]} | {r['batch']} | {_si(r['flops_training'])} | "
                f"{100 * r['attention_share']:.0f} % | {r['train_seconds'] * 1e3:.1f} | "
                f"{1e6 / r['train_tokens_per_s']:.1f} | {_si(r['train_flops_per_s'], 'FLOP/s')} | "
                f"{100 * r['train_mfu_causal']:.1f} % | {100 * r['train_mfu']:.1f} % | "
                f"{_mib(r.get('train_peak_bytes'))} |"
            )
    if "decode" in results:
        lines += [
            "",
            "## Generation (greedy, batch 1)",
            "",
            "| model | layers | new tokens | cached tok/s | uncached tok/s | speed-up | same tokens "
            "| cache bytes/token |",
            "|---|---|---|---|---|---|---|---|",
        ]
        for r in results["decode"]:
            lines.append(
                f"| {r['label']} | {r['n_layer']} | {r['n_new']} | {r['cached_tokens_per_s']:,.1f} | "
                f"{r['uncached_tokens_per_s']:,.1f} | {r['speedup']:.1f}× | {r['same_tokens']} | "
                f"{r['cache_bytes_per_token']:,.0f} |"
            )
    peer = results.get("peer")
    if peer:
        lines += ["", "## Peer: HuggingFace transformers GPT-2 on the same config", ""]
        if "skipped" in peer:
            lines.append(f"Skipped: {peer['skipped']}.")
        else:
            lines += [
                f"transformers {peer['versions']['transformers']}; after copying our weights into it the logits "
                f"differ by at most {peer['max_abs_logit_difference']:.2e}. Medians over {peer.get('rounds', 1)} "
                "interleaved rounds.",
                "",
                "| model | params | fwd ms | train ms | train tok/s | MFU full square |",
                "|---|---|---|---|---|---|",
            ]
            for name, title in (("aot", "aot GPT-2"), ("hf", "HF GPT2LMHeadModel")):
                r = peer[name]
                lines.append(
                    f"| {title} | {r['params']:,} | {r['forward_seconds'] * 1e3:.1f} | "
                    f"{r['train_seconds'] * 1e3:.1f} | "
                    f"{r['train_tokens_per_s']:,.0f} | {100 * r['train_mfu']:.1f} % |"
                )
            spread = {
                kind: f" (rounds {min(r):.2f}–{max(r):.2f})" if (r := peer.get(f"{kind}_speed_ratio_rounds")) else ""
                for kind in ("train", "forward")
            }
            lines.append(
                f"\nOurs / HF speed, median of the per-round ratios: training {peer['train_speed_ratio']:.2f}×"
                f"{spread['train']}, forward {peer['forward_speed_ratio']:.2f}×{spread['forward']}."
            )
    return "\n".join(lines) + "\n"


#: the widest line :func:`terminal_summary` prints
TERMINAL_WIDTH = 100


def terminal_summary(results: dict[str, Any]) -> str:
    """What `aot bench` prints: the headline columns of the model table and the peer's ratio, at most
    :data:`TERMINAL_WIDTH` columns wide (the full tables are in table.md)."""
    env, peak = results["environment"], results["peak"]
    lines = [
        f"{env['date']} · {env['processor']} · {env['cpu_count']} CPUs · {results['settings']['dtype']} · "
        f"matmul peak {_si(peak['used'], 'FLOP/s')}"
    ]
    if results.get("models"):
        lines += [
            "",
            f"{'group':<20} {'model':<16} {'layers':>6} {'train tok/s':>11} {'MFU':>6} {'peak mem':>9} {'vs GPT-2':>8}",
        ]
        base = {r["group"]: r for r in results["models"] if r["label"] == "GPT-2"}
        for r in results["models"]:
            gpt2 = base.get(r["group"])
            ratio = f"{r['train_tokens_per_s'] / gpt2['train_tokens_per_s']:.2f}×" if gpt2 else "—"
            lines.append(
                f"{r['group'][:20]:<20} {r['label'][:16]:<16} {r['n_layer']:>6} {r['train_tokens_per_s']:>11,.0f} "
                f"{100 * r['train_mfu_causal']:>5.1f}% {_mib(r.get('train_peak_bytes')):>9} {ratio:>8}"
            )
    peer = results.get("peer")
    if peer and "skipped" not in peer:
        lines += [
            "",
            f"HF GPT-2 peer: ours / HF training speed {peer['train_speed_ratio']:.2f}×, forward "
            f"{peer['forward_speed_ratio']:.2f}×; logits differ by at most {peer['max_abs_logit_difference']:.1e}",
        ]
    elif peer:
        lines += ["", f"HF GPT-2 peer skipped: {peer['skipped']}"[:TERMINAL_WIDTH]]
    return "\n".join(line[:TERMINAL_WIDTH] for line in lines) + "\n"


def _breakdown_table(models: list[dict[str, Any]], peak: float) -> list[str]:
    """Where each training step's time goes (rows measured with ``breakdown``), and the MFU the step would
    reach if only its two kinds of products took time (the ceiling they set)."""
    rows = [r for r in models if "time_breakdown" in r]
    if not rows:
        return []
    lines = [
        "",
        "## Where a training step's time goes (torch.profiler, self time of each op)",
        "",
        "*matmul*: dense products (linear layers, LM head), their FLOP/s as % of the peak. *attention kernel*: "
        "the fused SDPA forward and backward, FLOP/s of its unmasked work including the scores its backward "
        "recomputes (3.5 × causal attention FLOPs). *rest*: the profiled step's remaining time (element-wise "
        "ops, optimizer, copies, Python). *MFU if only products*: the MFU if the rest took no time, the ceiling "
        "the two kernels set.",
        "",
        "| model | profiled step ms | matmul ms (share) | matmul % of peak | attention kernel ms (share) "
        "| attention kernel % of peak | rest ms (share) | MFU full square | MFU full square if only products |",
        "|---|---|---|---|---|---|---|---|---|",
    ]
    for r in rows:
        b, rate = r["time_breakdown"], r.get("category_mfu", {})
        step = b["profiled_step"]

        def part(seconds: float, step: float = step) -> str:
            return f"{seconds * 1e3:.1f} ({100 * seconds / step:.0f} %)"

        def pct(key: str, rate: dict[str, float] = rate) -> str:
            return f"{100 * rate[key]:.0f} %" if key in rate else "—"

        ceiling = r["flops_training"] * r["batch"] * r["seq_len"] / (b["matmul"] + b["attention"]) / peak
        lines.append(
            f"| {r['label']} | {step * 1e3:.1f} | {part(b['matmul'])} | {pct('matmul')} | "
            f"{part(b['attention'])} | {pct('attention')} | {part(rest_seconds(b))} | {100 * r['train_mfu']:.1f} % | "
            f"{100 * ceiling:.1f} % |"
        )
    return lines


def plot_report(results: dict[str, Any], path: str | Path) -> Path:
    """Six panels: training tokens/s and MFU per model, where a training step's time goes; cost per token
    against T and against depth, decoding tokens/s with and without the cache."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, axes = plt.subplots(2, 3, figsize=(19, 9))
    models = results.get("models", [])
    for ax, (key, title, scale) in zip(
        axes[0],
        (
            ("train_tokens_per_s", "training tokens/s", 1.0),
            ("train_mfu_causal", "training MFU, causal FLOPs (%)", 100.0),
        ),
    ):
        groups = list(dict.fromkeys(r["group"] for r in models))
        labels = list(dict.fromkeys(r["label"] for r in models))
        width = 0.8 / max(1, len(groups))
        for g, group in enumerate(groups):
            values = [
                next((r[key] * scale for r in models if r["group"] == group and r["label"] == lbl), 0.0)
                for lbl in labels
            ]
            ax.bar([i + g * width for i in range(len(labels))], values, width, label=group)
        ax.set_xticks([i + width * (len(groups) - 1) / 2 for i in range(len(labels))], labels, rotation=20, fontsize=8)
        ax.set_title(title)
        ax.legend(fontsize=8)
    for ax, (key, var, xlabel) in zip(
        axes[1], (("seq_scaling", "seq_len", "sequence length T"), ("depth_scaling", "n_layer", "layers"))
    ):
        rows = results.get(key, [])
        for label in dict.fromkeys(r["label"] for r in rows):
            mine = [r for r in rows if r["label"] == label]
            ax.plot([r[var] for r in mine], [1e6 / r["train_tokens_per_s"] for r in mine], "o-", label=label)
        ax.set_xscale("log", base=2)
        ax.set_yscale("log")
        ax.set_xlabel(xlabel)
        ax.set_ylabel("training µs per token")
        ax.set_title(f"cost per token against {xlabel}")
        ax.legend(fontsize=8)
    _plot_breakdown(axes[0][2], results.get("models", []))
    _plot_decode(axes[1][2], results.get("decode", []))
    env = results["environment"]
    fig.suptitle(
        f"aot bench · {env['date']} · {env['processor']} · {env['threads']} threads · {env['dtype']}", fontsize=10
    )
    fig.tight_layout()
    path = Path(path)
    fig.savefig(path, dpi=110)
    plt.close(fig)
    return path


def _plot_breakdown(ax: Any, models: list[dict[str, Any]]) -> None:
    """Stacked bars: each profiled training step's milliseconds in dense matmuls, the attention kernel, the rest."""
    rows = [r for r in models if "time_breakdown" in r]
    bottom = [0.0] * len(rows)
    for key, name in (("matmul", "dense matmuls"), ("attention", "attention kernel"), ("rest", "rest")):
        values = [1e3 * (rest_seconds(b) if key == "rest" else b[key]) for b in (r["time_breakdown"] for r in rows)]
        ax.bar(range(len(rows)), values, bottom=bottom, label=name)
        bottom = [a + v for a, v in zip(bottom, values)]
    ax.set_xticks(range(len(rows)), [r["label"] for r in rows], rotation=20, fontsize=8)
    ax.set_ylabel("ms per training step (profiled)")
    ax.set_title("where a training step's time goes (same width/depth)")
    if rows:
        ax.legend(fontsize=8)


def _plot_decode(ax: Any, rows: list[dict[str, Any]]) -> None:
    """Bars: decoding tokens/s with and without the cache, per model (log scale)."""
    for offset, (key, name) in enumerate((("cached_tokens_per_s", "with cache"), ("uncached_tokens_per_s", "without"))):
        ax.bar([i + 0.4 * offset for i in range(len(rows))], [r[key] for r in rows], 0.4, label=name)
    ax.set_xticks([i + 0.2 for i in range(len(rows))], [r["label"] for r in rows], rotation=20, fontsize=8)
    ax.set_yscale("log")
    ax.set_ylabel("generated tokens/s (batch 1)")
    ax.set_title("decoding with and without the KV cache")
    if rows:
        ax.legend(fontsize=8)
