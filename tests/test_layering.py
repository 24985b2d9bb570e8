"""One way of layering a config, for every command that takes one (aot.layering): the defaults or a preset <
--config FILE < the command's flags < --set section.field=value; an unknown section or field is a one-line error;
every example in configs/ loads through its command."""

from __future__ import annotations

import dataclasses
from pathlib import Path
from typing import Any

import pytest
import yaml

from aot.cli import build_parser, main
from aot.errors import ConfigError
from aot.layering import build_sections, layered
from aot.validation import load_config_file

CONFIGS = Path(__file__).resolve().parents[1] / "configs"


def load(command: str, argv: list[str], capsys: pytest.CaptureFixture[str]) -> dict[str, dict[str, Any]]:
    """The config ``aot COMMAND ARGV`` would run with, section by section, as plain data."""
    if command in ("lm", "vision", "icl"):
        assert main(["train", command, *argv, "--dump-config"]) == 0
        return yaml.safe_load(capsys.readouterr().out)
    if command == "denoise":
        from aot.cli.denoise import settings_from_args as denoise_settings

        return denoise_settings(build_parser().parse_args(["denoise", *argv])).to_dict()
    if command == "bench":
        from aot.cli.bench import settings_from_args as bench_settings

        args = build_parser().parse_args(["bench", "--device", "cpu", *argv])
        return {"bench": dataclasses.asdict(bench_settings(args))}
    assert command == "analyze"
    from aot.cli.analyze import settings_from_args as analyze_settings

    return {"analyze": dataclasses.asdict(analyze_settings(build_parser().parse_args(["analyze", *argv])))}


# command, section, field, the value a config file gives, the flag and the value it gives, the --set value
ORDER = [
    ("lm", "train", "lr", 1e-3, ["--lr", "2e-3"], 2e-3, 3e-3),
    ("denoise", "denoise", "eta", 0.07, ["--eta", "0.09"], 0.09, 0.11),
    ("bench", "bench", "repeat", 3, ["--repeat", "4"], 4, 5),
    ("analyze", "analyze", "batches", 3, ["--batches", "4"], 4, 5),
]


@pytest.mark.parametrize(("command", "section", "name", "in_file", "flag", "by_flag", "by_set"), ORDER)
def test_a_file_overrides_the_defaults_a_flag_the_file_and_set_the_flag(
    command: str,
    section: str,
    name: str,
    in_file: Any,
    flag: list[str],
    by_flag: Any,
    by_set: Any,
    tmp_path: Path,
    capsys: pytest.CaptureFixture[str],
) -> None:
    config = tmp_path / "config.yaml"
    config.write_text(yaml.safe_dump({section: {name: in_file}}))
    file = ["--config", str(config)]
    assign = ["--set", f"{section}.{name}={by_set}"]

    def value(argv: list[str]) -> Any:
        return load(command, argv, capsys)[section][name]

    assert value([]) != in_file  # the default is another value
    assert value(file) == in_file
    assert value([*file, *flag]) == by_flag
    assert value([*file, *flag, *assign]) == by_set
    assert value([*file, *assign]) == by_set


UNKNOWN = [
    (["train", "lm"], "train"),
    (["denoise"], "denoise"),
    (["bench"], "bench"),
    (["analyze", "--calibrate"], "analyze"),
]


@pytest.mark.parametrize(("command", "section"), UNKNOWN)
def test_an_unknown_section_or_field_is_one_line(
    command: list[str], section: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    out = ["--out", str(tmp_path / "out")]
    assert main([*command, "--set", "nosuch.x=1", *out]) == 2
    err = capsys.readouterr().err
    assert err.startswith("aot: error: unknown section 'nosuch' in --set") and err.count("\n") == 1
    assert main([*command, "--set", f"{section}.nosuch=1", *out]) == 2
    err = capsys.readouterr().err
    assert f"unknown field 'nosuch' in the {section} config" in err and err.count("\n") == 1
    config = tmp_path / "config.yaml"
    config.write_text(f"{section}:\n  nosuch: 1\n")
    assert main([*command, "--config", str(config), *out]) == 2
    assert f"unknown field 'nosuch' in the {section} config" in capsys.readouterr().err
    assert not (tmp_path / "out").exists()


@pytest.mark.parametrize(("command", "field"), [(["bench"], "repeat"), (["analyze", "--calibrate"], "batches")])
def test_a_flat_file_of_a_one_section_command_is_told_where_its_fields_go(
    command: list[str], field: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    config = tmp_path / "flat.yaml"
    config.write_text(f"{field}: 3\n")
    assert main([*command, "--config", str(config), "--out", str(tmp_path / "out")]) == 2
    err = capsys.readouterr().err
    section = command[0]
    assert f"unknown section '{field}' in config file" in err and f"put the fields under `{section}:`" in err


@dataclasses.dataclass
class Part:
    size: int = 2
    name: str = "a"


def test_build_sections_validates_each_section_and_keeps_mapping_sections() -> None:
    built = build_sections({"model": dict[str, Any], "part": Part}, {"model": {"preset": "x"}, "part": {"size": 3}})
    assert built == {"model": {"preset": "x"}, "part": Part(size=3)}
    assert build_sections({"part": Part}, {"part": None}) == {"part": Part()}  # an empty YAML section
    assert layered({"part": Part}, {"part": {"size": 4}}, sets=["part.name=b"]) == {"part": Part(4, "b")}
    with pytest.raises(ConfigError, match="unknown section 'other' in the config; use part"):
        build_sections({"part": Part, "more": Part}, {"other": {}})
    with pytest.raises(ConfigError, match=r"part\.size='big' must be an integer"):
        build_sections({"part": Part}, {"part": {"size": "big"}})


@pytest.mark.parametrize("path", sorted(CONFIGS.glob("*.yaml")), ids=lambda p: p.name)
def test_every_example_in_configs_loads_through_its_command(path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """configs/NAME.yaml is the example of `aot train NAME` (lm, vision, icl) or `aot NAME`, and every field it
    gives is the one the command runs with."""
    assert path.stem in ("lm", "vision", "icl", "denoise", "bench", "analyze"), "give the new file its command"
    loaded = load(path.stem, ["--config", str(path)], capsys)
    for section, fields in load_config_file(path).items():
        for name, value in fields.items():
            got = loaded[section][name]
            assert (list(got) if isinstance(got, tuple) else got) == value, f"{path.name}: {section}.{name}"
