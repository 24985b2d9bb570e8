"""The lm-evaluation-harness model ``aot`` (extra ``aot[eval]``); the logic lives in :mod:`aot.eval.harness`.

How lm-eval finds it: lm-eval keeps its models in ``lm_eval.api.registry.model_registry``, whose entries may be lazy
placeholders (``"module:Class"`` strings or ``importlib.metadata`` entry points). aot declares the entry point
``aot = "aot.eval.lm_eval_model:AotHarnessLM"`` in the group ``lm_eval.models`` (pyproject.toml), the group lm-eval's
plugin discovery reads (``registry.load_plugins``, EleutherAI/lm-evaluation-harness#4013, after 0.4.13): there
``lm_eval --model aot --model_args pretrained=RUN_DIR ...`` works from the shell once aot is installed. lm-eval up to
0.4.13 reads no entry point (its registry holds its own ``MODEL_MAPPING`` and what imported modules register), so
there the shell command is ``aot eval harness RUN_DIR ...`` (:func:`run_command_line`: lm-eval's own ``lm-eval run``
with this model and ``pretrained=RUN_DIR``), and Python registers the model by importing this module::

    import aot.eval.lm_eval_model  # registers "aot" (lm-eval <= 0.4.13; later ones find the entry point)
    import lm_eval
    results = lm_eval.simple_evaluate(model="aot", model_args="pretrained=runs/lm,batch_size=16", tasks=["hellaswag"])

Importing it also registers lm-eval's own models (``import lm_eval.models``): 0.4.13's ``get_model`` imports them
only into an empty registry, so ``"aot"`` alone would hide ``"hf"`` and the rest.

The harness downloads its data sets from the HuggingFace hub; offline, run tasks from local files (a task's
``custom_dataset`` or ``dataset_kwargs``), or use ``aot eval lm --data``.
"""

from __future__ import annotations

import contextlib
import io
import sys
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import lm_eval.models  # noqa: F401  (lm-eval's own models, before "aot" makes the registry non-empty)
from lm_eval.api.model import LM
from lm_eval.api.registry import model_registry, register_model
from lm_eval.utils import simple_parse_args_string

from aot.errors import AotError
from aot.eval.harness import (
    MODEL_NAME,
    HarnessLogic,
    harness_device,
    model_arguments,
    parse_batch_size,
    parse_dtype,
)
from aot.eval.lm_folder import LMRunFolder, load_lm_run

#: runs ``aot eval harness`` loaded before lm-eval started, by (run folder, device): the model takes them from here
PRELOADED: dict[tuple[str, str], LMRunFolder] = {}


class AotHarnessLM(LM):
    """An aot run folder (or ``aot export hf`` folder) as a harness model: ``--model_args pretrained=RUN_DIR``
    (``run_dir=`` is taken too; lm-eval names its output folder after ``pretrained``), optionally ``dtype=float64``
    and the rest (:mod:`aot.eval.harness`)."""

    def __init__(
        self, pretrained: str, batch_size: int | str = 16, device: str | None = None, dtype: Any = "auto", **_: Any
    ) -> None:
        super().__init__()
        self._device, self.batch_size = harness_device(device), parse_batch_size(batch_size)  # LM.device reads _device
        cast = parse_dtype(dtype)
        run = PRELOADED.pop(_key(pretrained, self._device), None) or load_lm_run(pretrained, self._device)
        if cast is not None:
            run.model.to(cast)
        self.logic = HarnessLogic(run, self.batch_size, self._device)

    @classmethod
    def create_from_arg_string(cls, arg_string: str, additional_config: dict | None = None) -> AotHarnessLM:
        return cls(**model_arguments(simple_parse_args_string(arg_string), additional_config))

    @classmethod
    def create_from_arg_obj(cls, arg_dict: dict, additional_config: dict | None = None) -> AotHarnessLM:
        return cls(**model_arguments(arg_dict, additional_config))

    def loglikelihood(self, requests: list[Any], disable_tqdm: bool = False) -> list[tuple[float, bool]]:
        return self.logic.loglikelihood([tuple(r.args) for r in requests])

    def loglikelihood_rolling(self, requests: list[Any], disable_tqdm: bool = False) -> list[float]:
        return self.logic.loglikelihood_rolling([r.args[0] for r in requests])

    def generate_until(self, requests: list[Any], disable_tqdm: bool = False) -> list[str]:
        return self.logic.generate_until([tuple(r.args) for r in requests])


if MODEL_NAME not in model_registry:  # else lm-eval's entry-point placeholder, which resolves to AotHarnessLM
    register_model(MODEL_NAME)(AotHarnessLM)


def run_command_line(argv: Sequence[str], run: LMRunFolder, run_dir: str, device: str) -> int:
    """lm-eval's own command line (what its ``lm_eval`` script does) on ``argv``
    (:func:`aot.eval.harness.lm_eval_argv`: ``run`` with the model ``aot`` and ``pretrained=run_dir``), handing the
    model ``run`` (loaded already, on ``device``) instead of loading it again. An option lm-eval's parser refuses is
    one line."""
    from lm_eval._cli import HarnessCLI
    from lm_eval.utils import setup_logging

    setup_logging()
    cli, complaint = HarnessCLI(), io.StringIO()
    saved = sys.argv
    sys.argv = ["lm-eval", *argv]
    try:
        with contextlib.redirect_stderr(complaint):
            args = cli.parse_args()
    except SystemExit as exit_:  # --help (printed) or a bad option (argparse's usage and message, kept here)
        if not exit_.code:
            return 0
        message = complaint.getvalue().strip().splitlines()[-1].split("error: ", 1)[-1]
        raise AotError(f"lm-eval run: {message} (see `lm-eval run --help`)") from None
    finally:
        sys.argv = saved
    PRELOADED[_key(run_dir, device)] = run
    try:
        cli.execute(args)
    finally:
        PRELOADED.clear()
    return 0


def _key(run_dir: str, device: str) -> tuple[str, str]:
    return str(Path(run_dir).resolve()), device
