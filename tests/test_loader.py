"""aot.loader: everything a command reads from a run or export folder. Each file it reads (results.json,
config.json, trainer.json, aot_tokenizer.json), when corrupt, truncated, list-shaped, key-less, wrong-typed or not
UTF-8, is one line naming the file (and the field); a flipped byte in model.safetensors falls back to
checkpoint.prev with a notice, or is refused when nothing else verifies; weights that disagree with config.json
name the tensor and both shapes; and every command that reads a model refuses a damaged checkpoint in one line,
exit 2, changing no file. The run folders come from tiny real trainings, once per module."""

from __future__ import annotations

import hashlib
import json
import shutil
import time
from collections.abc import Callable
from pathlib import Path

import pytest
import torch
from safetensors.torch import load_file, save_file

import aot
from aot.cli import main
from aot.errors import AotError
from aot.loader import load_run
from aot.models import AotModel, build_model, preset_config
from aot.run_folder import state_digest

ROOT = Path(__file__).resolve().parents[1]
SONNETS = ROOT / "tests" / "fixtures" / "sonnets.txt"
LAMBADA = ROOT / "tests" / "fixtures" / "zeroshot" / "lambada.jsonl"
LOCK_NAMES = {".aot.lock"}  # what a command that takes a folder's lock may leave behind (empty, no content)

LM_TRAIN = [
    "train", "lm", "--corpus", str(SONNETS), "--model", "aot-mssa-l-cpu", "--device", "cpu", "--seed", "7",
    "--set", "model.n_layer=1", "--set", "model.n_embd=16", "--set", "model.n_head=2", "--set", "model.block_size=16",
    "--set", "train.steps=4", "--set", "train.batch_size=4", "--set", "train.warmup_steps=1",
    "--set", "train.precision=fp32", "--set", "train.checkpoint_every=2", "--set", "train.eval_every=0",
    "--set", "train.progress=false", "--set", "eval.final_windows=4", "--set", "eval.batch_size=2",
]  # fmt: skip
VISION_TRAIN = [
    "train", "vision", "--recipe", "digits-quick", "--set", "model.n_layer=1", "--set", "train.steps=2",
    "--set", "train.checkpoint_every=1", "--set", "train.progress=false",
]  # fmt: skip
ICL_TRAIN = [
    "train", "icl", "--model", "aot-mhsa-icl-cpu", "--dims", "2", "--steps", "2", "--set", "model.n_embd=32",
    "--set", "model.n_layer=1", "--set", "data.dims_start=2", "--set", "data.points_start=5",
    "--set", "train.warmup_steps=1", "--set", "train.eval_every=0", "--set", "train.checkpoint_every=1",
    "--set", "train.progress=false", "--set", "eval.final_prompts=20",
]  # fmt: skip


def _train(root: Path, argv: list[str]) -> Path:
    out = root / "run"
    with pytest.MonkeyPatch.context() as patch:
        patch.setenv("AOT_DATA", str(root / "data"))
        assert main([*argv, "--out", str(out)]) == 0
    assert (out / "checkpoint" / "trainer.json").is_file() and (out / "checkpoint.prev" / "trainer.json").is_file()
    return out


@pytest.fixture(scope="module")
def trained(tmp_path_factory) -> dict[str, Path]:  # type: ignore[no-untyped-def]
    """One tiny run of each task (checkpoint/ and checkpoint.prev/, results.json), trained once for the module."""
    root = tmp_path_factory.mktemp("trained")
    return {
        name: _train(root / name, argv)
        for name, argv in (("lm", LM_TRAIN), ("vision", VISION_TRAIN), ("icl", ICL_TRAIN))
    }


@pytest.fixture
def copy_run(trained, tmp_path) -> Callable[[str], Path]:  # type: ignore[no-untyped-def]
    """``copy_run(task)``: a fresh copy of that task's run in this test's tmp_path, free to damage."""

    def copy(task: str) -> Path:
        return Path(shutil.copytree(trained[task], tmp_path / f"{task}-run"))

    return copy


def flip_byte(path: Path, offset: int = -9) -> None:
    """One byte flipped inside the tensor data: the file stays a valid safetensors file, only its sha256 tells."""
    data = bytearray(path.read_bytes())
    data[offset] ^= 0xFF
    path.write_bytes(bytes(data))


