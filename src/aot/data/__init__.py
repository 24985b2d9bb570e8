"""Data: text corpora (fetch, cache), text sources streamed as documents, ``aot data prepare`` (llm.c token shards in
bounded memory), tokenizers, memmapped token splits and batch samplers."""

from aot.data.corpora import CORPORA, DEFAULT_CORPUS, data_dir, fetch_corpus, load_text, split_text
from aot.data.prepare import PrepareOptions, prepare
from aot.data.shards import LMBatches, LMData, eval_windows, open_lm_data, prepare_lm_data
from aot.data.sources import resolve
from aot.data.tokenizers import get_tokenizer

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
    "prepare",
    "prepare_lm_data",
    "resolve",
    "split_text",
]
