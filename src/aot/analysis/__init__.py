"""Look inside trained models (issue: do trained AoT layers denoise as Theorem 1 says?).

Everything here reads a model through its hook points (``run_with_cache``) and its attention weights:
:mod:`~aot.analysis.denoising` (energy shares, subspace SNR, coding rates), :mod:`~aot.analysis.profile`
(the per-layer profile of a model), :mod:`~aot.analysis.heads` (W_Q, W_K, W_V, W_O per head),
:mod:`~aot.analysis.circuits` (QK/OV spectra, composition, previous-token and induction scores),
:mod:`~aot.analysis.geometry` (principal angles, distance from orthogonality), :mod:`~aot.analysis.vision`
(class-token attention entropy), :mod:`~aot.analysis.recall_attention` (where each head of an MQAR model
looks: the matching key, the value after it, itself, the previous token), :mod:`~aot.analysis.recall_hits` (the
recall-hit split of an LM's loss), :mod:`~aot.analysis.attention_maps` / :mod:`~aot.cli.viz` (`aot viz
attention`), :mod:`~aot.analysis.calibration` (Definition 1 data, where the answer is
known) and :mod:`~aot.analysis.analyze` / :mod:`~aot.cli.analyze` (`aot analyze`).
"""

from aot.analysis.attention_maps import class_token_attention

__all__ = ["class_token_attention"]
