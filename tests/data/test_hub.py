"""hf:NAME without a hub: one line at once, no retries (aot.data.hub). The hub is made unreachable with
HF_ENDPOINT=http://127.0.0.1:9 (nothing listens on port 9: the connection is refused) or a local socket that never
answers; a local HTTP server stands in for a reachable one."""

from __future__ import annotations

import os
import socket
import subprocess
import sys
import threading
import time
import types
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

import pytest

from aot.data import hub
from aot.data.corpora import load_text
from aot.data.images import load_hf_images
from aot.errors import AotError

pytest.importorskip("datasets", reason="HuggingFace datasets not installed (aot[hf-data])")
huggingface_hub = pytest.importorskip("huggingface_hub")

REFUSED = "http://127.0.0.1:9"


@pytest.fixture
def endpoint(monkeypatch: pytest.MonkeyPatch) -> Iterator[None]:
    """The hub at REFUSED for this process (huggingface_hub reads HF_ENDPOINT once, at import)."""
    monkeypatch.setattr(huggingface_hub.constants, "ENDPOINT", REFUSED)
    import datasets

    monkeypatch.setattr(datasets.config, "HF_HUB_OFFLINE", False)
    yield


def test_unreachable_hub_is_one_line_at_once(endpoint: None) -> None:
    start = time.perf_counter()
    with pytest.raises(AotError) as info:
        load_text("hf:wikitext:wikitext-2-raw-v1")
    elapsed = time.perf_counter() - start
    line = str(info.value)
    assert elapsed < 5, f"{elapsed:.1f} s"
    assert "\n" not in line
    assert line.startswith(f"cannot load corpus 'hf:wikitext:wikitext-2-raw-v1': the HuggingFace hub {REFUSED}")
    assert "HF_HUB_OFFLINE=1" in line and "local .txt file" in line


def test_image_sets_probe_the_hub_too(endpoint: None) -> None:
    with pytest.raises(AotError, match=r"cannot load image set 'hf:fashion_mnist': the HuggingFace hub .*sub-folder"):
        load_hf_images("fashion_mnist")


def test_a_hub_that_never_answers_is_given_the_probe_timeout(monkeypatch: pytest.MonkeyPatch) -> None:
    with socket.socket() as silent:  # accepts connections (the kernel's backlog) and never writes a byte
        silent.bind(("127.0.0.1", 0))
        silent.listen(4)
        monkeypatch.setattr(huggingface_hub.constants, "ENDPOINT", f"http://127.0.0.1:{silent.getsockname()[1]}")
        start = time.perf_counter()
        reason = hub.hub_unreachable(timeout=0.5)
        elapsed = time.perf_counter() - start
    assert reason is not None and "does not answer" in reason
    assert 0.4 < elapsed < 3, f"{elapsed:.1f} s"


def test_a_hub_that_answers_is_reachable(monkeypatch: pytest.MonkeyPatch) -> None:
    class Answer(BaseHTTPRequestHandler):
        def do_HEAD(self) -> None:
            self.send_response(404)  # any answer means the hub is there
            self.end_headers()

        def log_message(self, *args: object) -> None:
            pass

    server = ThreadingHTTPServer(("127.0.0.1", 0), Answer)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    try:
        monkeypatch.setattr(huggingface_hub.constants, "ENDPOINT", f"http://127.0.0.1:{server.server_port}")
        assert hub.hub_unreachable(timeout=2) is None
    finally:
        server.shutdown()
        server.server_close()


def test_offline_mode_reads_the_cache_without_a_probe(monkeypatch: pytest.MonkeyPatch) -> None:
    def load_dataset(name: str, config: str | None, split: str) -> None:
        raise ConnectionError(f"Couldn't reach '{name}' on the Hub (OfflineModeIsEnabled)")

    fake = types.SimpleNamespace(load_dataset=load_dataset, config=types.SimpleNamespace(HF_HUB_OFFLINE=True))
    monkeypatch.setitem(sys.modules, "datasets", fake)
    monkeypatch.setattr(hub, "hub_unreachable", lambda timeout=0: pytest.fail("probed in offline mode"))
    with pytest.raises(AotError, match=r"HF_HUB_OFFLINE is set: only the local datasets cache is read\): Couldn't"):
        load_text("hf:wikitext")


# 2.7 s measured on a loaded 2-core AMD EPYC: the task probes the hub before its memory check (LMTask.check), so what
# remains is importing torch; the bound below leaves room for a loaded CI machine
def test_train_lm_without_a_hub_is_one_line_exit_2(tmp_path: Path) -> None:
    """What a user sees: `aot train lm --corpus hf:NAME` on a machine that cannot reach the hub: one line, exit 2,
    nothing written, no retries (which took 30-45 s before aot.data.hub probed the hub)."""
    env = {k: v for k, v in os.environ.items() if k not in ("HF_HUB_OFFLINE", "HF_DATASETS_OFFLINE")}
    env.update(HF_ENDPOINT=REFUSED, OMP_NUM_THREADS="1")
    out = tmp_path / "run"
    argv = [sys.executable, "-m", "aot.cli", "train", "lm", "--corpus", "hf:wikitext", "--out", str(out)]
    start = time.perf_counter()
    done = subprocess.run(argv, capture_output=True, text=True, env=env, timeout=120)
    elapsed = time.perf_counter() - start
    assert done.returncode == 2, done.stderr
    lines = done.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("aot: error: cannot load corpus 'hf:wikitext': the HuggingFace hub")
    assert "Retrying" not in done.stdout + done.stderr
    assert not out.exists()
    assert elapsed < 20, f"{elapsed:.1f} s"  # retries took 30-45 s (the probe alone: the test above)


def test_a_hub_that_answered_is_not_probed_again_in_the_process(monkeypatch: pytest.MonkeyPatch) -> None:
    """The task's early check and the load both call require_hub: one probe, not two; a hub that did not answer is
    asked again (it may be back)."""
    probes: list[str] = []
    answers = iter([None, "http://x does not answer"])
    monkeypatch.setattr(huggingface_hub.constants, "ENDPOINT", "http://probe-once.invalid")
    monkeypatch.setattr(hub, "_ANSWERED", set())
    monkeypatch.setattr(hub, "hub_unreachable", lambda timeout=0: probes.append("probe") or next(answers))
    hub.require_hub("wikitext", "corpus 'hf:wikitext'", "use a file", offline=False)
    hub.require_hub("wikitext", "corpus 'hf:wikitext'", "use a file", offline=False)
    assert probes == ["probe"]
    monkeypatch.setattr(huggingface_hub.constants, "ENDPOINT", "http://another.invalid")
    with pytest.raises(AotError, match="does not answer"):
        hub.require_hub("wikitext", "corpus 'hf:wikitext'", "use a file", offline=False)
    assert probes == ["probe", "probe"]
