"""The run config's documentation (issue 22 item 6): every field of every section reachable from
RunConfig (the env sections of every registered env and the flow section included) declares its
help, and ``help=true`` / ``--help`` prints every key with its default and help, then exits 0
without running anything."""

from __future__ import annotations

import dataclasses
import importlib.util
import subprocess

import pytest

import envs  # noqa: F401  (registers the shipped envs)
from envs import registry
from rltf.config.help import config_fields, field_help, field_types, yaml_value
from rltf.config.loading import REPO_ROOT, ConfigError, RunConfig, load_config

SHIPPED_ENVS = ("openagi", "travel")


def reachable_sections() -> list[type]:
    """RunConfig, each registered env's section class, and every dataclass their fields hold, found
    by following field types (not through rltf.config.help, whose walk is what is tested)."""
    seen: list[type] = []
    todo = [RunConfig, *(registry.spec(name).section for name in registry.names())]
    while todo:
        cls = todo.pop(0)
        if cls in seen:
            continue
        seen.append(cls)
        todo += [tp for tp in field_types(cls).values() if dataclasses.is_dataclass(tp)]
    return seen


def test_both_shipped_envs_and_the_flow_section_are_walked():
    names = {cls.__name__ for cls in reachable_sections()}
    assert set(SHIPPED_ENVS) <= set(registry.names())
    assert {"RunConfig", "OpenAGIEnvConfig", "TravelEnvConfig", "RewardSettings", "FlowSettings",
            "FlowBackendSettings", "MTPSettings", "OKRSettings", "ReActSettings", "LoraSettings",
            "EmbeddedSettings", "GrpoSettings"} <= names


def test_every_field_has_help_where_it_is_declared():
    missing, thin = [], []
    for cls in reachable_sections():
        for name, text in field_help(cls).items():
            where = f"{cls.__module__}.{cls.__qualname__}.{name}"
            if not text:
                missing.append(where)
            elif len(text.split()) < 4:  # "the seed", "learning rate": a name restated, not help
                thin.append(f"{where}: {text!r}")
    assert not missing, ("fields without help (a string literal on the line after the field): "
                         + ", ".join(missing))
    assert not thin, "help that only restates the name: " + "; ".join(thin)


def expected_keys() -> list[str]:
    """Every dotted key, by following field types: RunConfig's (its env section is a mapping until
    read), then each registered env's section under ``env.``."""
    keys: list[str] = []

    def walk(cls: type, prefix: str) -> None:
        for name, tp in field_types(cls).items():
            keys.append(f"{prefix}{name}")
            if dataclasses.is_dataclass(tp):
                walk(tp, f"{prefix}{name}.")

    walk(RunConfig, "")
    for name in registry.names():
        walk(registry.spec(name).section, "env.")
    return keys


def test_the_help_walk_lists_every_key_once():
    keys = [f.key for f in config_fields()]
    assert len(keys) == len(set(keys)), "a key listed twice"
    assert set(keys) == set(expected_keys())
    for key in ("planner.lora.r", "env.suite", "env.travel.reward.hard", "flow.backend.kind", "flow.okr.levels",
                "grpo.warm_start", "eval.schemas"):
        assert key in keys
    owner = {f.key: f.env for f in config_fields()}
    assert owner["env.name"] == "" and owner["env.suite"] == "openagi" and owner["env.travel.seed"] == "travel"


@dataclasses.dataclass
class Base:
    """A class docstring is not a field's help."""

    plain: int = 1
    """What plain does, in words."""
    bare: int = 2  # a comment is not help
    long: str = "x"
    """First line
    and the second line joined."""


@dataclasses.dataclass
class Child(Base):
    plain: int = 3
    """The child's own text wins."""
    extra: bool = False
    """Added by the child."""


def test_field_help_is_the_string_after_the_field_and_is_inherited():
    assert field_help(Base) == {"plain": "What plain does, in words.", "bare": "",
                                "long": "First line and the second line joined."}
    assert field_help(Child) == {"plain": "The child's own text wins.", "bare": "",
                                 "long": "First line and the second line joined.", "extra": "Added by the child."}


