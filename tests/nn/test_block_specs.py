"""Block specs: a block type is one ``BlockSpec``, and registering it is all it takes.

A throwaway block (tests/nn/throwaway_block.py: attention-only, MSSA without a norm inside, under a made-up name,
with its own option and FLOPs count) is registered for these tests and removed after them; the config, ``aot
bench``, the trainer's FLOPs per sample and ``aot analyze`` all read its spec. The built-in specs are checked
against what the code does.
"""

from __future__ import annotations

import dataclasses
import json
from collections.abc import Iterator

import numpy as np
import pytest
import torch
from throwaway_block import CALLS, LABEL, NAME, SPEC

from aot.blockspec import BlockSpec, block_spec, block_types, register_block, unregister_block
from aot.config import ModelConfig
from aot.errors import AotError, ConfigError
from aot.models import build_model
from aot.nn.attention import MultiHeadSubspaceSelfAttention


@pytest.fixture
def throwaway() -> Iterator[BlockSpec]:
    register_block(SPEC)
    CALLS.clear()
    try:
        yield SPEC
    finally:
        unregister_block(NAME)
    assert NAME not in block_types()


def tiny(**fields: object) -> ModelConfig:
    base: dict = dict(block=NAME, n_layer=2, n_embd=16, n_head=2, vocab_size=256, block_size=16, tied_output=False)
    return ModelConfig.from_dict({**base, **fields})


def test_the_config_takes_the_specs_defaults_and_rules(throwaway: BlockSpec) -> None:
    cfg = tiny()
    assert cfg.norm == "none" and cfg.position == "learned"  # the spec's default, the generic one
    assert tiny(norm="layernorm").norm == "layernorm"  # a value the config sets wins
    with pytest.raises(ConfigError, match="needs at least 2 heads"):
        tiny(n_head=1)
    with pytest.raises(ConfigError, match="ista_expand=4 is an option of block 'crate'"):  # another block's
        ModelConfig.from_dict({"block": NAME, "ista_expand": 4})
    assert tiny().score_temperature == 1.0 and isinstance(build_model(tiny()).backbone.blocks[0].attn.scale, float)
    assert isinstance(build_model(cfg).backbone.blocks[0].attn, MultiHeadSubspaceSelfAttention)


def test_without_its_spec_the_block_is_unknown() -> None:
    with pytest.raises(ConfigError, match=f"block={NAME!r} is not one of aot-mssa"):
        tiny()


def test_aot_bench_uses_the_spec(throwaway: BlockSpec) -> None:
    """The suite compares the spec's row, counts its FLOPs with the spec (and flop_counter agrees) and reads
    ``subspace`` for whether ``tied_output`` means anything."""
    from aot.bench.report import markdown_report
    from aot.bench.suite import BenchSettings, bench_blocks, run_suite

    assert (LABEL, NAME, {"tied_output": False}) in bench_blocks()
    settings = BenchSettings(
        n_embd=16, n_head=2, seq_len=8, batch=2, depth=1, warmup=0, repeat=1, rounds=1, memory=False,
        breakdown=False, peak_sizes=(64,), sections=("models",), scaling_blocks=(LABEL,), decode_blocks=(LABEL,),
    )  # fmt: skip
    results = run_suite(settings, log=lambda *_: None)
    rows = [row for row in results["models"] if row["label"] == LABEL]
    assert len(rows) == 2  # matched width/depth and matched params
    for row in rows:
        assert row["block"] == NAME and row["tied_output"] is False
        per_layer = 4 * 16 * 16 + 4 * 8 * 16  # the spec's dense and attention counts, d = K·p = 16, T = 8
        assert row["flops_forward"] == pytest.approx(row["n_layer"] * per_layer + 2 * 16 * 256)
        assert row["flop_counter_agreement_forward"] == pytest.approx(1.0, rel=0.01)
        assert row["flop_counter_agreement_training"] == pytest.approx(1.0, rel=0.01)
    assert {"dense", "attention"} <= set(CALLS)
    assert LABEL in markdown_report(results)
    with pytest.raises(ConfigError, match="scaling_blocks"):  # a label no registered block has
        BenchSettings(scaling_blocks=("No such block",))


