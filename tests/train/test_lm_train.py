"""The trainer: schedule, optimizers, exact resume, atomic checkpoints, DDP / FSDP equivalence, real training."""

from __future__ import annotations

import math
import os
import time
from pathlib import Path

import numpy as np
import pytest
import torch
import torch.nn.functional as F

from aot import run_folder
from aot.data.shards import LMBatches
from aot.errors import AotError
from aot.models import AotModel, build_model, preset_config
from aot.train import TrainConfig, Trainer, read_metrics
from aot.train.optim import Lion, param_groups
from aot.train.schedule import lr_at
from conftest import gloo_group

FIXTURE = Path(__file__).resolve().parents[1] / "fixtures" / "sonnets.txt"


def tiny_model(block: str = "aot-mssa", seed: int = 0, **overrides):
    fields = dict(n_layer=2, n_embd=32, n_head=4, block_size=16, vocab_size=256, tied_output=False)
    torch.manual_seed(seed)
    return build_model(
        preset_config({"aot-mssa": "aot-mssa-l-cpu", "transformer": "gpt2-cpu"}[block], **{**fields, **overrides})
    )


def fixture_tokens() -> np.ndarray:
    return np.frombuffer(FIXTURE.read_bytes(), dtype=np.uint8).astype(np.uint16)


def lm_loss(model, batch):
    return model(batch[0], labels=batch[0])[1]


def lm_loss_exact(model, batch):
    """Shifted cross-entropy in the model's own dtype (float64 in the equivalence tests)."""
    logits, _ = model(batch[0])
    return F.cross_entropy(logits[:, :-1].flatten(0, 1), batch[0][:, 1:].flatten())


# -- schedule and optimizers --------------------------------------------------------------------------------


def test_lr_schedule_warmup_then_cosine():
    base, lo = 1.0, 0.1
    assert lr_at(0, base, 10, 110, lo) == pytest.approx(0.1)
    assert lr_at(9, base, 10, 110, lo) == pytest.approx(1.0)
    assert lr_at(10, base, 10, 110, lo) == pytest.approx(1.0)
    assert lr_at(60, base, 10, 110, lo) == pytest.approx(lo + 0.5 * (base - lo))  # half-way: cos(π/2) = 0
    assert lr_at(35, base, 10, 110, lo) == pytest.approx(lo + 0.5 * (base - lo) * (1 + math.cos(math.pi / 4)))
    assert lr_at(110, base, 10, 110, lo) == pytest.approx(lo)


def test_lion_matches_its_update_rule():
    torch.manual_seed(0)
    param = torch.nn.Parameter(torch.randn(5, dtype=torch.float64))
    lr, (b1, b2), wd = 0.01, (0.9, 0.99), 0.1
    opt = Lion([param], lr=lr, betas=(b1, b2), weight_decay=wd)
    theta, m = param.detach().clone(), torch.zeros(5, dtype=torch.float64)
    for _ in range(3):
        grad = torch.randn(5, dtype=torch.float64)
        param.grad = grad.clone()
        opt.step()
        update = torch.sign(b1 * m + (1 - b1) * grad)
        theta = theta - lr * (update + wd * theta)
        m = b2 * m + (1 - b2) * grad
        torch.testing.assert_close(param.detach(), theta)


def test_no_decay_group_holds_biases_norms_and_positions():
    model = tiny_model("transformer")
    decay, no_decay = param_groups(model, 0.1)
    names = {id(p): n for n, p in model.named_parameters()}
    assert all(p.ndim >= 2 for p in decay["params"])
    no_decay_names = {names[id(p)] for p in no_decay["params"]}
    assert "pos_embed.weight" in no_decay_names and any("norm" in n for n in no_decay_names)
    assert no_decay["weight_decay"] == 0.0 and decay["weight_decay"] == 0.1


# -- resume and checkpoints ---------------------------------------------------------------------------------


