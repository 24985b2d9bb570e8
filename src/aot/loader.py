"""Everything a command reads from a run folder (``aot train TASK --out DIR``) or an export folder (``aot export
hf``, ``aot export safetensors``, ``save_pretrained``), through one entry point, :func:`load_run`:

- **the model**, from the newest checkpoint whose checksums verify (:func:`aot.run_folder.model_folder`): a damaged
  latest one falls back to ``checkpoint.prev`` with a one-line notice on stderr, as ``--resume`` does; when none
  verifies it is one line and no model is used. A folder without ``trainer.json`` (``save_pretrained``, an export)
  has no checksums and loads as it is. ``config.json`` and ``model.safetensors`` are read by
  :meth:`aot.models.AotModel.from_pretrained` (the config validated, the weights' shapes checked against it);
- **results.json**, schema-checked (:data:`RESULTS_SCHEMA`: every field a command reads has its JSON type); absent
  for an unfinished run or an export, which is ``{}``; :meth:`LoadedRun.need` asks for a field a command needs;
- **the tokenizer** of a language model (:func:`aot.data.tokenizers.load_tokenizer`).

Every problem is one :class:`aot.errors.AotError` line naming the file, the field and the fix — never a
JSONDecodeError, KeyError or AttributeError. The commands (``aot sample``, ``aot eval lm / icl``, ``aot analyze``,
``aot viz attention``, ``aot export hf / safetensors``, ``aot train vision --init-from``) all read through here.
"""

from __future__ import annotations

import sys
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from aot.config import ModelConfig
from aot.data.tokenizers import Tokenizer, load_tokenizer
from aot.errors import AotError
from aot.models.base import AotModel
from aot.run_folder import (
    MODEL_WEIGHTS,
    NUMBER,
    RESULTS_FILE,
    ModelFolder,
    RunFileError,
    json_field,
    read_json_object,
    require_model_folder,
)

#: the command that trains a model of each task, what writes a folder it loads from, and what the model is called
TRAIN_COMMANDS = {"lm": "aot train lm", "image": "aot train vision", "icl": "aot train icl"}
WRITTEN_BY = {
    "lm": "`aot train lm --out DIR` or `aot export hf`",
    "image": "`aot train vision --out DIR`",
    "icl": "`aot train icl --out DIR`",
}
MODEL_KINDS = {"lm": "a language model", "image": "an image classifier", "icl": "an in-context regression model"}

#: the JSON type of every results.json field a command reads (checked whenever the field is there)
RESULTS_SCHEMA: dict[str, type | tuple[type, ...]] = {
    "task": str,
    "config": dict,
    "config.data": dict,
    "config.model": dict,
    "config.train": dict,
    "config.data.tokenizer": str,
    "config.data.corpus": str,
    "config.data.val_fraction": NUMBER,
    "config.data.test_fraction": NUMBER,
    "config.data.dataset": str,
    "config.data.val_size": NUMBER,
    "config.data.task": str,
    "config.data.n_dims": int,
    "config.data.vocab_size": int,
    "config.data.seq_len": int,
    "config.data.n_pairs": int,
    "model": dict,
    "train": dict,
    "train.steps": int,
    "train.tokens": int,
    "val": dict,
    "val.accuracy": NUMBER,
    "test": dict,
    "test.accuracy": NUMBER,
    "baselines": dict,
    "baselines.val": dict,
    "baselines.val.bigram": dict,
    "baselines.val.bigram.nats_per_byte": NUMBER,
}
#: fields that must be there whenever the section holding them is
RESULTS_REQUIRED_IN_SECTION = ("baselines.val.bigram.nats_per_byte",)
RESULTS_FIX = "restore the results.json the run wrote, or train the run again"


def print_notice(line: str) -> None:
    """How a fallback is said: one ``aot: note:`` line on stderr."""
    print(f"aot: note: {line}", file=sys.stderr)


@dataclass
class LoadedRun:
    """A run or export folder, read: ``path`` as given, the ``model`` (eval mode) and where it came from
    (``source``: the folder, its checkpoint step, the damaged checkpoints passed over), ``results`` (the
    schema-checked results.json; ``{}`` for an unfinished run or an export), the ``tokenizer`` of a language
    model (None otherwise, or when not asked for)."""

    path: Path
    model: AotModel
    source: ModelFolder
    results: dict[str, Any] = field(default_factory=dict)
    tokenizer: Tokenizer | None = None

    @property
    def config(self) -> ModelConfig:
        return self.model.cfg

    @property
    def train_command(self) -> str:
        return TRAIN_COMMANDS.get(self.config.task, "aot train TASK")

    def need(self, dotted: str) -> Any:
        """The results.json field ``dotted`` (``config.data.dataset``) that a command needs; one line naming the
        file and the field when the run has not finished or its results.json lacks it."""
        if not self.results and not (self.path / RESULTS_FILE).exists():
            raise AotError(
                f"{str(self.path)!r} is not a finished `{self.train_command}` run: it has no {RESULTS_FILE} yet; "
                f"wait until its training finishes (or finish it with `{self.train_command} --resume --out DIR`)"
            )
        kinds = RESULTS_SCHEMA.get(dotted, (object, bool))
        value = json_field(self.results, dotted, kinds, self.path / RESULTS_FILE, RESULTS_FIX)
        if value is None:
            raise RunFileError(
                self.path / RESULTS_FILE,
                f"has no {dotted}",
                f"it was not written by `{self.train_command}`; restore the file the run wrote, or train it again",
            )
        return value


