"""transformers' own model tests against an export: ``ModelTesterMixin`` from the installed (pinned) version's
``tests/test_modeling_common.py``, fetched through pip from that version's source distribution, run on the class an
``aot export hf`` folder ships (tests/hf/mixin_tester.py, in a pytest of its own so that the mixin's global settings
stay out of this one). Every mixin test passes or is skipped: by the mixin's own flags, for a feature that does not
apply to an aot model (the reasons below), or by transformers' own markers for hardware and libraries this machine
lacks (an accelerator, flash attention, deepspeed, ...).

The source distribution ships the top of transformers' tests/ only: what test_modeling_common.py imports from
tests/exporters/ and tests/generation/ is not in it, so those two mixins are empty stand-ins here (and
``GenerationTesterMixin``'s tests do not run: tests/hf/test_hf_features.py covers ``generate``)."""

from __future__ import annotations

import json
import subprocess
import sys
import tarfile
import xml.etree.ElementTree as ET
from pathlib import Path

import pytest
import torch

from aot.cli import main
from aot.models import build_model, preset_config

transformers = pytest.importorskip("transformers")

VERSION = transformers.__version__
HERE = Path(__file__).parent
#: the mixin's skips for what does not apply to an aot model (by its flags and checks): reason -> why
FEATURE_SKIPS = {
    "Model does not have position embeddings": "no resize_position_embeddings: learned table or rotary (our flag)",
    "not composite": "one model, one config: no vision/audio towers or sub-models",
    "not a composite model": "one model, one config: no vision/audio towers or sub-models",
    "does not support SDPA": "the composite-model SDPA dispatch test (`_is_composite` is false)",
    "No subconfigs": "one config, no sub-configs",
    "Not returning cache or non standard Cache": "AotCache is not DynamicCache's layout: MSSA caches one tensor",
    "Cannot capture hidden states": "hidden states come from forward itself, not transformers' output recorder",
    "No usage of the `capture_outputs` decorator": "likewise: no output-recording decorator",
    "No conversion found": "aot's weight names are its own: no checkpoint key conversion",
    "does not support grouped_mm": "no mixture-of-experts layers",
    "no sparse experts": "no mixture-of-experts layers",
    "no `output_router_logits`": "no mixture-of-experts router",
    "No sequence-to-sequence language modeling head": "decoder-only",
    "_keep_in_fp32_modules": "no module that must stay in float32",
    "no `base_model_class` defined in tester": "transformers' RoPE scaling and vision RoPE: aot's rotary has neither",
    "does not support sliding window mask": "full causal attention, no sliding window",
    "not in MODEL_MAPPING": "no base model (AutoModel) class: the export is a causal LM",
    "does not have a TP plan": "no tensor-parallel plan",
}
#: transformers' markers for hardware and libraries this machine lacks
ENVIRONMENT_SKIPS = ("test requires", "test is slow", "not supported on")


def sdist_tests(cache: Path) -> Path:
    """A folder holding the package ``transformers_tests``: test_modeling_common.py of transformers ``VERSION``'s
    source distribution (downloaded once into ``cache`` with pip), with empty stand-ins for the modules it imports
    from folders the distribution leaves out. Skips in one line when pip cannot download it."""
    archives = sorted(cache.glob(f"transformers-{VERSION}.tar.gz"))
    if not archives:
        command = [sys.executable, "-m", "pip", "download", f"transformers=={VERSION}", "--no-binary", ":all:"]
        done = subprocess.run(
            [*command, "--no-deps", "-d", str(cache), "-q"], capture_output=True, text=True, timeout=600
        )
        archives = sorted(cache.glob(f"transformers-{VERSION}.tar.gz"))
        if done.returncode != 0 or not archives:
            last = (done.stderr.strip().splitlines() or ["no output"])[-1]
            pytest.skip(f"pip cannot download transformers {VERSION}'s source distribution: {last}")
    package = cache / "tests" / "transformers_tests"
    if not (package / "test_modeling_common.py").is_file():
        package.mkdir(parents=True, exist_ok=True)
        with tarfile.open(archives[0]) as archive:
            member = archive.extractfile(f"transformers-{VERSION}/tests/test_modeling_common.py")
            assert member is not None
            source = member.read().decode("utf-8")
            names = set(archive.getnames())
        (package / "__init__.py").write_text("")
        for line in source.splitlines():  # `from .exporters.test_export import ExportTesterMixin`
            if not line.startswith("from ."):
                continue
            module, imported = line[len("from .") :].split(" import ")
            target = package.joinpath(*module.split("."))
            shipped = f"transformers-{VERSION}/tests/{module.replace('.', '/')}.py" in names
            assert not shipped, f"the sdist now ships {module}: extract it instead of a stand-in"
            target.parent.mkdir(parents=True, exist_ok=True)
            for folder in target.relative_to(package).parents:  # each folder a package
                (package / folder / "__init__.py").touch()
            target.with_suffix(".py").write_text(
                "".join(
                    f"class {name.strip()}:\n    '''Not in transformers' source distribution: a stand-in.'''\n\n\n"
                    for name in imported.split(",")
                )
            )
        (package / "test_modeling_common.py").write_text(source)
    return package.parent