def _trainer(out: Path, model, steps=12, prefetch: bool | None = None, **cfg) -> Trainer:
    config = TrainConfig(
        steps=steps, batch_size=4, lr=3e-3, warmup_steps=3, log_every=1, progress=False, precision="fp32", **cfg
    )
    return Trainer(
        model,
        LMBatches(fixture_tokens(), 4, 16, seed=1),
        lm_loss,
        config,
        out,
        fingerprint={"model": model.cfg.to_dict()},
        model_config=model.cfg.to_dict(),
        prefetch=prefetch,
    )


def test_prefetching_the_next_step_changes_nothing_and_counts_the_data_wait(tmp_path):
    """The next step's batches made in a background thread (as on CUDA), with accumulation and dropout: the same
    losses and weights bit for bit as making them in the step; every log row says how long the step waited."""
    plain = _trainer(tmp_path / "plain", tiny_model(dropout=0.1), micro_batch_size=2, prefetch=False).fit()
    ahead = _trainer(tmp_path / "ahead", tiny_model(dropout=0.1), micro_batch_size=2, prefetch=True)
    assert ahead.prefetcher.pool is not None
    fetched = ahead.fit()
    assert fetched.losses == plain.losses
    first = AotModel.from_pretrained(tmp_path / "plain" / "checkpoint").state_dict()
    for name, value in AotModel.from_pretrained(tmp_path / "ahead" / "checkpoint").state_dict().items():
        torch.testing.assert_close(value, first[name], rtol=0, atol=0)
    rows = [r for r in read_metrics(tmp_path / "ahead") if not r.get("eval")]
    assert all(0 <= r["data_wait_s"] <= r["train_seconds"] for r in rows)


class _SlowStart(LMBatches):
    """The batches of LMBatches, the first steps' made slowly (as compilation makes a run's first steps slow)."""

    def get(self, step, start=0, stop=None):
        if step < 3:
            time.sleep(0.3)
        return super().get(step, start, stop)


def test_the_rate_leaves_out_the_first_steps_and_train_seconds_keeps_them(tmp_path):
    """Three slow first steps (0.3 s each) inside the first log interval: the row's rate measures the steady steps
    after the warm-up (WARMUP_STEPS), so its tokens/s is far above what the slow steps allow; train_seconds still
    holds all of them. A row of an interval inside the warm-up says so (``warmup``)."""
    from aot.train.trainer import WARMUP_STEPS

    config = TrainConfig(steps=12, batch_size=4, lr=3e-3, log_every=6, progress=False, precision="fp32")
    trainer = Trainer(tiny_model(), _SlowStart(fixture_tokens(), 4, 16, seed=1), lm_loss, config, tmp_path)
    result = trainer.fit()
    first = next(r for r in read_metrics(tmp_path) if not r.get("eval"))
    assert WARMUP_STEPS == 5 and first["step"] == 6 and "warmup" not in first
    slow_rate = 6 * 4 * 16 / 0.9  # six steps' tokens over the slow steps' sleep alone
    assert first["tokens_per_s"] > 3 * slow_rate and result.train_seconds > 0.9
    config = TrainConfig(steps=4, batch_size=4, lr=3e-3, log_every=2, progress=False, precision="fp32")
    Trainer(tiny_model(), LMBatches(fixture_tokens(), 4, 16, seed=1), lm_loss, config, tmp_path / "b").fit()
    assert [r.get("warmup") for r in read_metrics(tmp_path / "b") if not r.get("eval")] == [True, True]


