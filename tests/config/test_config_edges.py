"""Issue 25, config edges: control characters in run_name, a tilde output_dir, a dry run's checks,
dry_run in grpo and sft, out-of-range grpo settings."""

from __future__ import annotations

import pytest

from rltf.config.loading import ConfigError, load_config
from rltf.run.cli import run_cli

pytestmark = pytest.mark.usefixtures("one_torch_thread")


def test_control_characters_in_run_name_are_one_error_line(tmp_path, capsys):
    from train.rltf import main

    config = tmp_path / "nul.yaml"
    config.write_text('run_name: "a\\0b"\n')
    with pytest.raises(SystemExit) as stop:
        run_cli(main, [f"config={config}", f"output_dir={tmp_path}"])
    assert stop.value.code == 2
    assert capsys.readouterr().err.startswith("error: bad value for 'run_name': 'a\\x00b'")
    config.write_text('run_name: "a\\nb"\n')
    with pytest.raises(ConfigError, match=r"bad value for 'run_name': 'a\\nb'.*control characters"):
        load_config([f"config={config}"])


def test_a_tilde_output_dir_is_the_home_folder(monkeypatch, tmp_path):
    monkeypatch.setenv("HOME", str(tmp_path))
    cfg = load_config(["output_dir=~/runs", "run_name=r"])
    assert cfg.output_dir == str(tmp_path / "runs") and cfg.run_dir == tmp_path / "runs" / "r"


def test_a_dry_run_refuses_an_output_dir_that_is_a_file(tmp_path):
    (tmp_path / "out").write_text("a file")
    with pytest.raises(ConfigError, match=rf"{tmp_path / 'out'} \(output_dir\) is a file, not a folder"):
        load_config([f"output_dir={tmp_path / 'out'}", "dry_run=true"])


@pytest.mark.parametrize("recipe", ["grpo", "sft"])
def test_grpo_and_sft_honour_dry_run(tmp_path, capsys, recipe):
    import importlib

    main = importlib.import_module(f"train.{recipe}").main
    main([f"output_dir={tmp_path}", "run_name=dry", "dry_run=true"])
    out = capsys.readouterr().out
    assert out.startswith(f"dry run of train/{recipe}.py 'dry': the configuration is valid; nothing was loaded")
    assert not (tmp_path / "dry").exists()


@pytest.mark.parametrize("arg, message", [
    ("grpo.beta=-1", "'grpo.beta': -1.0; expected a finite number >= 0"),
    ("grpo.beta=nan", "'grpo.beta': nan"), ("grpo.beta=.inf", "'grpo.beta': inf"),
    ("grpo.num_iterations=100000000000000000000", "'grpo.num_iterations': 100000000000000000000; expected an "
                                                  "integer from 1 to 1000"),
])
def test_out_of_range_grpo_settings_are_refused(arg, message):
    with pytest.raises(ConfigError, match=f"bad value for {message}".replace("(", r"\(").replace(".", r"\.")):
        load_config([arg])
    load_config(["grpo.beta=0.04", "grpo.num_iterations=4"])  # in range: fine
