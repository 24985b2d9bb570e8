"""Part ``lm``: the paper's four language models (GPT-2 Base, AoT-MHSA-L Base, AoT-MSSA-L Base and Medium) trained
with ``aot train lm`` at the preset's size, their val / test loss and the gap to GPT-2 beside the paper's.

CPU presets keep the paper's proportions at a small size: the three Base models at matched non-embedding
parameters (attention-only models get the extra depth), and (``full``; ``quick`` leaves it out for time) Medium at
about twice AoT-MSSA Base's parameters with a wider model (the paper's 182M against 102M: 2.1× the non-embedding
parameters). ``paper`` is the
paper's recipe on OpenWebText with GPT-2 BPE under torchrun; it needs GPUs and ``--data openwebtext=...``.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from aot.data.sources import check_text_source
from aot.errors import AotError
from aot.report.document import Block, Figure, Paragraph, Table
from aot.report.paper_numbers import LM_BASELINE, LM_MODELS, LM_RECIPE, lm_gap
from aot.report.part import (
    Context,
    Part,
    Plan,
    Step,
    checkout_record,
    differences_blocks,
    fmt_count,
    read_step_results,
)
from aot.sweep import read_store, store_spec

# paper model -> (our preset, model overrides) per CPU preset; the paper preset uses the paper-scale presets
CPU_MODELS: dict[str, dict[str, tuple[str, dict[str, Any]]]] = {
    "tiny": {
        "GPT-2 Base": ("gpt2-cpu", {"n_layer": 1, "n_embd": 32}),
        "AoT-MSSA-L Base": ("aot-mssa-l-cpu", {"n_layer": 2, "n_embd": 32}),
    },
    "quick": {  # 1.58M non-embedding parameters each; no Medium (it took 10 of the 34 minutes of the first quick)
        "GPT-2 Base": ("gpt2-cpu", {"n_layer": 2}),
        "AoT-MHSA-L Base": ("aot-mhsa-l-cpu", {"n_layer": 6}),
        "AoT-MSSA-L Base": ("aot-mssa-l-cpu", {"n_layer": 12}),
    },
    "full": {  # 4.75M non-embedding parameters each (as benchmarks/lm); Medium 9.77M (2.06×)
        "GPT-2 Base": ("gpt2-cpu", {}),
        "AoT-MHSA-L Base": ("aot-mhsa-l-cpu", {}),
        "AoT-MSSA-L Base": ("aot-mssa-l-cpu", {}),
        "AoT-MSSA-L Medium": ("aot-mssa-l-cpu", {"n_layer": 33, "n_embd": 384, "n_head": 6}),
    },
}
# Every CPU model trains with rotary positions at its family's best lr in benchmarks/lm's rotary sweep (tag rope:
# lr 1e-3 / 3e-3 / 1e-2, 4.7M parameters, 1M byte tokens): with learned absolute positions the attention-only models
# stay at the bigram level on budgets like these (benchmarks/lm/README.md). The lrs are read from the benchmark's
# record (benchmarks/lm/results.json of this checkout, or --data lm-sweep=FILE), by the sweep engine's rule (each
# model's seed-0 sweep winner): recorded results stay with the benchmark, not in the package.
CPU_POSITION = "rope"
LM_SWEEP = checkout_record("lm", "results.json")  # None when installed from a wheel: --data lm-sweep=FILE
LM_SWEEP_ROWS = {"tag": "rope", "tokenizer": "bytes", "position": CPU_POSITION, "extra": []}  # the sweep read
# training options per CPU preset (the cpu-bench recipe: AdamW, warm-up, cosine, precision auto)
CPU_TRAIN: dict[str, list[str]] = {
    "tiny": ["--steps", "4", "--set", "model.block_size=32", "--set", "train.eval_every=2",
             "--set", "eval.periodic_windows=4", "--set", "eval.final_windows=8"],
    "quick": ["--steps", "200", "--set", "model.block_size=128", "--set", "train.eval_every=50"],
    "full": ["--steps", "1000", "--set", "train.eval_every=100", "--set", "train.checkpoint_every=100"],
}  # fmt: skip


def cpu_lrs(ctx: Context) -> tuple[dict[str, float], list[str]]:
    """Each model preset's best lr in benchmarks/lm's rotary sweep (:data:`LM_SWEEP_ROWS`), and why some are
    missing (no record here: the report then lists the steps without running them)."""
    given = ctx.data.get("lm-sweep") or LM_SWEEP
    if not given:
        return {}, [
            "this install holds no recorded lr sweep (a checkout's benchmarks/lm/results.json): pass --data "
            "lm-sweep=FILE"
        ]
    path = Path(given)
    if not path.is_file():
        return {}, [f"no lr sweep recorded at {path} (benchmarks/lm/results.json): pass --data lm-sweep=FILE"]
    try:
        store = read_store(path)
        summaries = store_spec(store).summaries(store["runs"])
    except AotError as exc:
        return {}, [str(exc)]
    lrs = {s.get("model"): s.lr for s in summaries if all(s.get(k) == v for k, v in LM_SWEEP_ROWS.items())}
    wanted = {preset for models in CPU_MODELS.values() for preset, _ in models.values()}
    absent = sorted(wanted - set(lrs))
    return lrs, [f"{path} has no lr sweep of {', '.join(absent)} (tag rope, bytes)"] if absent else []


def _slug(name: str) -> str:
    return name.lower().replace(" ", "-")


def _is_shards(spec: str) -> bool:
    """Whether ``spec`` names token shards (a folder `aot data prepare` wrote, llm.c .bin files) rather than text."""
    path = Path(spec).expanduser()
    if path.is_dir():
        return (path / "meta.json").is_file() or any(path.glob("*.bin"))
    return spec.endswith(".bin")


def _paper_steps(ctx: Context) -> tuple[list[Step], list[str]]:
    """The paper's recipe at the paper's scale: torchrun over the GPUs present (8 when none), from GPT-2 shards.
    OpenWebText given as text (a folder of .txt, .jsonl, parquet, hf:NAME) is prepared first, once, by a step of
    its own; given as shards (``aot data prepare``'s folder, llm.c .bin files) it is used as it is."""
    gpus = ctx.cuda_devices or 8
    source = ctx.data.get("openwebtext", "OPENWEBTEXT")
    steps: list[Step] = []
    shards = source
    if not _is_shards(source):
        prepare = Step("openwebtext-gpt2", ["data", "prepare", source, "--tokenizer", "gpt2"], results="meta.json")
        steps.append(prepare)
        shards = str(prepare.out_dir(ctx.part_dir))
    per_gpu = 12
    accumulation = max(1, round(LM_RECIPE["tokens_per_step"] / (per_gpu * 1024 * gpus)))
    train = [
        "--recipe", "gpu-base", "--data", shards,
        "--steps", str(LM_RECIPE["steps"]), "--batch-size", str(per_gpu * gpus * accumulation),
        "--lr", str(LM_RECIPE["lr"]), "--set", f"train.micro_batch_size={per_gpu}",
        "--set", f"train.warmup_steps={LM_RECIPE['warmup_steps']}", "--set", "train.min_lr_ratio=0.1",
        "--set", "model.block_size=1024", "--set", "train.checkpoint_every=2000", "--set", "train.eval_every=2000",
        "--set", "train.precision=bf16", "--set", "train.checkpoint_minutes=0", "--set", "eval.final_windows=4000",
    ]  # fmt: skip
    launcher = ["torchrun", f"--nproc_per_node={gpus}"]
    steps += [Step(_slug(m.name), ["train", "lm", "--model", m.preset, *train], launcher, True) for m in LM_MODELS]
    missing = []
    if not ctx.cuda_devices:
        missing.append("no CUDA GPU here: the paper's models (102M-182M, 600k steps of ~0.5M tokens) need GPUs")
    if "openwebtext" not in ctx.data:
        missing.append(
            "no OpenWebText given: pass --data openwebtext=PATH (text: .txt / .jsonl / parquet files or folders, "
            "hf:NAME; or shards made by `aot data prepare ... --tokenizer gpt2`, or llm.c .bin files)"
        )
    return steps, missing


def plan(ctx: Context) -> Plan:
    if ctx.preset == "paper":
        steps, missing = _paper_steps(ctx)
        return Plan(steps, settings={"models": {m.name: m.preset for m in LM_MODELS}}, missing=missing)
    corpus = ctx.data.get("text", "shakespeare")
    lrs, missing = cpu_lrs(ctx)
    steps = []
    for name, (preset, overrides) in CPU_MODELS[ctx.preset].items():
        argv = ["train", "lm", "--recipe", "cpu-bench", "--model", preset, "--corpus", corpus, "--tokenizer", "bytes"]
        for k, v in overrides.items():
            argv += ["--set", f"model.{k}={v}"]
        argv += ["--set", f"model.position={CPU_POSITION}", *(["--lr", f"{lrs[preset]:g}"] if preset in lrs else [])]
        argv += [*CPU_TRAIN[ctx.preset], "--set", "train.progress=false"]
        steps.append(Step(_slug(name), argv, resumable=ctx.preset == "full"))
    models = {name: [preset, overrides] for name, (preset, overrides) in CPU_MODELS[ctx.preset].items()}
    return Plan(steps, settings={"models": models, "corpus": corpus}, missing=missing)


def collect(part_dir: Path, plan: Plan) -> dict[str, Any]:
    runs = []
    for name in plan.settings["models"]:
        r = read_step_results(part_dir, plan, _slug(name))
        runs.append(
            {
                "paper_model": name,
                "step": _slug(name),
                "preset": r["config"]["model"]["preset"],
                "block": r["model"]["block"],
                "n_layer": r["model"]["n_layer"],
                "n_embd": r["model"]["n_embd"],
                "non_embedding_params": r["model"]["non_embedding_params"],
                "tokens": r["train"]["tokens"],
                "tokens_per_step": r["train"]["tokens"] / max(r["train"]["steps"], 1),
                "val_loss": r["val"]["loss"],
                "test_loss": r["test"]["loss"],
                "val_nats_per_byte": r["val"]["nats_per_byte"],
                "bigram_val_loss": r["baselines"]["val"]["bigram"]["loss"],
                "unigram_val_loss": r["baselines"]["val"]["unigram"]["loss"],
                "tokens_per_second": r["train"]["tokens_per_second"],
                "train_seconds": r["train"]["train_seconds"],
                "evals": [{"step": e["step"], "val_loss": e["val_loss"]} for e in r["train"]["evals"]],
                "tokenizer": r["data"]["tokenizer"],
                "corpus": r["config"]["data"]["corpus"],
                "context": r["config"]["model"].get("block_size"),
                "position": r["config"]["model"].get("position") or "learned",
                "lr": r["config"]["train"]["lr"],
                "machine": r["machine"],
            }
        )
    plot_val_curves(runs, part_dir / "val_loss.png")
    return {"runs": runs, "figures": {"val_loss.png": "Validation loss during training, every model"}}


def plot_val_curves(runs: list[dict[str, Any]], path: Path) -> Path:
    """Validation loss against training tokens for every run, with the bigram as a reference line."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, ax = plt.subplots(figsize=(7, 4))
    for run in runs:
        xs = [e["step"] * run["tokens_per_step"] for e in run["evals"]]
        ax.plot(xs, [e["val_loss"] for e in run["evals"]], marker="o", ms=3,
                label=f"{run['paper_model']} ({run['block']} L={run['n_layer']})")  # fmt: skip
    ax.axhline(runs[0]["bigram_val_loss"], color="grey", ls="--", lw=1, label="bigram (val)")
    ax.set_xlabel("training tokens")
    ax.set_ylabel(f"val loss (nats / token, {runs[0]['tokenizer']})")
    ax.legend(fontsize=8)
    ax.grid(alpha=0.3)
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)
    return path


def render(results: dict[str, Any], part_dir: Path) -> list[Block]:
    runs = results["runs"]
    paper = {m.name: m for m in LM_MODELS}
    base = next((r["val_loss"] for r in runs if r["paper_model"] == LM_BASELINE), None)
    rows = []
    for r in runs:
        gap = (
            "—" if base is None or r["paper_model"] == LM_BASELINE else f"{100 * (r['val_loss'] - base) / base:+.1f} %"
        )
        p = paper[r["paper_model"]]
        paper_gap = "—" if p.name == LM_BASELINE else f"{100 * lm_gap(p.name):+.1f} %"
        rows.append(
            [
                p.name,
                f"`{r['preset']}` {r['n_layer']} × {r['n_embd']}",
                fmt_count(r["non_embedding_params"]),
                fmt_count(r["tokens"]),
                f"{r['val_loss']:.3f}",
                f"{r['test_loss']:.3f}",
                gap,
                "yes" if r["val_loss"] < r["bigram_val_loss"] else "no",
                p.params,
                f"{p.val_loss:.2f}",
                paper_gap,
            ]
        )
    first = runs[0]
    table = Table(
        f"Val / test loss in nats per token ({first['tokenizer']} tokenizer) on {first['corpus']} (ours) beside the "
        "paper's final val loss on OpenWebText (nats per GPT-2 BPE token); gap = relative to GPT-2's val loss",
        [
            "paper's model",
            "ours",
            "non-emb. params",
            "tokens",
            "val loss",
            "test loss",
            "gap to GPT-2",
            "beats bigram",
            "paper: params",
            "paper: val loss",
            "paper: gap",
        ],
        rows,
    )
    bigram = ", ".join(sorted({f"{r['bigram_val_loss']:.3f}" for r in runs}))
    blocks: list[Block] = [
        table,
        Paragraph(
            f"Reference points on val (fitted on train): bigram {bigram}, unigram {first['unigram_val_loss']:.3f} "
            f"nats/token. Training speed: "
            + ", ".join(f"{r['paper_model']} {r['tokens_per_second']:,.0f} tok/s" for r in runs)
            + " (a shared machine: read ±30 %)."
        ),
        *[Figure(part_dir / rel, caption) for rel, caption in results["figures"].items()],
    ]
    paper_tokens = LM_RECIPE["steps"] * LM_RECIPE["tokens_per_step"]
    differences = [
        f"Data: {first['corpus']} with the {first['tokenizer']} tokenizer, not OpenWebText with GPT-2 BPE, so the "
        "losses are in other units and only the gaps to GPT-2 compare.",
        f"Scale: {fmt_count(min(r['non_embedding_params'] for r in runs))}-"
        f"{fmt_count(max(r['non_embedding_params'] for r in runs))} non-embedding parameters and "
        f"{fmt_count(first['tokens'])} training tokens each, against 102M-182M parameters and "
        f"{paper_tokens / 1e9:.0f}B tokens: these runs sit at the very start of training.",
        f"Context {first['context']} (the paper: {LM_RECIPE['context']}); one seed; the paper's exact depths and "
        "widths are not published (ours are chosen to match its parameter counts).",
        "Positions "
        + ", ".join(sorted({r.get("position", "learned") for r in runs}))
        + "; lr "
        + ", ".join(f"{r['paper_model']} {r['lr']:g}" for r in runs if "lr" in r)
        + " (CPU presets: each family's best lr of benchmarks/lm's rotary sweep). The paper's models are GPT-2's, "
        "with learned absolute positions and one recipe for all.",
    ]
    if not all(r["val_loss"] < r["bigram_val_loss"] for r in runs):
        differences.append("Some models have not beaten the bigram yet: their gaps say little.")
    return [*blocks, *differences_blocks(differences)]


PART = Part(
    name="lm",
    title="Language modelling: AoT against GPT-2",
    paper_items=("lm-val-loss",),
    plan=plan,
    collect=collect,
    render=render,
    data=("text", "openwebtext", "lm-sweep"),
    data_checks={"text": check_text_source},
)
