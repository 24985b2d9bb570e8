"""`aot train vision`: train an image classifier (AoT-MSSA-V, AoT-MHSA-V, ViT, CRATE) on an image set and report
top-1 / top-5 accuracy and loss on a held-out split during training and on the test split at the end.

A run is one config with the sections ``model`` (a model preset plus field overrides), ``train``
(:class:`aot.train.TrainConfig`), ``data`` (the image set, the held-out split, augmentation), ``loss`` (label
smoothing), ``eval`` and ``finetune`` (start from another run's weights with a new classifier). Named training
presets (:data:`VISION_PRESETS`) fill it; ``--config``, flags and ``--set`` override it
(:func:`aot.train.experiment.build_run_config`).
"""

from __future__ import annotations

import argparse
import json
import math
import textwrap
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any, ClassVar

import torch
import torch.nn.functional as F
from torch import nn

from aot.data.images import DEFAULT_IMAGE_SET, IMAGE_SETS, ImageBatches, ImageData, load_images
from aot.devices import resolve_device
from aot.errors import AotError, ConfigError
from aot.eval.vision import evaluate_classifier
from aot.models import build_model
from aot.models.base import AotModel
from aot.runinfo import machine_info
from aot.train import experiment
from aot.train.distributed import barrier, init_distributed
from aot.train.experiment import TaskRun
from aot.train.trainer import Trainer, TrainResult


@dataclass
class VisionDataConfig:
    """dataset: fashion-mnist, mnist, digits, a folder with one sub-folder per class, or hf:NAME.
    val_size: training images held out for the periodic evaluation (a count, or a fraction below 1).
    padding: random-crop padding in pixels (0 = no crop); flip: random horizontal flip (null = the set's
    default: on for Fashion-MNIST and folders, off for digits)."""

    dataset: str = DEFAULT_IMAGE_SET
    val_size: float = 0.1
    padding: int = 2
    flip: bool | None = None

    def __post_init__(self) -> None:
        if self.padding < 0 or self.val_size < 0:
            raise ConfigError(f"data.padding={self.padding} and data.val_size={self.val_size} must be >= 0")


@dataclass
class VisionLossConfig:
    """label_smoothing: ε of the smoothed cross-entropy (targets (1 − ε)·onehot + ε/classes)."""

    label_smoothing: float = 0.1

    def __post_init__(self) -> None:
        if not 0.0 <= self.label_smoothing < 1.0:
            raise ConfigError(f"loss.label_smoothing={self.label_smoothing} must be in [0, 1)")


@dataclass
class VisionEvalConfig:
    """periodic_images: held-out images scored at each evaluation during training (null = all of val);
    batch_size: images per forward pass when evaluating."""

    periodic_images: int | None = 2000
    batch_size: int = 500


@dataclass
class VisionFinetuneConfig:
    """init_from: a run folder (its checkpoint/) or a save_pretrained folder whose weights start this run; the
    model section is then the source model's, with a new classifier for this data set's classes."""

    init_from: str | None = None


_RECIPE = {"precision": "fp32", "optimizer": "adamw", "weight_decay": 0.05, "beta2": 0.99, "min_lr_ratio": 0.01}
_FASHION_TRAIN = {**_RECIPE, "steps": 430, "batch_size": 128, "lr": 1e-3, "warmup_steps": 30, "eval_every": 108}
# CRATE's recipe (Yu et al. 2023): Lion, lr 2e-4 (batch 4096 in their runs), weight decay 0.05
_PAPER_TRAIN = {
    **_RECIPE,
    "optimizer": "lion",
    "lr": 2e-4,
    "steps": 100_000,
    "batch_size": 1024,
    "micro_batch_size": 128,
    "warmup_steps": 5000,
    "eval_every": 5000,
    "checkpoint_every": 5000,
    "precision": "bf16",
}


def _fashion(model: dict[str, Any]) -> dict[str, Any]:
    return {"model": model, "data": {"dataset": "fashion-mnist", "val_size": 5000}, "train": dict(_FASHION_TRAIN)}


def _paper(model: str) -> dict[str, Any]:
    return {"model": {"preset": model}, "data": {"dataset": "", "val_size": 10_000}, "train": dict(_PAPER_TRAIN)}


