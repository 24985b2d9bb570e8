"""The paper's zero-shot protocols (LAMBADA, CBT, perplexity; the Austen-built sets) on trained language-model
run folders: which tasks exist, where their data is, one run scored on one task, many runs into one results
mapping and its Markdown table (the logic of `aot eval lm`, :mod:`aot.cli.eval_lm`)."""

from __future__ import annotations

import hashlib
import json
import sys
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from aot.errors import AotError
from aot.eval import zeroshot, zeroshot_data
from aot.eval.austen_sets import SET_NAMES, build_austen_sets
from aot.eval.lm_folder import LMRunFolder, load_lm_run
from aot.eval.scoring import Scorer, model_scorer
from aot.models.budget import check_fits, forward_need, machine_memory
from aot.runinfo import machine_info
from aot.validation import integer


@dataclass(frozen=True)
class ZeroShotTask:
    name: str
    kind: str  # lambada, cbt, perplexity
    reader: Callable[[Path], Any]
    what: str


ZEROSHOT_TASKS: dict[str, ZeroShotTask] = {
    t.name: t
    for t in [
        ZeroShotTask("lambada", "lambada", zeroshot_data.read_lambada, "LAMBADA .jsonl / .txt (--data)"),
        ZeroShotTask("cbt-cn", "cbt", zeroshot_data.read_cbt, "CBT common nouns, cbtest_CN_*.txt (--data)"),
        ZeroShotTask("cbt-ne", "cbt", zeroshot_data.read_cbt, "CBT named entities, cbtest_NE_*.txt (--data)"),
        ZeroShotTask("ptb", "perplexity", zeroshot_data.read_ptb, "PTB ptb.test.txt (--data)"),
        ZeroShotTask("wikitext", "perplexity", zeroshot_data.read_wikitext, "WikiText-103 wiki.test.raw (--data)"),
        ZeroShotTask("austen-lambada", "lambada", zeroshot_data.read_lambada, "LAMBADA-style, from Austen"),
        ZeroShotTask("austen-cbt-cn", "cbt", zeroshot_data.read_cbt, "CBT-CN-style, from Austen"),
        ZeroShotTask("austen-cbt-ne", "cbt", zeroshot_data.read_cbt, "CBT-NE-style, from Austen"),
        ZeroShotTask("austen-ppl", "perplexity", zeroshot_data.read_plain_text, "Persuasion's opening, plain text"),
    ]
}
#: what ``--task austen`` expands to (the default)
AUSTEN_TASKS = list(SET_NAMES)
#: the most windows one forward pass scores (memory is checked as well, against the model's size)
MAX_BATCH_SIZE = 4096
#: the range of each numeric option, stated once: :func:`evaluate_runs` checks it, `aot eval lm` parses with it
EVAL_OPTIONS = {"--batch-size": integer(1, MAX_BATCH_SIZE), "--stride": integer(1), "--limit": integer(1)}


def resolve_tasks(names: list[str]) -> list[str]:
    out: list[str] = []
    for item in names:
        for name in filter(None, (n.strip() for n in item.split(","))):
            expanded = AUSTEN_TASKS if name == "austen" else [name]
            for task in expanded:
                if task not in ZEROSHOT_TASKS:
                    raise AotError(
                        f"unknown task {task!r}; use one of {', '.join(ZEROSHOT_TASKS)} or austen (all Austen sets)"
                    )
                if task not in out:
                    out.append(task)
    return out


def resolve_data(tasks: list[str], data: list[str]) -> dict[str, Path]:
    """Paths of the tasks' files: ``--data PATH`` (one data-set task) or ``--data TASK=PATH``; Austen sets built."""
    real = [t for t in tasks if not t.startswith("austen-")]
    paths: dict[str, Path] = {}
    for item in data:
        task, sep, path = item.partition("=")
        if sep and task in ZEROSHOT_TASKS:
            paths[task] = Path(path)
        elif len(real) == 1:
            paths[real[0]] = Path(item)
        else:
            raise AotError(f"--data {item!r}: with {len(real)} data-set tasks write --data TASK=PATH")
    for task in real:
        if task not in paths:
            raise AotError(
                f"task {task!r} needs its data file: --data PATH ({ZEROSHOT_TASKS[task].what}); it is not bundled"
            )
    to_build = [t for t in tasks if t.startswith("austen-") and t not in paths]  # --data gives a set's file too
    if to_build:
        built = build_austen_sets()
        paths.update({t: built[t] for t in to_build if t in built})
    return paths


def check_run_options(run: LMRunFolder, batch_size: int, stride: int | None) -> None:
    """A run's scoring must fit: ``--stride`` at most its block_size - 1 (a rolling window keeps context), a batch of
    ``--batch-size`` full windows in memory (:func:`aot.models.budget.forward_need`). One line naming the run."""
    if stride is not None and stride > run.block_size - 1:
        raise AotError(
            f"--stride={stride} is more than {run.name}'s block_size - 1 = {run.block_size - 1}; "
            "a window scores at most that many new tokens"
        )
    need = forward_need(run.model.cfg, batch_size, run.block_size)
    check_fits(need, machine_memory(), f"--batch-size, now {batch_size}, for {run.name}")


def score_task(task: ZeroShotTask, loaded: Any, run: LMRunFolder, scorer: Scorer, stride: int | None) -> dict[str, Any]:
    if task.kind == "lambada":
        return zeroshot.lambada(loaded, run.tokenizer, scorer)
    if task.kind == "cbt":
        return zeroshot.cbt(loaded, run.tokenizer, scorer, run.block_size)
    return zeroshot.perplexity(loaded, run.tokenizer, scorer, run.block_size, stride)


