"""Zero-shot protocols (aot.eval.zeroshot), the scorer they share (aot.eval.scoring), the readers of the published
formats (aot.eval.zeroshot_data), the Austen-built sets and `aot eval lm`."""

from __future__ import annotations

import json
import math
from pathlib import Path

import pytest
import torch
from torch import nn

from aot.cli import main
from aot.data.tokenizers import ByteTokenizer
from aot.errors import AotError
from aot.eval import zeroshot, zeroshot_data
from aot.eval.austen_sets import cloze_examples, lambada_passages, paragraphs, sentences
from aot.eval.scoring import Scored, model_scorer, rolling_requests, score_requests
from aot.models import build_model
from aot.models.presets import PRESETS

FIXTURES = Path(__file__).resolve().parents[1] / "fixtures" / "zeroshot"
HIGH = 10.0


class BigramTable(nn.Module):
    """A hand-built model: the logits at each position depend on the current token only, through a table."""

    def __init__(self, table: torch.Tensor) -> None:
        super().__init__()
        self.table = table

    def forward(self, idx: torch.Tensor) -> tuple[torch.Tensor, None]:
        return self.table[idx], None


def successor_table() -> torch.Tensor:
    """next(b) = b + 1 with logit HIGH (others 0), except next('x') = ' ', next(' ') = 'a' and next('c') = '.'."""
    table = torch.zeros(256, 256, dtype=torch.float64)
    for b in range(255):
        table[b, b + 1] = HIGH
    for prev, nxt in (("x", " "), (" ", "a")):
        table[ord(prev)] = 0
        table[ord(prev), ord(nxt)] = HIGH
    table[ord("c")] = 0
    table[ord("c"), ord(".")] = HIGH
    return table


def log_p(table: torch.Tensor, prev: int, nxt: int) -> float:
    row = table[prev]
    return float(row[nxt] - torch.logsumexp(row, 0))


# -- the scorer ---------------------------------------------------------------------------------------------


def test_scorer_matches_a_direct_computation_with_left_truncation() -> None:
    torch.manual_seed(0)
    cfg = PRESETS["aot-mssa-l-cpu"].config(n_layer=2, n_embd=32, n_head=2, block_size=8, position="learned")
    model = build_model(cfg).double().eval()
    requests = [([1, 2, 3], [4, 5]), (list(range(10, 30)), [7, 8, 9]), ([5], [6])]
    scored = score_requests(model, requests, block_size=8, batch_size=2)
    for (context, continuation), got in zip(requests, scored):
        m = len(continuation)
        window = (context[-(8 - m) :] + continuation)[-8:]  # what the model may see: the last 8 tokens
        logits = model(torch.tensor([window]))[0][0].detach()
        lp = torch.log_softmax(logits, -1)
        start = len(window) - m
        want = [float(lp[start - 1 + i, continuation[i]]) for i in range(m)]
        assert got.token_logprobs == pytest.approx(want, abs=1e-12)
        assert got.token_greedy == tuple(int(lp[start - 1 + i].argmax()) == continuation[i] for i in range(m))
        assert got.next_token == int(lp[-1].argmax())
    # the long context really was truncated: scoring its last 5 tokens alone gives the same numbers
    alone = score_requests(model, [(requests[1][0][-5:], [7, 8, 9])], block_size=8)[0]
    assert alone.token_logprobs == pytest.approx(scored[1].token_logprobs, abs=1e-12)


def test_scorer_refuses_what_cannot_fit() -> None:
    model = BigramTable(successor_table())
    with pytest.raises(AotError, match="does not fit"):
        score_requests(model, [([1], list(range(8)))], block_size=8)
    with pytest.raises(AotError, match="without context"):
        score_requests(model, [([], [1])], block_size=8)


def test_rolling_requests_score_every_token_but_the_first_once() -> None:
    ids = list(range(100, 123))
    requests = rolling_requests(ids, block_size=8, stride=3)
    scored_positions = [len(ctx) + i for ctx, cont in requests for i in range(len(cont))]
    assert scored_positions == list(range(1, len(ids)))
    assert all(ctx == ids[: len(ctx)] for ctx, _ in requests)


# -- protocols with known answers -----------------------------------------------------------------------