def tree_hashes(root: Path) -> dict[str, str]:
    return {
        str(p.relative_to(root)): hashlib.sha256(p.read_bytes()).hexdigest()
        for p in sorted(root.rglob("*"))
        if p.is_file() and p.name not in LOCK_NAMES
    }


def one_line_naming(exc: pytest.ExceptionInfo, *names: str) -> str:
    message = str(exc.value)
    assert "\n" not in message, message
    for name in names:
        assert name in message, (name, message)
    return message


def save_folder(folder: Path, **fields: object) -> AotModel:
    """A save_pretrained folder (no trainer.json, so no checksums) of a tiny LM."""
    torch.manual_seed(0)
    model = build_model(preset_config("aot-mssa-l-cpu", n_layer=1, n_embd=16, n_head=2, block_size=16, **fields))
    model.save_pretrained(folder)
    (folder / "aot_tokenizer.json").write_text(json.dumps({"name": "bytes"}))
    return model


# -- each file the loader reads: one line naming it ----------------------------------------------------------

BAD_JSON = {
    "corrupt": b'{"task": "lm", "config": ',
    "not JSON": b"{not json}",
    "list-shaped": b"[1, 2, 3]",
    "not UTF-8": b'{"task": "\xff\xfe"}',
    "empty": b"",
}


@pytest.mark.parametrize("kind", BAD_JSON)
def test_a_bad_results_json_is_one_line_naming_it(copy_run, kind) -> None:  # type: ignore[no-untyped-def]
    run = copy_run("lm")
    (run / "results.json").write_bytes(BAD_JSON[kind])
    with pytest.raises(AotError) as exc:
        load_run(run)
    one_line_naming(exc, str(run / "results.json"), "restore the results.json")


@pytest.mark.parametrize(
    ("results", "field"),
    [
        ({"task": 3}, "task = 3 (an integer), where a string belongs"),
        ({"task": "lm", "config": []}, "config = [] (a list), where an object belongs"),
        ({"task": "lm", "config": {"data": {"tokenizer": 5}}}, "config.data.tokenizer = 5"),
        ({"task": "lm", "train": {"steps": "four"}}, 'train.steps = "four" (a string), where an integer belongs'),
        ({"task": "lm", "train": {"steps": True}}, "train.steps = true"),
        (
            {"task": "lm", "config": {"data": "shakespeare"}},
            'config.data = "shakespeare" (a string), where an object',
        ),
        ({"task": "lm", "baselines": {"val": {"bigram": {}}}}, "baselines.val.bigram without its nats_per_byte"),
    ],
)
def test_a_wrong_typed_results_json_names_the_field(copy_run, results, field) -> None:  # type: ignore[no-untyped-def]
    run = copy_run("lm")
    (run / "results.json").write_text(json.dumps(results))
    with pytest.raises(AotError) as exc:
        load_run(run)
    one_line_naming(exc, str(run / "results.json"), field)


def test_a_key_less_results_json_is_one_line_where_a_command_needs_the_key(copy_run) -> None:  # type: ignore[no-untyped-def]
    run = copy_run("vision")
    (run / "results.json").write_text(json.dumps({"task": "image"}))
    loaded = load_run(run, task="image")  # nothing required yet: a command asks for what it reads
    with pytest.raises(AotError) as exc:
        loaded.need("config.data.dataset")
    one_line_naming(exc, str(run / "results.json"), "has no config.data.dataset", "`aot train vision`")
    (run / "results.json").unlink()  # an unfinished run
    with pytest.raises(AotError) as exc:
        load_run(run).need("config.data.dataset")
    one_line_naming(exc, "is not a finished `aot train vision` run", "no results.json yet")


def test_results_json_of_another_task_than_the_model_is_two_runs_mixed(copy_run) -> None:  # type: ignore[no-untyped-def]
    run = copy_run("lm")
    results = json.loads((run / "results.json").read_text())
    (run / "results.json").write_text(json.dumps({**results, "task": "image"}))
    with pytest.raises(AotError) as exc:
        load_run(run)
    one_line_naming(exc, "mixes two runs", "'image'", "'lm'")


