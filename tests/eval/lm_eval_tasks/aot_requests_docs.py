"""The documents of the three local lm-evaluation-harness tasks beside this file (their ``custom_dataset``), made
for a byte-level model with a context of 16 tokens (tests/eval/test_lm_eval_plugin.py): each kind of request, and
the cases where conventions could part — an empty context, trailing whitespace in the context, contexts longer
than the model's context, and documents of 1, 2 and 6 rolling windows."""

from __future__ import annotations

from typing import Any

LOGLIKELIHOOD = [
    {"context": "To be, or", "continuation": " not"},
    {"context": "Shall I compare thee ", "continuation": "to a"},  # the trailing space moves to the continuation
    {"context": "", "continuation": "Thou art"},  # conditioned on the prefix token
    {"context": "Rough winds do shake the darling buds of May,\n", "continuation": "And summer"},  # cut from the left
]
MULTIPLE_CHOICE = [
    {"question": "To be, or", "choices": ["not", "yes", "maybe so"], "label": 0},
    {"question": "Shall I compare thee to a summer's", "choices": ["day", "night", "week"], "label": 0},
]
ROLLING = [
    {"text": "Thou art"},
    {"text": "Shall I compare thee to"},
    {"text": "Shall I compare thee to a summer's day? Thou art more lovely and more temperate: rough winds."},
]


def _test_split(docs: list[dict[str, Any]]) -> dict[str, Any]:
    import datasets

    return {"test": datasets.Dataset.from_list(docs)}


def loglikelihood(**_: Any) -> dict[str, Any]:
    return _test_split(LOGLIKELIHOOD)


def multiple_choice(**_: Any) -> dict[str, Any]:
    return _test_split(MULTIPLE_CHOICE)


def rolling(**_: Any) -> dict[str, Any]:
    return _test_split(ROLLING)
