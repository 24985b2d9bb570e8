"""HuggingFace ``transformers`` (extra ``aot[hf]``): an aot language model as ``AotConfig`` / ``AotForCausalLM``
(model type ``aot``), registered with ``AutoConfig`` / ``AutoModelForCausalLM`` when this package is imported, its
tokenizer as a ``PreTrainedTokenizerFast``, and ``export_hf`` (``aot export hf``).

An export carries its own modelling code (``auto_map`` in its config.json; :mod:`aot.hf.standalone`), so where aot is
not installed ``AutoModelForCausalLM.from_pretrained(EXPORT, trust_remote_code=True)`` loads it. With aot installed::

    import aot.hf  # registers "aot" with the Auto classes
    from transformers import AutoModelForCausalLM, AutoTokenizer
    model = AutoModelForCausalLM.from_pretrained("exports/lm")   # written by `aot export hf RUN_DIR exports/lm`

Why ``import aot.hf`` registers and ``import aot`` does not: registering needs transformers' model classes, and
``import aot.hf`` takes 4.1 s in a fresh Python against 1.6 s for ``import aot`` (benchmarks/integrations/), which
every ``aot`` command would pay; transformers 5 has no entry point through which a package could register lazily.
``trust_remote_code=True`` needs no aot import at all.

The wrapper (:mod:`aot.hf.modeling_aot`) holds aot's ``CausalLM`` as ``self.aot``: its logits are the model's own;
``generate()`` works greedy, sampling, beam, assisted and prompt-lookup on our cache (:mod:`aot.hf.cache`,
transformers' ``Cache`` API; MSSA still stores one tensor per layer), and slides its window past the context as
``aot sample`` does. Padding (left or right), ``output_hidden_states``, ``output_attentions``, ``inputs_embeds``,
gradient checkpointing and ``resize_token_embeddings`` work as transformers' users expect; a recurrent block takes
right padding only (refused in one line otherwise).
"""

from __future__ import annotations

from transformers import AutoConfig, AutoModelForCausalLM

from aot.hf.cache import AotCache
from aot.hf.configuration_aot import AotConfig
from aot.hf.export import export_hf, hf_config
from aot.hf.modeling_aot import AotForCausalLM
from aot.hf.tokenizer import hf_tokenizer

AutoConfig.register("aot", AotConfig, exist_ok=True)
AutoModelForCausalLM.register(AotConfig, AotForCausalLM, exist_ok=True)

__all__ = ["AotCache", "AotConfig", "AotForCausalLM", "export_hf", "hf_config", "hf_tokenizer"]
