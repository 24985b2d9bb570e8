"""Analysis of trained models: what their attention looks at (``aot viz``)."""

from aot.analysis.attention_maps import class_token_attention

__all__ = ["class_token_attention"]
