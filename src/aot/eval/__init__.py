"""Evaluation: language-model loss / perplexity / bits per byte and n-gram reference points."""

from aot.eval.lm import evaluate_lm, ngram_baselines

__all__ = ["evaluate_lm", "ngram_baselines"]