def test_deterministic_mode_holds_during_the_run_and_is_restored_after(tmp_path, monkeypatch):
    """train.deterministic=true: the steps run with torch's deterministic algorithms on (and cuBLAS's fixed
    workspace set, which a GPU reads at its first matmul); the process's settings are back afterwards; the losses
    are those of the default mode (a CPU is deterministic already)."""
    monkeypatch.delenv("CUBLAS_WORKSPACE_CONFIG", raising=False)
    seen = []

    def loss_fn(model, batch):
        seen.append(torch.are_deterministic_algorithms_enabled())
        return lm_loss(model, batch)

    def run(out, **cfg):
        config = TrainConfig(steps=3, batch_size=4, lr=3e-3, log_every=1, progress=False, precision="fp32", **cfg)
        torch.manual_seed(0)
        return Trainer(tiny_model(), LMBatches(fixture_tokens(), 4, 16, seed=1), loss_fn, config, out).fit()

    plain = run(tmp_path / "plain")
    assert seen == [False] * 3
    strict = run(tmp_path / "strict", deterministic=True)
    assert seen[3:] == [True] * 3 and not torch.are_deterministic_algorithms_enabled()
    assert os.environ["CUBLAS_WORKSPACE_CONFIG"] == ":4096:8"
    assert strict.losses == plain.losses


def test_resume_continues_exactly(tmp_path):
    """Dropout on, so the restored RNG state matters too."""
    full = _trainer(tmp_path / "full", tiny_model(dropout=0.1)).fit()
    _trainer(tmp_path / "cut", tiny_model(dropout=0.1)).fit(stop_at=5)
    resumed_model = tiny_model(dropout=0.1, seed=1)  # different init: everything must come from the file
    resumed = _trainer(tmp_path / "cut", resumed_model).fit(resume=True)
    assert [s for s, _ in resumed.losses] == list(range(1, 13))  # the whole run, read back from metrics.jsonl
    assert resumed.losses == full.losses
    assert [r["loss"] for r in read_metrics(tmp_path / "cut")] == [loss for _, loss in full.losses]
    weights = AotModel.from_pretrained(tmp_path / "full" / "checkpoint").state_dict()
    for name, value in resumed_model.state_dict().items():
        torch.testing.assert_close(value, weights[name], rtol=0, atol=0)


def test_checkpoint_from_another_config_is_one_line(tmp_path):
    _trainer(tmp_path, tiny_model(), steps=2).fit()
    with pytest.raises(AotError) as info:
        _trainer(tmp_path, tiny_model(n_layer=3), steps=2).fit(resume=True)
    message = str(info.value)
    assert "different config (model.n_layer=2 there, 3 here)" in message and "\n" not in message


def test_interrupted_save_leaves_the_previous_checkpoint(tmp_path, monkeypatch):
    trainer = _trainer(tmp_path, tiny_model(), steps=4, checkpoint_every=2)
    trainer.fit(stop_at=2)
    import safetensors.torch

    real_save = safetensors.torch.save_file
    calls = {"n": 0}

    def dying_save(tensors, filename, metadata=None):
        calls["n"] += 1
        if calls["n"] == 2:  # the optimizer file of the next checkpoint: die half-way
            Path(filename).write_bytes(b"partial")
            raise KeyboardInterrupt("killed")
        return real_save(tensors, filename, metadata)

    monkeypatch.setattr(safetensors.torch, "save_file", dying_save)
    with pytest.raises(KeyboardInterrupt):
        trainer.fit(resume=True)
    monkeypatch.setattr(safetensors.torch, "save_file", real_save)
    folder = run_folder.find_checkpoint(tmp_path)
    assert folder == tmp_path / "checkpoint"
    assert run_folder.read_trainer_state(folder)["step"] == 2
    assert (tmp_path / ".checkpoint.tmp").exists()  # the scratch folder of the killed save ...
    resumed = _trainer(tmp_path, tiny_model(), steps=4, checkpoint_every=2).fit(resume=True)
    assert resumed.step == 4 and not (tmp_path / ".checkpoint.tmp").exists()  # ... is never read, then removed


# -- distributed: the global batch does not depend on the number of processes -------------------------------


