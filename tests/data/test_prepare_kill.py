"""``kill -9`` of a running ``aot data prepare`` (``python -m aot.cli data prepare``, with tokenizer worker
processes) at seeded random moments, each followed by a rerun of the same command: the folder ends byte-identical
to an uninterrupted prepare. While a run is going, a reader (``open_shards``) refuses the unfinished folder in one
line and every file named like a finished shard is whole (its header matches its size).

The five-kill test takes ~15 s and is marked slow; the one-kill test runs by default. Kills in this process at
chosen points (a shard boundary, mid-shard, between a shard's rename and its record) are in
tests/data/test_prepare.py."""

from __future__ import annotations

import os
import random
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
from prepare_fixtures import folder_bytes, make_documents, read_llmc, shard_names, write_jsonl

from aot.data import llmc
from aot.data.prepare import PrepareOptions, prepare
from aot.data.shardset import open_shards
from aot.data.sources import resolve
from aot.errors import AotError

ROOT = Path(__file__).resolve().parents[2]
VAL, TEST = 0.1, 0.1


def command(src: Path, out: Path, shard_tokens: int) -> list[str]:
    return [
        sys.executable, "-m", "aot.cli", "data", "prepare", str(src), "--out", str(out), "--tokenizer", "bytes",
        "--workers", "2", "--shard-tokens", str(shard_tokens), "--val-fraction", str(VAL),
        "--test-fraction", str(TEST), "--no-progress",
    ]  # fmt: skip


def check_while_running(out: Path, seen: dict[str, int]) -> None:
    """What a reader may see of a prepare that is still going: only whole shards under shard names, and a folder
    that ``open_shards`` refuses in one line (named unfinished once progress.json exists)."""
    for name in shard_names(out):
        try:
            header = llmc.read_header(out / name)
        except AotError as exc:
            if not (out / name).exists():  # replaced or dropped between the listing and the read
                continue
            raise AssertionError(f"a partial file under a shard's name: {exc}") from None
        assert header.count >= 1
        seen["shards"] += 1
    had_progress = (out / "progress.json").exists()
    try:
        open_shards(out, verify=False)
    except AotError as exc:
        assert "\n" not in str(exc)
        if had_progress and not (out / "meta.json").exists():
            assert "unfinished `aot data prepare`" in str(exc), str(exc)
            seen["refused"] += 1
    else:
        assert (out / "meta.json").exists(), "a reader accepted an unfinished folder"


def run_and_kill(cmd: list[str], out: Path, delay: float | None, seen: dict[str, int]) -> str:
    """Run ``cmd`` (its own process group); ``delay`` s after the folder shows work, SIGKILL the group. Returns
    'killed' or 'finished'."""
    env = {**os.environ, "PYTHONPATH": str(ROOT / "src"), "OMP_NUM_THREADS": "1"}
    proc = subprocess.Popen(
        cmd, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, start_new_session=True
    )
    started: float | None = None
    try:
        while proc.poll() is None:
            if out.exists():
                check_while_running(out, seen)
                if started is None and (list(out.glob(".*.bin.tmp")) or shard_names(out)):
                    started = time.monotonic()
            if delay is not None and started is not None and time.monotonic() - started >= delay:
                os.killpg(proc.pid, signal.SIGKILL)
                proc.wait()
                return "killed"
            time.sleep(0.01)
    finally:
        if proc.poll() is None:
            os.killpg(proc.pid, signal.SIGKILL)
        _, err = proc.communicate()
    assert proc.returncode == 0, err
    return "finished"


def kill_and_resume(tmp_path: Path, kills: int, n_docs: int, seed: int) -> None:
    docs = make_documents(n_docs, seed=seed, min_words=50, max_words=150)
    src = write_jsonl(tmp_path / "docs.jsonl", docs)
    shard_tokens = 10_000
    reference = tmp_path / "reference"
    options = PrepareOptions(tokenizer="bytes", val_fraction=VAL, test_fraction=TEST, shard_tokens=shard_tokens)
    prepare(resolve([str(src)]), reference, options, workers=0, progress=False)
    out = tmp_path / "out"
    cmd = command(src, out, shard_tokens)
    rng = random.Random(seed)
    seen = {"shards": 0, "refused": 0}
    outcomes = [run_and_kill(cmd, out, rng.uniform(0.0, 0.5), seen) for _ in range(kills)]
    assert outcomes.count("killed") >= max(1, kills - 2), outcomes  # most kills landed mid-run
    for name in shard_names(out):  # what the kills left under shard names is whole
        read_llmc(out / name)
    assert run_and_kill(cmd, out, None, seen) == "finished"
    assert seen["shards"] > 0 and seen["refused"] > 0, seen
    assert not list(out.glob(".*.bin.tmp")) and not (out / "progress.json").exists()
    assert folder_bytes(out) == folder_bytes(reference)  # scratch files of a killed record write are gone too


def test_one_kill_minus_9_then_a_rerun_gives_the_same_bytes(tmp_path):
    kill_and_resume(tmp_path, kills=1, n_docs=2500, seed=41)


@pytest.mark.slow
def test_five_kills_minus_9_then_a_rerun_give_the_same_bytes(tmp_path):
    kill_and_resume(tmp_path, kills=5, n_docs=9000, seed=42)