def load_run(
    path: str | Path,
    device: str = "cpu",
    *,
    task: str | tuple[str, ...] | None = None,
    purpose: str = "this command",
    tokenizer: bool = True,
    notify: Callable[[str], None] = print_notice,
) -> LoadedRun:
    """Read the run or export folder ``path``: the model (on ``device``, eval mode) from the newest checkpoint that
    verifies, results.json, and for a language model its tokenizer (unless ``tokenizer=False``). ``task``: the
    model task(s) ``purpose`` accepts (``lm``, ``image``, ``icl``); a model of another is one line. Falling back
    past a damaged checkpoint is said through ``notify`` (default: a note on stderr)."""
    path = Path(path)
    tasks = (task,) if isinstance(task, str) else task
    source = find_model(path, tasks, notify)
    results = read_run_results(path)
    model = load_model(source)
    cfg = model.cfg
    if tasks is not None and cfg.task not in tasks:
        wanted = " or ".join(f"{MODEL_KINDS[t]} (a run of `{TRAIN_COMMANDS[t]}`)" for t in tasks)
        raise AotError(
            f"{str(path)!r} holds {MODEL_KINDS.get(cfg.task, repr(cfg.task))} ({cfg.block}); {purpose} needs {wanted}"
        )
    recorded = results.get("task")
    if recorded is not None and recorded != cfg.task:
        raise AotError(
            f"{str(path)!r} mixes two runs: {RESULTS_FILE} is of a {recorded!r} run, {source.path.name}/ holds a "
            f"{cfg.task!r} model; give a folder that one training wrote"
        )
    loaded = LoadedRun(path, model.to(device).eval(), source, results)
    if tokenizer and cfg.task == "lm":
        loaded.tokenizer = load_tokenizer(path, source.path)
        if loaded.tokenizer.vocab_size > cfg.vocab_size:
            raise AotError(
                f"{str(path)!r}: tokenizer {loaded.tokenizer.name} has {loaded.tokenizer.vocab_size} tokens but the "
                f"model only {cfg.vocab_size}; the folder mixes two runs"
            )
    return loaded


def find_model(
    path: Path, tasks: tuple[str, ...] | None = None, notify: Callable[[str], None] = print_notice
) -> ModelFolder:
    """The folder of ``path`` whose model is to be read — verified (:func:`aot.run_folder.model_folder`), each
    damaged checkpoint passed over said through ``notify`` — or one line: no such folder, no model, none verifies."""
    if not path.exists():
        if tasks:
            finished = " or ".join(f"`{TRAIN_COMMANDS[t]}`" for t in tasks)
            raise AotError(
                f"{str(path)!r} is not a finished {finished} run: there is no such folder (a run folder holds "
                "checkpoint/ and results.json)"
            )
        raise AotError(
            f"{str(path)!r} holds no good checkpoint or model: there is no such folder; give a run folder "
            "(`aot train TASK --out DIR`) or an export folder"
        )
    if not path.is_dir():
        raise AotError(f"{str(path)!r} is a file; give a run folder (`aot train TASK --out DIR`) or an export folder")
    written_by = " or ".join(WRITTEN_BY[t] for t in tasks) if tasks else "`aot train TASK --out DIR`"
    source = require_model_folder(path, written_by)
    for line in source.notices():
        notify(f"{str(path)!r}: {line}")
    return source


def load_model(source: ModelFolder) -> AotModel:
    """The model in ``source`` (built on the CPU): :meth:`AotModel.from_pretrained` — config.json validated, the
    weights' names and shapes checked against it; a sharded FSDP checkpoint is one line pointing to
    ``aot export safetensors``."""
    state = source.state or {}
    if state.get("format") == "sharded" and not (source.path / MODEL_WEIGHTS).is_file():
        raise AotError(
            f"checkpoint {str(source.path)!r} is sharded (FSDP in several processes); gather it into one file "
            "with `aot export safetensors RUN_DIR OUT_DIR` and give OUT_DIR"
        )
    return AotModel.from_pretrained(source.path)


def read_run_results(run_dir: Path) -> dict[str, Any]:
    """``run_dir/results.json``, every field of :data:`RESULTS_SCHEMA` that is there of its type; ``{}`` when the
    file is absent (a run still training, an export). A corrupt, truncated, non-UTF-8, list-shaped or wrong-typed
    file is one line naming it and the field."""
    path = run_dir / RESULTS_FILE
    if not path.exists():
        return {}
    results = read_json_object(path, RESULTS_FIX)
    for dotted, kinds in RESULTS_SCHEMA.items():
        json_field(results, dotted, kinds, path, RESULTS_FIX)
    for dotted in RESULTS_REQUIRED_IN_SECTION:
        section, name = dotted.rsplit(".", 1)
        if (
            json_field(results, section, dict, path, RESULTS_FIX) is not None
            and json_field(results, dotted, RESULTS_SCHEMA[dotted], path, RESULTS_FIX) is None
        ):
            raise RunFileError(path, f"has {section} without its {name}", RESULTS_FIX)
    return results
