"""Where a model's attention goes on multi-query associative recall (MQAR; Zoology, Arora et al. 2023, arXiv
2312.04927; the layout of :mod:`aot.data.mqar`: pairs ``k_1 v_1 … k_n v_n`` at positions 0 … 2n − 1, then queries).

A query at position t (``targets[t] != IGNORE``) holds a key k_i asked again; its matching key sits at p = 2(i − 1)
in the pairs part and the value to answer at p + 1. A causal model solves MQAR when some layer's query lands on
p + 1 and copies what it reads there: Zoology's recall, and the second step of Olsson et al.'s (2022) induction
mechanism, whose first step is a previous-token head moving k_i forward to p + 1 so that a query can match it there.
The scores of every head, as means of its attention pattern A (rows: queries, columns: keys):

* ``key``: A[t, p] over the queries, the weight on the matching key itself;
* ``value``: A[t, p + 1] over the queries, the weight on the value to copy (the recall target);
* ``self``: A[t, t] over the queries, the weight the query keeps on itself;
* ``previous_token``: A[t, t − 1] over every position t ≥ 1 of the sequences (the first step of the mechanism);
* ``value_to_key``: A[p + 1, p] over the pairs, the weight each value puts on its own key: that first step where
  recall needs it (a head may move keys forward there and nowhere else, which ``previous_token`` dilutes).

Why these: with Q = K (MSSA) a query scores the matching key k_i as it scores itself (the same token), so ``key``
is easy to reach, while p + 1 holds an unrelated token v_i whose score is bounded by the self-score; reaching
``value`` needs a previous-token step first (docs/math.md, "What MSSA can and cannot express for recall").

Blocks without attention patterns (``linear-attn``: its kernelised attention has ``hook_z`` only; ``mamba``: no
attention hooks) get ``None`` for every score.
"""

from __future__ import annotations

import torch

from aot.analysis.heads import model_blocks
from aot.data.mqar import IGNORE
from aot.errors import AotError
from aot.nn.hooks import HookedModule

#: the per-head scores, in the order they are reported
SCORES = ("key", "value", "self", "previous_token", "value_to_key")


def pattern_names(model: HookedModule) -> list[str] | None:
    """``blocks.{l}.attn.hook_pattern`` of every layer, or ``None`` when a block has no attention pattern."""
    names = [f"blocks.{layer}.attn.hook_pattern" for layer in range(len(model_blocks(model)))]
    points = model.hook_points()
    return names if all(name in points for name in names) else None


def answer_positions(
    tokens: torch.Tensor, targets: torch.Tensor, n_pairs: int
) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """The queries of MQAR sequences (B, T): their rows b, positions t and matching keys' positions p (each (Q,)),
    p the even position in the pairs part [0, 2·n_pairs) holding tokens[b, t]. One line when a query's token is no
    key of its pairs or the token after its key is not its target (the sequences are not MQAR of ``n_pairs``)."""
    rows, at = torch.nonzero(targets != IGNORE, as_tuple=True)
    keys = tokens[:, 0 : 2 * n_pairs : 2]  # (B, n)
    match = keys[rows] == tokens[rows, at][:, None]  # (Q, n)
    found = match.any(dim=1)
    p = 2 * match.int().argmax(dim=1)
    bad = ~found | (tokens[rows, (p + 1).clamp_max(tokens.shape[1] - 1)] != targets[rows, at]) | (p + 1 >= at)
    if bool(bad.any()):
        i = int(bad.nonzero()[0])
        raise AotError(
            f"not MQAR sequences of {n_pairs} pairs: the query at row {int(rows[i])}, position {int(at[i])} "
            f"(token {int(tokens[rows[i], at[i]])}) has no key before it followed by its answer "
            f"{int(targets[rows[i], at[i]])}; give the sequences and n_pairs of one MQAR config"
        )
    return rows, at, p


def score_sums(
    pattern: torch.Tensor, tokens: torch.Tensor, targets: torch.Tensor, n_pairs: int
) -> tuple[dict[str, torch.Tensor], dict[str, int]]:
    """The sums over the queries (``key``, ``value``, ``self``), over the positions t ≥ 1 (``previous_token``) and
    over the pairs' values (``value_to_key``) of every head's weights, (H,) each, and how many terms each sum has:
    patterns (B, H, T, T)."""
    rows, at, p = answer_positions(tokens.to(pattern.device), targets.to(pattern.device), n_pairs)
    per_query = pattern[rows, :, at]  # (Q, H, T): each query's row of every head
    t = torch.arange(1, pattern.shape[-1], device=pattern.device)
    values = torch.arange(1, 2 * n_pairs, 2, device=pattern.device)  # the pairs' values; their keys one before
    q = torch.arange(len(p), device=pattern.device)
    sums = {
        "key": per_query[q, :, p].sum(0),
        "value": per_query[q, :, p + 1].sum(0),
        "self": per_query[q, :, at].sum(0),
        "previous_token": pattern[:, :, t, t - 1].sum(dim=(0, 2)),
        "value_to_key": pattern[:, :, values, values - 1].sum(dim=(0, 2)),
    }
    counts = {"key": len(p), "value": len(p), "self": len(p), "previous_token": pattern.shape[0] * len(t)}
    counts["value_to_key"] = pattern.shape[0] * n_pairs
    return sums, counts


def recall_attention_scores(
    pattern: torch.Tensor, tokens: torch.Tensor, targets: torch.Tensor, n_pairs: int
) -> dict[str, torch.Tensor]:
    """The five scores (see the module docstring) of every head: attention patterns (B, H, T, T) of the MQAR
    sequences ``tokens`` / ``targets`` (B, T) with ``n_pairs`` pairs → (H,) each."""
    sums, counts = score_sums(pattern, tokens, targets, n_pairs)
    return {name: sums[name] / counts[name] for name in SCORES}


@torch.no_grad()
def recall_head_scores(
    model: HookedModule, tokens: torch.Tensor, targets: torch.Tensor, n_pairs: int, batch_size: int = 64
) -> dict[str, torch.Tensor | None]:
    """The five scores of every head of ``model`` on MQAR sequences (N, T), read from ``blocks.{l}.attn.hook_pattern``
    of ``model(tokens)`` in batches of ``batch_size``: (L, H) float64 each, means over all the queries (and positions)
    of the sequences; ``None`` each for a model whose blocks have no attention pattern."""
    names = pattern_names(model)
    if names is None:
        return dict.fromkeys(SCORES)
    device = next(model.parameters()).device
    totals = {score: torch.zeros(len(names), 0, dtype=torch.float64) for score in SCORES}
    counts = dict.fromkeys(SCORES, 0)
    for start in range(0, len(tokens), batch_size):
        chunk, answers = tokens[start : start + batch_size], targets[start : start + batch_size]
        _, cache = model.run_with_cache(chunk.to(device), names_filter=names)
        layers = [score_sums(cache[name].double(), chunk, answers, n_pairs) for name in names]
        for score in SCORES:
            batch = torch.stack([sums[score].cpu() for sums, _ in layers])  # (L, H)
            totals[score] = batch if totals[score].numel() == 0 else totals[score] + batch
            counts[score] += layers[0][1][score]
    return {score: totals[score] / counts[score] for score in SCORES}
