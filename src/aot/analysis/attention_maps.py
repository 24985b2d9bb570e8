"""The class token's attention over the patches of an image classifier, read through the hook points.

For layer l and head k, ``A_l,k = softmax(q_cls · K^T · scale)`` is row 0 of the pattern that
``blocks.{l}.attn.hook_pattern`` carries (MSSA: q = k = U_kᵀz, the paper's Eq. (7) with the class token as the
query; MHSA / ViT / CRATE: their own projections). It sums to 1 over the class token and the N patches; the
maps drawn here are its patch part, shaped to the patch grid. Any block with attention exposes the hook.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np
import torch
import torch.nn.functional as F

from aot.models.base import AotModel


@torch.no_grad()
def class_token_attention(model: AotModel, images: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    """``(logits, attention)`` for normalised images (B, C, H, W); attention is (L, B, heads, 1 + N): row 0 of
    every layer's pattern, over the class token (index 0) and the N patches in the patch-embedding order."""
    model.eval()
    logits, cache = model.run_with_cache(images, names_filter=lambda name: name.endswith("attn.hook_pattern"))
    layers = sorted(cache, key=lambda name: int(name.split(".")[1]))
    if not layers:
        from aot.errors import AotError

        raise AotError(f"the {model.cfg.block!r} model has no attention hook points to read")
    return logits, torch.stack([cache[name][:, :, 0, :] for name in layers])


def patch_maps(attention: torch.Tensor, grid: int) -> torch.Tensor:
    """(..., 1 + N) → (..., grid, grid): drop the class token's attention to itself, lay the patches out row by
    row (the order of ``patch_embed(x).flatten(2)``)."""
    return attention[..., 1:].reshape(*attention.shape[:-1], grid, grid)


def plot_attention_grid(
    path: Path,
    images: np.ndarray,
    maps: np.ndarray,
    mean_map: np.ndarray,
    titles: list[str],
    layer: int,
    image_size: int,
) -> Path:
    """One row per image: the image, then each head's map of ``layer`` and the mean over layers and heads,
    upsampled (bilinear) to the image and drawn over it. ``images`` (B, C, H, W) uint8, ``maps`` (B, heads, g, g),
    ``mean_map`` (B, g, g)."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    n_images, n_heads = maps.shape[:2]
    columns = n_heads + 2
    fig, axes = plt.subplots(n_images, columns, figsize=(1.5 * columns, 1.5 * n_images + 0.4), squeeze=False)

    def upsample(grid_map: np.ndarray) -> np.ndarray:
        t = torch.from_numpy(grid_map).float()[None, None]
        return F.interpolate(t, size=(image_size, image_size), mode="bilinear", align_corners=False)[0, 0].numpy()

    for row in range(n_images):
        picture = images[row].transpose(1, 2, 0)
        picture = picture[..., 0] if picture.shape[-1] == 1 else picture
        cmap = "gray" if picture.ndim == 2 else None
        axes[row, 0].imshow(picture, cmap=cmap)
        axes[row, 0].set_title(titles[row], fontsize=7)
        panels = [(maps[row, k], f"L{layer} head {k}") for k in range(n_heads)] + [(mean_map[row], "mean of layers")]
        for column, (grid_map, label) in enumerate(panels, start=1):
            axes[row, column].imshow(picture, cmap=cmap)
            axes[row, column].imshow(upsample(grid_map), cmap="inferno", alpha=0.6)
            if row == 0:
                axes[row, column].set_title(label, fontsize=7)
    for ax in axes.flat:
        ax.set_xticks([])
        ax.set_yticks([])
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)
    return path
