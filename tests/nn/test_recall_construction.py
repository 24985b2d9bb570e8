"""What attention can and cannot express for recall (docs/math.md, "What MSSA can and cannot express for recall"),
by computation on the real modules, on every 2-pair MQAR instance of a small vocabulary: keys 1-3, values 4-7,
filler 0; ``k_1 v_1 k_2 v_2`` then the two keys asked again at positions 4 and 6.

- weights set by hand make a 2-layer AoT-MHSA with learned positions (W_Q ≠ W_K) answer every instance: a
  previous-token head, then a head matching the query against the copied predecessor (induction);
- one attention layer without positions, MSSA or MHSA, whatever its weights, gives the same output at a query when the
  values of the two pairs are swapped (its output is a function of the token and of the set of earlier tokens), so
  it cannot answer both instances;
- weights set by hand make one AoT-MSSA layer (W_O, Q = K = V, no positions) with a token shift answer every instance.
"""

from __future__ import annotations

import itertools

import pytest
import torch

from aot.config import ModelConfig
from aot.data.mqar import MQARConfig
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


def test_the_instances_are_mqar_sequences_of_that_config() -> None:
    cfg = MQARConfig(vocab_size=V, seq_len=T, n_pairs=2, random_fill=False)  # the layout aot.data.mqar draws
    assert (cfg.vocab_size // 2, cfg.slots, cfg.queries) == (4, 2, 2)
    assert len(instances()) == 144


def answers(model: torch.nn.Module) -> float:
    """The share of queries whose argmax is the right value, over every instance."""
    right = total = 0
    for tokens, asked in instances():
        with torch.no_grad():
            logits = model(torch.tensor([tokens]))[0][0]
        for t, value in asked.items():
            right += int(logits[t].argmax()) == value
            total += 1
    return right / total


def plain(block: str, **fields: object) -> ModelConfig:
    base = dict(
        block=block, n_layer=1, n_head=1, vocab_size=V, block_size=T, norm="none", final_norm=False, bias=False,
        attn_scale=False, task="lm",
    )  # fmt: skip
    return ModelConfig(**{**base, **fields})


def test_two_hand_set_mhsa_layers_with_positions_answer_every_instance() -> None:
    # stream: TOK one-hot [0, 8), POS one-hot [8, 16), PREV one-hot [16, 24) written by layer 1
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
    assert answers(model) == 1.0
    with torch.no_grad():
        first.out_proj.weight.zero_()  # without the previous-token step the second head has nothing to match
    assert answers(model) < 0.5


def swapped_values(tokens: list[int]) -> list[int]:
    """The same sequence with the values of the two pairs exchanged: every query's answer changes."""
    return [tokens[0], tokens[3], tokens[2], tokens[1], *tokens[4:]]


@pytest.mark.parametrize("block", ["aot-mssa", "aot-mhsa"])
@pytest.mark.parametrize("seed", [0, 1, 2])
def test_one_layer_without_positions_answers_a_sequence_and_its_value_swap_alike(block: str, seed: int) -> None:
    torch.manual_seed(seed)
    cfg = plain(block, n_embd=16, n_head=2, position="none", norm="layernorm", bias=True, attn_scale=True)
    model = build_model(cfg.replace(tied_output=False, init_std=0.5)).double().eval()
    for tokens, asked in instances():
        other = swapped_values(tokens)
        with torch.no_grad():
            a, b = model(torch.tensor([tokens]))[0][0], model(torch.tensor([other]))[0][0]
        assert not torch.allclose(a[1], b[1])  # the positions that differ do give different outputs
        for t in asked:  # but a query sees the same token and the same set of earlier tokens
            torch.testing.assert_close(a[t], b[t], rtol=0, atol=1e-10)


def test_one_hand_set_mssa_layer_with_a_token_shift_answers_every_instance() -> None:
    # stream: the token one-hot twice, A = [0, 8) kept (mu = 0) and B = [8, 16) shifted (mu = 1)
    cfg = plain("aot-mssa", n_embd=16, head_dim=8, position="none", tied_output=False, token_shift="channel")
    model = build_model(cfg).double().eval()
    alpha, gain = 5.0, 30.0
    with torch.no_grad():
        for p in model.parameters():
            p.zero_()
        model.tok_embed.weight[:, :V] = torch.eye(V)
        model.tok_embed.weight[:, V:] = torch.eye(V)
        attn = model.backbone.blocks[0].attn
        attn.token_shift.mix[V:] = 1.0  # z~_t = [x_t in A ; x_{t-1} in B]
        U = attn.subspace_proj.weight  # (p, d): P = U z~, query = key = value
        for c, k in enumerate(KEYS):  # a key code, from the token and from its predecessor
            U[c, k] = U[c, V + k] = alpha
        for c, v in enumerate(VALUES, start=len(KEYS)):  # a value code, from the token only
            U[c, v] = 1.0
            attn.out_proj.weight[v, c] = gain  # W_O reads the value code out into the logits; key codes: nothing
    # the query ties its own position, its key's and its value's (all alpha^2; the self-score bound allows ties)
    assert answers(model) == 1.0
    tokens = instances()[0][0]
    with torch.no_grad():
        a, b = model(torch.tensor([tokens]))[0][0], model(torch.tensor([swapped_values(tokens)]))[0][0]
    assert int(a[4].argmax()) != int(b[4].argmax())  # it tells a sequence from its value swap
    with torch.no_grad():
        attn.token_shift.mix.zero_()  # the same layer without the shift: MSSA as the paper has it
    assert answers(model) < 0.5