# Named training presets. The CPU ones train the ~0.8M-parameter models of aot.models.presets on Fashion-MNIST
# for one epoch (430 steps of 128 of the 55,000 training images); the paper's sizes need an ImageNet-style
# folder (--data DIR).
VISION_PRESETS: dict[str, dict[str, Any]] = {
    "aot-mssa": _fashion({"preset": "aot-mssa-v-cpu"}),
    "aot-mhsa": _fashion({"preset": "aot-mhsa-v-cpu"}),
    "transformer": _fashion({"preset": "vit-cpu"}),
    "crate": _fashion({"preset": "crate-v-cpu"}),
    "digits-quick": {
        "model": {"preset": "aot-mssa-v-cpu", "image_size": 8, "patch_size": 2, "n_layer": 4, "n_embd": 128},
        "data": {"dataset": "digits", "val_size": 0.1, "padding": 0},
        "train": {**_RECIPE, "steps": 150, "batch_size": 64, "lr": 2e-3, "warmup_steps": 15, "eval_every": 50},
        "eval": {"periodic_images": None},
    },
    "aot-mssa-s": _paper("aot-mssa-v-s"),
    "aot-mhsa-s": _paper("aot-mhsa-v-s"),
    "vit-s": _paper("vit-s"),
    "crate-b": _paper("crate-v-b"),
}


@dataclass
class VisionRun(TaskRun):
    """The config of ``aot train vision``: sections model, train, data, loss, eval and finetune."""

    task: ClassVar[str] = "image"
    presets: ClassVar[dict[str, dict[str, Any]]] = VISION_PRESETS
    data: VisionDataConfig
    loss: VisionLossConfig
    eval: VisionEvalConfig
    finetune: VisionFinetuneConfig


# preset < config file < flags < --set assignments, validated (see aot.train.experiment.build_run_config)
build_run_config = VisionRun.build


# -- running ----------------------------------------------------------------------------------------------


def check_image_shape(data: ImageData, image_size: int, in_chans: int) -> None:
    """One-line error when the data's images do not fit the model's ``image_size`` × ``image_size`` × ``in_chans``."""
    c, h, w = data.image_shape
    if (c, h, w) != (in_chans, image_size, image_size):
        raise AotError(
            f"{data.name} images are {h}x{w} with {c} channel(s) but the model takes {image_size}x{image_size} "
            f"with {in_chans}; set model.image_size={h} and model.in_chans={c} (square images only) "
            "or resize the images"
        )


def load_init_model(source: str, num_classes: int) -> AotModel:
    """The weights of a trained image model (a run folder or a save_pretrained folder), classifier reset to
    ``num_classes`` outputs (normal(0, init_std) weights, zero bias)."""
    from aot.train.checkpoint import model_folder

    model = AotModel.from_pretrained(model_folder(Path(source)) or Path(source))
    if model.cfg.task != "image":
        raise AotError(f"--init-from {source!r} holds a {model.cfg.task!r} model; fine-tuning needs an image model")
    model.reset_classifier(num_classes)  # type: ignore[operator]
    head = model.get_classifier()  # type: ignore[operator]
    nn.init.normal_(head.weight, std=model.cfg.init_std)
    nn.init.zeros_(head.bias)
    return model


def classification_loss(label_smoothing: float):  # type: ignore[no-untyped-def]
    def loss_fn(model: nn.Module, batch: tuple[torch.Tensor, ...]) -> torch.Tensor:
        """Cross-entropy with label smoothing, mean over the micro-batch: ``batch = (images, labels)``."""
        return F.cross_entropy(model(batch[0]).float(), batch[1], label_smoothing=label_smoothing)

    return loss_fn


