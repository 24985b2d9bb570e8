"""Hand-set weights on 2-pair MQAR instances, shared by the tests that read them: tests/nn/test_recall_construction.py
(what attention can and cannot express for recall; docs/math.md, "What MSSA can and cannot express for recall") and
tests/analysis/test_recall_attention.py (where a model that solves them puts its attention).

Every 2-pair instance of a small vocabulary: keys 1-3, values 4-7, filler 0; ``k_1 v_1 k_2 v_2`` then the two keys
asked again at positions 4 and 6 (the layout :mod:`aot.data.mqar` draws for ``vocab_size=8, seq_len=8, n_pairs=2``).
"""

from __future__ import annotations

import itertools

import torch

from aot.config import ModelConfig
from aot.models import build_model

V, T = 8, 8
KEYS, VALUES = (1, 2, 3), (4, 5, 6, 7)


def instances() -> list[tuple[list[int], dict[int, int]]]:
    """Every 2-pair sequence (tokens, {query position: answer}): 6 key orders x 12 value pairs x 2 query orders."""
    out = []
    for (k1, k2), (v1, v2), flip in itertools.product(
        itertools.permutations(KEYS, 2), itertools.permutations(VALUES, 2), (False, True)
    ):
        first, second = ((k2, v2), (k1, v1)) if flip else ((k1, v1), (k2, v2))
        out.append(([k1, v1, k2, v2, first[0], 0, second[0], 0], {4: first[1], 6: second[1]}))
    return out


def plain(block: str, **fields: object) -> ModelConfig:
    """A one-layer LM config of the instances' vocabulary and length without norms, biases or score scaling."""
    base = dict(
        block=block, n_layer=1, n_head=1, vocab_size=V, block_size=T, norm="none", final_norm=False, bias=False,
        score_scale=False, task="lm",
    )  # fmt: skip
    return ModelConfig.from_dict({**base, **fields})


def induction_mhsa() -> torch.nn.Module:
    """A 2-layer AoT-MHSA with learned positions (W_Q ≠ W_K), weights set by hand, that answers every instance (float64,
    eval mode): layer 0 is a previous-token head writing each position's predecessor into the stream, layer 1 an
    induction head (Olsson et al. 2022) matching the query's token against those predecessors, so a query lands on
    the value after its key and copies it into the logits. Zeroing layer 0's ``out_proj`` removes the
    previous-token step."""
    # stream: TOK one-hot [0, 8), POS one-hot [8, 16), PREV one-hot [16, 24) written by the first layer
    tok, pos, prev = 0, V, V + T
    model = build_model(plain("aot-mhsa", n_layer=2, n_embd=24, position="learned")).double().eval()
    d, beta, gamma, gain = 24, 30.0, 30.0, 3.0
    with torch.no_grad():
        for p in model.parameters():
            p.zero_()
        model.tok_embed.weight[:, tok : tok + V] = torch.eye(V)  # the LM head is tied: logits = the TOK part
        model.pos_embed.weight[:, pos : pos + T] = torch.eye(T)
        first, second = (block.attn for block in model.backbone.blocks)
        wq, wk, wv = first.qkv_proj.weight.view(3, d, d)  # rows: the q, k, v coordinates; columns: the stream
        for i in range(1, T):  # previous-token head: position i's query is position i-1's key
            wq[i - 1, pos + i] = beta
        for j in range(T):
            wk[j, pos + j] = 1.0
        for x in range(V):
            wv[x, tok + x] = 1.0  # the value is the token ...
        first.out_proj.weight[prev : prev + V, :V] = torch.eye(V)  # ... written into PREV
        wq, wk, wv = second.qkv_proj.weight.view(3, d, d)
        for x in range(V):  # induction head: the query's token against each key's predecessor
            wq[x, tok + x] = gamma
            wk[x, prev + x] = 1.0
            wv[x, tok + x] = 1.0
        wq[V, pos : pos + T] = 1.0  # a constant query coordinate ...
        wk[V, pos + 0] = -100.0  # ... keeps position 0 (whose "predecessor" is itself) out
        second.out_proj.weight[tok : tok + V, :V] = gain * torch.eye(V)  # the matched token, into the logits
    return model
