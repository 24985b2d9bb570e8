"""Property-based tests (hypothesis): random configs, --set assignments, token tensors, image shapes and random
bytes as config, checkpoint and corpus files never end in a raw traceback — only success or a one-line
AotError / ConfigError — and never change a file that was there."""

from __future__ import annotations

import math
import shutil
import tempfile
from pathlib import Path

import pytest

hypothesis = pytest.importorskip("hypothesis")
import torch  # noqa: E402
from hypothesis import HealthCheck, given, settings  # noqa: E402
from hypothesis import strategies as st  # noqa: E402

from aot.blockspec import block_specs  # noqa: E402
from aot.config import ModelConfig  # noqa: E402
from aot.errors import AotError  # noqa: E402
from aot.models import build_model, preset_config  # noqa: E402
from aot.tasks.lm import LMRun  # noqa: E402
from aot.train import TrainConfig  # noqa: E402
from aot.validation import check_fields, load_config_file  # noqa: E402

FAST = settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])

SCALARS = st.one_of(
    st.none(),
    st.booleans(),
    st.integers(min_value=-(2**70), max_value=2**70),
    st.floats(allow_nan=True, allow_infinity=True),
    st.text(max_size=8),
)
VALUES = st.one_of(SCALARS, st.lists(SCALARS, max_size=3), st.dictionaries(st.text(max_size=4), SCALARS, max_size=2))


def _one_line(exc: BaseException) -> None:
    assert isinstance(exc, AotError), f"{type(exc).__name__}: {exc}"
    assert "\n" not in str(exc) and str(exc)


def _check_limits(obj, section: str) -> None:
    """A config that was accepted holds only values of the declared types within the declared limits."""
    check_fields(obj, section)  # would raise if anything were off
    for name, value in vars(obj).items():
        if isinstance(value, float):
            assert math.isfinite(value), name


TRAIN_FIELDS = list(TrainConfig.__dataclass_fields__)


@FAST
@given(st.dictionaries(st.sampled_from([*TRAIN_FIELDS, "lr_max", "seeds", "zzz"]), VALUES, max_size=5))
def test_random_train_sections_are_accepted_checked_or_one_line(fields):
    try:
        cfg = TrainConfig.from_dict(fields)
    except Exception as exc:
        _one_line(exc)
        return
    _check_limits(cfg, "train")
    assert 0 <= cfg.seed < 2**63 and cfg.lr > 0 and 0 <= cfg.beta1 < 1 and 0 <= cfg.beta2 < 1


OPTION_FIELDS = sorted({name for spec in block_specs() for name in spec.options.field_names()})
MODEL_FIELDS = [f for f in ModelConfig.__dataclass_fields__ if f not in ("task",)] + OPTION_FIELDS + ["attn_scale"]


@FAST
@given(st.dictionaries(st.sampled_from([*MODEL_FIELDS, "layers"]), VALUES, max_size=4))
def test_random_model_sections_are_accepted_checked_or_one_line(fields):
    try:
        cfg = ModelConfig.from_dict({"n_layer": 1, "n_embd": 8, "n_head": 2, **fields}, saved=True)
    except Exception as exc:
        _one_line(exc)
        return
    _check_limits(cfg, "model")
    _check_limits(cfg.options, "model")  # the block's own fields, flat in the section, within their limits


SET_KEYS = st.sampled_from(
    [
        "train.lr",
        "train.seed",
        "train.steps",
        "train.beta2",
        "train.checkpoint_minutes",
        "eval.batch_size",
        "eval.final_windows",
        "data.val_fraction",
        "data.tokenizer",
        "model.n_layer",
        "model.dropout",
        "model.block",
        "train.nope",
        "nosection.x",
        "train",
        "",
    ]
)
SET_VALUES = st.one_of(
    st.text(max_size=10),
    st.sampled_from(["abc", "nan", "-inf", "1e400", "-1", "0", "2**64", "18446744073709551616", "[1, 2]", "{a: 1}"]),
    st.sampled_from(["null", "true", "3e-4", "0.5", "1.0", "7", "'7'", "[", "]", ": :", "!!binary AAAA", "&a *a"]),
)


@FAST
@given(st.lists(st.tuples(SET_KEYS, SET_VALUES), max_size=3))
def test_random_set_assignments_are_accepted_checked_or_one_line(assignments):
    sets = [f"{key}={value}" for key, value in assignments]
    try:
        run = LMRun.build("cpu-quick", sets=sets)
    except Exception as exc:
        _one_line(exc)
        return
    assert isinstance(run, LMRun)
    _check_limits(run.train, "train")
    _check_limits(run.eval, "eval")
    _check_limits(run.data, "data")


