"""Data: text corpora (fetch, cache), text sources streamed as documents, ``aot data prepare`` (llm.c token shards in
bounded memory), tokenizers, memmapped token splits and batch samplers."""

from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from aot.data.corpora import CORPORA, DEFAULT_CORPUS, data_dir, fetch_corpus, load_text, split_text
    from aot.data.prepare import PrepareOptions
    from aot.data.shards import LMBatches, LMData, eval_windows, open_lm_data, prepare_lm_data
    from aot.data.sources import resolve
    from aot.data.tokenizers import get_tokenizer

# loaded on first use (PEP 562): the streaming pipeline (sources, prepare, llmc, tokenizers) runs without torch
_LAZY = {
    **dict.fromkeys(["CORPORA", "DEFAULT_CORPUS", "data_dir", "fetch_corpus", "load_text", "split_text"], "corpora"),
    "PrepareOptions": "prepare",  # the function is aot.data.prepare.prepare (the module's name is not shadowed)
    **dict.fromkeys(["LMBatches", "LMData", "eval_windows", "open_lm_data", "prepare_lm_data"], "shards"),
    "resolve": "sources",
    "get_tokenizer": "tokenizers",
}


def __getattr__(name: str) -> Any:
    if name in _LAZY:
        import importlib

        value = getattr(importlib.import_module(f"aot.data.{_LAZY[name]}"), name)
        globals()[name] = value
        return value
    raise AttributeError(f"module 'aot.data' has no attribute {name!r}")


__all__ = [
    "CORPORA",
    "DEFAULT_CORPUS",
    "LMBatches",
    "LMData",
    "PrepareOptions",
    "data_dir",
    "eval_windows",
    "fetch_corpus",
    "get_tokenizer",
    "load_text",
    "open_lm_data",
    "prepare_lm_data",
    "resolve",
    "split_text",
]
