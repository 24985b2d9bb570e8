"""What transformers' users ask of a causal LM, on the class an `aot export hf` folder ships, checked against aot's own
model: hidden states and attention probabilities, padding (left and right, in forward, generate and pipelines),
transformers' Cache API on aot's cache (MSSA still one tensor per layer), assisted and prompt-lookup decoding,
gradient checkpointing, resized embeddings, inputs_embeds and loading info."""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import pytest
import torch
from hf_runs import export, lm_run, remote_code_cache, shipped

from aot.eval.lm_folder import load_lm_run
from aot.eval.sampling import sample

transformers = pytest.importorskip("transformers")

#: case -> (preset, changes)
CASES = {
    "mssa-rope": ("aot-mssa-tied-l-cpu", {"position": "rope"}),  # MSSA, tied output, rotary positions
    "mssa-learned": ("aot-mssa-l-cpu", {"position": "learned"}),  # MSSA with W_O, learned positions
    "mssa-shift": ("aot-mssa-l-cpu", {"token_shift": "channel", "position": "rope"}),
    "mhsa": ("aot-mhsa-l-cpu", {"position": "learned"}),
    "llama": ("llama-l-cpu", {}),  # MHSA with rotary positions, SwiGLU, RMSNorm
    "linear-attn": ("aot-mhsa-l-cpu", {"block": "linear-attn"}),
}
TEXTS = ["Shall I compare thee", "To be", "A", "Rough winds do shake"]


class Export:
    """A case's run (aot's model and tokenizer), its export folder and the shipped model loaded from it."""

    def __init__(self, folder: Path, case: str) -> None:
        preset, changes = CASES[case]
        self.run_dir = lm_run(folder / "run", preset, **changes)
        self.folder = export(self.run_dir, folder / "export")
        self.run = load_lm_run(self.run_dir)
        self.ours = self.run.model.eval()
        self.cls = shipped(self.folder)
        self.model = self.cls.from_pretrained(self.folder).eval()

    def tokenizer(self) -> Any:
        from transformers import AutoTokenizer

        return AutoTokenizer.from_pretrained(self.folder, trust_remote_code=True)

    def ids(self, text: str) -> torch.Tensor:
        return torch.tensor(self.run.tokenizer.encode(text))


@pytest.fixture(scope="module")
def exports(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Any]:
    """``exports(case)``: the case's :class:`Export`, made once per module."""
    root = tmp_path_factory.mktemp("exports")
    made: dict[str, Export] = {}
    with remote_code_cache(root / "hf-modules"):

        def get(case: str) -> Export:
            if case not in made:
                made[case] = Export(root / case, case)
            return made[case]

        yield get


@contextmanager
def refused(match: str) -> Iterator[None]:
    """The export's own AotError (its modelling code carries a copy of aot's), in one line matching ``match``."""
    with pytest.raises(Exception, match=match) as error:
        yield
    assert type(error.value).__name__ == "AotError" and "\n" not in str(error.value)


def padded(rows: list[torch.Tensor], side: str) -> tuple[torch.Tensor, torch.Tensor]:
    """``rows`` padded with 0 to one length on ``side``, and the attention mask."""
    width = max(len(r) for r in rows)
    ids = torch.zeros(len(rows), width, dtype=torch.long)
    mask = torch.zeros(len(rows), width, dtype=torch.long)
    for i, row in enumerate(rows):
        span = slice(width - len(row), width) if side == "left" else slice(0, len(row))
        ids[i, span], mask[i, span] = row, 1
    return ids, mask


# -- hidden states and attention probabilities ----------------------------------------------------------------


