"""Run configuration: YAML + key=value overrides, validated into dataclasses with clear errors."""

from __future__ import annotations

import dataclasses
from pathlib import Path

import pytest
import yaml

from rltf.config.loading import (
    CONFIG_DIR,
    ConfigError,
    RunConfig,
    config_to_yaml,
    load_config,
    save_config,
)


def _write(tmp_path: Path, text: str, name: str = "run.yaml") -> Path:
    path = tmp_path / name
    path.write_text(text)
    return path


# ------------------------------------------------------------------------------ overrides
def test_overrides_are_typed_and_applied_in_order():
    cfg = load_config(["rltf.lr=1e-4", "planner.lora.enabled=true", "rltf.steps=7", "rltf.steps=9",
                       "planner.lora.target_modules=[q_proj,v_proj]", "eval.splits=[validation,test]"])
    assert cfg.rltf.lr == pytest.approx(1e-4) and isinstance(cfg.rltf.lr, float)
    assert cfg.planner.lora.enabled is True
    assert cfg.rltf.steps == 9  # the last override wins
    assert cfg.planner.lora.target_modules == ["q_proj", "v_proj"]
    assert cfg.eval.splits == ["validation", "test"]
    assert isinstance(cfg, RunConfig) and cfg.run_dir == Path("checkpoints") / "default"


def test_config_argument_picks_the_yaml(tmp_path):
    path = _write(tmp_path, "run_name: mine\nrltf:\n  k_samples: 3\n  baseline: rloo\n")
    cfg = load_config([f"config={path}", "rltf.k_samples=4"])
    assert cfg.run_name == "mine" and cfg.rltf.baseline == "rloo"
    assert cfg.rltf.k_samples == 4  # overrides apply after the file, wherever config= appears
    assert load_config(["rltf.k_samples=4", f"config={path}"]).rltf.k_samples == 4
    # keys the file does not set keep the dataclass defaults
    assert cfg.sft == RunConfig().sft
    # a shipped config by bare name
    assert load_config(["config=llama-lora"]).planner.model == load_config(
        [f"config={CONFIG_DIR / 'llama-lora.yaml'}"]).planner.model


def test_interpolation_follows_overrides():
    cfg = load_config(["seed=5"])  # default.yaml ties the embedded planner's init seed to the run seed
    assert cfg.seed == 5 and cfg.planner.embedded.seed == 5


# ------------------------------------------------------------------------------ errors
def test_unknown_top_level_key_names_it_and_suggests():
    with pytest.raises(ConfigError) as e:
        load_config(["lr=1e-4"])
    msg = str(e.value)
    assert "'lr'" in msg and "override 'lr=1e-4'" in msg and "'rltf.lr'" in msg and "'sft.lr'" in msg
    with pytest.raises(ConfigError, match=r"unknown config key 'plannr'.*did you mean 'planner'"):
        load_config(["plannr.model=x"])


def test_unknown_nested_key_typo_suggests_closest():
    with pytest.raises(ConfigError) as e:
        load_config(["rltf.lrr=3e-4"])
    msg = str(e.value)
    assert "unknown config key 'rltf.lrr'" in msg and "did you mean 'rltf.lr'" in msg
    assert "Valid keys under 'rltf'" in msg and "k_samples" in msg
    with pytest.raises(ConfigError, match=r"'planner\.lora\.rank'.*did you mean 'planner\.lora\.r'"):
        load_config(["planner.lora.rank=4"])


def test_unknown_key_in_yaml_names_the_file(tmp_path):
    path = _write(tmp_path, "planner:\n  lora:\n    enabeld: true\n")
    with pytest.raises(ConfigError) as e:
        load_config([f"config={path}"])
    msg = str(e.value)
    assert "'planner.lora.enabeld'" in msg and str(path) in msg and "did you mean 'planner.lora.enabled'" in msg


@pytest.mark.parametrize("override, expected", [
    ("rltf.steps=abc", "expected an integer"),
    ("rltf.lr=fast", "expected a number"),
    ("dry_run=maybe", "expected true or false"),
    ("planner.lora.target_modules=q", "expected a list of strings or null"),
    ("rltf.baseline=average", "expected one of 'moving_average', 'per_task', 'rloo'"),
    ("planner.dtype=fp8", "expected one of 'auto', 'float32', 'bfloat16', 'float16'"),
    ("planner=3", "expected a section"),
])
def test_wrong_type_or_enum_names_key_value_and_expectation(override, expected):
    key, _, value = override.partition("=")
    with pytest.raises(ConfigError) as e:
        load_config([override])
    msg = str(e.value)
    assert f"'{key}'" in msg and value in msg and expected in msg


@pytest.mark.parametrize("override, expected", [
    ("rltf.steps=-1", "expected an integer >= 0"),
    ("rltf.lr=0", "expected a number > 0"),
    ("rltf.baseline_decay=1.0", "< 1"),
    ("planner.lora.dropout=-0.1", ">= 0"),
])
def test_out_of_range_values(override, expected):
    key = override.partition("=")[0]
    with pytest.raises(ConfigError) as e:
        load_config([override])
    assert f"'{key}'" in str(e.value) and expected in str(e.value)


