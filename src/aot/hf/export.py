"""``aot export hf``: a language-model run as a HuggingFace folder that loads with transformers alone.

The folder holds config.json (``AotConfig``, with ``auto_map`` naming the two code files below) + model.safetensors
(``AotForCausalLM``), generation_config.json, the tokenizer as a ``PreTrainedTokenizerFast`` (:mod:`aot.hf.tokenizer`)
and our own record of it (so ``aot sample`` / ``aot eval lm`` read the folder), ``configuration_aot.py`` and
``modeling_aot.py`` (aot's code for the model, torch and transformers only: :mod:`aot.hf.standalone`) and a README.
It is written all at once and never over a user's run unless ``force`` (:mod:`aot.train.export_folder`).
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

from aot.blockspec import block_spec
from aot.config import ModelConfig
from aot.hf.configuration_aot import AotConfig
from aot.hf.modeling_aot import AotForCausalLM
from aot.hf.standalone import configuration_source, modeling_source
from aot.hf.tokenizer import hf_tokenizer, special_token

#: what config.json's auto_map names: the classes transformers loads with trust_remote_code=True
AUTO_MAP = {"AutoConfig": "configuration_aot.AotConfig", "AutoModelForCausalLM": "modeling_aot.AotForCausalLM"}


def hf_config(cfg: ModelConfig, **extra: Any) -> AotConfig:
    """The HF config of a model of ``cfg``: ours under ``aot``, the sizes under HF's names, and ``auto_map``."""
    return AotConfig(
        aot=cfg.to_dict(),
        vocab_size=cfg.vocab_size,
        max_position_embeddings=cfg.block_size,
        hidden_size=cfg.n_embd,
        num_hidden_layers=cfg.n_layer,
        num_attention_heads=cfg.n_head,
        auto_map=AUTO_MAP,  # type: ignore[call-arg]  # PreTrainedConfig takes it (and any other key) as kwargs
        **extra,
    )


def export_hf(run_dir: str | Path, out_dir: str | Path, force: bool = False) -> Path:
    """Write ``out_dir`` from the language-model run ``run_dir`` (see the module docstring); the modelling code is
    assembled and checked before anything is written."""
    from transformers import GenerationConfig

    from aot.data.tokenizers import save_tokenizer
    from aot.eval.lm_folder import load_lm_run
    from aot.train.export_folder import export_folder

    out = Path(out_dir)
    with export_folder(out, "hf", run_dir, force) as scratch:
        run = load_lm_run(run_dir)
        cfg = run.model.cfg
        modeling, requirements = modeling_source(cfg.block)
        tokenizer = hf_tokenizer(run.tokenizer, cfg.block_size)
        wrapped = AotForCausalLM(hf_config(cfg), model=run.model)
        # no eos_token_id: generate runs to max_new_tokens, as `aot sample` does (the models have no end-of-text)
        wrapped.generation_config = GenerationConfig(
            bos_token_id=tokenizer.bos_token_id, pad_token_id=tokenizer.pad_token_id
        )
        with _quiet_progress():
            wrapped.save_pretrained(scratch)
        tokenizer.save_pretrained(scratch)
        save_tokenizer(run.tokenizer, scratch)  # writes aot_tokenizer.json (and a trained BPE's tokenizer.json again)
        (scratch / "configuration_aot.py").write_text(configuration_source(), encoding="utf-8")
        (scratch / "modeling_aot.py").write_text(modeling, encoding="utf-8")
        (scratch / "README.md").write_text(
            readme(run, out, requirements, special_token(run.tokenizer)), encoding="utf-8"
        )
    return out


@contextmanager
def _quiet_progress() -> Iterator[None]:
    """No progress bar from transformers (one file of a small model: ``aot export hf`` prints one line)."""
    from transformers.utils import logging as hf_logging

    shown = hf_logging.is_progress_bar_enabled()
    hf_logging.disable_progress_bar()
    try:
        yield
    finally:
        if shown:
            hf_logging.enable_progress_bar()


def readme(run: Any, out: Path, requirements: list[str], special: str) -> str:
    """The export's README: what it is, how to load it with and without aot."""
    cfg = run.model.cfg
    return (
        f"# {run.name}: an aot language model ({cfg.block}, {cfg.n_layer} layers, context {cfg.block_size} tokens)\n\n"
        f"Exported by `aot export hf` from {json.dumps(str(run.path))}. Tokenizer: {run.tokenizer.name} "
        f"(eos, bos and pad: {special!r}).\n\n"
        f"## Load it with transformers alone (needs {', '.join(requirements)})\n\n"
        "`modeling_aot.py` and `configuration_aot.py` are aot's own code for this model, so transformers asks you to\n"
        "trust it:\n\n"
        "    from transformers import AutoModelForCausalLM, AutoTokenizer\n"
        f"    model = AutoModelForCausalLM.from_pretrained({str(out)!r}, trust_remote_code=True)\n"
        f"    tokenizer = AutoTokenizer.from_pretrained({str(out)!r}, trust_remote_code=True)\n\n"
        "## Or with aot installed (`pip install aot[hf]`)\n\n"
        "    import aot.hf  # registers model type 'aot' with the Auto classes\n"
        f"    model = AutoModelForCausalLM.from_pretrained({str(out)!r})\n\n"
        "Without either, transformers stops with `trust_remote_code=True` in its message: pass it, or\n"
        "`pip install aot` and `import aot.hf` first.\n\n"
        f"`generate()` runs to `max_new_tokens` (no end-of-text token stops it) and, past the context of "
        f"{cfg.block_size} tokens, slides its window as `aot sample` does. {padding_note(cfg.block)}\n"
    )


def padding_note(block: str) -> str:
    """What the README says of padding for ``block``: attention blocks take it on either side; a recurrent block's
    state would take in a left pad."""
    if not block_spec(block).recurrent:
        return (
            "Batches may be padded (an `attention_mask` with zeros; left padding for `generate`, as pipelines pad): "
            "each prompt gets what it gets alone."
        )
    return (
        f"Block {block!r} is recurrent: batches may be padded on the right only (a left pad would enter its state), "
        "so `generate` takes one prompt length per batch."
    )
