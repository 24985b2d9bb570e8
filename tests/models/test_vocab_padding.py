"""model.vocab_multiple: the embedding and the LM head get vocab_size rounded up to an aligned width (GPT-2's 50,257
in 50,304 rows), the logits are cut back to vocab_size, so the loss, sampling and every score are those of a model
whose head is the first vocab_size rows; configs and checkpoints without the field load as before."""

from __future__ import annotations

import torch
import torch.nn.functional as F

from aot.config import ModelConfig
from aot.models import AotModel, build_model, preset_config


def _model(**changes):  # type: ignore[no-untyped-def]
    torch.manual_seed(0)
    fields = dict(n_layer=2, n_embd=32, n_head=2, block_size=16, vocab_size=250, vocab_multiple=64)
    return build_model(preset_config("aot-mssa-l-cpu").replace(**{**fields, **changes})).double().eval()


def test_the_rows_are_aligned_and_the_logits_are_the_vocabulary():
    assert preset_config("gpt2-base").replace(vocab_multiple=64).padded_vocab == 50_304
    model = _model()
    assert model.tok_embed.weight.shape == (256, 32) and model.lm_head.weight.shape == (256, 32)
    idx = torch.randint(0, 250, (3, 16), generator=torch.Generator().manual_seed(1))
    logits, loss = model(idx, labels=idx)
    assert logits.shape == (3, 16, 250)
    hidden = model.backbone(model.embed(idx))
    torch.testing.assert_close(logits, hidden @ model.lm_head.weight[:250].T, rtol=0, atol=1e-12)
    expected = F.cross_entropy(logits[:, :-1].reshape(-1, 250), idx[:, 1:].reshape(-1))
    torch.testing.assert_close(loss, expected, rtol=0, atol=1e-12)
    with torch.no_grad():
        model.lm_head.weight[250:] = 1e6  # the alignment rows are never a token, however large their scores
    out = model.generate(idx[:1, :4], max_new_tokens=8, temperature=1.0, generator=torch.Generator().manual_seed(0))
    assert int(out.max()) < 250 and torch.equal(model(idx)[0], logits)


def test_padding_rows_get_no_gradient_and_the_model_round_trips(tmp_path):
    model = _model().train()
    idx = torch.randint(0, 250, (2, 16), generator=torch.Generator().manual_seed(2))
    model(idx, labels=idx)[1].backward()
    grad = model.tok_embed.weight.grad
    assert grad is not None and grad[:250].abs().sum() > 0 and torch.equal(grad[250:], torch.zeros_like(grad[250:]))
    model.save_pretrained(tmp_path / "m")
    loaded = AotModel.from_pretrained(tmp_path / "m").double().eval()
    assert loaded.cfg.vocab_multiple == 64 and loaded.tok_embed.weight.shape == (256, 32)
    torch.testing.assert_close(loaded(idx)[0], model.eval()(idx)[0], rtol=0, atol=0)


def test_a_config_without_the_field_is_unpadded_and_keeps_its_dict():
    cfg = ModelConfig(vocab_size=250)
    assert cfg.vocab_multiple == 1 and cfg.padded_vocab == 250
    assert "vocab_multiple" not in cfg.to_dict()  # the config.json and fingerprint of older runs are unchanged
    assert ModelConfig.from_dict(cfg.to_dict()) == cfg
