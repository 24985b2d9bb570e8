"""Named model sizes: CPU-scale presets that train in minutes here, and the paper's scale.

The paper does not publish depth or width. The paper-scale presets keep GPT-2's width (768; 1024 for
Medium, as GPT-2 Medium) and choose the depth whose parameter count lands nearest the paper's figure:
attention-only layers are cheap (MHSA 4d², untied MSSA 2d², tied MSSA d²), so they need many more of
them. ``aot models`` prints every preset with its exact count.

CPU presets are matched on non-embedding parameters at d = 256 (about 4.7 M):
GPT-2 6 layers (12d² each), AoT-MHSA 18 (4d²), AoT-MSSA untied 36 (2d²), tied 72 (d²), CRATE 24 (3d²; as in the
CRATE code, and with the ISTA step as a residual increment).

How a name reads (:data:`NAMING`, which ``aot models`` prints under its table): ``BLOCK[-VARIANT]-KIND-SIZE[-wide]``.
Renamed presets keep their old names for one release (:data:`PRESET_RENAMES`).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from aot.config import ModelConfig
from aot.errors import ConfigError, renamed

GPT2_VOCAB = 50257


@dataclass(frozen=True)
class Preset:
    name: str
    fields: dict[str, Any]
    note: str
    paper_params: str = ""  # the parameter count the paper reports, where it reports one

    def config(self, **overrides: Any) -> ModelConfig:
        return ModelConfig.from_dict({**self.fields, **overrides})


def _lm(block: str, n_layer: int, n_embd: int, n_head: int, **extra: Any) -> dict[str, Any]:
    return dict(task="lm", block=block, n_layer=n_layer, n_embd=n_embd, n_head=n_head, **extra)


_PAPER_LM = dict(vocab_size=GPT2_VOCAB, block_size=1024)
_GPT2 = dict(activation="gelu_tanh")  # GPT-2's MLP uses the tanh approximation of GELU
_CPU_LM = dict(vocab_size=256, block_size=256)
_IMAGENET = dict(task="image", image_size=224, patch_size=16, in_chans=3, num_classes=1000)
# patch 7: 16 patches + the class token keep a CPU epoch of Fashion-MNIST near 1.5-3 min (patch 4: 49 patches, 3x)
_FASHION = dict(task="image", image_size=28, patch_size=7, in_chans=1, num_classes=10)
# what makes the attention-only image models train (the ablations of benchmarks/vision): a LayerNorm inside each
# layer and a learned step size eta per channel starting at 0.1; without the norm they stay near chance
_AOT_V_CPU = dict(norm="layernorm", residual_scale="channel", residual_scale_init=0.1)
_ICL = dict(task="icl", n_dims=20, n_points=41)
_ICL_CPU = dict(task="icl", n_dims=10, n_points=21)

#: how a preset's name reads, one line per part (``aot models`` prints it under the table)
NAMING = (
    "names read BLOCK[-VARIANT]-KIND-SIZE[-wide]:",
    "  BLOCK    aot-mssa, aot-mhsa, gpt2, vit, crate, llama, linear-attn, mamba",
    "  VARIANT  tied (MSSA's output tied to its input projection, the paper's formula); res, alpha (CRATE's)",
    "  KIND     l a language model, v a vision model (the paper's AoT-MSSA-L / -V), icl in-context regression;",
    "           gpt2-* (language) and vit-* (vision) leave it out",
    "  SIZE     base, medium (GPT-2's), s, b (ViT-S/16, ViT-B/16), cpu (trains in minutes on a CPU)",
    "  -wide    a CPU model with the same parameters spent on width over depth (fewer, wider layers; rotary, init",
    "           std 0.05)",
)


class PresetTable(dict[str, Preset]):
    """The presets by name; an old name of :data:`PRESET_RENAMES` still finds its preset (``PRESETS[old]``), said
    once, though ``in`` and iteration see the new names only."""

    def __missing__(self, name: str) -> Preset:
        if name not in PRESET_RENAMES:
            raise KeyError(name)
        return self[renamed(name, PRESET_RENAMES, RENAME_WHY, stacklevel=2)]


_BY_NAME: dict[str, Preset] = {
    p.name: p
    for p in [
        # -- language, the paper's scale (OpenWebText, GPT-2 BPE) --------------------------------------
        Preset("gpt2-base", _lm("transformer", 12, 768, 12, **_GPT2, **_PAPER_LM), "GPT-2 small", "124M"),
        Preset(
            "aot-mhsa-l-base",
            _lm("aot-mhsa", 35, 768, 12, **_PAPER_LM),
            "35 MHSA layers (4d² each) land on 122M",
            "122M",
        ),
        Preset(
            "aot-mssa-l-base",
            _lm("aot-mssa", 53, 768, 12, tied_output=False, **_PAPER_LM),
            "53 MSSA layers with a learned W_O (2d² each) land on 102M",
            "102M",
        ),
        Preset(
            "aot-mssa-l-medium",
            _lm("aot-mssa", 62, 1024, 16, tied_output=False, **_PAPER_LM),
            "GPT-2 Medium's width 1024; 62 MSSA layers land on 182M",
            "182M",
        ),
        # -- language, CPU scale (d = 256, ~4.7M non-embedding parameters each) -------------------------
        Preset("gpt2-cpu", _lm("transformer", 6, 256, 4, **_GPT2, **_CPU_LM), "GPT-2 block, 6 layers"),
        Preset("aot-mhsa-l-cpu", _lm("aot-mhsa", 18, 256, 4, **_CPU_LM), "AoT-MHSA, 18 layers"),
        Preset(
            "aot-mssa-l-cpu",
            _lm("aot-mssa", 36, 256, 4, tied_output=False, **_CPU_LM),
            "AoT-MSSA with learned W_O, 36 layers",
        ),
        Preset(
            "aot-mssa-tied-l-cpu",
            _lm("aot-mssa", 72, 256, 4, tied_output=True, **_CPU_LM),
            "AoT-MSSA as in the paper's formula (tied output), 72 layers",
        ),
        Preset(
            "aot-mssa-tied-l-cpu-wide",
            _lm("aot-mssa", 18, 512, 8, tied_output=True, position="rope", init_std=0.05, **_CPU_LM),
            "the tied operator that trains: width 512 over depth, rotary, init std 0.05",  # benchmarks/lm tied-recipe
        ),
        Preset(
            "aot-mhsa-l-cpu-wide",
            _lm("aot-mhsa", 8, 384, 6, position="rope", init_std=0.05, **_CPU_LM),
            "AoT-MHSA nearest GPT-2 here: width 384 over depth, rotary, init std 0.05",  # benchmarks/lm
        ),
        Preset(
            "aot-mssa-l-cpu-wide",
            _lm("aot-mssa", 16, 384, 6, tied_output=False, position="rope", init_std=0.05, **_CPU_LM),
            "AoT-MSSA (W_O), width 384 over depth, rotary, init std 0.05",  # why: benchmarks/lm, tied-recipe
        ),
        Preset("crate-l-cpu", _lm("crate", 24, 256, 4, tied_output=False, **_CPU_LM), "CRATE, 24 layers"),
        Preset(
            "crate-res-l-cpu",
            _lm("crate", 24, 256, 4, tied_output=False, ista_residual=True, **_CPU_LM),
            "CRATE, 24 layers, ISTA step added to the stream",  # why: benchmarks/lm/crate_diagnosis.md
        ),
        Preset(
            "crate-res-l-cpu-wide",
            _lm("crate", 11, 384, 6, tied_output=False, ista_residual=True, position="rope", init_std=0.05, **_CPU_LM),
            "CRATE-res that learns: width 384 over depth, rotary, init std 0.05 (11 blocks of 3d²: +3 % params)",
        ),
        Preset(
            "crate-alpha-l-cpu",
            _lm("crate", 7, 256, 4, tied_output=False, ista_expand=4, position="rope", **_CPU_LM),
            # the benchmark's rows at the default init use this preset: it keeps 0.02 (0.05 is better, via --set)
            "CRATE-α: overcomplete 4d dictionary, rotary (7 blocks of 10d²: -3 % params)",
        ),
        Preset("llama-l-cpu", _lm("llama", 6, 256, 4, bias=False, **_CPU_LM), "Llama block, 6 layers"),
        # -- vision, the paper's scale (ImageNet-1K, 224², patch 16) -------------------------------------
        Preset("vit-s", dict(block="transformer", n_layer=12, n_embd=384, n_head=6, **_IMAGENET), "ViT-S/16", "22M"),
        Preset(
            "aot-mssa-v-s",
            dict(block="aot-mssa", n_layer=17, n_embd=768, n_head=12, tied_output=False, norm="none", **_IMAGENET),
            "no LayerNorm inside (as the paper's vision models); width 768, 17 layers land on 22M",
            "22M",
        ),
        Preset(
            "aot-mhsa-v-s",
            dict(block="aot-mhsa", n_layer=24, n_embd=384, n_head=6, norm="none", **_IMAGENET),
            "no LayerNorm inside; ViT-S width 384, 24 layers land on 15M",
            "15M",
        ),
        Preset(
            "crate-v-s",
            dict(block="crate", n_layer=12, n_embd=576, n_head=12, tied_output=False, **_IMAGENET),
            "CRATE-S/16",
            "13.1M",
        ),
        Preset(
            "crate-v-b",
            dict(block="crate", n_layer=12, n_embd=768, n_head=12, tied_output=False, **_IMAGENET),
            "CRATE-B/16",
            "22.8M",
        ),
        # -- vision, CPU scale (Fashion-MNIST 28², patch 7) ----------------------------------------------
        Preset("vit-cpu", dict(block="transformer", n_layer=4, n_embd=128, n_head=4, **_FASHION), "ViT, 4 layers"),
        Preset(
            "aot-mssa-v-cpu",
            dict(block="aot-mssa", n_layer=6, n_embd=256, n_head=4, tied_output=False, **_AOT_V_CPU, **_FASHION),
            "AoT-MSSA-V, 6 layers x 256 (beat 24 x 128), LayerNorm and eta per channel (benchmarks/vision)",
        ),
        Preset(
            "aot-mhsa-v-cpu",
            dict(block="aot-mhsa", n_layer=12, n_embd=128, n_head=4, **_AOT_V_CPU, **_FASHION),
            "AoT-MHSA-V, 12 layers, LayerNorm and eta per channel (benchmarks/vision)",
        ),
        Preset(
            "crate-v-cpu",
            dict(block="crate", n_layer=16, n_embd=128, n_head=4, tied_output=False, **_FASHION),
            "CRATE, 16 layers",
        ),
        # -- in-context regression (Garg et al.: d = 256, 8 heads, x in R^20, up to 41 points) -------------
        Preset(
            "gpt2-icl",
            dict(block="transformer", n_layer=12, n_embd=256, n_head=8, **_GPT2, **_ICL),
            "Garg et al.'s GPT-2, 12 layers",
        ),
        Preset(
            "llama-icl",
            dict(block="llama", n_layer=12, n_embd=256, n_head=8, bias=False, **_ICL),
            "Llama block (RoPE, SwiGLU, RMSNorm), 12 layers",
        ),
        Preset(
            "aot-mhsa-icl",
            dict(block="aot-mhsa", n_layer=36, n_embd=256, n_head=8, **_ICL),
            "AoT-MHSA at GPT-2's parameter count, 36 layers",
        ),
        Preset(
            "aot-mssa-icl",
            dict(block="aot-mssa", n_layer=72, n_embd=256, n_head=8, tied_output=False, **_ICL),
            "AoT-MSSA (learned W_O) at GPT-2's parameter count, 72 layers",
        ),
        Preset(
            "linear-attn-icl",
            dict(block="linear-attn", n_layer=36, n_embd=256, n_head=8, **_ICL),
            "causal linear attention (elu+1) at GPT-2's parameter count, 36 layers",
        ),
        Preset(
            "mamba-icl",
            dict(block="mamba", n_layer=22, n_embd=256, n_head=8, **_ICL),
            "Mamba (S6, needs aot[mamba]) at GPT-2's parameter count, 22 layers",
        ),
        # -- in-context regression, CPU scale (width 128, ~0.4M parameters each, x in R^10, 21 points) --------
        Preset(
            "gpt2-icl-cpu",
            dict(block="transformer", n_layer=2, n_embd=128, n_head=4, **_GPT2, **_ICL_CPU),
            "GPT-2, 2 layers",
        ),
        Preset(
            "llama-icl-cpu",
            dict(block="llama", n_layer=2, n_embd=128, n_head=4, bias=False, **_ICL_CPU),
            "Llama block, 2 layers",
        ),
        Preset("aot-mhsa-icl-cpu", dict(block="aot-mhsa", n_layer=6, n_embd=128, n_head=4, **_ICL_CPU), "AoT-MHSA, 6"),
        Preset(
            "aot-mssa-icl-cpu",
            dict(block="aot-mssa", n_layer=12, n_embd=128, n_head=4, tied_output=False, **_ICL_CPU),
            "AoT-MSSA with learned W_O, 12 layers",
        ),
        Preset(
            "linear-attn-icl-cpu",
            dict(block="linear-attn", n_layer=6, n_embd=128, n_head=4, **_ICL_CPU),
            "causal linear attention, 6 layers",
        ),
        Preset(
            "mamba-icl-cpu",
            dict(block="mamba", n_layer=3, n_embd=128, n_head=4, **_ICL_CPU),
            "Mamba, 3 layers (12 % fewer parameters: 4 would be 17 % more)",
        ),
    ]
}
PRESETS: PresetTable = PresetTable(_BY_NAME)

#: old model preset name -> its new one; the old names still resolve, with one line, and go in the next release
PRESET_RENAMES: dict[str, str] = {
    "aot-mssa-w-cpu": "aot-mssa-l-cpu-wide",
    "aot-mhsa-w-cpu": "aot-mhsa-l-cpu-wide",
    "aot-mssa-tied-w-cpu": "aot-mssa-tied-l-cpu-wide",
    "crate-res-w-cpu": "crate-res-l-cpu-wide",
}
#: why the new names read as they do, for the deprecation line
RENAME_WHY = "model presets: -l- a language model, -wide the width-over-depth CPU variant"


def get_preset(name: str) -> Preset:
    """The model preset ``name``; an old name of :data:`PRESET_RENAMES` gives the renamed preset, said once."""
    name = renamed(name, PRESET_RENAMES, RENAME_WHY, stacklevel=2)
    if name not in PRESETS:
        import difflib

        close = difflib.get_close_matches(name, PRESETS, n=1)
        hint = f"did you mean {close[0]!r}? " if close else ""
        raise ConfigError(f"unknown preset {name!r}; {hint}run `aot models` to list them")
    return PRESETS[name]


def preset_config(name: str, **overrides: Any) -> ModelConfig:
    """The config of preset ``name`` with some fields overridden."""
    return get_preset(name).config(**overrides)
