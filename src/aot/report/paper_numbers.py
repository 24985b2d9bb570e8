"""The paper's reported numbers, in one place, for the report to set ours beside.

Source: Peng Wang, Yifu Lu, Yaodong Yu, Druv Pai, Qing Qu, Yi Ma, *Attention-Only Transformers via Unrolled
Subspace Denoising*, ICML 2025 (PMLR 267), arXiv 2506.03790. The prose about the paper (its setup and claims)
is in docs/paper.md; this module holds only the numbers, so that every table of ``aot reproduce`` reads them
from here and no number of the paper is typed twice. Values marked ≈ in the paper are approximate there.

Each entry of :data:`PAPER_ITEMS` names one table or figure of the paper; a report part lists the items it
sits beside (``Part.paper_items``), and the report says plainly which items no part reproduces.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

ARXIV = "2506.03790"
CITATION = (
    f"Wang, Lu, Yu, Pai, Qu, Ma. Attention-Only Transformers via Unrolled Subspace Denoising. ICML 2025, arXiv {ARXIV}"
)
URL = f"https://arxiv.org/abs/{ARXIV}"


@dataclass(frozen=True)
class PaperItem:
    """One table or figure of the paper: its key, what it shows, and the report part meant to reproduce it."""

    key: str
    title: str
    part: str


PAPER_ITEMS: tuple[PaperItem, ...] = (
    PaperItem("theorem1-figure", "Theorem 1: SNR per layer of the unrolled MSSA denoiser (figure)", "theory"),
    PaperItem("lm-val-loss", "Language: OpenWebText pre-training, final validation loss (table)", "lm"),
    PaperItem("zero-shot", "Language: zero-shot LAMBADA / PTB / WikiText / CBT (table)", "zeroshot"),
    PaperItem("imagenet", "Vision: ImageNet-1K top-1 accuracy (table) and attention maps (figure)", "vision"),
    PaperItem("icl", "In-context learning of (sparse) linear regression (figure)", "icl"),
    PaperItem(
        "denoising-trained",
        "Claim: each layer of a trained AoT denoises at Theorem 1's rate (the paper shows it on synthetic data only)",
        "inside",
    ),
    PaperItem("efficiency", "Efficiency: FLOPs, memory and time per pass against a transformer", "efficiency"),
)

# -- Theorem 1 --------------------------------------------------------------------------------------------

# The paper's SNR figure: 13 layers, SNR from the first to the last layer, read off the figure (≈). The
# simulation's d, p, K, N and η are not stated in the paper.
THEOREM1_LAYERS = 13
THEOREM1_SNR: dict[float, tuple[float, float]] = {0.2: (1.55, 2.62), 0.5: (1.63, 2.73)}

# -- language ---------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class PaperLM:
    """One language model of the paper: name, parameter count, our preset at that count, final val loss (≈)."""

    name: str
    params: str
    preset: str
    block: str
    val_loss: float


# OpenWebText, GPT-2 BPE, context 1024, nanoGPT recipe (below); validation loss in nats per BPE token.
LM_MODELS: tuple[PaperLM, ...] = (
    PaperLM("GPT-2 Base", "124M", "gpt2-base", "transformer", 2.85),
    PaperLM("AoT-MHSA-L Base", "122M", "aot-mhsa-l-base", "aot-mhsa", 2.94),
    PaperLM("AoT-MSSA-L Base", "102M", "aot-mssa-l-base", "aot-mssa", 3.18),
    PaperLM("AoT-MSSA-L Medium", "182M", "aot-mssa-l-medium", "aot-mssa", 3.00),
)
LM_BASELINE = "GPT-2 Base"  # the row the paper's gaps are measured against

# The nanoGPT recipe the paper trained with (AdamW, cosine schedule); tokens per step ≈ 0.5M.
LM_RECIPE: dict[str, Any] = {
    "corpus": "OpenWebText",
    "tokenizer": "GPT-2 BPE",
    "context": 1024,
    "lr": 6e-4,
    "min_lr": 6e-5,
    "beta1": 0.9,
    "beta2": 0.95,
    "weight_decay": 0.1,
    "warmup_steps": 2000,
    "steps": 600_000,
    "tokens_per_step": 491_520,  # nanoGPT: 12 sequences × 1024 tokens × 40 accumulation steps
}

# -- zero-shot --------------------------------------------------------------------------------------------

ZERO_SHOT_COLUMNS = ("lambada_loss", "ptb_loss", "wikitext_loss", "lambada_acc", "cbt_cn_acc", "cbt_ne_acc")
ZERO_SHOT: dict[str, dict[str, float]] = {
    "AoT-MSSA-L Base": dict(zip(ZERO_SHOT_COLUMNS, (4.70, 6.03, 4.65, 0.25, 0.80, 0.74))),
    "AoT-MSSA-L Medium": dict(zip(ZERO_SHOT_COLUMNS, (4.47, 5.08, 4.22, 0.29, 0.84, 0.77))),
    "AoT-MHSA-L Base": dict(zip(ZERO_SHOT_COLUMNS, (4.42, 5.52, 4.19, 0.38, 0.86, 0.82))),
    "GPT-2 Base": dict(zip(ZERO_SHOT_COLUMNS, (4.32, 5.75, 4.13, 0.40, 0.87, 0.84))),
}

# -- vision -----------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class PaperVision:
    name: str
    params: str
    preset: str
    top1: float  # ImageNet-1K top-1 accuracy, % (≈)


IMAGENET: tuple[PaperVision, ...] = (
    PaperVision("ViT-S", "22M", "vit-s", 72.4),
    PaperVision("AoT-MSSA-V", "22M", "aot-mssa-v-s", 71.7),
    PaperVision("AoT-MHSA-V", "15M", "aot-mhsa-v-s", 69.5),
)
# The CRATE recipe the vision models were trained with.
VISION_RECIPE: dict[str, Any] = {
    "optimizer": "Lion",
    "lr": 2e-4,
    "weight_decay": 0.05,
    "batch_size": 512,
    "epochs": 200,
}

# -- in-context learning ----------------------------------------------------------------------------------

# Garg et al.'s protocol; the paper reports curves, not a table: AoT is "comparable" to GPT-2 and Llama.
ICL_PROTOCOL: dict[str, int | str] = {"x_dim": 20, "max_points": 40, "metric": "squared error / d"}

# -- efficiency -------------------------------------------------------------------------------------------

# Attention parameters per layer as multiples of d² (weights only), as the paper counts them.
PARAMS_PER_LAYER_D2: dict[str, int] = {
    "AoT-MSSA (tied)": 1,
    "AoT-MSSA (W_O)": 2,
    "AoT-MHSA": 4,
    "GPT-2": 12,
}


def lm_gap(name: str) -> float:
    """The paper's val-loss gap of model ``name`` to GPT-2 Base, relative (0.116 = +11.6 %)."""
    by_name = {m.name: m.val_loss for m in LM_MODELS}
    return (by_name[name] - by_name[LM_BASELINE]) / by_name[LM_BASELINE]