@pytest.mark.parametrize("kind", BAD_JSON)
def test_a_bad_config_json_is_one_line_naming_it(tmp_path, kind) -> None:  # type: ignore[no-untyped-def]
    save_folder(tmp_path / "model")
    (tmp_path / "model" / "config.json").write_bytes(BAD_JSON[kind])
    with pytest.raises(AotError) as exc:
        load_run(tmp_path / "model")
    one_line_naming(exc, str(tmp_path / "model" / "config.json"))


@pytest.mark.parametrize(
    ("change", "field"),
    [
        ({"n_layer": "two"}, "model.n_layer"),
        ({"n_embd": -4}, "n_embd=-4"),
        ({"block": "no-such-block"}, "block"),
        ({"colour": "blue"}, "unknown field 'colour'"),
    ],
)
def test_a_config_json_that_does_not_validate_is_its_error_with_the_file(tmp_path, change, field) -> None:  # type: ignore[no-untyped-def]
    save_folder(tmp_path / "model")
    path = tmp_path / "model" / "config.json"
    path.write_text(json.dumps({**json.loads(path.read_text()), **change}))
    with pytest.raises(AotError) as exc:
        load_run(tmp_path / "model")
    one_line_naming(exc, str(path), field)


def test_a_key_less_config_json_names_the_file_and_what_disagrees(tmp_path) -> None:  # type: ignore[no-untyped-def]
    save_folder(tmp_path / "model")
    (tmp_path / "model" / "config.json").write_text("{}")  # every field its default: another model entirely
    with pytest.raises(AotError) as exc:
        load_run(tmp_path / "model")
    one_line_naming(exc, str(tmp_path / "model" / "config.json"), "does not fit", "the weights 1 layer")


def hf_export(folder: Path, config: object) -> AotModel:
    """An `aot export hf` folder written without transformers: the HF config, weights named aot.* (the tied head
    saved once, as transformers does)."""
    model = save_folder(folder)
    (folder / "model.safetensors").unlink()
    state = {f"aot.{k}": v.clone() for k, v in model.state_dict().items() if k != "lm_head.weight"}
    save_file(state, str(folder / "model.safetensors"))
    (folder / "config.json").write_text(config if isinstance(config, str) else json.dumps(config))
    return model


def test_an_hf_export_loads_and_its_bad_configs_are_one_line(tmp_path) -> None:  # type: ignore[no-untyped-def]
    cfg = preset_config("aot-mssa-l-cpu", n_layer=1, n_embd=16, n_head=2, block_size=16).to_dict()
    saved = hf_export(tmp_path / "hf", {"model_type": "aot", "architectures": ["AotForCausalLM"], "aot": cfg})
    run = load_run(tmp_path / "hf")
    assert run.tokenizer is not None and run.tokenizer.name == "bytes" and run.results == {}
    loaded = run.model.state_dict()
    for name, value in saved.state_dict().items():  # every tensor, the tied head (saved once) included
        assert torch.equal(loaded[name], value), name
    config = tmp_path / "hf" / "config.json"
    for text, message in (
        ("[1, 2]", "must hold a JSON object of fields, not a list"),
        (json.dumps({"model_type": "aot", "vocab_size": 256}), "without its aot section"),
        (json.dumps({"model_type": "gpt2", "n_embd": 16}), "of a 'gpt2' model, not of an aot model"),
        (json.dumps({"model_type": "aot", "aot": [1]}), "aot = [1] (a list), where an object belongs"),
        ('{"model_type": "aot", "aot": {', "is not valid JSON: it ends early (truncated)"),
    ):
        config.write_text(text)
        with pytest.raises(AotError) as exc:
            load_run(tmp_path / "hf")
        one_line_naming(exc, str(config), message)


@pytest.mark.parametrize(
    ("content", "message"),
    [
        (b"{not json", "is not valid JSON"),
        (b'["bytes"]', "must hold a JSON object of fields, not a list"),
        (b"{}", "has no name"),
        (b'{"name": 5}', "name = 5 (an integer), where a string belongs"),
        (b'{"name": "\xff"}', "is not UTF-8 text"),
        (b'{"name": "klingon"}', "names tokenizer 'klingon'"),
    ],
)
def test_a_bad_aot_tokenizer_json_is_one_line_naming_it(tmp_path, content, message) -> None:  # type: ignore[no-untyped-def]
    save_folder(tmp_path / "model")
    (tmp_path / "model" / "aot_tokenizer.json").write_bytes(content)
    with pytest.raises(AotError) as exc:
        load_run(tmp_path / "model")
    one_line_naming(exc, str(tmp_path / "model" / "aot_tokenizer.json"), message)