def train_vision(
    run: VisionRun,
    out_dir: str | Path,
    device_name: str = "auto",
    resume: bool | str = False,
    force: bool = False,
    stop_at: int | None = None,
) -> dict:
    """Train, evaluate on val and test, and write ``results.json``, ``loss_curve.png`` and ``confusion.png``.
    ``run.train.seed`` seeds everything (model init, augmentation, dropout); ``resume`` / ``force``: see
    :meth:`aot.train.Trainer.fit`. ``stop_at``: stop after that step with a checkpoint and no final evaluation
    (as an interrupted run would)."""
    out = Path(out_dir)
    from aot.train.distributed import env_from_torchrun

    device = resolve_device(device_name, env_from_torchrun().local_rank)
    env = init_distributed(device)
    if not run.data.dataset:
        raise AotError("this preset needs an image set: pass --data FOLDER (one sub-folder per class) or hf:NAME")
    data = load_images(run.data.dataset, run.data.val_size if run.data.val_size < 1 else int(run.data.val_size))
    seed = run.train.seed
    torch.manual_seed(seed)
    if run.finetune.init_from:
        model = load_init_model(run.finetune.init_from, data.num_classes)
    else:
        model = build_model(run.model_config(num_classes=data.num_classes))
    model_cfg = model.cfg
    check_image_shape(data, model_cfg.image_size, model_cfg.in_chans)
    batches = ImageBatches(data, run.train.batch_size, seed=seed, padding=run.data.padding, flip=run.data.flip)
    val_x, val_y = data.splits["val"]

    def periodic_eval(net: nn.Module) -> dict[str, float]:
        if not len(val_y):
            return {}
        s = evaluate_classifier(
            net, val_x, val_y, data.normalise, run.eval.batch_size, run.eval.periodic_images, device
        )
        return {"val_loss": s["loss"], "val_top1": s["top1"], "val_top5": s["top5"]}

    fingerprint = {
        "model": model_cfg.to_dict(),
        "data": {**{k: v for k, v in data.info().items() if k != "classes"}, "config": vars(run.data)},
        "loss": vars(run.loss),
        "init_from": run.finetune.init_from,
        "seed": seed,
    }
    trainer = Trainer(
        model,
        batches,
        classification_loss(run.loss.label_smoothing),
        run.train,
        out,
        device=device,
        evaluate=periodic_eval,
        fingerprint=fingerprint,
        model_config=model_cfg.to_dict(),
    )
    wall_start = time.perf_counter()
    result = trainer.fit(resume=resume, stop_at=stop_at, force=force)
    if stop_at is not None and result.step < run.train.steps:
        return {}
    final = {}
    trainer.model.eval()
    with torch.no_grad(), trainer.autocast():
        for split in ("val", "test"):
            x, y = data.splits[split]
            final[split] = evaluate_classifier(
                trainer.model, x, y, data.normalise, run.eval.batch_size, None, device, data.num_classes
            )
    results: dict[str, Any] = {}
    if env.is_main:
        results = _results(run, model, data, result, final, batches, seed, time.perf_counter() - wall_start)
        out.mkdir(parents=True, exist_ok=True)
        (out / "results.json").write_text(json.dumps(results, indent=2) + "\n")
        plot_loss_curve(out, results)
        plot_confusion(out, results)
    barrier()
    return results


def _results(run, model, data, result: TrainResult, final, batches, seed, wall) -> dict:  # type: ignore[no-untyped-def]
    cfg = model.cfg
    return {
        "task": "image",
        "machine": machine_info(),
        "seed": seed,
        "config": run.to_dict(),
        "model": {
            "block": cfg.block,
            "n_layer": cfg.n_layer,
            "n_embd": cfg.n_embd,
            "n_head": cfg.n_head,
            "norm": cfg.norm,
            "residual_scale": cfg.residual_scale,
            "patch_size": cfg.patch_size,
            "params": model.num_params(),
            "non_embedding_params": model.num_params(non_embedding=True),
        },
        "data": data.info(),
        "train": {
            "steps": result.step,
            "images": result.tokens,
            "epochs": batches.epochs(result.step),
            "train_seconds": result.train_seconds,
            "wall_seconds": wall,
            "images_per_second": result.tokens_per_second,
            "final_train_loss": result.last_loss,
            "curve": [{"step": s, "loss": v} for s, v in result.losses],
            "evals": result.evals,
        },
        "val": final["val"],
        "test": final["test"],
    }


def plot_loss_curve(out: Path, results: dict[str, Any]) -> Path:
    """Training loss (label-smoothed) and held-out loss against training images."""
    model, train = results["model"], results["train"]
    return experiment.plot_training_curve(
        out,
        train["curve"],
        train["evals"],
        x_per_step=train["images"] / max(train["steps"], 1),
        x_label="training images",
        eval_key="val_loss",
        y_label="cross-entropy (nats)",
        title=f"{model['block']} L={model['n_layer']} d={model['n_embd']} on {results['data']['name']}: "
        f"test top-1 {100 * results['test']['top1']:.1f}%",
    )


