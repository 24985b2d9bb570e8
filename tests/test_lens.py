"""The TransformerLens view (aot.lens) computes what the aot model computes: same logits in float64, same
attention patterns, MSSA's Q = K = V; blocks without a mapping get one line. Skips without transformer-lens 3.x."""

from __future__ import annotations

import pytest
import torch

from aot.errors import AotError
from aot.lens import check_mappable
from aot.models import build_model, preset_config

CASES = [
    ("aot-mssa-l-cpu", {}),  # learned W_O, learned positions
    ("aot-mssa-tied-l-cpu", {"position": "rope"}),  # the paper's operator, rotary
    ("aot-mssa-tied-l-cpu", {"score_scale": False, "residual_scale": "scalar", "residual_scale_init": 0.5}),
    ("aot-mssa-l-cpu", {"head_dim": 8, "norm": "none", "position": "none"}),  # K·p != d, no norm, no positions
    ("aot-mhsa-l-cpu", {"position": "rope", "residual_scale": "channel", "residual_scale_init": 0.3}),
    ("gpt2-cpu", {}),  # GELU MLP (GPT-2's tanh)
    ("gpt2-cpu", {"activation": "gelu", "bias": False}),
    ("aot-mssa-l-cpu", {"vocab_multiple": 96}),  # an aligned (padded) vocabulary: 256 tokens in 288 rows
]


def small_model(name: str, **changes):  # type: ignore[no-untyped-def]
    torch.manual_seed(0)
    fields = dict(n_layer=2, n_embd=32, n_head=2, head_dim=None, block_size=16)
    model = build_model(preset_config(name).replace(**{**fields, **changes})).double().eval()
    with torch.no_grad():  # away from the init, so that biases, norms and eta all matter
        for param in model.parameters():
            param.normal_(0.0, 0.3 if param.dim() > 1 else 0.1)
    return model


@pytest.fixture(scope="module")
def lens():  # type: ignore[no-untyped-def]
    transformer_lens = pytest.importorskip("transformer_lens", reason="transformer-lens not installed (aot[lens])")
    if not hasattr(transformer_lens, "HookedTransformerConfig"):
        pytest.skip("transformer-lens 4 has no HookedTransformer (aot[lens] installs 3.x)")
    import aot.lens

    return aot.lens


@pytest.mark.parametrize(("name", "changes"), CASES, ids=[f"{n}-{'-'.join(c) or 'default'}" for n, c in CASES])
def test_hooked_transformer_gives_our_logits_and_patterns(lens, name, changes) -> None:  # type: ignore[no-untyped-def]
    model = small_model(name, **changes)
    tl_model = lens.to_hooked_transformer(model)
    idx = torch.randint(0, model.cfg.vocab_size, (3, 16), generator=torch.Generator().manual_seed(1))
    (ours, _), our_cache = model.run_with_cache(idx, names_filter=lambda n: n.endswith("hook_pattern"))
    theirs, their_cache = tl_model.run_with_cache(idx)
    assert theirs.dtype == torch.float64
    torch.testing.assert_close(theirs, ours, rtol=0, atol=1e-12)
    for layer in range(model.cfg.n_layer):
        pattern = their_cache[f"blocks.{layer}.attn.hook_pattern"]
        torch.testing.assert_close(pattern, our_cache[f"blocks.{layer}.attn.hook_pattern"], rtol=0, atol=1e-12)
    if model.cfg.block == "aot-mssa":  # one projection U_hᵀz serves as query, key and value
        q, k, v = (their_cache[f"blocks.0.attn.hook_{n}"] for n in "qkv")
        assert torch.equal(q, k) and torch.equal(k, v)


ABLATIONS = [
    ("aot-mssa-l-cpu", {"position": "rope"}, "hook_z"),
    ("aot-mssa-tied-l-cpu", {}, "hook_z"),
    ("aot-mhsa-l-cpu", {"position": "rope"}, "hook_z"),
    ("aot-mhsa-l-cpu", {}, "hook_q"),
    ("aot-mhsa-l-cpu", {"position": "rope"}, "hook_k"),
    ("gpt2-cpu", {}, "hook_v"),
]


@pytest.mark.parametrize(("name", "changes", "hook"), ABLATIONS, ids=[f"{n}-{h}" for n, _, h in ABLATIONS])
def test_one_ablation_function_gives_the_same_logits_on_ours_and_the_view(lens, name, changes, hook) -> None:  # type: ignore[no-untyped-def]
    """aot's hook_q / hook_k / hook_v / hook_z have TransformerLens's layout, (batch, pos, head, d_head): one
    function zeroing head 1 of layer 0 gives the same logits on the aot model and on its HookedTransformer, and the
    activations the hooks see are the same tensors."""
    model = small_model(name, **changes)
    tl_model = lens.to_hooked_transformer(model)
    idx = torch.randint(0, 256, (2, 16), generator=torch.Generator().manual_seed(2))
    point = f"blocks.0.attn.{hook}"
    seen: dict[str, torch.Tensor] = {}

    def ablate(z: torch.Tensor, hook) -> torch.Tensor:  # type: ignore[no-untyped-def]
        seen[hook.name] = z.detach().clone()
        z = z.clone()
        z[:, :, 1] = 0.0  # head 1 of (batch, pos, head, d_head)
        return z

    theirs = tl_model.run_with_hooks(idx, fwd_hooks=[(point, ablate)])
    their_input = seen.pop(point)
    with model.hooks([(point, ablate)]):
        ours, _ = model(idx)
    assert their_input.shape == (2, 16, model.cfg.n_head, model.cfg.p)
    torch.testing.assert_close(seen[point], their_input, rtol=0, atol=1e-12)
    assert (ours - theirs).abs().max() < 1e-5
    torch.testing.assert_close(ours, theirs, rtol=0, atol=1e-12)  # float64: the same to rounding
    assert (theirs - tl_model(idx)).abs().max() > 1e-3  # the ablation did something
    assert (theirs - tl_model(idx)).abs().max() > 1e3 * (ours - theirs).abs().max()