def test_a_trained_bpe_file_that_does_not_load_is_one_line(tmp_path) -> None:  # type: ignore[no-untyped-def]
    pytest.importorskip("tokenizers")
    save_folder(tmp_path / "model", vocab_size=300)
    (tmp_path / "model" / "aot_tokenizer.json").write_text(json.dumps({"name": "bpe-300"}))
    (tmp_path / "model" / "tokenizer.json").write_bytes(b'{"version": "1.0", "model": ')
    with pytest.raises(AotError) as exc:
        load_run(tmp_path / "model")
    one_line_naming(exc, str(tmp_path / "model" / "tokenizer.json"), "does not load as a trained BPE")


def resign(folder: Path, **changes: object) -> None:
    """Rewrite a checkpoint's trainer.json with ``changes`` and a matching checksum (a hostile or buggy writer)."""
    state = {**json.loads((folder / "trainer.json").read_text()), **changes}
    state["state_sha256"] = state_digest(state)
    (folder / "trainer.json").write_text(json.dumps(state))


@pytest.mark.parametrize(
    ("damage", "reason"),
    [
        (lambda f: (f / "trainer.json").write_bytes(b'{"step": 4, '), "trainer.json is not valid JSON"),
        (lambda f: (f / "trainer.json").write_bytes(b"[4]"), "trainer.json must hold a JSON object"),
        (lambda f: (f / "trainer.json").write_bytes(b'{"step": "\xff"}'), "trainer.json is not UTF-8 text"),
        (lambda f: (f / "trainer.json").write_text('{"step": 4}'), "trainer.json does not match its checksum"),
        (lambda f: (f / "trainer.json").unlink(), "trainer.json is missing"),
        (lambda f: resign(f, step="four"), "trainer.json has step = 'four'"),
        (lambda f: resign(f, files={"../x": "0"}), "trainer.json lists '../x', a file outside the checkpoint"),
        (lambda f: flip_byte(f / "model.safetensors"), "model.safetensors does not match its sha256"),
        (lambda f: (f / "config.json").write_text("{}"), "config.json does not match its sha256"),
        (lambda f: (f / "model.safetensors").unlink(), "model.safetensors is missing"),
    ],
)
def test_a_damaged_checkpoint_falls_back_with_a_notice_or_is_refused(copy_run, damage, reason) -> None:  # type: ignore[no-untyped-def]
    run = copy_run("lm")
    damage(run / "checkpoint")
    notices: list[str] = []
    loaded = load_run(run, notify=notices.append)
    assert loaded.source.path == run / "checkpoint.prev" and loaded.source.step == 2
    assert len(notices) == 1 and notices[0].startswith(f"{str(run)!r}: checkpoint/ is damaged ({reason}")
    assert notices[0].endswith("; using checkpoint.prev/ (step 2)")
    prev = AotModel.from_pretrained(run / "checkpoint.prev")
    assert all(torch.equal(v, prev.state_dict()[k]) for k, v in loaded.model.state_dict().items())
    shutil.rmtree(run / "checkpoint.prev")  # nothing else verifies: refused, no model used
    with pytest.raises(AotError) as exc:
        load_run(run, notify=notices.append)
    one_line_naming(exc, str(run), f"checkpoint/ is damaged ({reason}", "no model was loaded")


def test_an_unfinished_run_reads_its_tokenizer_from_the_checkpoint_it_loads(copy_run) -> None:  # type: ignore[no-untyped-def]
    run = copy_run("lm")
    (run / "results.json").unlink()  # still training: the tokenizer's name is in the checkpoint's trainer.json
    (run / "checkpoint" / "trainer.json").write_bytes(b"\x00garbage")  # ... of the checkpoint actually used
    loaded = load_run(run, notify=lambda line: None)
    assert loaded.source.path.name == "checkpoint.prev" and loaded.results == {}
    assert loaded.tokenizer is not None and loaded.tokenizer.name == "bytes"


