"""Beyond the paper: learn the bases. The unrolled network Z ← Z + η·MSSA_l(Z) of docs/paper.md §2, with a fresh
U_k^(l) per layer trained by backprop to denoise Definition 1 data (recover U_k a_i from z_i, up to one
global scale), then compared with the true subspaces (principal angles, heads matched to clusters) and
measured with the paper's SNR per layer (docs/paper.md §3).

Each layer is the core's :class:`aot.nn.attention.MultiHeadSubspaceSelfAttention` (tied output, no score
scale, not causal), so what is learned here is exactly the operator of the language and vision models.
Training uses plain softmax: the hard threshold h has zero gradient.
"""

from __future__ import annotations

import json
import math
import time
from pathlib import Path
from typing import Any, cast

import torch
from torch import nn

from aot.config import ModelConfig
from aot.nn.attention import MultiHeadSubspaceSelfAttention
from aot.runinfo import machine_info
from aot.theory.config import LearnConfig
from aot.theory.data import orthonormal_bases, sample_mixture
from aot.theory.metrics import match_heads, principal_angles, snr_trajectory


def mssa_config(d: int, p: int, n_heads: int) -> ModelConfig:
    """The core config of the paper's operator: tied output U_k, no 1/√p, no norm, not causal."""
    return ModelConfig(
        block="aot-mssa",
        n_embd=d,
        n_head=n_heads,
        head_dim=p,
        tied_output=True,
        score_scale=False,
        norm="none",
        position="none",
        dropout=0.0,
        causal=False,
    )


class UnrolledMSSA(nn.Module):
    """L layers of Z ← Z + η · MSSA_l(Z), each with its own bases U^(l) (K heads of dimension p)."""

    def __init__(self, d: int, p: int, n_heads: int, n_layers: int, eta: float, generator: torch.Generator) -> None:
        super().__init__()
        cfg = mssa_config(d, p, n_heads)
        self.eta = eta
        self.layers = nn.ModuleList(MultiHeadSubspaceSelfAttention(cfg) for _ in range(n_layers))
        for layer in self.mssa_layers():  # random orthonormal bases, independent of the true ones
            self.set_bases(layer, orthonormal_bases(d, p, n_heads, generator, dtype=torch.float32))

    def mssa_layers(self) -> list[MultiHeadSubspaceSelfAttention]:
        return [cast(MultiHeadSubspaceSelfAttention, layer) for layer in self.layers]

    @staticmethod
    def set_bases(layer: MultiHeadSubspaceSelfAttention, bases: torch.Tensor) -> None:
        """Load (K, d, p) bases into a core MSSA layer: ``subspace_proj.weight`` = [U_1 … U_K]ᵀ, (K·p, d)."""
        with torch.no_grad():
            layer.subspace_proj.weight.copy_(bases.transpose(1, 2).reshape(-1, bases.shape[1]))

    def bases(self) -> torch.Tensor:
        """The learned bases of every layer: (L, K, d, p) (not orthonormal in general)."""
        return torch.stack([layer.bases().detach() for layer in self.mssa_layers()])

    def forward(self, tokens: torch.Tensor) -> list[torch.Tensor]:
        """tokens (B, N, d) -> [Z⁽⁰⁾, …, Z⁽ᴸ⁾]."""
        trajectory = [tokens]
        for layer in self.layers:
            trajectory.append(trajectory[-1] + self.eta * layer(trajectory[-1]))
        return trajectory


def denoising_loss(output: torch.Tensor, signal: torch.Tensor) -> torch.Tensor:
    """Relative error of the best global rescaling of the output: min_γ ‖γ·out − S‖² / ‖S‖²
    = 1 − ⟨out, S⟩² / (‖out‖² ‖S‖²). 0 = perfect recovery of U_k a_i (up to scale); ≈ noise share at input."""
    inner = (output * signal).sum()
    return 1.0 - inner**2 / ((output**2).sum() * (signal**2).sum())


