"""`aot export safetensors RUN_DIR OUT_DIR`: one ``model.safetensors`` + ``config.json`` from a run's checkpoint.

A run trained with FSDP in several processes keeps sharded checkpoints (``checkpoint/sharded``, one file per
process, written through ``torch.distributed.checkpoint``); this command reads the shards in one process
(``torch.distributed.checkpoint.load`` without a process group) into the model built from ``config.json`` and
writes the single file that ``AotModel.from_pretrained(OUT_DIR)`` loads. A full-format checkpoint is verified and
re-saved the same way.
"""

from __future__ import annotations

import warnings
from pathlib import Path

from aot.errors import AotError
from aot.loader import find_model, load_model
from aot.models.base import AotModel
from aot.run_folder import MODEL_CONFIG
from aot.train.checkpoint import FORMAT_SHARDED, SHARDED_DIR
from aot.train.export_folder import check_out, export_folder

FORMAT = "safetensors"  # the name of this format in `aot export` and in the export's aot_export.json


def export_safetensors(run_dir: str | Path, out_dir: str | Path, force: bool = False) -> Path:
    """Write ``model.safetensors`` + ``config.json`` of the newest good checkpoint of ``run_dir`` (a run folder
    or a checkpoint folder) into ``out_dir``, all at once and never over a user's run unless ``force``
    (:mod:`aot.train.export_folder`); returns ``out_dir``."""
    run_dir, out = Path(run_dir), Path(out_dir)
    check_out(out, FORMAT, force)  # before any reading: a refused OUT_DIR costs nothing
    source = find_model(run_dir)  # the newest checkpoint that verifies (a notice if it falls back), else one line
    folder, state = source.path, source.state or {}
    if not (folder / MODEL_CONFIG).is_file():
        raise AotError(f"checkpoint {str(folder)!r} has no {MODEL_CONFIG}; it was not written by `aot train`")
    if out.resolve() == folder.resolve():
        raise AotError("OUT_DIR must differ from the checkpoint folder")
    with export_folder(out, FORMAT, folder, force) as scratch:
        if state.get("format") == FORMAT_SHARDED:
            model = _load_sharded(folder)
        else:
            model = load_model(source)
        model.save_pretrained(scratch)
    return out


def _load_sharded(folder: Path) -> AotModel:
    import torch.distributed.checkpoint as dcp

    from aot.models import build_model
    from aot.models.weights import read_model_config

    model = build_model(read_model_config(folder / MODEL_CONFIG)[0])
    state = {"model": model.state_dict()}
    try:
        with warnings.catch_warnings():  # "loading in a single process": exactly the intent here
            warnings.simplefilter("ignore", UserWarning)
            dcp.load(state, checkpoint_id=str(folder / SHARDED_DIR), no_dist=True)
    except Exception as exc:  # DCP wraps what failed in its own exception type
        first = (str(exc).strip().splitlines() or [type(exc).__name__])[0]
        raise AotError(f"cannot read the sharded checkpoint {str(folder)!r}: {first}") from None
    model.load_state_dict(state["model"])
    return model