def test_a_checkpoint_folder_given_directly_must_verify(copy_run) -> None:  # type: ignore[no-untyped-def]
    run = copy_run("lm")
    assert load_run(run / "checkpoint").source.step == 4
    flip_byte(run / "checkpoint" / "model.safetensors")
    with pytest.raises(AotError) as exc:
        load_run(run / "checkpoint")
    one_line_naming(exc, "model.safetensors does not match its sha256", "fall back to its previous checkpoint")


def test_a_folder_without_checksums_loads_silently_and_an_intact_run_says_nothing(copy_run, tmp_path) -> None:  # type: ignore[no-untyped-def]
    notices: list[str] = []
    save_folder(tmp_path / "model")
    plain = load_run(tmp_path / "model", notify=notices.append)
    assert plain.source.state is None and plain.source.path == tmp_path / "model" and plain.results == {}
    run = load_run(copy_run("lm"), notify=notices.append)
    assert run.source.path.name == "checkpoint" and run.source.step == 4 and notices == []
    assert run.results["task"] == "lm" and run.tokenizer is not None and run.tokenizer.name == "bytes"
    assert run.config is run.model.cfg and not run.model.training
    icl = aot.load_run(copy_run("icl"))  # the package's top level has it
    assert icl.tokenizer is None and icl.config.task == "icl"


def test_weights_that_disagree_with_config_json_name_the_tensor_and_both_shapes(tmp_path) -> None:  # type: ignore[no-untyped-def]
    save_folder(tmp_path / "model")
    config = tmp_path / "model" / "config.json"
    fields = json.loads(config.read_text())
    config.write_text(json.dumps({**fields, "n_embd": 32}))
    with pytest.raises(AotError) as exc:
        AotModel.from_pretrained(tmp_path / "model")
    message = one_line_naming(exc, str(tmp_path / "model" / "model.safetensors"), str(config))
    assert "tensor 'backbone.blocks.0.attn_norm.weight' is [16] in the weights but [32] for the config (and " in message
    assert "damaged" not in message
    for n_layer in (2, 200_000):  # checked before building: 200000 layers are refused at once, not built first
        config.write_text(json.dumps({**fields, "n_layer": n_layer}))
        start = time.perf_counter()
        with pytest.raises(AotError) as exc:
            load_run(tmp_path / "model")
        assert time.perf_counter() - start < 5
        one_line_naming(exc, f"the config has n_layer={n_layer}, the weights 1 layer;", "different models")
    config.write_text(json.dumps(fields))
    weights = tmp_path / "model" / "model.safetensors"
    state = load_file(weights)
    save_file({**state, "extra.weight": torch.zeros(2)}, str(weights))
    with pytest.raises(AotError) as exc:
        load_run(tmp_path / "model")
    one_line_naming(exc, "1 the config has no place for (first 'extra.weight')")
    save_file({k: v for k, v in state.items() if k != "backbone.final_norm.weight"}, str(weights))
    with pytest.raises(AotError) as exc:
        load_run(tmp_path / "model")
    one_line_naming(exc, "1 missing (first 'backbone.final_norm.weight')")
    config.write_text(json.dumps(fields))
    (tmp_path / "model" / "model.safetensors").write_bytes(b"\x08\x00\x00\x00\x00\x00\x00\x00{}")
    with pytest.raises(AotError) as exc:
        load_run(tmp_path / "model")
    one_line_naming(exc, "is damaged or not a safetensors file")


def test_a_task_mismatch_and_a_missing_folder_are_one_line(copy_run, tmp_path) -> None:  # type: ignore[no-untyped-def]
    with pytest.raises(AotError) as exc:
        load_run(copy_run("lm"), task="image", purpose="attention maps")
    one_line_naming(exc, "holds a language model", "attention maps needs an image classifier", "`aot train vision`")
    with pytest.raises(AotError) as exc:
        load_run(tmp_path / "nowhere", task="icl")
    one_line_naming(exc, "is not a finished `aot train icl` run: there is no such folder")
    (tmp_path / "empty").mkdir()
    with pytest.raises(AotError) as exc:
        load_run(tmp_path / "empty")
    one_line_naming(exc, "holds no model")