def test_the_trainers_flops_come_from_the_spec(throwaway: BlockSpec) -> None:
    """``training_flops_per_sample`` (what the trainer's MFU divides by): T · 3 · (dense + causal attention)."""
    from aot.bench.flops import training_flops_per_sample

    cfg = tiny()
    T, L, d = 16, 2, 16
    causal_keys = (T + 1) / 2
    expected = T * 3 * (L * 4 * d * d + 2 * d * 256 + L * 4 * causal_keys * d)
    assert training_flops_per_sample(cfg, T) == pytest.approx(expected)
    assert {"dense", "attention"} <= set(CALLS)
    register_block(dataclasses.replace(SPEC, dense_flops=None, attention_flops=None))  # no analytic count
    assert training_flops_per_sample(cfg, T) is None


def test_aot_analyze_uses_the_spec(throwaway: BlockSpec, tmp_path) -> None:
    """``aot analyze`` on a run of the throwaway block: the analysis runs, and the model's ``tied_output`` is
    reported because the spec says the block has subspace bases (and not once it says otherwise)."""
    from aot.analysis.analyze import analyze_run, describe

    corpus = tmp_path / "corpus.txt"
    rng = np.random.default_rng(0)
    corpus.write_text(" ".join("".join(rng.choice(list("abcdefgh"), 5)) for _ in range(2000)))
    run = tmp_path / "run"
    torch.manual_seed(0)
    build_model(tiny()).save_pretrained(run / "checkpoint")
    (run / "results.json").write_text(json.dumps({"config": {"data": {"corpus": str(corpus), "tokenizer": "bytes"}}}))
    results = analyze_run(run, tmp_path / "out", batches=1, batch_size=2, seq_len=16)
    assert results["model"]["block"] == NAME and results["model"]["tied_output"] is False
    assert len(results["denoising"]["layers"]) == 2
    register_block(dataclasses.replace(SPEC, subspace=False))
    assert describe(build_model(tiny()))["tied_output"] is None


def test_lens_peer_and_timm_read_the_spec(throwaway: BlockSpec) -> None:
    from aot.lens import check_mappable, supported_blocks
    from aot.models.timm_models import _family

    model = build_model(tiny())
    with pytest.raises(AotError, match=f"no TransformerLens mapping for block {NAME!r}"):
        check_mappable(model)
    assert NAME not in supported_blocks() and "aot-mssa" in supported_blocks()
    assert _family(NAME) == "tempered_mssa" and _family("transformer") == "vit"
    pytest.importorskip("transformers")
    from aot.bench.peer import hf_gpt2

    with pytest.raises(AotError, match="needs a GPT-2 config"):
        hf_gpt2(tiny())


@pytest.mark.parametrize("name", ["aot-mssa", "aot-mhsa", "transformer", "crate", "llama"])
def test_the_built_in_specs_count_what_their_modules_hold(name: str) -> None:
    """Every built-in block with an analytic count: its dense FLOPs per token are 2 × the weights of its
    matrix products (each weight is used once per token), CRATE-α's encoder twice over."""
    spec = block_spec(name)
    for extra in [{}, {"ista_expand": 4}] if name == "crate" else [{}]:
        cfg = ModelConfig(block=name, n_layer=1, n_embd=32, n_head=4, tied_output=False, bias=False, options=extra)
        module = spec.build(cfg)
        matrices = [p for p in module.parameters() if p.ndim == 2]
        step = getattr(module, "mlp", None)
        uses = {id(getattr(step, "dictionary", None)): 3, id(getattr(step, "encoder", None)): 3}  # CRATE's steps
        assert spec.dense_flops is not None
        assert spec.dense_flops(cfg) == sum(2 * p.numel() * uses.get(id(p), 1) for p in matrices)


def test_recurrent_specs_have_no_analytic_count_and_no_kv_cache() -> None:
    for name in ("linear-attn", "mamba"):
        spec = block_spec(name)
        assert spec.recurrent and spec.dense_flops is None and spec.attention_flops is None
    assert not any(block_spec(name).recurrent for name in ("aot-mssa", "aot-mhsa", "transformer", "crate", "llama"))