def draw_batch(
    cfg: LearnConfig, bases: torch.Tensor, n: int, generator: torch.Generator
) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """n samples of Definition 1 with fixed bases: tokens, signal (n, N, d) and labels (N,)."""
    d = bases.shape[1]
    samples = [
        sample_mixture(d, cfg.p, cfg.n_clusters, cfg.tokens_per_cluster, cfg.delta, bases=bases, generator=generator)
        for _ in range(n)
    ]
    tokens = torch.stack([s.tokens for s in samples]).float()
    signal = torch.stack([s.signal for s in samples]).float()
    return tokens, signal, samples[0].labels


def energy_fractions(head: torch.Tensor, true: torch.Tensor) -> torch.Tensor:
    """Share of a learned head's weight energy ‖U_kᵀ W‖²_F / ‖W‖²_F inside each true subspace: (K,)."""
    return torch.einsum("kdp,dq->kpq", true, head).pow(2).sum(dim=(1, 2)) / head.pow(2).sum()


def alignment(learned: torch.Tensor, true: torch.Tensor, active: float = 0.1) -> list[dict[str, Any]]:
    """Learned (L, H, d, p) against true (K, d, p) bases, per layer.

    For every head: its scale ‖W‖_F/√p, the true subspace holding most of its energy, that energy share and
    the principal angles (degrees) to that subspace. A head is *active* when its scale is at least ``active``
    times the layer's largest (a head the training shrank to ~0 does nothing). Also the one-to-one matching
    of heads to clusters (:func:`aot.theory.metrics.match_heads`) and its principal angles.
    """
    rows = []
    p = learned.shape[-1]
    for layer, layer_bases in enumerate(learned):
        heads: list[dict[str, Any]] = []
        scales = [float(torch.linalg.norm(w) / math.sqrt(p)) for w in layer_bases]
        for h, w in enumerate(layer_bases):
            energy = energy_fractions(w, true)
            nearest = int(energy.argmax())
            angles = torch.rad2deg(principal_angles(w, true[nearest]))
            heads.append(
                {
                    "head": h,
                    "scale": scales[h],
                    "active": scales[h] >= active * max(scales),
                    "nearest_cluster": nearest,
                    "energy_in_nearest": float(energy[nearest]),
                    "principal_angles_deg": angles.tolist(),
                }
            )
        active_heads = [x for x in heads if x["active"]]
        match = match_heads(layer_bases, true)
        matched = [torch.rad2deg(principal_angles(layer_bases[h], true[k])) for k, h in enumerate(match)]
        rows.append(
            {
                "layer": layer,
                "heads": heads,
                "active_heads": len(active_heads),
                "clusters_covered": len({x["nearest_cluster"] for x in active_heads}),
                "energy_in_nearest": sum(x["energy_in_nearest"] for x in active_heads) / len(active_heads),
                "mean_angle_to_nearest_deg": sum(sum(x["principal_angles_deg"]) / p for x in active_heads)
                / len(active_heads),
                "max_angle_to_nearest_deg": max(max(x["principal_angles_deg"]) for x in active_heads),
                "matched_head_for_cluster": match,
                "matched_mean_angle_deg": float(torch.stack([a.mean() for a in matched]).mean()),
                "matched_max_angle_deg": float(max(a.max() for a in matched)),
            }
        )
    return rows


def mean_snr_per_layer(model: UnrolledMSSA, tokens: torch.Tensor, bases: torch.Tensor, labels: torch.Tensor) -> list:
    """SNR (docs/paper.md §3) per layer and cluster, averaged over the samples of ``tokens``: (L + 1) × K."""
    with torch.no_grad():
        trajectory = model(tokens)
    per_sample = [snr_trajectory([z[i].double() for z in trajectory], bases, labels) for i in range(tokens.shape[0])]
    return torch.stack(per_sample).mean(dim=0).tolist()


