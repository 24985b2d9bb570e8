"""Image classifier (ViT layout): patch embedding + class token + learned positions → backbone → linear head.

Follows timm's interface (``forward_features``, ``forward_head``, ``forward_intermediates``,
``reset_classifier``, ``no_weight_decay``) so that it drops into timm-style training code.
"""

from __future__ import annotations

import torch
from torch import nn

from aot.config import ModelConfig
from aot.models.base import AotModel
from aot.models.inputs import check_images
from aot.nn.hooks import HookPoint


class ImageClassifier(AotModel):
    embedding_names = ("patch_embed", "pos_embed", "cls_token")

    def __init__(self, cfg: ModelConfig) -> None:
        super().__init__(cfg)
        self.num_classes = cfg.num_classes
        self.num_patches = (cfg.image_size // cfg.patch_size) ** 2
        self.patch_embed = nn.Conv2d(cfg.in_chans, cfg.n_embd, cfg.patch_size, stride=cfg.patch_size)
        self.cls_token = nn.Parameter(torch.zeros(1, 1, cfg.n_embd))
        # position="none" leaves the tokens without positions (an ablation); "learned" adds a learned table
        self.pos_embed = nn.Parameter(
            torch.zeros(1, self.num_patches + 1, cfg.n_embd), requires_grad=cfg.position != "none"
        )
        self.head: nn.Module = nn.Linear(cfg.n_embd, cfg.num_classes)
        self.hook_embed = HookPoint()
        self._finish()
        nn.init.normal_(self.cls_token, std=cfg.init_std)
        if cfg.position != "none":
            nn.init.normal_(self.pos_embed, std=cfg.init_std)

    def embed(self, images: torch.Tensor) -> torch.Tensor:
        """images (B, C, H, W) → tokens (B, 1 + N, d): class token first."""
        check_images(images, self.cfg.in_chans, self.cfg.image_size)
        patches = self.patch_embed(images).flatten(2).transpose(1, 2)  # (B, N, d)
        cls = self.cls_token.expand(patches.shape[0], -1, -1)
        return self.hook_embed(torch.cat([cls, patches], dim=1) + self.pos_embed)

    def forward_features(self, images: torch.Tensor) -> torch.Tensor:
        return self.backbone(self.embed(images))

    def forward_head(self, features: torch.Tensor, pre_logits: bool = False) -> torch.Tensor:
        pooled = features[:, 0]  # the class token
        return pooled if pre_logits else self.head(pooled)

    def forward(self, images: torch.Tensor) -> torch.Tensor:
        return self.forward_head(self.forward_features(images))

    def forward_intermediates(
        self, images: torch.Tensor, indices: list[int] | None = None
    ) -> tuple[torch.Tensor, list[torch.Tensor]]:
        """Final features and the residual stream after the blocks in ``indices`` (default: all)."""
        features, intermediates = self.backbone(self.embed(images), return_intermediates=True)
        wanted = range(len(intermediates)) if indices is None else indices
        return features, [intermediates[i] for i in wanted]

    def get_classifier(self) -> nn.Module:
        return self.head

    def reset_classifier(self, num_classes: int) -> None:
        """A new, freshly initialised classifier for ``num_classes`` (timm's convention); 0 removes it, and the model
        returns the pooled features (``num_features`` wide). The config keeps its class count then: a ModelConfig
        always describes a classifier."""
        self.num_classes = num_classes
        if num_classes == 0:
            self.head = nn.Identity()
            return
        self.cfg = self.cfg.replace(num_classes=num_classes)
        self.head = nn.Linear(self.cfg.n_embd, num_classes)
