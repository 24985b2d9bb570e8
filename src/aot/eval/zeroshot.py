"""The paper's zero-shot protocols (§4, after GPT-2): LAMBADA, CBT-CN / CBT-NE, and perplexity (PTB, WikiText,
the Austen held-out text). Every protocol turns its examples into (context, continuation) requests and asks one
:data:`aot.eval.scoring.Scorer` for their log-likelihoods, so a test can hand it a scorer with known answers.

LAMBADA. The context is the passage without its last word, the continuation is `` ␣word``. Three accuracies:

- ``acc_whole_word`` (what the tables use): greedy decoding from the context writes exactly the word and then
  ends it — every token of `` ␣word`` is the argmax given the ones before, and the argmax after the word is not
  a letter or digit (so "the" is not counted when the model would write "then");
- ``acc_all_tokens``: every token of the word is the argmax (lm-evaluation-harness's ``lambada_openai`` acc: no
  check that the word ends);
- ``acc_last_token``: only the word's last token is the argmax given everything before it (the original
  word-level protocol; for a byte model this is the word's last letter given the rest: much easier).

``perplexity`` is ``exp(-mean_examples log p(␣word | context))``: per target word, as GPT-2 reports it.

CBT. The query's ``XXXXX`` splits it into a prefix and a suffix; each candidate ``c`` is scored as the
continuation ``c ⊕ suffix`` given ``context sentences ⊕ prefix``, and the prediction is the candidate of highest
log-likelihood (for a model with a short context the rest of the query is cut, see :func:`cbt`). The
log-likelihood of the whole filled sentence differs from this by ``log p(prefix | context)``,
which is the same for every candidate, so both choose the same candidate (GPT-2's "probability of each choice
and the rest of the sentence").

Perplexity. The document's tokens are scored in rolling windows (:func:`aot.eval.scoring.rolling_requests`):
``per_token = exp(-Σ log p / n_scored_tokens)`` and ``per_word = exp(-Σ log p / n_words)`` with ``n_words`` the
data set's own word count (see :mod:`aot.eval.zeroshot_data`).
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import Any

import numpy as np

from aot.data.tokenizers import Tokenizer
from aot.eval.scoring import Request, Scorer, rolling_requests
from aot.eval.zeroshot_data import CBT_BLANK, ClozeExample, LambadaExample, PerplexityDoc


def _mean(values: Sequence[float]) -> float:
    return float(np.mean(values)) if len(values) else float("nan")


def ends_word(text: str) -> bool:
    """Whether a decoded next token ends the word before it (it does not start with a letter or digit)."""
    return not text[:1].isalnum()


def lambada(examples: Sequence[LambadaExample], tokenizer: Tokenizer, scorer: Scorer) -> dict[str, Any]:
    """LAMBADA's last-word accuracies and per-word perplexity (see the module docstring)."""
    requests: list[Request] = [(tokenizer.encode(ex.context), tokenizer.encode(" " + ex.target)) for ex in examples]
    scored = scorer(requests)
    whole = [s.is_greedy and ends_word(tokenizer.decode([s.next_token])) for s in scored]
    return {
        "examples": len(examples),
        "acc_whole_word": _mean([float(w) for w in whole]),
        "acc_all_tokens": _mean([float(s.is_greedy) for s in scored]),
        "acc_last_token": _mean([float(s.token_greedy[-1]) for s in scored]),
        "loss": -_mean([s.logprob for s in scored]),  # nats per target word: the paper's "LAMBADA loss"
        "perplexity": math.exp(min(-_mean([s.logprob for s in scored]), 700.0)),
        "target_tokens_mean": _mean([s.n_tokens for s in scored]),
    }


def cloze_request(
    example: ClozeExample, candidate: str, tokenizer: Tokenizer, suffix_tokens: int | None = None
) -> Request:
    """(context sentences ⊕ query prefix, candidate ⊕ query suffix); the space before the blank goes with the
    candidate, so a BPE sees `` ␣candidate`` as in running text. ``suffix_tokens`` cuts the rest of the query
    after that many tokens (the same budget for every candidate)."""
    prefix, _, suffix = example.query.partition(CBT_BLANK)
    context = " ".join(example.context)
    if prefix.strip():
        context = f"{context} {prefix.rstrip()}"
    continuation = tokenizer.encode(" " + candidate + suffix)
    if suffix_tokens is not None:
        continuation = continuation[: len(tokenizer.encode(" " + candidate)) + suffix_tokens]
    return tokenizer.encode(context), continuation


def cbt(
    examples: Sequence[ClozeExample], tokenizer: Tokenizer, scorer: Scorer, block_size: int | None = None
) -> dict[str, Any]:
    """CBT accuracy: the candidate whose continuation is most likely (ties go to the first listed). With a
    ``block_size``, the rest of the query after the blank is cut to ``block_size // 2 - (longest candidate)``
    tokens (at least 0), the same for every candidate, so that half the window still holds context."""
    requests = []
    for ex in examples:
        budget = None
        if block_size is not None:
            longest = max(len(tokenizer.encode(" " + c)) for c in ex.candidates)
            budget = max(block_size // 2 - longest, 0)
        requests += [cloze_request(ex, c, tokenizer, budget) for c in ex.candidates]
    scored = scorer(requests)
    correct, position = [], 0
    for ex in examples:
        scores = [s.logprob for s in scored[position : position + len(ex.candidates)]]
        position += len(ex.candidates)
        correct.append(float(ex.candidates[int(np.argmax(scores))] == ex.answer))
    return {
        "examples": len(examples),
        "accuracy": _mean(correct),
        "chance": _mean([1.0 / len(ex.candidates) for ex in examples]),
    }


def perplexity(
    doc: PerplexityDoc, tokenizer: Tokenizer, scorer: Scorer, block_size: int, stride: int | None = None
) -> dict[str, Any]:
    """Per-token and per-word perplexity of a document scored in rolling windows, and bits per byte."""
    ids = tokenizer.encode(doc.text)
    scored = scorer(rolling_requests(ids, block_size, stride))
    nats = -sum(s.logprob for s in scored)
    n_tokens = sum(s.n_tokens for s in scored)
    n_bytes = int(tokenizer.token_byte_lengths()[ids[1:]].sum())
    return {
        "tokens": n_tokens,
        "words": doc.words,
        "nats_per_token": nats / n_tokens,
        "nats_per_word": nats / doc.words,
        "per_token_perplexity": math.exp(min(nats / n_tokens, 700.0)),
        "per_word_perplexity": math.exp(min(nats / doc.words, 700.0)),
        "bits_per_byte": nats / max(n_bytes, 1) / math.log(2),
    }