def test_lambada_on_a_hand_built_model() -> None:
    table = successor_table()
    examples = zeroshot_data.read_lambada(FIXTURES / "lambada.jsonl")
    assert [ex.target for ex in examples] == ["abc", "ab", "zbc", "abd"]
    scores = zeroshot.lambada(examples, ByteTokenizer(), model_scorer(BigramTable(table), block_size=16))
    # "abc": greedy and then '.', "ab": greedy but then 'c' (no word end), "zbc": only its last token, "abd": none
    assert scores["acc_whole_word"] == pytest.approx(1 / 4)
    assert scores["acc_all_tokens"] == pytest.approx(2 / 4)
    assert scores["acc_last_token"] == pytest.approx(3 / 4)
    lp = {
        t: sum(log_p(table, a, b) for a, b in zip(b"x " + t.encode(), b" " + t.encode()))
        for t in ("abc", "ab", "zbc", "abd")
    }
    assert scores["perplexity"] == pytest.approx(math.exp(-sum(lp.values()) / 4), rel=1e-9)
    txt = zeroshot.lambada(
        zeroshot_data.read_lambada(FIXTURES / "lambada.txt"), ByteTokenizer(), model_scorer(BigramTable(table), 16)
    )
    assert txt == scores


def mock_scorer(logprob_of: dict[str, float]):  # type: ignore[no-untyped-def]
    """A scorer whose log-likelihood of a continuation is looked up by its text (its first word)."""

    def scorer(requests):  # type: ignore[no-untyped-def]
        out = []
        for _, cont in requests:
            word = bytes(cont).decode().split()[0]
            out.append(Scored((logprob_of[word],), (True,), 0))
        return out

    return scorer


def test_cbt_picks_the_most_likely_candidate() -> None:
    examples = zeroshot_data.read_cbt(FIXTURES / "cbtest_NE_tiny.txt")
    assert [ex.answer for ex in examples] == ["Tom", "Ann"] and len(examples[0].context) == 20
    scores = zeroshot.cbt(examples, ByteTokenizer(), mock_scorer({"Ann": -3.0, "Bob": -5.0, "Tom": -1.0}))
    assert scores["accuracy"] == pytest.approx(0.5)  # Tom always wins: right once, wrong once
    assert scores["chance"] == pytest.approx(1 / 3)
    context, continuation = zeroshot.cloze_request(examples[0], "Bob", ByteTokenizer())
    assert bytes(context).decode().endswith("garden . Then") and bytes(continuation).decode() == " Bob went home ."
    # a short context window cuts the rest of the query, the same for every candidate
    _, cut = zeroshot.cloze_request(examples[0], "Bob", ByteTokenizer(), suffix_tokens=5)
    assert bytes(cut).decode() == " Bob went"
    same = zeroshot.cbt(examples, ByteTokenizer(), mock_scorer({"Ann": -3.0, "Bob": -5.0, "Tom": -1.0}), 16)
    assert same["accuracy"] == pytest.approx(0.5)


@pytest.mark.parametrize(
    ("reader", "fixture", "words"),
    [
        (zeroshot_data.read_ptb, "ptb.tiny.txt", 8 + 1 + 10 + 1),  # tokens + one <eos> per sentence
        (zeroshot_data.read_wikitext, "wiki.tiny.raw", None),  # whitespace tokens of the raw file
    ],
)
def test_perplexity_of_a_uniform_model_is_the_vocabulary_size(reader, fixture, words) -> None:  # type: ignore[no-untyped-def]
    uniform = BigramTable(torch.zeros(256, 256, dtype=torch.float64))
    doc = reader(FIXTURES / fixture)
    assert doc.words == (words if words is not None else len((FIXTURES / fixture).read_text().split()))
    scores = zeroshot.perplexity(doc, ByteTokenizer(), model_scorer(uniform, 16), block_size=16)
    n = len(doc.text.encode()) - 1  # every byte after the first, each scored once
    assert scores["tokens"] == n
    assert scores["per_token_perplexity"] == pytest.approx(256.0)
    assert scores["per_word_perplexity"] == pytest.approx(math.exp(n * math.log(256) / doc.words))
    assert scores["bits_per_byte"] == pytest.approx(8.0)


def test_detokenisers() -> None:
    assert (
        zeroshot_data.read_ptb(FIXTURES / "ptb.tiny.txt").text.splitlines()[1] == "mr. <unk>'s plan , he said , is fine"
    )
    wiki = zeroshot_data.read_wikitext(FIXTURES / "wiki.tiny.raw")
    assert "The game's 3,000 copies (in Japan) sold-out." in wiki.text
    assert wiki.words == len((FIXTURES / "wiki.tiny.raw").read_text().split())