LM = build_model(preset_config("aot-mssa-l-cpu", n_layer=1, n_embd=16, n_head=2, block_size=8, vocab_size=32))
IMAGE = build_model(
    preset_config("aot-mssa-l-cpu", task="image", n_layer=1, n_embd=16, n_head=2, image_size=8, patch_size=4)
)


@FAST
@given(
    st.lists(st.integers(min_value=0, max_value=10), min_size=0, max_size=3),
    st.sampled_from([torch.long, torch.int32, torch.uint8, torch.float32, torch.bool]),
    st.integers(min_value=-40, max_value=40),
    st.integers(min_value=0, max_value=40),
)
def test_random_token_tensors_run_or_are_rejected_in_one_line(shape, dtype, low, span):
    idx = (torch.arange(math.prod(shape)).reshape(shape) % (span + 1) + low).to(dtype)
    try:
        logits, _ = LM(idx)
    except Exception as exc:
        _one_line(exc)
        return
    assert idx.ndim == 2 and logits.shape == (*idx.shape, 32) and torch.isfinite(logits).all()


@FAST
@given(
    st.lists(st.integers(min_value=1, max_value=9), min_size=1, max_size=5),
    st.sampled_from([torch.float32, torch.float64, torch.long]),
    st.sampled_from([0.0, float("nan"), float("inf")]),
)
def test_random_image_shapes_run_or_are_rejected_in_one_line(shape, dtype, poison):
    images = torch.zeros(shape).to(dtype)
    if images.is_floating_point() and images.numel():
        images.view(-1)[0] = poison
    try:
        logits = IMAGE(images.float() if images.dtype == torch.float64 else images)
    except Exception as exc:
        _one_line(exc)
        return
    assert logits.shape == (shape[0], 10) and torch.isfinite(logits).all()


@FAST
@given(st.binary(max_size=200), st.sampled_from([".yaml", ".json", ".yml", ""]))
def test_random_bytes_as_a_config_file(blob, suffix):
    with tempfile.TemporaryDirectory() as tmp:
        path = Path(tmp) / f"config{suffix}"
        path.write_bytes(blob)
        try:
            data = load_config_file(path)
            LMRun.build("cpu-quick", config_file=str(path))
        except Exception as exc:
            _one_line(exc)
        else:
            assert isinstance(data, dict)
        assert path.read_bytes() == blob  # never changed


@pytest.fixture(scope="module")
def trained_run(tmp_path_factory, tiny_trainer):
    """One tiny run with two checkpoints, copied for each example."""
    out = tmp_path_factory.mktemp("run") / "run"
    tiny_trainer(out, steps=2, checkpoint_every=1).fit()
    return out


@settings(max_examples=15, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(
    st.sampled_from(
        ["model.safetensors", "optimizer.safetensors", "trainer.json", "config.json", "rng-rank0.safetensors"]
    ),
    st.binary(max_size=300),
    st.booleans(),
)
def test_random_bytes_as_checkpoint_files(trained_run, tiny_trainer, name, blob, both):
    """Random bytes in place of a checkpoint file (in the latest, or in both checkpoints): --resume falls back
    to the previous checkpoint or stops with one line; the damaged files are never rewritten."""
    with tempfile.TemporaryDirectory() as tmp:
        out = Path(tmp) / "run"
        shutil.copytree(trained_run, out)
        folders = ["checkpoint", "checkpoint.prev"] if both else ["checkpoint"]
        for folder in folders:
            (out / folder / name).write_bytes(blob)
        try:
            result = tiny_trainer(out, steps=2, checkpoint_every=1).fit(resume=True)
        except Exception as exc:
            _one_line(exc)
            assert both and all((out / folder / name).read_bytes() == blob for folder in folders)
        else:
            assert not both and result.step == 2
            assert (out / "checkpoint.damaged" / name).read_bytes() == blob  # moved aside, not deleted


@settings(max_examples=15, deadline=None)
@given(st.binary(min_size=0, max_size=3000))
def test_random_bytes_as_a_corpus_file(blob):
    from aot.data.shards import prepare_lm_data

    with tempfile.TemporaryDirectory() as tmp:
        corpus = Path(tmp) / "corpus.txt"
        corpus.write_bytes(blob)
        try:
            data = prepare_lm_data(str(corpus), "bytes", root=Path(tmp) / "cache")
        except Exception as exc:
            _one_line(exc)
        else:
            assert data.vocab_size == 256
        assert corpus.read_bytes() == blob
