"""The lm-evaluation-harness model ``aot`` (extra ``aot[eval]``): importing this module registers it with the
harness's model registry. The logic lives in :class:`aot.eval.harness.HarnessLogic`.

    import aot.eval.lm_eval_model  # registers "aot"
    import lm_eval
    results = lm_eval.simple_evaluate(model="aot", model_args="run_dir=runs/lm,batch_size=16", tasks=["lambada_openai"])

The harness downloads its data sets from the HuggingFace hub; where that is impossible (as here) run tasks from
local files (see the harness's docs on ``dataset_path``), or use ``aot eval lm --data``.
"""

from __future__ import annotations

from typing import Any

from lm_eval.api.model import LM
from lm_eval.api.registry import register_model

from aot.eval.harness import HarnessLogic
from aot.eval.lm_folder import load_lm_run


@register_model("aot")
class AotHarnessLM(LM):
    """An AoT run folder (or ``aot export hf`` folder) as a harness model: ``model_args="run_dir=..."``."""

    def __init__(self, run_dir: str, batch_size: int | str = 16, device: str = "cpu", **_: Any) -> None:
        super().__init__()
        self.logic = HarnessLogic(load_lm_run(run_dir, device), int(batch_size), device)

    def loglikelihood(self, requests: list[Any], disable_tqdm: bool = False) -> list[tuple[float, bool]]:
        return self.logic.loglikelihood([tuple(r.args) for r in requests])

    def loglikelihood_rolling(self, requests: list[Any], disable_tqdm: bool = False) -> list[float]:
        return self.logic.loglikelihood_rolling([r.args[0] for r in requests])

    def generate_until(self, requests: list[Any], disable_tqdm: bool = False) -> list[str]:
        return self.logic.generate_until([tuple(r.args) for r in requests])