def _dist_cfg(strategy: str) -> TrainConfig:
    return TrainConfig(
        steps=4,
        batch_size=8,
        micro_batch_size=2,
        lr=1e-2,
        warmup_steps=1,
        log_every=1,
        progress=False,
        precision="fp32",
        strategy=strategy,
    )


def _double_model():
    return tiny_model(block_size=16).double()


def _worker(rank: int, world: int, store: str, strategy: str, out: str) -> None:
    with gloo_group(rank, world, store):
        trainer = Trainer(
            _double_model(), LMBatches(fixture_tokens(), 8, 16, seed=2), lm_loss_exact, _dist_cfg(strategy), out
        )
        trainer.fit()
        from torch.distributed.checkpoint.state_dict import StateDictOptions, get_model_state_dict

        state = get_model_state_dict(trainer.model, options=StateDictOptions(full_state_dict=True, cpu_offload=True))
        if rank == 0:
            torch.save(state, Path(out) / "weights.pt")


def _one_process_weights(tmp_path: Path) -> dict[str, torch.Tensor]:
    trainer = Trainer(
        _double_model(),
        LMBatches(fixture_tokens(), 8, 16, seed=2),
        lm_loss_exact,
        _dist_cfg("auto"),
        tmp_path / "single",
    )
    trainer.fit()
    return trainer.model.state_dict()


@pytest.mark.parametrize("strategy", ["ddp", "fsdp"])
def test_two_processes_match_one(tmp_path, strategy):
    """2 gloo CPU processes (global batch 8 = 2 x 2 micro-batches of 2 each) end with the weights of 1 process
    (4 micro-batches of 2) within 1e-5."""
    import torch.multiprocessing as mp

    reference = _one_process_weights(tmp_path)
    out = tmp_path / strategy
    mp.spawn(_worker, args=(2, str(tmp_path / "store"), strategy, str(out)), nprocs=2, join=True)
    weights = torch.load(out / "weights.pt")
    assert set(weights) == set(reference)
    for name, value in reference.items():
        torch.testing.assert_close(weights[name], value, rtol=0, atol=1e-5, msg=name)
    assert run_folder.read_trainer_state(out / "checkpoint")["world_size"] == 2


# -- a short real training run ------------------------------------------------------------------------------


def test_short_training_beats_the_unigram(tmp_path):
    from aot.eval.lm import evaluate_lm, ngram_baselines

    tokens = fixture_tokens()
    split = int(0.9 * len(tokens))
    train, val = tokens[:split], tokens[split:]
    torch.manual_seed(0)
    model = build_model(preset_config("aot-mssa-l-cpu", n_layer=2, n_embd=64, n_head=4, block_size=32))
    cfg = TrainConfig(steps=300, batch_size=16, lr=1e-2, warmup_steps=10, progress=False)
    Trainer(model, LMBatches(train, 16, 32), lm_loss, cfg, tmp_path).fit()
    ones = np.ones(256, dtype=np.int64)
    unigram = ngram_baselines(train, val, 256, ones)["unigram"]["loss"]
    scores = evaluate_lm(model.eval(), val, 32, ones)
    assert scores["loss"] < unigram - 0.2


@pytest.mark.slow
def test_compiled_training_matches_eager(tmp_path):
    """torch.compile changes the speed, not the numbers (needs a C++ compiler for inductor on CPU)."""
    eager = _trainer(tmp_path / "eager", tiny_model(), steps=3).fit()
    compiled = _trainer(tmp_path / "compiled", tiny_model(), steps=3, compile=True).fit()
    for (_, a), (_, b) in zip(eager.losses, compiled.losses):
        assert a == pytest.approx(b, rel=1e-4)


