"""Data: text corpora (fetch, cache, contiguous split), tokenizers, memmapped token shards and batch samplers."""

from aot.data.corpora import CORPORA, DEFAULT_CORPUS, data_dir, fetch_corpus, load_text, split_text
from aot.data.shards import LMBatches, LMData, eval_windows, prepare_lm_data
from aot.data.tokenizers import get_tokenizer

__all__ = [
    "CORPORA",
    "DEFAULT_CORPUS",
    "LMBatches",
    "LMData",
    "data_dir",
    "eval_windows",
    "fetch_corpus",
    "get_tokenizer",
    "load_text",
    "prepare_lm_data",
    "split_text",
]