def test_caches_hold_the_same_q_k_v_z(lens) -> None:  # type: ignore[no-untyped-def]
    """run_with_cache on both: MHSA's hook_q, hook_k, hook_v and hook_z are equal tensors of one shape."""
    model = small_model("aot-mhsa-l-cpu", position="rope")
    tl_model = lens.to_hooked_transformer(model)
    idx = torch.randint(0, 256, (3, 11), generator=torch.Generator().manual_seed(3))
    names = [f"blocks.{layer}.attn.hook_{n}" for layer in range(model.cfg.n_layer) for n in "qkvz"]
    _, our_cache = model.run_with_cache(idx, names_filter=names)
    _, their_cache = tl_model.run_with_cache(idx, names_filter=names)
    for name in names:
        assert our_cache[name].shape == their_cache[name].shape == (3, 11, 2, 16)
        torch.testing.assert_close(our_cache[name], their_cache[name], rtol=0, atol=1e-12)


@pytest.mark.parametrize(
    ("name", "changes", "message"),
    [
        ("llama-l-cpu", {}, "no TransformerLens mapping for block 'llama'"),
        ("crate-l-cpu", {}, "no TransformerLens mapping for block 'crate'"),
        ("aot-mhsa-l-cpu", {"norm": "rmsnorm"}, "no TransformerLens mapping for norm 'rmsnorm'"),
        ("aot-mhsa-l-cpu", {"final_norm": False}, "without a final norm"),
    ],
)
def test_blocks_without_a_mapping_are_one_line(name, changes, message) -> None:  # type: ignore[no-untyped-def]
    with pytest.raises(AotError, match=message) as error:
        check_mappable(small_model(name, **changes))
    assert "\n" not in str(error.value)


def exported(tmp_path, model):  # type: ignore[no-untyped-def]
    """``model`` as a run folder (bytes) and its `aot export hf` folder."""
    import json

    from aot.cli import main

    model.float().save_pretrained(tmp_path / "run" / "checkpoint")
    (tmp_path / "run" / "results.json").write_text(json.dumps({"config": {"data": {"tokenizer": "bytes"}}}))
    assert main(["export", "hf", str(tmp_path / "run"), str(tmp_path / "export")]) == 0
    return tmp_path / "run", tmp_path / "export"


@pytest.mark.parametrize("name", ["aot-mssa-tied-l-cpu", "aot-mhsa-l-cpu"])
def test_generate_works_by_default_and_is_aots_greedy(lens, name, tmp_path) -> None:  # type: ignore[no-untyped-def]
    """No eos_token_id needed; learned positions (aot-mhsa) too, where TransformerLens's cached generate errs."""
    from aot.eval.lm_folder import load_lm_run
    from aot.eval.sampling import sample

    changes = {"position": "rope"} if "mssa" in name else {}
    run_dir, _ = exported(tmp_path, small_model(name, **changes))
    run = load_lm_run(run_dir)
    tl_model = lens.to_hooked_transformer(run.model)
    ids = run.tokenizer.encode("Shall I")
    new = run.block_size - len(ids)  # to the end of the context
    tokens = tl_model.generate(torch.tensor([ids]), max_new_tokens=new, do_sample=False, verbose=False)
    assert tokens[0, len(ids) :].tolist() == sample(run, "Shall I", new, temperature=0)[1]  # `aot sample` greedy
    with pytest.raises(AotError, match="exceed the context of 16 tokens") as error:
        tl_model.generate(torch.tensor([ids]), max_new_tokens=new + 1, do_sample=False, verbose=False)
    assert "\n" not in str(error.value)


def test_set_tokenizer_takes_the_exported_tokenizer(lens, tmp_path) -> None:  # type: ignore[no-untyped-def]
    transformers = pytest.importorskip("transformers")
    from aot.eval.lm_folder import load_lm_run
    from aot.eval.sampling import sample

    run_dir, export = exported(tmp_path, small_model("aot-mssa-l-cpu"))
    tokenizer = transformers.AutoTokenizer.from_pretrained(export, trust_remote_code=True)
    run = load_lm_run(run_dir)
    tl_model = lens.to_hooked_transformer(run.model, tokenizer)  # set_tokenizer(tokenizer)
    assert tl_model.to_tokens("Shall I")[0].tolist() == run.tokenizer.encode("Shall I")  # no bos prepended
    text = tl_model.generate("Shall I", max_new_tokens=6, do_sample=False, verbose=False)
    assert text == tokenizer.decode(run.tokenizer.encode("Shall I") + sample(run, "Shall I", 6, temperature=0)[1])
    assert tokenizer("Shall I").input_ids == run.tokenizer.encode("Shall I")  # the user's tokenizer is as it was