def _lines_by_key(out: str) -> dict[str, str]:
    return {line.strip().split(" = ", 1)[0]: line.strip() for line in out.splitlines() if " = " in line}


def test_help_true_prints_every_key_with_its_default_and_exits_0(tmp_path, capsys, monkeypatch):
    """train/rltf.py's ``__main__`` block (``run_cli(main, ["help=true"])``) in this process, from an
    empty working directory (issue #52 item 2: not a process of its own, ~8 CPU s of imports fewer;
    tests/run/test_entry_points.py runs the entry point as a process)."""
    from rltf.run.cli import RESUME_ADVICE, run_cli
    from train.rltf import main  # a recipe (train/ is not a package of the layers): its main, in process

    monkeypatch.chdir(tmp_path)
    capsys.readouterr()
    with pytest.raises(SystemExit) as info:
        run_cli(main, ["help=true"], interrupted=RESUME_ADVICE)
    out = capsys.readouterr()
    proc = subprocess.CompletedProcess(["help=true"], info.value.code, out.out, out.err)
    assert proc.returncode == 0, proc.stderr[-2000:]
    assert list(tmp_path.iterdir()) == []  # nothing ran: no run folder, no checkpoints
    printed = _lines_by_key(proc.stdout)
    for f in config_fields():
        if f.is_section:
            assert f"{f.key}:" in proc.stdout.split()
            continue
        assert printed.get(f.key, "").startswith(f"{f.key} = {yaml_value(f.default)}   ("), f.key
        assert " ".join(f.help.split()[:6]) in " ".join(proc.stdout.split()), f.key  # its help, wrapped
    # the values configs/default.yaml sets differently are marked
    assert printed["rltf.steps"].endswith("[configs/default.yaml: 300]")


@pytest.mark.parametrize("flag", ["--help", "-h", "help", "help=true", "--help=true", "help=yes"])
def test_help_flags_print_the_listing_and_exit_0(flag, capsys):
    with pytest.raises(SystemExit) as exit_info:
        load_config([flag, "rltf.lr=0.5"])
    assert exit_info.value.code == 0
    printed = _lines_by_key(capsys.readouterr().out)
    assert printed["rltf.lr"].startswith("rltf.lr = 0.0003   (a number > 0 and <= 1)")
    assert printed["rltf.lr"].endswith("[configs/default.yaml + overrides: 0.5]")


def test_help_false_runs_as_usual_and_a_bad_help_value_is_named():
    assert load_config(["help=false", "rltf.steps=3"]).rltf.steps == 3
    with pytest.raises(ConfigError, match=r"bad value for 'help' in argument 'help=maybe'.*expected true or false"):
        load_config(["help=maybe"])


def test_help_is_printed_even_when_the_other_arguments_are_bad(capsys):
    with pytest.raises(SystemExit) as exit_info:
        load_config(["--help", "rltf.lrr=1"])
    assert exit_info.value.code == 0
    out = capsys.readouterr().out
    assert "not shown" in out and "'rltf.lrr'" in out and "rltf.lr = 0.0003" in out


@pytest.mark.parametrize("recipe", ["sft", "evaluate", "grpo"])
def test_the_other_recipes_print_the_same_help(recipe, capsys, monkeypatch):
    spec = importlib.util.spec_from_file_location(f"recipe_{recipe}", REPO_ROOT / "train" / f"{recipe}.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    with pytest.raises(SystemExit) as exit_info:
        module.main(["--help"])
    assert exit_info.value.code == 0
    printed = _lines_by_key(capsys.readouterr().out)
    assert printed["grpo.warm_start"].startswith("grpo.warm_start = text")
    if recipe == "grpo":  # train/grpo.py reads configs/grpo-lite.yaml unless told otherwise
        assert "[configs/grpo-lite.yaml" in "\n".join(printed.values())