@pytest.mark.parametrize("case", ["mssa-rope", "mssa-learned", "mhsa"])
def test_hidden_states_and_attentions_are_aots(case: str, exports: Any) -> None:
    e = exports(case)
    ids = e.ids("Shall I compare thee")[None]
    with torch.no_grad():
        out = e.model(ids, output_hidden_states=True, output_attentions=True)
        plain = e.model(ids)
        _, acts = e.ours.run_with_cache(ids)
    n = e.ours.cfg.n_layer
    assert out.attentions is not None and out.hidden_states is not None
    assert plain.attentions is None and plain.hidden_states is None  # computed only when asked
    torch.testing.assert_close(out.logits, plain.logits, rtol=0, atol=1e-6)
    want = [acts["hook_embed"], *(acts[f"blocks.{i}.hook_resid_post"] for i in range(n - 1)), acts["hook_final"]]
    assert len(out.hidden_states) == n + 1
    for got, expected in zip(out.hidden_states, want):
        torch.testing.assert_close(got, expected, rtol=0, atol=1e-6)
    assert len(out.attentions) == n
    for i, got in enumerate(out.attentions):
        assert got.shape == (1, e.ours.cfg.n_head, ids.shape[1], ids.shape[1])
        torch.testing.assert_close(got, acts[f"blocks.{i}.attn.hook_pattern"], rtol=0, atol=1e-6)
        torch.testing.assert_close(got.sum(-1), torch.ones_like(got.sum(-1)))
        assert bool((got.triu(1) == 0).all())  # causal
    if case == "mssa-learned":  # MSSA's probabilities: softmax(s · P_k P_kᵀ) of the subspace projections, by hand
        attn = e.ours.backbone.blocks[0].attn
        z = e.ours.backbone.blocks[0].attn_norm(out.hidden_states[0])
        p = attn.split_heads(attn.subspace_proj(z))  # (1, K, T, p) = U_kᵀ z
        scores = p @ p.transpose(-2, -1) * attn.scale
        scores = scores.masked_fill(torch.ones_like(scores, dtype=torch.bool).triu(1), float("-inf"))
        torch.testing.assert_close(out.attentions[0], scores.softmax(-1), rtol=1e-5, atol=1e-6)


def test_eager_attention_is_aots_explicit_path(exports: Any) -> None:
    e = exports("mssa-rope")
    eager = e.cls.from_pretrained(e.folder, attn_implementation="eager").eval()
    assert eager.config._attn_implementation == "eager" and e.model.config._attn_implementation == "sdpa"
    ids = e.ids("Shall I compare thee")[None]
    with torch.no_grad():
        torch.testing.assert_close(eager(ids).logits, e.ours(ids)[0], rtol=0, atol=1e-5)


def test_a_recurrent_block_says_it_has_no_attention_probabilities(exports: Any) -> None:
    e = exports("linear-attn")
    with refused("no attention probabilities"):
        e.model(e.ids("To be")[None], output_attentions=True)
    hidden = e.model(e.ids("To be")[None], output_hidden_states=True).hidden_states
    assert len(hidden) == e.ours.cfg.n_layer + 1


# -- padding --------------------------------------------------------------------------------------------------


@pytest.mark.parametrize("case", ["mssa-rope", "mssa-learned", "mssa-shift", "mhsa", "llama"])
@pytest.mark.parametrize("side", ["left", "right"])
def test_a_padded_batch_gives_each_prompts_own_logits(case: str, side: str, exports: Any) -> None:
    """Masked keys left out, positions counted over the unmasked tokens: each row's logits are aot's on that row
    alone, in one call and continued on the cache."""
    e = exports(case)
    rows = [e.ids(text) for text in TEXTS]
    ids, mask = padded(rows, side)
    with torch.no_grad():
        out = e.model(ids, attention_mask=mask, use_cache=True)
        for i, row in enumerate(rows):
            torch.testing.assert_close(out.logits[i][mask[i].bool()], e.ours(row[None])[0][0], rtol=1e-4, atol=1e-5)
        if side == "left":  # continue every row by one token on the cache
            new = torch.tensor([[7], [8], [9], [10]])
            step = e.model(new, attention_mask=torch.cat([mask, torch.ones_like(new)], 1), cache=out.cache)
            for i, row in enumerate(rows):
                want = e.ours(torch.cat([row, new[i]])[None])[0][0, -1]
                torch.testing.assert_close(step.logits[i, -1], want, rtol=1e-4, atol=1e-5)


def test_a_recurrent_block_takes_right_padding_and_refuses_left_padding(exports: Any) -> None:
    e = exports("linear-attn")
    rows = [e.ids(text) for text in TEXTS[:2]]
    ids, mask = padded(rows, "right")
    with torch.no_grad():
        logits = e.model(ids, attention_mask=mask).logits
    for i, row in enumerate(rows):
        torch.testing.assert_close(logits[i, : len(row)], e.ours(row[None])[0][0], rtol=1e-4, atol=1e-5)
    ids, mask = padded(rows, "left")
    with refused("pad on the right"):
        e.model(ids, attention_mask=mask)


