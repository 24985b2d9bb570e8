"""In-context-regression run folders against the classical baselines: Garg et al.'s figure — normalised squared
error against the number of in-context examples, for every trained run and every baseline, with bootstrap 5–95 %
bands (the logic of `aot eval icl`, :mod:`aot.cli.eval_icl`).

All runs must share the task and d (they are evaluated on the same held-out prompts, drawn from the first run's
data config, optionally out of distribution)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from aot.data.icl import ICLDataConfig, eval_prompts
from aot.errors import AotError
from aot.eval.icl import BASELINES, baselines_for, bootstrap_band, model_predictions, squared_errors
from aot.loader import load_run as read_run
from aot.models.budget import Need, check_fits, machine_memory
from aot.run_folder import RESULTS_FILE
from aot.runinfo import machine_info
from aot.validation import from_dict, integer, number


def load_run(run_dir: Path) -> tuple[dict[str, Any], Any]:
    """A finished run folder of `aot train icl` (read by :func:`aot.loader.load_run`: checkpoint verified,
    results.json schema-checked): its results.json — with the fields the evaluation reads there (the data config,
    valid as an ``ICLDataConfig``; model; train) — and its trained model."""
    run = read_run(run_dir, task="icl", purpose="`aot eval icl`")
    for dotted in ("config.data.task", "config.data.n_dims", "model", "train"):
        run.need(dotted)
    try:
        from_dict(ICLDataConfig, run.need("config.data"), "config.data")
    except AotError as exc:
        raise AotError(f"{str(run.path / RESULTS_FILE)!r}: {exc}; restore the file the run wrote") from None
    return run.results, run.model


#: the most held-out prompts one `aot eval icl` draws (memory is checked as well: the prompts and the bootstrap)
MAX_PROMPTS = 100_000
#: the range of each numeric option, stated once: :func:`evaluate_runs` checks it, `aot eval icl` parses with it
ICL_EVAL_OPTIONS = {"--prompts": integer(1, MAX_PROMPTS), "--x-scale": number(0, low_open=True)}


def prompts_need(data_cfg: ICLDataConfig, n_prompts: int, n_boot: int) -> Need:
    """The held-out prompts (float64 x, y and w per prompt) and one curve's bootstrap (``n_boot`` resamples of every
    prompt's errors, float64, with their int64 indices)."""
    n = data_cfg.n_points
    parts = {
        "prompts": n_prompts * n * (data_cfg.n_dims + 2) * 8,
        "bootstrap": n_boot * n_prompts * (n + 1) * 8,
    }
    return Need(parts, f"{n_prompts:,} prompts of {n} points in d={data_cfg.n_dims}")


def evaluate_runs(
    run_dirs: list[Path],
    n_prompts: int = 1000,
    x_distribution: str = "gaussian",
    x_scale: float = 2.0,
    baselines: list[str] | None = None,
    n_boot: int = 1000,
    labels: list[str] | None = None,
) -> dict[str, Any]:
    """Curves of every run and baseline on one held-out set. Returns the content of results.json. The options are
    checked first (:data:`ICL_EVAL_OPTIONS`), and the prompts and bootstrap against memory before they are drawn."""
    ICL_EVAL_OPTIONS["--prompts"].named("--prompts").check(n_prompts)
    ICL_EVAL_OPTIONS["--x-scale"].named("--x-scale").check(x_scale)
    runs = [load_run(Path(d)) for d in run_dirs]
    data_cfg = ICLDataConfig(**runs[0][0]["config"]["data"])
    for (results, _), path in zip(runs, run_dirs):
        other = results["config"]["data"]
        if (other["task"], other["n_dims"]) != (data_cfg.task, data_cfg.n_dims):
            raise AotError(
                f"{str(path)!r} was trained on {other['task']} regression in d={other['n_dims']}, the first run on "
                f"{data_cfg.task} in d={data_cfg.n_dims}; evaluate runs of one task and d together"
            )
    check_fits(prompts_need(data_cfg, n_prompts, n_boot), machine_memory(), "--prompts")
    prompts = eval_prompts(data_cfg, n_prompts, x_distribution=x_distribution, x_scale=x_scale)
    curves: dict[str, dict[str, Any]] = {}
    names = labels or [Path(d).name for d in run_dirs]
    for name, (results, model), path in zip(names, runs, run_dirs):
        preds = model_predictions(model, prompts.xs, prompts.ys)
        band = bootstrap_band(squared_errors(preds, prompts.ys, prompts.error_scale), n_boot)
        curves[name] = {"kind": "model", "run": str(path), "model": results["model"], "train": _train_info(results)}
        curves[name].update(band)
    for name in baselines if baselines is not None else baselines_for(data_cfg.task):
        if name not in BASELINES:
            raise AotError(f"unknown baseline {name!r}; use {', '.join(BASELINES)}")
        preds = BASELINES[name](prompts.xs, prompts.ys)
        curves[name] = {"kind": "baseline", **bootstrap_band(squared_errors(preds, prompts.ys, prompts.error_scale))}
    d = data_cfg.n_dims
    for curve in curves.values():
        curve["at"] = {
            k: curve["mean"][i] for k, i in (("k=d/2", d // 2), ("k=d", d), ("k=2d", 2 * d)) if i < len(curve["mean"])
        }
    return {
        "task": "icl-eval",
        "machine": machine_info(),
        "data": vars(data_cfg),
        "x_distribution": x_distribution,
        "x_scale": x_scale if x_distribution == "scaled" else None,
        "n_prompts": n_prompts,
        "error": "mean over prompts of (prediction - y)^2 / E[(w.x)^2] (d for linear / noisy, k for sparse)",
        "band": "5-95 % bootstrap quantiles of that mean (prompts resampled)",
        "curves": curves,
    }


def _train_info(results: dict[str, Any]) -> dict[str, Any]:
    train = results["train"]
    return {k: train[k] for k in ("steps", "prompts", "train_seconds") if k in train}


def plot_curves(results: dict[str, Any], path: Path) -> Path:
    """One figure: every model and baseline, error against in-context examples, bootstrap bands shaded."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, ax = plt.subplots(figsize=(7, 4.5))
    for name, curve in results["curves"].items():
        ks = list(range(len(curve["mean"])))
        style = "-" if curve["kind"] == "model" else "--"
        (line,) = ax.plot(ks, curve["mean"], style, label=name, lw=1.5 if curve["kind"] == "model" else 1)
        ax.fill_between(ks, curve["low"], curve["high"], color=line.get_color(), alpha=0.15)
    d = results["data"]["n_dims"]
    ax.axvline(d, color="gray", lw=0.8, ls=":")
    ax.set_xlabel("in-context examples k")
    ax.set_ylabel("squared error / d" if results["data"]["task"] != "sparse" else "squared error / k (non-zeros)")
    ax.set_ylim(0, 1.6)
    where = results["x_distribution"] + (f" x{results['x_scale']}" if results["x_scale"] else "")
    ax.set_title(f"{results['data']['task']} regression, d = {d}, x {where}")
    ax.legend(fontsize=8, ncol=2)
    fig.tight_layout()
    fig.savefig(path, dpi=120)
    plt.close(fig)
    return path


def summary_table(results: dict[str, Any]) -> str:
    lines = [f"{'curve':<28} {'k=d/2':>8} {'k=d':>8} {'k=2d':>8}"]
    for name, curve in results["curves"].items():
        at = curve["at"]
        lines.append(
            f"{name[:28]:<28} " + " ".join(f"{at.get(k, float('nan')):>8.3f}" for k in ("k=d/2", "k=d", "k=2d"))
        )
    return "\n".join(lines)