@pytest.mark.parametrize(
    ("world", "expected"),
    [(1, (480, 12, 40)), (2, (240, 12, 20)), (3, (160, 10, 16)), (8, (60, 12, 5)), (16, (30, 10, 3))],
)
def test_the_papers_batch_splits_for_any_gpu_count_that_divides_it(world, expected):
    """480 rows at micro-batches of at most 12: the global batch never changes, the micro-batch is the largest that
    divides each process's share, and a smaller one than asked is said in a note."""
    from aot.train.trainer import split_batch

    per_process, micro, steps, note = split_batch(480, world, 12)
    assert (per_process, micro, steps) == expected and per_process * world == 480 and micro * steps == per_process
    assert bool(note) == (micro != 12)


def test_a_world_size_that_does_not_divide_the_batch_is_one_line():
    from aot.errors import ConfigError
    from aot.train.trainer import split_batch

    refused = r"480 rows cannot be shared evenly by 7 processes; .*\(1, 2, 3, 4, 5, 6, 8, 10"
    with pytest.raises(ConfigError, match=refused):
        split_batch(480, 7, 12)
    assert split_batch(16, 2, None)[:3] == (8, 8, 1)  # no micro-batch asked: the whole share at once


def _eval_worker(rank: int, world: int, store: str, out: str) -> None:
    from aot.eval.lm import evaluate_lm

    with gloo_group(rank, world, store):
        torch.manual_seed(0)
        model = tiny_model().eval()
        tokens = fixture_tokens()
        with torch.no_grad():
            split = evaluate_lm(model, tokens, 16, np.ones(256, dtype=np.int64), 4, 37, across_ranks=True)
        torch.save(split, Path(out) / f"rank{rank}.pt")


@pytest.mark.parametrize("world", [2, 3])
def test_the_final_evaluation_split_across_ranks_equals_one_process(tmp_path, world):
    """Each of 2 (3) gloo processes scores its share of 37 windows (3 uneven: 13 / 12 / 12, the short ones padded
    so every process runs the same batches); one all-reduce gives every process the one-process figures."""
    import torch.multiprocessing as mp

    from aot.eval.lm import evaluate_lm

    torch.manual_seed(0)
    with torch.no_grad():
        one = evaluate_lm(tiny_model().eval(), fixture_tokens(), 16, np.ones(256, dtype=np.int64), 4, 37)
    mp.spawn(_eval_worker, args=(world, str(tmp_path / "store"), str(tmp_path)), nprocs=world, join=True)
    for rank in range(world):
        split = torch.load(tmp_path / f"rank{rank}.pt")
        assert split.keys() == one.keys() and split["windows"] == 37
        for key, value in one.items():
            assert split[key] == pytest.approx(value, rel=1e-12, abs=1e-12), key


def test_adamw_is_fused_only_for_parameters_on_cuda():
    """On a CPU the for-each AdamW every recorded run used (numbers unchanged); the fused kernel is asked for only
    when every parameter is on CUDA (not testable without a GPU: the decision is, by the parameters' device)."""
    from aot.train.optim import build_optimizer

    optimizer = build_optimizer(tiny_model(), "adamw", 1e-3, 0.1, (0.9, 0.95))
    assert not optimizer.defaults.get("fused")
    if torch.cuda.is_available():
        assert build_optimizer(tiny_model().cuda(), "adamw", 1e-3, 0.1, (0.9, 0.95)).defaults["fused"] is True


def test_the_process_group_timeout_is_long_enough_for_a_large_run_and_settable(monkeypatch):
    from datetime import timedelta

    from aot.errors import AotError
    from aot.train.distributed import process_group_timeout

    monkeypatch.delenv("AOT_PG_TIMEOUT_MINUTES", raising=False)
    assert process_group_timeout() == timedelta(minutes=30)  # NCCL's default is 10
    monkeypatch.setenv("AOT_PG_TIMEOUT_MINUTES", "90")
    assert process_group_timeout() == timedelta(minutes=90)
    for bad in ("soon", "0", "-5"):
        monkeypatch.setenv("AOT_PG_TIMEOUT_MINUTES", bad)
        with pytest.raises(AotError, match="AOT_PG_TIMEOUT_MINUTES"):
            process_group_timeout()
