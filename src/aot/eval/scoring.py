"""The one scorer every zero-shot protocol, the HuggingFace wrapper's tests and the lm-evaluation-harness adapter
use: the log-likelihood of a continuation given a context,

    log p(c | x) = Σ_{i=1..m} log softmax(f(x ⊕ c_{<i}))[c_i]          (the paper's §4 zero-shot scoring)

computed from the model's logits (``model(idx)`` returns logits or a tuple whose first item is the logits; the
loss convention of ``forward`` plays no part).

Truncation, said plainly: the model sees at most ``block_size`` tokens. For a request (context x, continuation c)
the input is the *last* ``block_size`` tokens of ``x ⊕ c``; tokens of the context beyond that are dropped from
the left, so the continuation is always scored whole, on as much of the context as fits. A continuation longer
than ``block_size - 1`` tokens cannot be scored in one window and is refused (split it, as
:func:`rolling_requests` does for perplexity). The position after the continuation is computed too, so each
request also reports the greedy next token after the continuation (the whole-word check of LAMBADA uses it).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

import torch
import torch.nn.functional as F
from torch import nn

from aot.errors import AotError

Request = tuple[Sequence[int], Sequence[int]]  # (context token ids, continuation token ids)


@dataclass(frozen=True)
class Scored:
    """The score of one continuation: per-token log-probabilities, whether each token is the argmax given
    everything before it, and the argmax after the last token (``-1`` if that position did not fit)."""

    token_logprobs: tuple[float, ...]
    token_greedy: tuple[bool, ...]
    next_token: int

    @property
    def logprob(self) -> float:
        return float(sum(self.token_logprobs))

    @property
    def is_greedy(self) -> bool:
        """Every continuation token is the argmax: greedy decoding from the context reproduces it."""
        return all(self.token_greedy)

    @property
    def n_tokens(self) -> int:
        return len(self.token_logprobs)


#: what a protocol calls to score requests (the model's scorer, or a mock in tests)
Scorer = Callable[[Sequence[Request]], list[Scored]]


def model_logits(model: nn.Module, idx: torch.Tensor, **kwargs: Any) -> torch.Tensor:
    """Logits (B, T, V) of ``model(idx, **kwargs)`` whatever the return convention (tensor, tuple, ``.logits``)."""
    out = model(idx, **kwargs)
    if isinstance(out, torch.Tensor):
        return out
    if isinstance(out, tuple | list):
        return out[0]
    return out.logits


#: how a request becomes the model's input: ``(context, continuation, block_size)`` → (the ids fed, the index in
#: them of the continuation's first token; the continuation's tokens are predicted at the positions from there on)
Window = Callable[[Sequence[int], Sequence[int], int], tuple[list[int], int]]


def _check_request(context: Sequence[int], continuation: Sequence[int], longest: int, block_size: int) -> None:
    """One-line errors for a request no window can score: an empty continuation or context, or a continuation of
    more than ``longest`` tokens."""
    m = len(continuation)
    if m == 0:
        raise AotError("cannot score an empty continuation; give at least one token")
    if not context:
        raise AotError("cannot score a continuation without context; give at least one context token")
    if m > longest:
        limit = " (at most block_size - 1); split it into shorter pieces" if longest < block_size else ""
        raise AotError(f"a continuation of {m} tokens does not fit the model's context of {block_size} tokens{limit}")


def _window(context: Sequence[int], continuation: Sequence[int], block_size: int) -> tuple[list[int], int]:
    """The ids fed to the model (at most ``block_size``: the last ones of ``context ⊕ continuation``) and the index
    of the first continuation token in it (see the module docstring)."""
    _check_request(context, continuation, block_size - 1, block_size)
    m = len(continuation)
    ids = list(context[-(block_size - m) :]) + list(continuation)
    return ids, len(ids) - m


def lm_eval_window(context: Sequence[int], continuation: Sequence[int], block_size: int) -> tuple[list[int], int]:
    """lm-eval's HF model's input for a request (``HFLM._loglikelihood_tokens``):
    ``(context ⊕ continuation)[-(block_size + 1):][:-1]``, a continuation of up to ``block_size`` tokens on as much
    context as fits before it; its last token is predicted at the input's last position, so no position is left
    for the token after it."""
    _check_request(context, continuation, block_size, block_size)
    ids = [*context, *continuation][-(block_size + 1) :][:-1]
    return ids, len(ids) - len(continuation) + 1


@torch.no_grad()
def score_requests(
    model: nn.Module,
    requests: Sequence[Request],
    block_size: int,
    batch_size: int = 16,
    device: str = "cpu",
    progress: str | None = None,
    window: Window = _window,
) -> list[Scored]:
    """Score each (context, continuation) pair on the input ``window`` makes of it (default: the module docstring's
    truncation; :func:`lm_eval_window`: lm-eval's). Rows of a batch are right-padded (causal attention: padding after
    a row's tokens cannot change them). ``Scored.next_token`` is the argmax after the continuation where the input
    reaches past it, else -1. ``progress``: a label for a tqdm bar over the batches (none if ``None``)."""
    from tqdm.auto import tqdm

    cuts = [window(*request, block_size) for request in requests]
    order = sorted(range(len(requests)), key=lambda i: -len(cuts[i][0]))
    scored: dict[int, Scored] = {}
    starts = range(0, len(order), batch_size)
    for first in tqdm(starts, desc=progress, unit="batch", disable=progress is None, leave=False):
        rows = order[first : first + batch_size]
        batch = torch.zeros(len(rows), len(cuts[rows[0]][0]), dtype=torch.long)
        for r, i in enumerate(rows):
            batch[r, : len(cuts[i][0])] = torch.tensor(cuts[i][0])
        logits = model_logits(model, batch.to(device))
        logprobs = F.log_softmax(logits.to(torch.promote_types(logits.dtype, torch.float32)), dim=-1)
        for r, i in enumerate(rows):
            ids, start = cuts[i]
            targets = torch.tensor(list(requests[i][1]), device=logprobs.device)
            # the continuation's tokens are predicted at positions start - 1, ..., start - 2 + m; small, to the CPU
            predicted = logprobs[r, start - 1 : start - 1 + len(targets)]
            token_lp = predicted.gather(-1, targets[:, None])[:, 0].cpu()
            greedy = (predicted.argmax(-1) == targets).cpu()
            after = start - 1 + len(targets)  # the position after the continuation, where it fits
            next_token = int(logprobs[r, after].argmax()) if after < len(ids) else -1
            scored[i] = Scored(tuple(float(v) for v in token_lp), tuple(bool(g) for g in greedy), next_token)
    return [scored[i] for i in range(len(requests))]


def model_scorer(
    model: nn.Module,
    block_size: int,
    batch_size: int = 16,
    device: str = "cpu",
    progress: str | None = None,
    window: Window = _window,
) -> Scorer:
    """``score_requests`` bound to a model: the :data:`Scorer` the protocols take."""
    model.eval()
    return lambda requests: score_requests(model, requests, block_size, batch_size, device, progress, window)


def rolling_requests(ids: Sequence[int], block_size: int, stride: int | None = None) -> list[Request]:
    """Cut a document into requests that score every token but the first exactly once: pieces of ``stride``
    tokens (default ``block_size // 2``), each conditioned on the tokens before it (truncated from the left by
    the scorer, so every scored token sees at least ``block_size - stride`` tokens of context once the
    document is that long). The first token has no context and is not scored."""
    stride = stride or max(1, block_size // 2)
    if not 1 <= stride <= block_size - 1:
        raise AotError(f"stride {stride} must be in [1, block_size - 1 = {block_size - 1}]")
    ids = list(ids)
    return [(ids[:start], ids[start : start + stride]) for start in range(1, len(ids), stride)]