def test_bad_value_in_yaml_names_the_file(tmp_path):
    path = _write(tmp_path, "rltf:\n  k_samples: many\n")
    with pytest.raises(ConfigError, match=r"'rltf\.k_samples' in config file .*run\.yaml.*'many'.*an integer"):
        load_config([f"config={path}"])


def test_cross_field_checks():
    with pytest.raises(ConfigError, match=r"'rltf\.baseline' is 'rloo'.*k_samples"):
        load_config(["rltf.baseline=rloo", "rltf.k_samples=1"])
    with pytest.raises(ConfigError, match=r"load_in_4bit.*lora\.enabled"):
        load_config(["planner.load_in_4bit=true"])
    with pytest.raises(ConfigError, match=r"'eval\.splits'.*'valid'"):
        load_config(["eval.splits=[test,valid]"])
    with pytest.raises(ConfigError, match=r"d_model.*num_heads"):
        load_config(["planner.embedded.d_model=130"])
    with pytest.raises(ConfigError, match=r"run_name"):
        load_config(["run_name=a/b"])


def test_bad_arguments_and_files(tmp_path):
    with pytest.raises(ConfigError, match=r"expected key=value"):
        load_config(["rltf.lr"])
    with pytest.raises(ConfigError, match=r"config file 'no-such\.yaml' not found.*default"):
        load_config(["config=no-such.yaml"])
    broken = _write(tmp_path, "rltf: [unclosed")
    with pytest.raises(ConfigError, match=r"cannot read config file"):
        load_config([f"config={broken}"])
    a_list = _write(tmp_path, "- a\n- b\n", "list.yaml")
    with pytest.raises(ConfigError, match=r"must be a mapping"):
        load_config([f"config={a_list}"])
    with pytest.raises(ConfigError, match=r"Interpolation key 'sed'"):
        load_config(["planner.embedded.seed=${sed}"])


# ------------------------------------------------------------------------------ round trip and shipped configs
def test_yaml_round_trip(tmp_path):
    cfg = load_config(["config=llama-lora", "rltf.lr=2e-5", "seed=3", "run_name=rt", "eval.splits=[test]"])
    path = save_config(cfg, tmp_path / "run" / "config.yaml")
    again = load_config([f"config={path}"])
    assert again == cfg
    assert yaml.safe_load(path.read_text())["rltf"]["lr"] == pytest.approx(2e-5)
    assert "${" not in path.read_text()  # interpolations are resolved in the saved file
    assert config_to_yaml(again) == config_to_yaml(cfg)


@pytest.mark.parametrize("name", ["default", "flan-t5-large", "llama-lora"])
def test_shipped_configs_load_and_set_every_key_they_mention(name):
    path = CONFIG_DIR / f"{name}.yaml"
    cfg = load_config([f"config={path}"])
    raw = yaml.safe_load(path.read_text())

    def check(section: dict, obj, prefix=""):
        for key, value in section.items():
            got = getattr(obj, key)
            if isinstance(value, dict):
                check(value, got, f"{prefix}{key}.")
            elif not (isinstance(value, str) and value.startswith("${")):
                assert got == value, f"{prefix}{key}"

    check(raw, cfg)


def test_shipped_configs_are_what_they_say():
    default = load_config([])
    assert default.planner.model == "embedded" and default.planner.dtype == "float32"
    assert default.env.backend == "lite" and not default.planner.lora.enabled
    flan = load_config(["config=flan-t5-large"])
    assert flan.planner.model == "google/flan-t5-large" and flan.planner.dtype == "bfloat16"
    assert not flan.planner.lora.enabled
    llama = load_config(["config=llama-lora"])
    lora = llama.planner.lora
    assert llama.planner.arch == "causal" and llama.planner.dtype == "bfloat16"
    assert (lora.enabled, lora.r, lora.alpha, lora.target_modules) == (True, 8, 16, ["q_proj", "v_proj"])


def test_every_field_has_a_default_so_dataclass_defaults_validate():
    from rltf.config.loading import validate_config

    cfg = RunConfig()
    validate_config(cfg)
    assert all(f.default is not dataclasses.MISSING or f.default_factory is not dataclasses.MISSING
               for f in dataclasses.fields(cfg))


def test_grpo_section_is_part_of_the_run_config():
    from train.grpo import parse_args

    cfg = parse_args(["grpo.loss_type=grpo", "grpo.beta=0.04", "grpo.top_k=5"])
    assert cfg.run_name == "grpo-lite" and cfg.planner.arch == "causal"  # configs/grpo-lite.yaml by default
    assert (cfg.grpo.loss_type, cfg.grpo.beta, cfg.grpo.top_k, cfg.grpo.warm_start) == ("grpo", 0.04, 5, "text")
    assert "grpo:" in config_to_yaml(cfg) and "loss_type: grpo" in config_to_yaml(cfg)
    with pytest.raises(ConfigError, match=r"grpo\.warm_start.*'sft'.*(text|constrained)"):
        load_config(["grpo.warm_start=sft"])
    with pytest.raises(ConfigError, match=r"grpo\.top_p"):
        load_config(["grpo.top_p=1.5"])
    with pytest.raises(ConfigError, match=r"unknown config key 'grpo\.loss'.*did you mean 'grpo\.loss_type'"):
        parse_args(["grpo.loss=grpo"])