def test_readers_name_the_bad_line() -> None:
    with pytest.raises(AotError, match=r"lambada_bad.jsonl:2: .*'text'"):
        zeroshot_data.read_lambada(FIXTURES / "lambada_bad.jsonl")
    with pytest.raises(AotError, match=r"cbtest_bad.txt:6: expected sentence 6"):
        zeroshot_data.read_cbt(FIXTURES / "cbtest_bad.txt")
    with pytest.raises(AotError, match="does not exist"):
        zeroshot_data.read_cbt(FIXTURES / "missing.txt")
    # a CBT file given as LAMBADA text: refused at its first question line
    cbt_as_lambada = FIXTURES / "cbtest_NE_tiny.txt"
    with pytest.raises(AotError, match=r"cbtest_NE_tiny.txt:21: looks like a CBT file"):
        zeroshot_data.read_lambada(cbt_as_lambada)


def test_ptb_errors_count_blank_lines(tmp_path: Path) -> None:
    bad = tmp_path / "ptb.txt"
    bad.write_text("the cat sat\n\n\n{not ptb}\n")
    with pytest.raises(AotError, match=r"ptb.txt:4: does not look like PTB"):
        zeroshot_data.read_ptb(bad)


# -- the Austen-style builders on a small text -----------------------------------------------------------


def test_sentences_and_lambada_passages() -> None:
    para = 'Mr. Darcy walked in. "Is it you?" she said! Then the garden was quiet.'
    assert sentences(para) == ["Mr. Darcy walked in.", '"Is it you?" she said!', "Then the garden was quiet."]
    text = "CHAPTER 1\n\nThe garden was green. Anne liked the garden. Everyone walked to the garden.\n"
    paras = paragraphs(text)
    assert paras == ["The garden was green. Anne liked the garden. Everyone walked to the garden."]
    assert lambada_passages(paras, 10) == ["The garden was green. Anne liked the garden. Everyone walked to the garden"]


def test_cloze_examples_follow_cbt() -> None:
    names = ["Anne", "Emma", "Jane", "Lucy", "Mary", "Kitty", "Harriet", "Fanny", "Susan", "Marianne"]
    sents = [f"Then {names[i % 10]} met {names[(i + 3) % 10]} at noon." for i in range(21)]
    paras = [" ".join(sents)] * 2
    examples = cloze_examples(paras, "ne", 5)
    assert examples
    for ex in examples:
        assert len(ex.context) == 20 and len(ex.candidates) == 10 and ex.answer in ex.candidates
        assert zeroshot_data.CBT_BLANK in ex.query and ex.query.replace(zeroshot_data.CBT_BLANK, ex.answer) in sents


# -- the command ----------------------------------------------------------------------------------------


def tiny_run(folder: Path, tokenizer: str = "bytes") -> Path:
    torch.manual_seed(0)
    cfg = PRESETS["aot-mssa-l-cpu"].config(n_layer=2, n_embd=32, n_head=2, block_size=32, position="rope")
    build_model(cfg).save_pretrained(folder / "checkpoint")
    (folder / "results.json").write_text(json.dumps({"config": {"data": {"tokenizer": tokenizer}}}))
    return folder


def test_eval_lm_command_writes_results(tmp_path: Path) -> None:
    run = tiny_run(tmp_path / "run")
    out = tmp_path / "eval"
    code = main(
        ["eval", "lm", str(run), "--task", "lambada,cbt-ne", "--data", f"lambada={FIXTURES / 'lambada.jsonl'}",
         "--data", f"cbt-ne={FIXTURES / 'cbtest_NE_tiny.txt'}", "--out", str(out)]
    )  # fmt: skip
    assert code == 0
    results = json.loads((out / "results.json").read_text())
    row = results["runs"]["run"]
    assert row["lambada"]["examples"] == 4 and row["cbt-ne"]["examples"] == 2
    assert set(results["sets"]) == {"lambada", "cbt-ne"}
    assert "| run |" in (out / "results.md").read_text()
    assert row["training"] is None  # tiny_run's results.json records no training


def test_eval_lm_rows_carry_the_runs_own_losses(tmp_path: Path) -> None:
    run = tiny_run(tmp_path / "run")
    trained = {"config": {"data": {"tokenizer": "bytes", "corpus": "shakespeare"}}, "train": {"tokens": 4096}}
    trained |= {"val": {"loss": 2.4, "nats_per_byte": 2.4}, "test": {"loss": 2.5, "nats_per_byte": 2.5}}
    (run / "results.json").write_text(json.dumps(trained))
    out = tmp_path / "eval"
    argv = ["eval", "lm", str(run), "--task", "lambada", "--data", f"lambada={FIXTURES / 'lambada.jsonl'}"]
    assert main([*argv, "--out", str(out)]) == 0
    row = json.loads((out / "results.json").read_text())["runs"]["run"]
    assert row["training"] == {
        "corpus": "shakespeare", "tokens": 4096, "val_loss": 2.4, "val_nats_per_byte": 2.4, "test_loss": 2.5,
        "test_nats_per_byte": 2.5,
    }  # fmt: skip
    assert "austen_held_out" not in row