def evaluate_runs(
    run_dirs: list[str],
    tasks: list[str],
    data: list[str],
    device: str = "cpu",
    batch_size: int = 16,
    stride: int | None = None,
    limit: int | None = None,
) -> dict[str, Any]:
    """Every task on every run; the dict written to results.json. The options are checked first
    (:data:`EVAL_OPTIONS`), then the data files are read, then the runs are loaded and each checked against its
    batch (memory, stride), all before anything is scored."""
    for flag, value in (("--batch-size", batch_size), ("--stride", stride), ("--limit", limit)):
        if value is not None:
            EVAL_OPTIONS[flag].named(flag).check(value)
    tasks = resolve_tasks(tasks)
    paths = resolve_data(tasks, data)
    loaded = {t: ZEROSHOT_TASKS[t].reader(paths[t]) for t in tasks}  # read (and check) every file before any model runs
    if limit is not None:
        loaded = {t: v[:limit] if isinstance(v, list) else v for t, v in loaded.items()}
    runs = [load_lm_run(d, device) for d in run_dirs]
    for run in runs:
        check_run_options(run, batch_size, stride)
    results: dict[str, Any] = {
        "task": "eval-lm",
        "machine": machine_info(),
        "date": time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime()),
        "protocols": {
            "lambada": "table: acc_whole_word (greedy decoding writes the word and ends it); ppl per target word",
            "cbt": "candidate with the highest log p(candidate + rest of the query | context + query prefix); "
            "the rest of the query cut to block_size // 2 - (longest candidate) tokens",
            "perplexity": f"rolling windows, stride {stride or 'block_size // 2'}; per token and per word",
            "truncation": "contexts longer than the model's block_size keep their last tokens (left truncation)",
        },
        "sets": {
            t: {
                "path": str(paths[t]),
                "sha256": _sha(paths[t]),
                "what": ZEROSHOT_TASKS[t].what,
                "items": _count(loaded[t]),
            }
            for t in tasks
        },
        "runs": {},
    }
    for run in runs:
        scorer = model_scorer(run.model, run.block_size, batch_size, device, progress=run.name)
        row: dict[str, Any] = {
            "path": str(run.path),
            "block": run.model.cfg.block,
            "n_layer": run.model.cfg.n_layer,
            "block_size": run.block_size,
            "tokenizer": run.tokenizer.name,
            "non_embedding_params": run.model.num_params(non_embedding=True),
            "training": training_record(run.path),
        }
        if any(t.startswith("austen-") for t in tasks) and trained_on_austen(row["training"]):
            row["austen_held_out"] = False
            print(
                f"aot: note: {run.name} was trained on Austen, so the austen-* sets are not held out for it; "
                "its scores there are in-domain, not zero-shot",
                file=sys.stderr,
            )
        for task in tasks:
            start = time.perf_counter()
            row[task] = score_task(ZEROSHOT_TASKS[task], loaded[task], run, scorer, stride)
            row[task]["seconds"] = time.perf_counter() - start
        results["runs"][run.name] = row
    return results


def training_record(run_dir: Path) -> dict[str, Any] | None:
    """What the run's own results.json says of its training (tokens seen, val / test loss and nats per byte), so a
    zero-shot table can show the in-domain loss beside the zero-shot numbers; None for an export or a run that has
    not finished."""
    path = run_dir / "results.json"
    try:
        result = json.loads(path.read_text())
        return {
            "corpus": str(result["config"]["data"]["corpus"]),
            "tokens": result["train"]["tokens"],
            **{f"{split}_{key}": result[split][key] for split in ("val", "test") for key in ("loss", "nats_per_byte")},
        }
    except (OSError, ValueError, KeyError, TypeError):
        return None


def trained_on_austen(training: dict[str, Any] | None) -> bool:
    """Whether a run's training corpus was Austen's novels, from which the austen-* sets are built."""
    return training is not None and "austen" in training.get("corpus", "").lower()


def _sha(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()[:16]


def _count(loaded: Any) -> int:
    return len(loaded) if isinstance(loaded, list) else int(loaded.words)


def headline(task: str, scores: dict[str, Any]) -> str:
    kind = ZEROSHOT_TASKS[task].kind
    if kind == "lambada":
        return f"{100 * scores['acc_whole_word']:.1f}% / {scores['perplexity']:.4g}"
    if kind == "cbt":
        return f"{100 * scores['accuracy']:.1f}%"
    return f"{scores['per_token_perplexity']:.3f} / {scores['per_word_perplexity']:.4g}"


def markdown_table(results: dict[str, Any]) -> str:
    tasks = list(results["sets"])
    names = {
        "lambada": "acc % / ppl",
        "cbt": "acc %",
        "perplexity": "ppl per token / per word",
    }
    head = (
        "| run | block | non-emb. params | "
        + " | ".join(f"{t} ({names[ZEROSHOT_TASKS[t].kind]})" for t in tasks)
        + " |"
    )
    lines = [head, "|" + "---|" * (3 + len(tasks))]
    for name, row in results["runs"].items():
        cells = [headline(t, row[t]) for t in tasks]
        lines.append(
            f"| {name} | {row['block']} | {row['non_embedding_params'] / 1e6:.2f}M | " + " | ".join(cells) + " |"
        )
    return "\n".join(lines) + "\n"