@pytest.mark.parametrize("case", ["mssa-rope", "mssa-shift", "mhsa"])
def test_a_batched_pipeline_generates_what_one_prompt_at_a_time_does(case: str, exports: Any) -> None:
    """`pipeline("text-generation", batch_size=4)` on prompts of different lengths (left-padded by the pipeline)
    gives each prompt's one-by-one greedy text, cached and uncached, also once the window slides past the context
    (32 tokens); and that text is `aot sample --temperature 0`'s."""
    from transformers import pipeline

    e = exports(case)
    generator = pipeline("text-generation", model=e.model, tokenizer=e.tokenizer())
    new = 20  # the longest prompt (20 tokens) passes the context of 32
    for use_cache in (True, False):
        options = dict(max_new_tokens=new, do_sample=False, use_cache=use_cache)
        batched = generator(TEXTS, batch_size=4, **options)
        alone = [generator(text, **options) for text in TEXTS]
        assert batched == alone
        for text, got in zip(TEXTS, batched):
            _, greedy, _ = sample(e.run, text, new, temperature=0)
            assert got[0]["generated_text"] == text + e.run.tokenizer.decode(greedy)


def test_batched_generate_with_left_padding_equals_each_prompt_alone(exports: Any) -> None:
    e = exports("mssa-learned")
    rows = [e.ids(text) for text in TEXTS]
    ids, mask = padded(rows, "left")
    out = e.model.generate(ids, attention_mask=mask, max_new_tokens=16, do_sample=False)
    for i, text in enumerate(TEXTS):
        assert out[i, ids.shape[1] :].tolist() == sample(e.run, text, 16, temperature=0)[1]


# -- the cache ------------------------------------------------------------------------------------------------


@pytest.mark.parametrize("case", ["mssa-rope", "mhsa"])
def test_the_cache_is_transformers_cache_and_mssa_stores_one_tensor_per_layer(case: str, exports: Any) -> None:
    from transformers.cache_utils import Cache, DynamicCache

    e = exports(case)
    cfg = e.ours.cfg
    ids = torch.stack([e.ids("Shall I compare"), e.ids("thee to a summe")])  # 2 x 15 tokens
    with torch.no_grad():
        out = e.model(ids[:, :10], use_cache=True)
        cache = out.cache
        assert isinstance(cache, Cache) and isinstance(cache, DynamicCache)
        assert cache.get_seq_length() == 10 and not cache.is_compileable and cache.is_croppable
        assert len(cache) == cfg.n_layer
        for layer in cache.layers:
            assert layer.keys.shape == (2, cfg.n_head, 10, cfg.p)
            one = case.startswith("mssa")  # MSSA: one tensor, query, key and value at once
            assert len(layer.tensors) == (1 if one else 2)
            assert (layer.keys.data_ptr() == layer.values.data_ptr()) == one
            if one:
                torch.testing.assert_close(layer.keys, layer.values, rtol=0, atol=0)
        tensors = 1 if case.startswith("mssa") else 2
        assert cache.nbytes == cfg.n_layer * tensors * 2 * cfg.n_head * 10 * cfg.p * 4
        # fed back, under transformers' name and the 4.x one: the logits of the whole sequence
        full = e.model(ids).logits
        more = e.model(ids[:, 10:12], cache=cache).logits
        torch.testing.assert_close(more, full[:, 10:12], rtol=1e-5, atol=1e-5)
        last = e.model(ids[:, 12:], past_key_values=cache).logits
        torch.testing.assert_close(last, full[:, 12:], rtol=1e-5, atol=1e-5)
        assert cache.get_seq_length() == 15
        cache.crop(-5)
        assert cache.get_seq_length() == 10
        again = e.model(ids[:, 10:], cache=cache).logits
        torch.testing.assert_close(again, full[:, 10:], rtol=1e-5, atol=1e-5)


@pytest.mark.parametrize("case", ["mssa-rope", "mhsa"])
def test_assisted_and_prompt_lookup_decoding_give_the_greedy_tokens(case: str, exports: Any) -> None:
    e = exports(case)
    ids = e.ids("abcabcabcab")[None]  # repeats: prompt lookup finds candidates
    greedy = sample(e.run, "abcabcabcab", 16, temperature=0)[1]
    lookup = e.model.generate(ids, max_new_tokens=16, do_sample=False, prompt_lookup_num_tokens=3)
    assert lookup[0, ids.shape[1] :].tolist() == greedy
    assistant = exports("mssa-learned" if case != "mssa-learned" else "mhsa").model
    assisted = e.model.generate(ids, max_new_tokens=16, do_sample=False, assistant_model=assistant)
    assert assisted[0, ids.shape[1] :].tolist() == greedy


def test_a_block_with_a_state_is_refused_assisted_decoding(exports: Any) -> None:
    e = exports("mssa-shift")
    assert e.model._is_stateful and not exports("mssa-rope").model._is_stateful
    with pytest.raises(ValueError, match="stateful"):
        e.model.generate(e.ids("abcabc")[None], max_new_tokens=4, do_sample=False, prompt_lookup_num_tokens=3)


# -- training -------------------------------------------------------------------------------------------------