def train_learned(cfg: LearnConfig, seed: int = 0, progress: bool = False) -> dict[str, Any]:
    """Train the per-layer bases by backprop; return losses, alignment and SNR per layer, before and after.
    ``progress`` shows a tqdm bar (on stderr) with the current loss."""
    from tqdm.auto import tqdm

    d = cfg.d or cfg.n_clusters * cfg.p
    generator = torch.Generator().manual_seed(seed)
    true_bases = orthonormal_bases(d, cfg.p, cfg.n_clusters, generator)
    torch.manual_seed(seed)
    model = UnrolledMSSA(d, cfg.p, cfg.n_clusters, cfg.n_layers, cfg.eta, generator)
    eval_generator = torch.Generator().manual_seed(seed + 1_000_003)
    eval_tokens, eval_signal, labels = draw_batch(cfg, true_bases, cfg.eval_samples, eval_generator)

    def evaluate() -> dict[str, Any]:
        with torch.no_grad():
            trajectory = model(eval_tokens)
        return {
            "loss_per_layer": [float(denoising_loss(z, eval_signal)) for z in trajectory],
            "snr": mean_snr_per_layer(model, eval_tokens, true_bases, labels),
            "alignment": alignment(model.bases().double(), true_bases),
        }

    before = evaluate()
    optimizer = torch.optim.Adam(model.parameters(), lr=cfg.lr)
    losses = []
    bar = tqdm(total=cfg.steps, desc=f"learn seed {seed}", unit="step", leave=False, disable=not progress)
    for _ in range(cfg.steps):
        tokens, signal, _ = draw_batch(cfg, true_bases, cfg.batch_size, generator)
        trajectory = model(tokens)[1:]
        if cfg.every_layer:  # deep supervision: every layer should denoise
            loss = torch.stack([denoising_loss(z, signal) for z in trajectory]).mean()
        else:
            loss = denoising_loss(trajectory[-1], signal)
        optimizer.zero_grad(set_to_none=True)
        loss.backward()
        optimizer.step()
        losses.append(float(loss.detach()))
        bar.set_postfix(loss=f"{losses[-1]:.4f}", refresh=False)
        bar.update()
    bar.close()
    after = evaluate()
    return {
        "d": d,
        "config": {**cfg.__dict__, "d": d},
        "seed": seed,
        "train_loss": losses,
        "before": before,
        "after": after,
        "random_overlap_baseline": cfg.p / d,
    }


