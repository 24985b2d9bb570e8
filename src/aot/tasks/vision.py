"""`aot train vision`: train an image classifier (AoT-MSSA-V, AoT-MHSA-V, ViT, CRATE) on an image set and report
top-1 / top-5 accuracy and loss on a held-out split during training and on the test split at the end.

A run is one config with the sections ``model`` (a model preset plus field overrides), ``train``
(:class:`aot.train.TrainConfig`), ``data`` (the image set, the held-out split, augmentation), ``loss`` (label
smoothing), ``eval`` and ``finetune`` (start from another run's weights with a new classifier). Named training
recipes (:data:`VISION_RECIPES`, named by their data and model: ``fashion-mssa``, ``imagenet-vit-s``, ...; ``aot
train vision --recipe NAME``) fill it; ``--config``, flags and ``--set`` override it
(:meth:`aot.tasks.TaskRun.build`); :func:`aot.tasks.run_task` runs it.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, ClassVar

import torch
import torch.nn.functional as F
from torch import nn

from aot.config import ModelConfig
from aot.data.image_stream import ModelInputs
from aot.data.image_transforms import AUGMENTS
from aot.data.images import DEFAULT_IMAGE_SET, IMAGE_SETS, ImageData, open_images
from aot.errors import AotError, ConfigError, renamed_attributes
from aot.loader import load_run
from aot.models import build_model
from aot.models.base import AotModel
from aot.models.budget import image_tokens
from aot.tasks.figures import plot_training_curve
from aot.tasks.metric import TIMES, Metric, dated_row
from aot.tasks.protocol import SMOKE, Setup, Task, TaskCommand, TaskOption, TaskRun, model_summary, sets_field
from aot.tasks.vision_inputs import VisionData, batch_source, evaluate_split, recipe_of, uses_workers
from aot.train.trainer import Trainer, TrainResult

MAX_WORKERS = 256  # decoding processes per training process


@dataclass
class VisionDataConfig:
    """dataset: fashion-mnist, mnist, digits, hf:NAME, or a folder: ImageNet's layout (train/CLASS + val/CLASS),
    class folders (CLASS/IMAGE), or tar shards from `aot data pack-images`.
    val_size: training images held out for the periodic evaluation (a count, or a fraction below 1).
    augment: auto (pad-crop for the in-memory sets, random-resized-crop for folders), pad-crop (CIFAR's: pad, random
    crop, flip) or random-resized-crop (Inception's, as ViT / DeiT / CRATE train; evaluation resizes to
    image_size / crop_pct and center-crops). scale: RandomResizedCrop's area range. padding: pad-crop's padding in
    pixels (0 = no crop); flip: random horizontal flip (null = the set's default: on, off for digits).
    randaug_ops / randaug_magnitude: RandAugment (0 ops = off; DeiT: 2 ops at 9 of 31).
    mixup / cutmix: the Beta(α, α) of mixup and CutMix (0 = off; DeiT: 0.8 and 1.0), mixed with probability
    mix_prob, CutMix instead of mixup with probability switch_prob when both are on.
    workers: decoding processes per training process (null = the cores, less one, up to 8; 0 = in the loop).
    mean / std: per-channel normalisation on the 0-1 scale (null = the set's: computed on its training split, or on
    stats_images training images of a folder)."""

    dataset: str = DEFAULT_IMAGE_SET
    val_size: float = 0.1
    augment: str = "auto"
    scale: list[float] = field(default_factory=lambda: [0.08, 1.0])
    crop_pct: float = 0.875
    padding: int = 2
    flip: bool | None = None
    randaug_ops: int = 0
    randaug_magnitude: int = 9
    mixup: float = 0.0
    cutmix: float = 0.0
    mix_prob: float = 1.0
    switch_prob: float = 0.5
    workers: int | None = None
    mean: list[float] | None = None
    std: list[float] | None = None
    stats_images: int = 1000

    def __post_init__(self) -> None:
        if self.padding < 0 or self.val_size < 0:
            raise ConfigError(f"data.padding={self.padding} and data.val_size={self.val_size} must be >= 0")
        if self.augment not in ("auto", *AUGMENTS):
            raise ConfigError(f"data.augment={self.augment!r} is not one of auto, {', '.join(AUGMENTS)}")
        if len(self.scale) != 2 or not 0 < self.scale[0] <= self.scale[1] <= 1:
            raise ConfigError(f"data.scale={self.scale} must be [low, high] with 0 < low <= high <= 1")
        if not 0 < self.crop_pct <= 1:
            raise ConfigError(f"data.crop_pct={self.crop_pct} must be in (0, 1]")
        if not 0 <= self.randaug_magnitude <= 30 or self.randaug_ops < 0:
            raise ConfigError(
                f"data.randaug_ops={self.randaug_ops} must be >= 0 and data.randaug_magnitude="
                f"{self.randaug_magnitude} in 0..30"
            )
        if min(self.mixup, self.cutmix) < 0 or not 0 <= self.mix_prob <= 1 or not 0 <= self.switch_prob <= 1:
            raise ConfigError("data.mixup and data.cutmix must be >= 0, data.mix_prob and data.switch_prob in [0, 1]")
        if self.workers is not None and not 0 <= self.workers <= MAX_WORKERS:
            raise ConfigError(
                f"data.workers={self.workers} must be 0 (decode in the training loop) to {MAX_WORKERS} processes"
            )
        for name in ("mean", "std"):
            value = getattr(self, name)
            if value is not None and (len(value) not in (1, 3) or (name == "std" and min(value) <= 0)):
                raise ConfigError(f"data.{name}={value} must list 1 or 3 channels' values (std > 0)")
        if (self.mean is None) != (self.std is None):
            raise ConfigError("set data.mean and data.std together, or neither")
        if self.stats_images < 1:
            raise ConfigError(f"data.stats_images={self.stats_images} must be >= 1")

    def fingerprint(self) -> dict[str, Any]:
        """The fields a resumed run must match: every field but the decoding processes; a field added since a run
        began is left out at its default, so that run still resumes."""
        defaults = VisionDataConfig()
        first = ("dataset", "val_size", "padding", "flip")  # the fields of the first release
        return {k: v for k, v in vars(self).items() if k != "workers" and (k in first or v != getattr(defaults, k))}


@dataclass
class VisionLossConfig:
    """label_smoothing: ε of the smoothed cross-entropy (targets (1 − ε)·onehot + ε/classes)."""

    label_smoothing: float = 0.1

    def __post_init__(self) -> None:
        if not 0.0 <= self.label_smoothing < 1.0:
            raise ConfigError(f"loss.label_smoothing={self.label_smoothing} must be in [0, 1)")


@dataclass
class VisionEvalConfig:
    """periodic_images: images scored at each evaluation during training (null = all of the split; a fixed seeded
    sample of a folder's); periodic_split: val (the held-out training images) or test (e.g. ImageNet's val folder,
    as ImageNet runs report it); batch_size: images per forward pass when evaluating."""

    periodic_images: int | None = 2000
    periodic_split: str = "val"
    batch_size: int = 500

    def __post_init__(self) -> None:
        if self.periodic_split not in ("val", "test"):
            raise ConfigError(f"eval.periodic_split={self.periodic_split!r} must be val or test")


@dataclass
class VisionFinetuneConfig:
    """init_from: a run folder (its checkpoint/) or a save_pretrained folder whose weights start this run; the
    model section is then the source model's, with a new classifier for this data set's classes."""

    init_from: str | None = None


_RECIPE = {"precision": "fp32", "optimizer": "adamw", "weight_decay": 0.05, "beta2": 0.99, "min_lr_ratio": 0.01}
_FASHION_TRAIN = {**_RECIPE, "steps": 430, "batch_size": 128, "lr": 1e-3, "warmup_steps": 30, "eval_every": 108}
# The paper's ImageNet-1K recipe (Wang et al. 2025, section 4: "the CRATE recipe"): Lion, lr 2e-4, weight decay 0.05,
# batch 512, 200 epochs of the 1,281,167 training images (500,456 steps). Where the paper is silent, DeiT-S's
# recipe decides: 5 warm-up epochs, cosine to 1 % of the peak, RandomResizedCrop 224 + flip, RandAugment 2 ops at
# 9, mixup 0.8, CutMix 1.0, label smoothing 0.1 (DeiT's random erasing and repeated augmentation are not built).
IMAGENET_TRAIN_IMAGES = 1_281_167
IMAGENET_MEAN, IMAGENET_STD = [0.485, 0.456, 0.406], [0.229, 0.224, 0.225]
_PAPER_BATCH = 512
_PAPER_EPOCH = IMAGENET_TRAIN_IMAGES / _PAPER_BATCH  # 2,502.3 steps
_PAPER_TRAIN = {
    **_RECIPE,
    "optimizer": "lion",
    "lr": 2e-4,
    "steps": math.ceil(200 * _PAPER_EPOCH),
    "batch_size": _PAPER_BATCH,
    "micro_batch_size": 64,
    "warmup_steps": round(5 * _PAPER_EPOCH),
    "eval_every": round(_PAPER_EPOCH),
    "checkpoint_every": round(_PAPER_EPOCH),
    "checkpoint_minutes": 0,
    "precision": "bf16",
}
_PAPER_DATA = {
    "dataset": "",
    "val_size": 0,
    "augment": "random-resized-crop",
    "randaug_ops": 2,
    "randaug_magnitude": 9,
    "mixup": 0.8,
    "cutmix": 1.0,
    "mean": IMAGENET_MEAN,
    "std": IMAGENET_STD,
}
_PAPER_EVAL = {"periodic_split": "test", "periodic_images": 10_000, "batch_size": 256}


def _fashion(model: dict[str, Any]) -> dict[str, Any]:
    return {"model": model, "data": {"dataset": "fashion-mnist", "val_size": 5000}, "train": dict(_FASHION_TRAIN)}


def _paper(model: str) -> dict[str, Any]:
    return {
        "model": {"preset": model},
        "data": dict(_PAPER_DATA),
        "train": dict(_PAPER_TRAIN),
        "eval": dict(_PAPER_EVAL),
    }


# Named training recipes, named by data set and model (fashion-*, digits-*, imagenet-*). The CPU ones train the
# ~0.8M-parameter models of aot.models.presets on Fashion-MNIST for one epoch (430 steps of 128 of the 55,000
# training images); the paper's sizes need ImageNet (--data DIR: its train/ + val/ folders, or their tar shards from
# `aot data pack-images`); configs/paper/imagenet-*.yaml spell them out.
VISION_RECIPES: dict[str, dict[str, Any]] = {
    "fashion-mssa": _fashion({"preset": "aot-mssa-v-cpu"}),
    "fashion-mhsa": _fashion({"preset": "aot-mhsa-v-cpu"}),
    "fashion-vit": _fashion({"preset": "vit-cpu"}),
    "fashion-crate": _fashion({"preset": "crate-v-cpu"}),
    "digits-quick": {
        "model": {"preset": "aot-mssa-v-cpu", "image_size": 8, "patch_size": 2, "n_layer": 4, "n_embd": 128},
        "data": {"dataset": "digits", "val_size": 0.1, "padding": 0},
        "train": {**_RECIPE, "steps": 150, "batch_size": 64, "lr": 2e-3, "warmup_steps": 15, "eval_every": 50},
        "eval": {"periodic_images": None},
    },
    "imagenet-mssa-s": _paper("aot-mssa-v-s"),
    "imagenet-mhsa-s": _paper("aot-mhsa-v-s"),
    "imagenet-vit-s": _paper("vit-s"),
    "imagenet-crate-s": _paper("crate-v-s"),
    "imagenet-crate-b": _paper("crate-v-b"),
}
#: the vision recipes' old names, which were block and model names (the old names go in the next release)
VISION_RECIPE_RENAMES: dict[str, str] = {
    "aot-mssa": "fashion-mssa",
    "aot-mhsa": "fashion-mhsa",
    "transformer": "fashion-vit",
    "crate": "fashion-crate",
    "aot-mssa-s": "imagenet-mssa-s",
    "aot-mhsa-s": "imagenet-mhsa-s",
    "vit-s": "imagenet-vit-s",
    "crate-s": "imagenet-crate-s",
    "crate-b": "imagenet-crate-b",
}


@dataclass
class VisionRun(TaskRun):
    """The config of ``aot train vision``: sections model, train, data, loss, eval and finetune."""

    task: ClassVar[str] = "image"
    recipes: ClassVar[dict[str, dict[str, Any]]] = VISION_RECIPES
    recipe_renames: ClassVar[dict[str, str]] = VISION_RECIPE_RENAMES
    data: VisionDataConfig
    loss: VisionLossConfig
    eval: VisionEvalConfig
    finetune: VisionFinetuneConfig


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
    """The weights of a trained image model (a run folder — its newest checkpoint that verifies, read by
    :func:`aot.loader.load_run` — or a save_pretrained folder), in training mode, classifier reset to
    ``num_classes`` outputs (normal(0, init_std) weights, zero bias)."""
    model = load_run(source, task="image", purpose="--init-from (fine-tuning)", tokenizer=False).model.train()
    model.reset_classifier(num_classes)  # type: ignore[operator]
    head = model.get_classifier()  # type: ignore[operator]
    nn.init.normal_(head.weight, std=model.cfg.init_std)
    nn.init.zeros_(head.bias)
    return model


@dataclass
class VisionState:
    """What the final evaluation and the results need from the setup: the batch source, the recipe, and the unreadable
    images the evaluation met."""

    batches: Any
    recipe: Any
    unreadable: dict[str, int] = field(default_factory=dict)


def classification_loss(label_smoothing: float, inputs: ModelInputs | None = None):  # type: ignore[no-untyped-def]
    def loss_fn(model: nn.Module, batch: tuple[torch.Tensor, ...]) -> torch.Tensor:
        """Cross-entropy with label smoothing, mean over the micro-batch of ``inputs(batch) = (images, targets)``
        (:class:`aot.data.image_stream.ModelInputs`: normalised and mixed on the batch's device); targets are class
        ids, or class probabilities (B, classes) after mixup / CutMix."""
        images, targets = inputs(batch) if inputs is not None else batch[:2]
        return F.cross_entropy(model(images).float(), targets, label_smoothing=label_smoothing)

    return loss_fn


#: the numbers a results-store row keeps of a vision run: row field -> where it is in the run's results.json
VISION_FIELDS: dict[str, tuple[str, ...]] = {
    **{name: ("model", name) for name in ("block", "n_layer", "n_embd", "norm", "residual_scale", "params")},
    "epochs": ("train", "epochs"),
    "val_top1": ("val", "top1"),
    **{f"test_{name}": ("test", name) for name in ("top1", "top5", "loss")},
    "images_per_second": ("train", "images_per_second"),
    **TIMES,
}


class VisionTask(Task[VisionData]):
    """Image classification: label-smoothed cross-entropy; top-1 / top-5 / loss on a held-out part of the training
    set during training and on the test split at the end."""

    name = "vision"
    metric = Metric("val_top1", "max", "val top-1")
    smoke = ("digits-quick", (*SMOKE, "model.n_embd=32", "train.batch_size=16"))
    run_cls = VisionRun
    finite_result = ("test", "loss", "test loss")
    command = TaskCommand(
        help="train an image classifier (AoT-MSSA-V, AoT-MHSA-V, ViT, CRATE)",
        description="Train an image classifier with the shared trainer (AdamW or Lion, warm-up + cosine, label "
        "smoothing, augmentation computed from the step, so --resume is exact) and report top-1 / top-5 "
        "accuracy and loss on a held-out part of the training set during training and on the test set at the end. "
        "Writes results.json, loss_curve.png, confusion.png, metrics.jsonl and checkpoint/ into --out. "
        "Fashion-MNIST (the default) comes from Debian: apt-get install -y dataset-fashion-mnist. A folder (ImageNet's "
        "train/ + val/ class folders, class folders, or tar shards from `aot data pack-images`) stays on disk: "
        "data.workers processes decode it, any size and mode, with RandomResizedCrop (+ RandAugment, mixup / CutMix "
        "when set) for training and resize + center crop for evaluation; an image that cannot be decoded is "
        "skipped, counted and replaced by the next one.",
        examples=(
            "aot train vision                                # AoT-MSSA-V on Fashion-MNIST, 1 epoch",
            "aot train vision --recipe fashion-vit --seed 1  # the ViT baseline",
            "aot train vision --recipe digits-quick          # seconds, scikit-learn digits",
            "aot train vision --data mnist --out runs/mnist",
            "aot train vision --data mnist --init-from runs/vision --out runs/ft   # new classifier",
            "aot train vision --set train.optimizer=lion --set train.lr=2e-4",
            "aot train vision --out runs/vision --resume     # continue an interrupted run exactly",
            "aot train vision --data photos/ --set model.image_size=64 --set model.patch_size=8 --set model.in_chans=3",
            "aot data pack-images /data/imagenet --out /data/imagenet-shards   # once: 1,000 tar files, not 1.28M",
            "torchrun --nproc_per_node 8 -m aot.cli train vision --config configs/paper/imagenet-aot-mssa-v-s.yaml \\",
            "    --data /data/imagenet-shards --out runs/in1k-aot-mssa --resume auto",
        ),
        recipe_notes=(
            "fashion-mssa, fashion-mhsa, fashion-vit, fashion-crate   ~0.8M parameters each (aot models),",
            "                            Fashion-MNIST 28x28, patch 7, 1 epoch (430 x 128), AdamW 1e-3, fp32",
            "digits-quick                scikit-learn 8x8 digits, 150 steps, > 80% in seconds",
            "imagenet-mssa-s, imagenet-mhsa-s, imagenet-vit-s, imagenet-crate-s, imagenet-crate-b   the paper's",
            "                            ImageNet-1K runs (224, patch 16): Lion 2e-4, batch 512, 200 epochs,",
            "                            RandAugment, mixup / CutMix; need --data IMAGENET (train/ + val/ class",
            "                            folders, or tar shards)",
            "(renamed: aot-mssa, aot-mhsa, transformer, crate, aot-mssa-s, aot-mhsa-s, vit-s, crate-s, crate-b",
            " still work for one release)",
        ),
        default_recipe="fashion-mssa",
        options=(
            TaskOption(
                "--data",
                f"image set: {', '.join(IMAGE_SETS)}, hf:NAME, or a folder: ImageNet's train/ + val/ class folders, "
                "class folders, or tar shards from `aot data pack-images`",
                sets_field("data", "dataset"),
            ),
            TaskOption(
                "--workers",
                f"processes decoding a folder's images, per training process (0: in the loop; default: the cores, "
                f"less one, up to 8; at most {MAX_WORKERS})",
                sets_field("data", "workers"),
                kind=int,
            ),
            TaskOption(
                "--init-from",
                "start from this run's weights with a new classifier",
                sets_field("finetune", "init_from"),
                metavar="DIR",
            ),
            TaskOption(
                "--label-smoothing",
                "label smoothing epsilon (default 0.1)",
                sets_field("loss", "label_smoothing"),
                kind=float,
            ),
        ),
    )

    def check(self, run: VisionRun, device: torch.device | None = None) -> None:
        """An image set must be named, and the training step must fit in memory (the source run's model, when
        fine-tuning, is checked as it is loaded)."""
        if not run.data.dataset:
            raise AotError(
                "this recipe needs an image set: pass --data DIR (ImageNet's train/ + val/ class folders, class "
                "folders, or tar shards from `aot data pack-images`) or hf:NAME"
            )
        if not run.finetune.init_from:
            self.check_memory(run, *self.planned_model(run), device=device)

    def planned_model(self, run: VisionRun) -> tuple[ModelConfig, int]:
        cfg = run.model_config()
        return cfg, image_tokens(cfg)

    def load_data(self, run: VisionRun, is_main: bool) -> VisionData:
        return open_images(run.data.dataset, run.data.val_size if run.data.val_size < 1 else int(run.data.val_size))

    def build_model(self, run: VisionRun, data: VisionData) -> AotModel:
        if run.finetune.init_from:
            model = load_init_model(run.finetune.init_from, data.num_classes)
        else:
            model = build_model(run.model_config(num_classes=data.num_classes))
        if not uses_workers(data, run.data):  # decoded images are resized and converted to the model's input
            assert isinstance(data, ImageData)
            check_image_shape(data, model.cfg.image_size, model.cfg.in_chans)
        return model

    def seq_len(self, run: VisionRun, model: AotModel) -> int:
        return image_tokens(model.cfg)

    def setup(self, run: VisionRun, data: VisionData, model: AotModel, device: torch.device) -> Setup:
        recipe = recipe_of(data, run.data, model.cfg.image_size, model.cfg.in_chans)
        batches, inputs = batch_source(data, run.data, run.train.batch_size, run.train.seed, recipe)
        periodic = run.eval.periodic_split

        def periodic_eval(net: nn.Module) -> dict[str, float]:
            if not data.size(periodic):
                return {}
            s = evaluate_split(
                net, data, periodic, run.data, recipe, run.eval.batch_size, run.eval.periodic_images, device
            )
            return {f"{periodic}_loss": s["loss"], f"{periodic}_top1": s["top1"], f"{periodic}_top5": s["top5"]}

        info = {k: v for k, v in data.info().items() if k not in ("classes", "notes", "skipped_files")}
        fingerprint = {
            "model": model.cfg.to_dict(),
            "data": {**info, "config": run.data.fingerprint()},
            "loss": vars(run.loss),
            "init_from": run.finetune.init_from,
            "seed": run.train.seed,
        }
        state = VisionState(batches, recipe)
        loss = classification_loss(run.loss.label_smoothing, inputs)
        return Setup(batches, loss, periodic_eval, fingerprint, state=state)

    def final_eval(
        self, run: VisionRun, data: VisionData, setup: Setup, trainer: Trainer, device: torch.device
    ) -> dict:
        final = {}
        for split in ("val", "test"):
            final[split] = evaluate_split(
                trainer.model,
                data,
                split,
                run.data,
                setup.state.recipe,
                run.eval.batch_size,
                None,
                device,
                data.num_classes,
                setup.state.unreadable,
            )
        return final

    def results(
        self, run: VisionRun, data: VisionData, setup: Setup, model: AotModel, result: TrainResult, final: dict
    ) -> dict[str, Any]:
        info = data.info()
        info["image_shape"] = [model.cfg.in_chans, model.cfg.image_size, model.cfg.image_size]
        unreadable = {**getattr(setup.state.batches, "unreadable", {}), **setup.state.unreadable}
        info["unreadable_images"] = {"count": len(unreadable), "first": sorted(unreadable)[:20]}
        return {
            "model": model_summary(model, model.cfg, "n_head", "norm", "residual_scale", "patch_size"),
            "data": info,
            "train": {
                "images": result.seen,
                "epochs": setup.state.batches.epochs(result.step),
                "images_per_second": result.seen_per_second,
                "workers": int(getattr(setup.state.batches, "workers", 0)),
            },
            "val": final["val"],
            "test": final["test"],
        }

    def figures(self, out: Path, results: dict[str, Any]) -> list[Path]:
        return [plot_loss_curve(out, results), plot_confusion(out, results)]

    def store_row(self, results: dict[str, Any]) -> dict[str, Any]:
        """Size, epochs, val / test accuracy, speed, the date."""
        return dated_row(results, VISION_FIELDS)

    def summary(self, results: dict[str, Any], out: Path) -> str:
        model, train, test = results["model"], results["train"], results["test"]
        return (
            f"{model['block']} ({model['params'] / 1e6:.2f}M params) {train['epochs']:.1f} epochs of "
            f"{results['data']['name']} in {train['train_seconds']:.0f}s ({train['images_per_second']:,.0f} img/s): "
            f"test top-1 {100 * test['top1']:.2f}%, top-5 {100 * test['top5']:.2f}%, loss {test['loss']:.4f}; "
            f"val top-1 {100 * results['val']['top1']:.2f}%. Wrote {out / 'results.json'}"
        )


def plot_loss_curve(out: Path, results: dict[str, Any]) -> Path:
    """Training loss (label-smoothed) and held-out loss against training images."""
    model, train = results["model"], results["train"]
    return plot_training_curve(
        out,
        train["curve"],
        train["evals"],
        x_per_step=train["images"] / max(train["steps"], 1),
        x_label="training images",
        eval_key=f"{results['config']['eval'].get('periodic_split', 'val')}_loss",
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


__getattr__ = renamed_attributes(__name__, {"VISION_PRESETS": "VISION_RECIPES"}, "training recipes")