@pytest.mark.filterwarnings("ignore:.*is deprecated.*:FutureWarning")  # 5.24 renames it activation_checkpointing
@pytest.mark.parametrize("case", ["mssa-rope", "mssa-shift", "mhsa"])
def test_gradient_checkpointing_gives_the_same_gradients(case: str, exports: Any) -> None:
    e = exports(case)
    rows = [e.ids(text) for text in TEXTS]
    ids, mask = padded(rows, "left")
    labels = ids.masked_fill(mask == 0, -100)

    def grads(checkpointing: bool) -> dict[str, torch.Tensor]:
        model = e.cls.from_pretrained(e.folder).train()
        if checkpointing:
            model.gradient_checkpointing_enable(gradient_checkpointing_kwargs={"use_reentrant": False})
            assert model.is_gradient_checkpointing
        model(ids, attention_mask=mask, labels=labels).loss.backward()
        return {name: p.grad for name, p in model.named_parameters() if p.grad is not None}

    plain, checkpointed = grads(False), grads(True)
    assert plain.keys() == checkpointed.keys() and len(plain) == len(list(e.model.parameters()))
    for name in plain:
        torch.testing.assert_close(checkpointed[name], plain[name], rtol=1e-5, atol=1e-6)


def test_inputs_embeds_equal_input_ids(exports: Any) -> None:
    e = exports("mssa-learned")
    ids = e.ids("Shall I compare")[None]
    with torch.no_grad():
        embeds = e.model.get_input_embeddings()(ids)
        torch.testing.assert_close(e.model(inputs_embeds=embeds).logits, e.model(ids).logits, rtol=0, atol=0)
    with refused("input_ids or inputs_embeds"):
        e.model(ids, inputs_embeds=embeds)
    # generate from embeddings (transformers returns the new tokens only): the greedy tokens, past the context too
    greedy = sample(e.run, "Shall I compare", 24, temperature=0)[1]
    for use_cache in (True, False):
        new = e.model.generate(inputs_embeds=embeds, max_new_tokens=24, do_sample=False, use_cache=use_cache)
        assert new[0].tolist() == greedy


# -- embeddings and loading ------------------------------------------------------------------------------------


@pytest.mark.parametrize("tied", [True, False])
def test_resized_embeddings_save_and_load(tied: bool, exports: Any, tmp_path: Path) -> None:
    e = exports("mssa-learned")
    model = e.cls.from_pretrained(e.folder, tie_word_embeddings=tied).eval()
    assert (model.get_output_embeddings().weight is model.get_input_embeddings().weight) == tied
    ids = e.ids("Shall I compare")[None]
    with torch.no_grad():
        before = model(ids).logits
        model.resize_token_embeddings(266)
        after = model(ids).logits
    assert after.shape[-1] == 266 and model.config.vocab_size == 266 and model.config.aot["vocab_size"] == 266
    torch.testing.assert_close(after[..., :256], before, rtol=0, atol=0)  # the old tokens' logits are kept
    model.save_pretrained(tmp_path / "resized")
    again, info = e.cls.from_pretrained(tmp_path / "resized", output_loading_info=True)
    assert not info["missing_keys"] and not info["unexpected_keys"]
    with torch.no_grad():
        torch.testing.assert_close(again.eval()(ids).logits, after, rtol=0, atol=0)
    model.resize_token_embeddings(200)
    with torch.no_grad():
        assert model(ids.clamp(max=199)).logits.shape[-1] == 200


def test_loading_info_and_rotary_buffers(exports: Any) -> None:
    e = exports("mssa-rope")
    model, info = e.cls.from_pretrained(e.folder, output_loading_info=True)
    assert set(info) >= {"missing_keys", "unexpected_keys", "mismatched_keys"}
    assert not info["missing_keys"] and not info["unexpected_keys"]
    ids = e.ids("Shall I compare")[None]
    with torch.no_grad():  # the rotary frequencies (a buffer that is not saved) are aot's
        torch.testing.assert_close(model.eval()(ids).logits, e.ours(ids)[0], rtol=0, atol=1e-6)


def test_the_readme_loads_the_tokenizer_with_trust_remote_code(exports: Any) -> None:
    """Without the flag transformers 5.25 asks on stdin whether to trust the tokenizer's folder."""
    readme = (exports("mssa-rope").folder / "README.md").read_text()
    alone = readme.split("## Or with aot installed")[0]
    lines = [line for line in alone.splitlines() if "from_pretrained(" in line]
    assert any("AutoTokenizer" in line for line in lines)
    assert all("trust_remote_code=True" in line for line in lines), lines
    assert "does not support padding" not in readme and "Padding is not supported" not in readme