def plot_learned(result: dict[str, Any], path: str | Path) -> None:
    """Training loss, principal angles per layer (before/after) and SNR per layer (before/after)."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, axes = plt.subplots(1, 3, figsize=(14, 3.8))
    axes[0].plot(result["train_loss"], lw=0.8)
    axes[0].set_xlabel("step")
    axes[0].set_ylabel("denoising loss (1 − cos²)")
    axes[0].set_yscale("log")
    axes[0].set_title("training", fontsize=10)
    for key, style in (("before", "o--"), ("after", "o-")):
        rows = result[key]["alignment"]
        layers = [r["layer"] + 1 for r in rows]
        axes[1].plot(
            layers,
            [r["mean_angle_to_nearest_deg"] for r in rows],
            style,
            label=f"{key}: active heads, nearest subspace",
        )
        axes[1].plot(
            layers, [r["matched_mean_angle_deg"] for r in rows], style, alpha=0.4, label=f"{key}: heads matched 1-to-1"
        )
        snr = torch.tensor(result[key]["snr"]).mean(dim=1)
        axes[2].plot(range(len(snr)), snr, style, label=f"{key} training")
    axes[1].set_xlabel("layer")
    axes[1].set_ylabel("mean principal angle to true U_k (deg)")
    axes[1].set_ylim(0, 92)
    axes[1].set_title("learned vs true subspaces", fontsize=10)
    axes[2].set_xlabel("layer")
    axes[2].set_ylabel("mean SNR (true bases)")
    axes[2].set_title("SNR per layer of the learned network", fontsize=10)
    for ax in axes[1:]:
        ax.grid(alpha=0.3)
        ax.legend(fontsize=7)
    cfg = result["config"]
    fig.suptitle(
        f"learned bases: d={cfg['d']}, p={cfg['p']}, K={cfg['n_clusters']}, "
        f"N={cfg['n_clusters'] * cfg['tokens_per_cluster']}, "
        f"δ={cfg['delta']:g}, L={cfg['n_layers']}, η={cfg['eta']:g}, {cfg['steps']} Adam steps",
        fontsize=10,
    )
    fig.tight_layout()
    fig.savefig(path, dpi=130)
    plt.close(fig)


def _spread(values: list[float]) -> dict[str, float]:
    """Mean, standard deviation (n − 1; 0 for one value), min and max."""
    tensor = torch.tensor(values, dtype=torch.float64)
    std = float(tensor.std()) if len(values) > 1 else 0.0
    return {"mean": float(tensor.mean()), "std": std, "min": float(tensor.min()), "max": float(tensor.max())}


def seed_summary(runs: list[dict[str, Any]]) -> dict[str, Any]:
    """Across seeds: per layer, the mean principal angle of the active heads to their nearest true subspace, the
    energy inside it, and the mean SNR after training; and the SNR at the input and at the last layer."""
    n_layers = len(runs[0]["after"]["alignment"])

    def mean_snr(run: dict[str, Any], layer: int) -> float:
        row = run["after"]["snr"][layer]
        return sum(row) / len(row)

    return {
        "seeds": [run["seed"] for run in runs],
        "angle_deg_per_layer": [
            _spread([run["after"]["alignment"][layer]["mean_angle_to_nearest_deg"] for run in runs])
            for layer in range(n_layers)
        ],
        "energy_per_layer": [
            _spread([run["after"]["alignment"][layer]["energy_in_nearest"] for run in runs])
            for layer in range(n_layers)
        ],
        "snr_after_per_layer": [_spread([mean_snr(run, layer) for run in runs]) for layer in range(n_layers + 1)],
        "snr_first": _spread([mean_snr(run, 0) for run in runs]),
        "snr_last": _spread([mean_snr(run, n_layers) for run in runs]),
    }


def _pm(spread: dict[str, float], digits: int) -> str:
    mean, std, low, high = (f"{spread[key]:.{digits}f}" for key in ("mean", "std", "min", "max"))
    return f"{mean} ± {std} ({low}–{high})"


def seeds_markdown(result: dict[str, Any]) -> str:
    """The learned-bases experiment over seeds: mean ± std (min–max) per layer, one line per seed, then the
    per-layer table of the first seed."""
    summary, runs = result["summary"], result["runs"]
    lines = [
        "# `aot denoise --learn` — learned bases",
        "",
        f"Over {len(runs)} seed(s) ({', '.join(str(s) for s in summary['seeds'])}): mean ± standard deviation "
        "(min–max) after training. Angle: mean principal angle of a layer's active heads to their nearest true "
        "subspace; energy: the share of their weight energy inside it.",
        "",
        "| layer | SNR after training | mean angle (deg) | energy in nearest true subspace |",
        "|---|---|---|---|",
    ]
    for layer, snr in enumerate(summary["snr_after_per_layer"]):
        if layer == 0:
            lines.append(f"| 0 (input) | {_pm(snr, 2)} | | |")
        else:
            angle, energy = summary["angle_deg_per_layer"][layer - 1], summary["energy_per_layer"][layer - 1]
            lines.append(f"| {layer} | {_pm(snr, 2)} | {_pm(angle, 1)} | {_pm(energy, 3)} |")
    lines += ["", "| seed | SNR input → last layer | mean angle per layer (deg) |", "|---|---|---|"]
    for run in runs:
        snr = [sum(row) / len(row) for row in run["after"]["snr"]]
        angles = " / ".join(f"{a['mean_angle_to_nearest_deg']:.1f}" for a in run["after"]["alignment"])
        lines.append(f"| {run['seed']} | {snr[0]:.2f} → {snr[-1]:.2f} | {angles} |")
    first = {**runs[0], "machine": result["machine"], "seconds": result["seconds"], "command": result["command"]}
    return "\n".join(lines) + "\n\n## Seed " + str(runs[0]["seed"]) + " in detail\n\n" + learned_markdown(first)


def learned_markdown(result: dict[str, Any]) -> str:
    """A per-layer table of one seed of the learned-bases experiment, with date and machine."""
    cfg, m = result["config"], result["machine"]
    lines = [
        f"Command: `{result.get('command', 'aot denoise --learn')}` — {m['date']}, {m['platform']}, "
        f"{m.get('processor', '')}, {m['cpu_count']} CPUs, torch {m['torch']} ({m['torch_threads']} thread(s)), "
        f"{result['seconds']:.0f} s. d={cfg['d']}, p={cfg['p']}, K={cfg['n_clusters']}, "
        f"N={cfg['n_clusters'] * cfg['tokens_per_cluster']}, δ={cfg['delta']:g}, L={cfg['n_layers']}, "
        f"η={cfg['eta']:g}, plain softmax, {cfg['steps']} Adam steps (lr {cfg['lr']:g}) of {cfg['batch_size']} "
        f"fresh samples, seed {result['seed']}; loss = 1 − cos²(Z⁽ˡ⁾, signal)"
        f"{' averaged over layers' if cfg['every_layer'] else ' at the last layer'}. Random subspaces overlap "
        f"p/d = {result['random_overlap_baseline']:.2f} of their energy.",
        "",
        "| layer | SNR before | SNR after | loss before | loss after | active heads | clusters covered | "
        "energy in nearest true subspace | mean / max angle to it (deg) | 1-to-1 matched mean angle (deg) |",
        "|---|---|---|---|---|---|---|---|---|---|",
    ]
    before, after = result["before"], result["after"]
    for layer in range(len(after["snr"])):
        snr_b = sum(before["snr"][layer]) / len(before["snr"][layer])
        snr_a = sum(after["snr"][layer]) / len(after["snr"][layer])
        cells = [f"{layer}", f"{snr_b:.3f}", f"{snr_a:.3f}"]
        cells += [f"{before['loss_per_layer'][layer]:.4f}", f"{after['loss_per_layer'][layer]:.4f}"]
        if layer == 0:
            cells += ["input"] + [""] * 4
        else:
            a = after["alignment"][layer - 1]
            cells += [
                f"{a['active_heads']}",
                f"{a['clusters_covered']}",
                f"{a['energy_in_nearest']:.3f}",
                f"{a['mean_angle_to_nearest_deg']:.1f} / {a['max_angle_to_nearest_deg']:.1f}",
                f"{a['matched_mean_angle_deg']:.1f}",
            ]
        lines.append("| " + " | ".join(cells) + " |")
    return "\n".join(lines) + "\n"


def run_learned_cli(
    cfg: LearnConfig, out: Path, seeds: list[int], device: str, command: str = "aot denoise --learn"
) -> int:
    """`aot denoise --learn`: train once per seed, write results.json (every seed's run and the spread across
    seeds), results.md and learned_bases.png (the first seed) into ``out``."""
    del device  # CPU-sized experiment; the core modules run wherever torch does, but this one is tiny
    out.mkdir(parents=True, exist_ok=True)
    start = time.time()
    runs = [train_learned(cfg, seed, progress=True) for seed in seeds]
    summary = seed_summary(runs)
    result = {
        "config": runs[0]["config"],
        "command": command,
        "machine": machine_info(),
        "seconds": time.time() - start,
        "summary": summary,
        "runs": runs,
    }
    (out / "results.json").write_text(json.dumps(result, indent=1))
    plot_learned({**runs[0], "machine": result["machine"]}, out / "learned_bases.png")
    (out / "results.md").write_text(seeds_markdown(result))
    angles = " / ".join(f"{a['mean']:.0f} ± {a['std']:.0f}" for a in summary["angle_deg_per_layer"])
    print(
        f"{len(runs)} seed(s): SNR {_pm(summary['snr_first'], 2)} at the input -> {_pm(summary['snr_last'], 2)} "
        f"at layer {cfg.n_layers}; mean angle of active heads to the nearest true subspace per layer: {angles} deg"
    )
    print(f"wrote {out}/results.json, results.md and learned_bases.png ({result['seconds']:.0f} s)")
    return 0 if all(math.isfinite(run["train_loss"][-1]) for run in runs if run["train_loss"]) else 1