def plot_confusion(out: Path, results: dict[str, Any], filename: str = "confusion.png") -> Path:
    """The test confusion matrix, rows normalised to the fraction of each true class."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    counts = torch.tensor(results["test"]["confusion"], dtype=torch.float64)
    fractions = counts / counts.sum(dim=1, keepdim=True).clamp_min(1)
    classes = results["data"]["classes"]
    size = max(4.0, 0.45 * len(classes) + 2)
    fig, ax = plt.subplots(figsize=(size, size))
    ax.imshow(fractions.numpy(), cmap="Blues", vmin=0, vmax=1)
    if len(classes) <= 20:
        for t in range(len(classes)):
            for p in range(len(classes)):
                if counts[t, p]:
                    colour = "white" if fractions[t, p] > 0.5 else "black"
                    ax.text(p, t, f"{int(counts[t, p])}", ha="center", va="center", fontsize=7, color=colour)
        ax.set_xticks(range(len(classes)), classes, rotation=60, ha="right", fontsize=8)
        ax.set_yticks(range(len(classes)), classes, fontsize=8)
    ax.set_xlabel("predicted")
    ax.set_ylabel("true")
    ax.set_title(f"{results['model']['block']} on {results['data']['name']} test: {100 * results['test']['top1']:.1f}%")
    fig.tight_layout()
    path = out / filename
    fig.savefig(path, dpi=120)
    plt.close(fig)
    return path


# -- command line -----------------------------------------------------------------------------------------


def register(subparsers: argparse._SubParsersAction) -> None:
    parser = subparsers.add_parser(
        "vision",
        help="train an image classifier (AoT-MSSA-V, AoT-MHSA-V, ViT, CRATE)",
        description=textwrap.fill(
            "Train an image classifier with the shared trainer (AdamW or Lion, warm-up + cosine, label smoothing, "
            "random crop + flip computed from the step, so --resume is exact) and report top-1 / top-5 accuracy "
            "and loss on a held-out part of the training set during training and on the test set at the end. "
            "Writes results.json, loss_curve.png, confusion.png, metrics.jsonl and checkpoint/ into --out. "
            "Fashion-MNIST (the default) comes from Debian: apt-get install -y dataset-fashion-mnist.",
            width=100,
        ),
        epilog="Examples:\n"
        "  aot train vision                                # AoT-MSSA-V on Fashion-MNIST, 1 epoch\n"
        "  aot train vision --preset transformer --seed 1  # the ViT baseline\n"
        "  aot train vision --preset digits-quick          # seconds, scikit-learn digits\n"
        "  aot train vision --data mnist --out runs/mnist\n"
        "  aot train vision --data mnist --init-from runs/vision --out runs/ft   # new classifier\n"
        "  aot train vision --set train.optimizer=lion --set train.lr=2e-4\n"
        "  aot train vision --out runs/vision --resume     # continue an interrupted run exactly\n"
        "Presets:\n"
        "  aot-mssa, aot-mhsa, transformer, crate   ~0.8M parameters each (aot models), Fashion-MNIST 28x28\n"
        "                                           patch 7, 1 epoch (430 x 128), AdamW 1e-3, fp32\n"
        "  digits-quick                             scikit-learn 8x8 digits, 150 steps, > 80% in seconds\n"
        "  aot-mssa-s, aot-mhsa-s, vit-s, crate-b   the paper's ImageNet sizes (224, patch 16), Lion 2e-4;\n"
        "                                           need --data FOLDER (one sub-folder per class)\n"
        "Print the full config with --dump-config.",
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    parser.add_argument(
        "--data", help=f"image set: {', '.join(IMAGE_SETS)}, a folder with one sub-folder per class, or hf:NAME"
    )
    parser.add_argument("--init-from", metavar="DIR", help="start from this run's weights with a new classifier")
    parser.add_argument("--label-smoothing", type=float, help="label smoothing epsilon (default 0.1)")
    experiment.add_train_args(parser, VISION_PRESETS, default_preset="aot-mssa", default_out="runs/vision")
    parser.set_defaults(func=run_command)


def run_command(args: argparse.Namespace) -> int:
    flags = experiment.train_flags(args)
    for section, key, value in (
        ("data", "dataset", args.data),
        ("finetune", "init_from", args.init_from),
        ("loss", "label_smoothing", args.label_smoothing),
    ):
        if value is not None:
            flags.setdefault(section, {})[key] = value
    run = build_run_config(args.preset, args.config, flags, args.set, model_preset=args.model)
    if args.dump_config:
        print(experiment.dump_config(run), end="")
        return 0
    results = train_vision(run, args.out, args.device, **experiment.fit_options(args))
    if results:
        model, train, test = results["model"], results["train"], results["test"]
        print(
            f"{model['block']} ({model['params'] / 1e6:.2f}M params) {train['epochs']:.1f} epochs of "
            f"{results['data']['name']} in {train['train_seconds']:.0f}s ({train['images_per_second']:,.0f} img/s): "
            f"test top-1 {100 * test['top1']:.2f}%, top-5 {100 * test['top5']:.2f}%, loss {test['loss']:.4f}; "
            f"val top-1 {100 * results['val']['top1']:.2f}%. Wrote {Path(args.out) / 'results.json'}"
        )
    if not math.isfinite(results.get("test", {}).get("loss", 0.0)):
        raise AotError("training diverged (non-finite test loss); lower --lr")
    return 0
