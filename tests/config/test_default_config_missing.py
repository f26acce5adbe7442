"""An rltf installed without its checkout's ``configs/`` (issue #38 item 10): a run without ``config=``
stops with one line naming the default config it looked for and how to go on (exit status 2),
instead of running on other defaults. The folder is hidden by pointing the lookup elsewhere, from
a temporary working directory; the repository's ``configs/`` is not touched."""

from __future__ import annotations

import pytest

from rltf.config import loading
from rltf.config.loading import ConfigError, load_config
from rltf.run.cli import EXIT_USER_ERROR, run_cli


@pytest.fixture
def no_configs(tmp_path, monkeypatch):
    """The lookup of an installed package: no ``configs/`` next to it; the working directory elsewhere."""
    gone = tmp_path / "site-packages" / "configs"
    monkeypatch.setattr(loading, "CONFIG_DIR", gone)
    monkeypatch.setattr(loading, "DEFAULT_CONFIG", gone / "default.yaml")
    monkeypatch.chdir(tmp_path)
    return gone


def test_without_the_configs_folder_the_default_run_is_a_clear_error(no_configs):
    with pytest.raises(ConfigError) as e:
        load_config([])
    message = str(e.value)
    assert str(no_configs / "default.yaml") in message and "config=PATH" in message and "\n" not in message
    with pytest.raises(ConfigError, match="default run config"):
        load_config(["rltf.steps=3"])  # overrides alone are no config either


def test_the_command_line_prints_one_line_and_exits_2(no_configs, capsys):
    with pytest.raises(SystemExit) as e:
        run_cli(load_config, [])
    assert e.value.code == EXIT_USER_ERROR == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and err.startswith("error: no config= given") and "config=PATH" in err


def test_a_named_config_still_loads_and_a_bare_name_says_the_folder_is_missing(no_configs, tmp_path):
    own = tmp_path / "mine.yaml"
    own.write_text("seed: 7\n")
    assert load_config([f"config={own}"]).seed == 7
    with pytest.raises(ConfigError, match=r"shipped configs: none \(.*configs is not there: .*config=PATH"):
        load_config(["config=flan-t5-large"])


def test_help_still_prints_without_the_folder(no_configs, capsys):
    with pytest.raises(SystemExit) as e:
        load_config(["help=true"])
    assert e.value.code == 0
    assert "default run config" in capsys.readouterr().out  # the note says why the values are the defaults


def test_the_checkouts_default_config_is_found():
    assert loading.default_config_path() == loading.DEFAULT_CONFIG and loading.DEFAULT_CONFIG.is_file()
