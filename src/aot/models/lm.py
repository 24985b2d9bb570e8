"""Causal language model: token + learned position embeddings → backbone → LM head tied to the embedding.

Loss convention (HuggingFace's): ``model(idx, labels=idx)`` — the labels are the inputs and the model shifts
them, so the loss is the mean cross-entropy of the logits at positions 0..T-2 against the tokens at 1..T-1;
labels equal to -100 are ignored (padding, prompts).
"""

from __future__ import annotations

from collections.abc import Callable

import torch
import torch.nn.functional as F
from torch import nn

from aot.config import ModelConfig
from aot.errors import AotError
from aot.models.base import AotModel
from aot.models.inputs import check_token_ids
from aot.nn.cache import Cache
from aot.nn.hooks import HookPoint


class CausalLM(AotModel):
    embedding_names = ("tok_embed", "pos_embed")

    def __init__(self, cfg: ModelConfig) -> None:
        super().__init__(cfg)
        self.tok_embed = nn.Embedding(cfg.padded_vocab, cfg.n_embd)  # rows past vocab_size: alignment only
        self.pos_embed = nn.Embedding(cfg.block_size, cfg.n_embd) if cfg.position == "learned" else None
        self.drop = nn.Dropout(cfg.dropout)
        self.lm_head = nn.Linear(cfg.n_embd, cfg.padded_vocab, bias=False)
        self.lm_head.weight = self.tok_embed.weight  # tied (GPT-2)
        self.hook_embed = HookPoint()
        self._finish()

    def embed(self, idx: torch.Tensor, offset: int = 0) -> torch.Tensor:
        """idx: (B, T) token ids → (B, T, d); positions start at ``offset`` (the cached length)."""
        check_token_ids(idx, self.cfg.vocab_size)
        T = idx.shape[1]
        if offset + T > self.cfg.block_size:
            raise AotError(
                f"sequence of {offset + T} tokens exceeds block_size={self.cfg.block_size}; "
                "crop the input or build the model with a larger block_size"
            )
        x = self.tok_embed(idx)
        if self.pos_embed is not None:
            x = x + self.pos_embed(torch.arange(offset, offset + T, device=idx.device))
        return self.hook_embed(self.drop(x))

    def forward(
        self, idx: torch.Tensor, labels: torch.Tensor | None = None, cache: Cache | None = None
    ) -> tuple[torch.Tensor, torch.Tensor | None]:
        """Returns (logits (B, T, V), loss or None). ``labels`` (B, T) are the inputs themselves (the model
        shifts them, as HF's causal LMs do): the loss is :func:`shifted_cross_entropy`. With a ``cache`` the
        call appends to it and ``idx`` holds only the new tokens."""
        offset = cache.length if cache is not None else 0
        hidden = self.backbone(self.embed(idx, offset), cache)
        logits = self.lm_head(hidden)
        if self.cfg.padded_vocab != self.cfg.vocab_size:  # the alignment rows are no tokens: cut them off
            logits = logits[..., : self.cfg.vocab_size]
        loss = None if labels is None else shifted_cross_entropy(logits, labels)
        return logits, loss

    @torch.no_grad()
    def generate(
        self,
        idx: torch.Tensor,
        max_new_tokens: int,
        temperature: float = 1.0,
        top_k: int | None = None,
        use_cache: bool = True,
        generator: torch.Generator | None = None,
        top_p: float | None = None,
        on_token: Callable[[torch.Tensor], None] | None = None,
    ) -> torch.Tensor:
        """Sample ``max_new_tokens`` continuations of idx (B, T). ``temperature=0`` is greedy. A prompt longer
        than ``block_size`` keeps its last ``block_size`` tokens (and so does every later window).
        ``on_token(next_ids (B, 1))`` is called as each token is chosen (streaming)."""
        n_prompt = idx.shape[1]
        capacity = min(self.cfg.block_size, n_prompt + max_new_tokens)  # sized once: the buffers never grow
        cache = self.new_cache(capacity) if use_cache else None
        tokens = idx.new_empty(idx.shape[0], n_prompt + max_new_tokens)  # filled in place, no copy per step
        tokens[:, :n_prompt] = idx
        step_input = idx
        for end in range(n_prompt, n_prompt + max_new_tokens):
            if cache is None:
                step_input = tokens[:, max(0, end - self.cfg.block_size) : end]
            elif cache.length + step_input.shape[1] > self.cfg.block_size:  # window full: restart
                cache, step_input = self.new_cache(capacity), tokens[:, max(0, end - self.cfg.block_size) : end]
            logits, _ = self(step_input, cache=cache)
            tokens[:, end : end + 1] = sample_next(logits[:, -1], temperature, top_k, generator, top_p)
            step_input = tokens[:, end : end + 1]
            if on_token is not None:
                on_token(step_input)
        return tokens


IGNORE_INDEX = -100  # labels with this value are not scored (HF's and PyTorch's default)


def shifted_cross_entropy(logits: torch.Tensor, labels: torch.Tensor) -> torch.Tensor:
    """Mean next-token cross-entropy: logits (B, T, V) at positions 0..T-2 against ``labels`` (B, T) at
    1..T-1, skipping labels equal to :data:`IGNORE_INDEX`. Computed in float32 at least (bf16 logits are
    promoted; float64 stays float64)."""
    logits = logits[:, :-1].to(torch.promote_types(logits.dtype, torch.float32))
    return F.cross_entropy(logits.flatten(0, 1), labels[:, 1:].flatten(), ignore_index=IGNORE_INDEX)


def sample_next(
    logits: torch.Tensor,
    temperature: float,
    top_k: int | None,
    generator: torch.Generator | None = None,
    top_p: float | None = None,
) -> torch.Tensor:
    """logits (B, V) → next token ids (B, 1). ``top_k`` keeps the k most likely tokens; ``top_p`` (nucleus
    sampling) keeps the fewest most likely tokens whose probabilities sum to at least p (always the first)."""
    if temperature == 0:
        return logits.argmax(dim=-1, keepdim=True)
    logits = logits / temperature
    if top_k is not None:
        kth = torch.topk(logits, min(top_k, logits.shape[-1])).values[:, -1:]
        logits = logits.masked_fill(logits < kth, float("-inf"))
    if top_p is not None and top_p < 1.0:
        sorted_logits, order = torch.sort(logits, dim=-1, descending=True)
        probs = torch.softmax(sorted_logits.float(), dim=-1)
        drop_sorted = probs.cumsum(dim=-1) - probs >= top_p  # the tokens ranked above already reach p
        logits = logits.masked_fill(drop_sorted.scatter(-1, order, drop_sorted), float("-inf"))
    return torch.multinomial(torch.softmax(logits.float(), dim=-1), 1, generator=generator)