def test_a_run_trained_on_austen_is_flagged_on_the_austen_sets(tmp_path: Path, capsys) -> None:  # type: ignore[no-untyped-def]
    from aot.eval.zeroshot_runs import trained_on_austen

    assert trained_on_austen({"corpus": "austen"}) and trained_on_austen({"corpus": "/data/Austen-novels.txt"})
    assert not trained_on_austen({"corpus": "shakespeare"}) and not trained_on_austen(None)
    run = tiny_run(tmp_path / "run")
    trained = {"config": {"data": {"tokenizer": "bytes", "corpus": "austen"}}, "train": {"tokens": 1}}
    trained |= {"val": {"loss": 2.4, "nats_per_byte": 2.4}, "test": {"loss": 2.5, "nats_per_byte": 2.5}}
    (run / "results.json").write_text(json.dumps(trained))
    lambada = tmp_path / "austen_lambada.jsonl"
    lambada.write_text((FIXTURES / "lambada.jsonl").read_text())
    argv = ["eval", "lm", str(run), "--task", "austen-lambada", "--data", f"austen-lambada={lambada}"]
    assert main([*argv, "--out", str(tmp_path / "eval")]) == 0
    assert "not held out" in capsys.readouterr().err
    assert json.loads((tmp_path / "eval" / "results.json").read_text())["runs"]["run"]["austen_held_out"] is False


@pytest.mark.parametrize(
    ("argv", "message"),
    [
        (["--task", "hellaswag"], "unknown task 'hellaswag'"),
        (["--task", "ptb"], "needs its data file"),
        (["--task", "ptb", "--data", str(FIXTURES / "lambada.jsonl")], "lambada.jsonl:1: does not look like PTB"),
        (["--task", "cbt-cn", "--data", str(FIXTURES / "cbtest_bad.txt")], "cbtest_bad.txt:6"),
    ],
)
def test_eval_lm_bad_input_is_one_line(tmp_path: Path, capsys, argv: list[str], message: str) -> None:  # type: ignore[no-untyped-def]
    run = tiny_run(tmp_path / "run")
    assert main(["eval", "lm", str(run), *argv, "--out", str(tmp_path / "o")]) == 2
    err = capsys.readouterr().err.strip()
    assert err.startswith("aot: error:") and message in err and "\n" not in err


def test_run_folder_without_a_model_is_one_line(tmp_path: Path, capsys) -> None:  # type: ignore[no-untyped-def]
    (tmp_path / "empty").mkdir()
    assert (
        main(["eval", "lm", str(tmp_path / "empty"), "--task", "lambada", "--data", str(FIXTURES / "lambada.txt")]) == 2
    )
    err = capsys.readouterr().err.strip()
    assert "holds no model" in err and "\n" not in err


def test_eval_lm_perplexity_tasks_from_their_files(tmp_path: Path) -> None:
    run = tiny_run(tmp_path / "run")
    out = tmp_path / "eval"
    argv = ["eval", "lm", str(run), "--task", "ptb", "--task", "wikitext", "--out", str(out), "--stride", "8"]
    argv += ["--data", f"ptb={FIXTURES / 'ptb.tiny.txt'}", "--data", f"wikitext={FIXTURES / 'wiki.tiny.raw'}"]
    assert main(argv) == 0
    row = json.loads((out / "results.json").read_text())["runs"]["run"]
    for task, fixture in (("ptb", "ptb.tiny.txt"), ("wikitext", "wiki.tiny.raw")):
        reader = zeroshot_data.read_ptb if task == "ptb" else zeroshot_data.read_wikitext
        doc = reader(FIXTURES / fixture)
        assert row[task]["words"] == doc.words and row[task]["tokens"] == len(doc.text.encode()) - 1
        assert row[task]["nats_per_word"] == pytest.approx(
            row[task]["nats_per_token"] * row[task]["tokens"] / doc.words
        )
    # one data-set task takes a bare path
    assert (
        main(["eval", "lm", str(run), "--task", "ptb", "--data", str(FIXTURES / "ptb.tiny.txt"), "--out", str(out)])
        == 0
    )