def parameterized_path(cache: Path) -> list[str]:
    """test_modeling_common imports ``parameterized`` (transformers' test extra): its wheel, fetched with pip, unless
    it is installed."""
    try:
        import parameterized  # noqa: F401
    except ImportError:
        wheels = sorted(cache.glob("parameterized-*.whl"))
        if not wheels:
            command = [sys.executable, "-m", "pip", "download", "parameterized", "--no-deps", "-d", str(cache), "-q"]
            subprocess.run(command, capture_output=True, text=True, timeout=600)
            wheels = sorted(cache.glob("parameterized-*.whl"))
        if not wheels:
            pytest.skip("pip cannot download parameterized, which transformers' test_modeling_common.py imports")
        return [str(wheels[-1])]  # a pure-Python wheel imports as it is
    return []


def tiny_export(folder: Path, preset: str, **changes: object) -> Path:
    """The `aot export hf` folder of a 2-layer, 32-wide language model (bytes, context 32)."""
    torch.manual_seed(0)
    fields = dict(n_layer=2, n_embd=32, n_head=4, head_dim=None, block_size=32, **changes)
    build_model(preset_config(preset).replace(**fields)).save_pretrained(folder / "run" / "checkpoint")
    (folder / "run" / "results.json").write_text(json.dumps({"config": {"data": {"tokenizer": "bytes"}}}))
    assert main(["export", "hf", str(folder / "run"), str(folder / "export")]) == 0
    return folder / "export"


def run_mixin(export: Path, tests: Path, extra_path: list[str], work: Path) -> dict[str, list[tuple[str, str]]]:
    """Run mixin_tester.py on ``export`` in a pytest of its own; each outcome -> [(test, message)]."""
    report = work / "report.xml"
    (work / "pytest.ini").write_text("[pytest]\n")  # not the project's settings (its -m, pythonpath, warnings)
    env = {
        "PATH": "/usr/bin:/bin",
        "PYTHONPATH": ":".join([str(tests), *extra_path]),
        "AOT_MIXIN_EXPORT": str(export),
        "HF_HOME": str(work / "hf-home"),
        "HF_HUB_OFFLINE": "1",
        "OMP_NUM_THREADS": "1",
    }
    command = [sys.executable, "-m", "pytest", str(HERE / "mixin_tester.py"), "-c", str(work / "pytest.ini")]
    command += ["-p", "no:cacheprovider", "-q", f"--junitxml={report}", "--rootdir", str(work)]
    done = subprocess.run(command, env=env, cwd=work, capture_output=True, text=True, timeout=1200)
    assert report.is_file(), done.stdout[-3000:] + done.stderr[-3000:]
    outcomes: dict[str, list[tuple[str, str]]] = {"passed": [], "failed": [], "skipped": []}
    for case in ET.parse(report).getroot().iter("testcase"):
        name = case.get("name", "")
        bad = case.find("failure") if case.find("failure") is not None else case.find("error")
        skipped = case.find("skipped")
        if bad is not None:
            outcomes["failed"].append((name, (bad.get("message") or "").splitlines()[0][:300]))
        elif skipped is not None:
            outcomes["skipped"].append((name, skipped.get("message") or ""))
        else:
            outcomes["passed"].append((name, ""))
    return outcomes


#: the exports the mixin runs on: MSSA with W_O and learned positions; tied MSSA with rotary positions and a token
#: shift; AoT-MHSA and Llama (slow)
EXPORTS = [
    pytest.param("aot-mssa-l-cpu", {}, id="mssa"),
    pytest.param("aot-mssa-tied-l-cpu", {"position": "rope", "token_shift": "channel"}, id="mssa-tied-rope-shift"),
    pytest.param("aot-mhsa-l-cpu", {}, id="mhsa", marks=pytest.mark.slow),
    pytest.param("llama-l-cpu", {}, id="llama", marks=pytest.mark.slow),
]


@pytest.mark.parametrize(("preset", "changes"), EXPORTS)
def test_transformers_model_tester_mixin(
    preset: str, changes: dict[str, object], tmp_path: Path, pytestconfig: pytest.Config
) -> None:
    cache_provider = getattr(pytestconfig, "cache", None)  # absent under -p no:cacheprovider
    cache = cache_provider.mkdir(f"transformers-{VERSION}") if cache_provider else tmp_path / "cache"
    cache.mkdir(parents=True, exist_ok=True)  # kept between runs in pytest's cache folder: downloaded once
    tests = sdist_tests(cache)
    extra = parameterized_path(cache)
    export = tiny_export(tmp_path, preset, **changes)
    outcomes = run_mixin(export, tests, extra, tmp_path)
    counts = {outcome: len(tests) for outcome, tests in outcomes.items()}
    print(f"transformers {VERSION} ModelTesterMixin on {preset} {changes}: {counts}")
    for name, message in outcomes["skipped"]:
        print(f"  skipped {name}: {message}")
    assert not outcomes["failed"], "\n".join(f"{name}: {message}" for name, message in outcomes["failed"])
    unexplained = [
        (name, message)
        for name, message in outcomes["skipped"]
        if not any(reason in message for reason in (*FEATURE_SKIPS, *ENVIRONMENT_SKIPS))
    ]
    assert not unexplained, unexplained
    passed = {name for name, _ in outcomes["passed"]}
    # what this work is about ran and passed, not skipped
    assert {
        "test_attention_outputs",
        "test_hidden_states_output",
        "test_resize_tokens_embeddings",
        "test_resize_embeddings_untied",
        "test_inputs_embeds",
        "test_inputs_embeds_matches_input_ids",
        "test_can_use_safetensors",
        "test_training_gradient_checkpointing",
        "test_batching_equivalence",
        "test_can_init_all_missing_weights",
    } <= passed
    assert len(passed) >= 100
