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

import pytest
import torch

from aot.data.mqar import MQARConfig
from aot.models import build_model
from recall_constructions import KEYS, VALUES, T, V, induction_mhsa, instances, plain


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


def test_two_hand_set_mhsa_layers_with_positions_answer_every_instance() -> None:
    model = induction_mhsa()  # a previous-token head, then an induction head (tests/recall_constructions.py)
    assert answers(model) == 1.0
    with torch.no_grad():  # without the previous-token step the second head has nothing to match
        model.backbone.blocks[0].attn.out_proj.weight.zero_()
    assert answers(model) < 0.5


def swapped_values(tokens: list[int]) -> list[int]:
    """The same sequence with the values of the two pairs exchanged: every query's answer changes."""
    return [tokens[0], tokens[3], tokens[2], tokens[1], *tokens[4:]]


@pytest.mark.parametrize("block", ["aot-mssa", "aot-mhsa"])
@pytest.mark.parametrize("seed", [0, 1, 2])
def test_one_layer_without_positions_answers_a_sequence_and_its_value_swap_alike(block: str, seed: int) -> None:
    torch.manual_seed(seed)
    cfg = plain(block, n_embd=16, n_head=2, position="none", norm="layernorm", bias=True, score_scale=True)
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