def test_an_icl_run_whose_data_config_does_not_validate_is_one_line(copy_run) -> None:  # type: ignore[no-untyped-def]
    from aot.eval.icl_runs import load_run as load_icl_run

    run = copy_run("icl")
    results = json.loads((run / "results.json").read_text())
    results["config"]["data"]["noise_std"] = "loud"
    (run / "results.json").write_text(json.dumps(results))
    with pytest.raises(AotError) as exc:
        load_icl_run(run)
    one_line_naming(exc, str(run / "results.json"), "config.data.noise_std")
    del results["config"]["data"]["n_dims"]
    (run / "results.json").write_text(json.dumps(results))
    with pytest.raises(AotError) as exc:
        load_icl_run(run)
    one_line_naming(exc, str(run / "results.json"), "has no config.data.n_dims")


# -- every command that reads a model, on a damaged checkpoint ------------------------------------------------

COMMANDS = {
    "sample": ("lm", ["sample", "{run}", "--prompt", "To be", "--max-new-tokens", "2"]),
    "viz attention": ("vision", ["viz", "attention", "{run}", "--images", "2"]),
    "analyze": ("lm", ["analyze", "{run}", "--batches", "1", "--batch-size", "1", "--seq-len", "8", "--out", "{out}"]),
    "eval lm": ("lm", ["eval", "lm", "{run}", "--task", "lambada", "--data", f"lambada={LAMBADA}", "--out", "{out}"]),
    "eval icl": ("icl", ["eval", "icl", "{run}", "--prompts", "10", "--out", "{out}"]),
    "export hf": ("lm", ["export", "hf", "{run}", "{out}"]),
    "export safetensors": ("lm", ["export", "safetensors", "{run}", "{out}"]),
    "train vision --init-from": ("vision", [*VISION_TRAIN, "--init-from", "{run}", "--out", "{out}"]),
}


@pytest.mark.parametrize("command", COMMANDS)
def test_every_command_refuses_a_damaged_checkpoint_in_one_line_changing_nothing(copy_run, tmp_path, capsys, command):  # type: ignore[no-untyped-def]
    if command == "export hf":
        pytest.importorskip("transformers")
    task, argv = COMMANDS[command]
    run = copy_run(task)
    shutil.rmtree(run / "checkpoint.prev")
    flip_byte(run / "checkpoint" / "model.safetensors")
    before = tree_hashes(tmp_path)
    out = tmp_path / "out"
    args = [str(run) if a == "{run}" else str(out) if a == "{out}" else a for a in argv]
    with pytest.MonkeyPatch.context() as patch:
        patch.setenv("AOT_DATA", str(tmp_path / "data"))
        code = main(args)
    err = capsys.readouterr().err.strip()
    assert code == 2, err
    assert err.startswith("aot: error: ") and "\n" not in err, err
    assert "model.safetensors does not match its sha256" in err and "no model was loaded" in err, err
    after = tree_hashes(tmp_path)
    assert {k: v for k, v in after.items() if k in before} == before  # nothing that was there changed
    assert not [k for k in after if k not in before and not k.startswith("data/")], after.keys() - before.keys()


def test_a_command_falls_back_to_checkpoint_prev_and_says_so(copy_run, capsys) -> None:  # type: ignore[no-untyped-def]
    run = copy_run("lm")
    flip_byte(run / "checkpoint" / "model.safetensors")
    assert main(["sample", str(run), "--prompt", "To be", "--max-new-tokens", "2", "--temperature", "0"]) == 0
    err = capsys.readouterr().err
    note = (
        f"aot: note: {str(run)!r}: checkpoint/ is damaged (model.safetensors does not match its sha256); "
        "using checkpoint.prev/ (step 2)"
    )
    assert note in err.splitlines()


def test_a_save_pretrained_folder_says_how_to_name_its_tokenizer_and_then_loads_with_it(tmp_path) -> None:  # type: ignore[no-untyped-def]
    from aot.data.tokenizers import get_tokenizer, save_tokenizer

    model = build_model(preset_config("gpt2-cpu", n_layer=1, n_embd=16, n_head=2, vocab_size=256, block_size=16))
    model.save_pretrained(tmp_path / "m")
    with pytest.raises(AotError, match=r"save_tokenizer\(TOKENIZER, FOLDER\).*tokenizer=False"):
        load_run(tmp_path / "m")
    assert load_run(tmp_path / "m", tokenizer=False).tokenizer is None
    save_tokenizer(get_tokenizer("bytes"), tmp_path / "m")
    assert load_run(tmp_path / "m").tokenizer.encode("ab") == [97, 98]
