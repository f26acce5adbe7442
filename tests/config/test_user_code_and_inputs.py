"""Issue #52 items 3-4, in process: the user's code named by an import path (``env.name``, ``env.tools``,
``rltf.objective``) is one line naming the path whatever it raises (``SystemExit``, ``KeyboardInterrupt``
included); environment interpolation is off unless ``env_interpolation: true`` and what it reads is never
saved; values that cannot run (a 5,000-deep list, a name too long for the file system, a million beams,
a billion tasks per step, lr 1e300, integer overflows, a newline in an override) are one ConfigError line
naming the key and the limit. The command line's exit status and single line: tests/run/test_error_lines.py."""

from __future__ import annotations

import sys
import textwrap

import pytest
import yaml

from rltf.config.loading import ConfigError, config_to_yaml, load_config, save_config


@pytest.fixture
def user_modules(tmp_path, monkeypatch):
    """A folder on ``sys.path`` with modules that misbehave on import; removed from ``sys.modules`` after."""
    folder = tmp_path / "usercode"
    folder.mkdir()
    modules = {
        "exits_on_import": "import sys\nsys.exit(0)\n",
        "interrupts_on_import": "raise KeyboardInterrupt\n",
        "raises_on_import": "raise RuntimeError('tool module boom')\n",
        "user_hooks": textwrap.dedent("""
            import sys

            def leave(*args):
                sys.exit(0)

            def interrupt(*args):
                raise KeyboardInterrupt
        """),
    }
    for name, code in modules.items():
        (folder / f"{name}.py").write_text(code)
    monkeypatch.syspath_prepend(str(folder))
    yield folder
    for name in modules:
        sys.modules.pop(name, None)


def _error(args: list[str]) -> str:
    with pytest.raises(ConfigError) as info:
        load_config(args)
    message = str(info.value)
    assert "\n" not in message
    return message


# ------------------------------------------------------------------ env.name
@pytest.mark.parametrize("path, reason", [
    ("sys:exit", "calling sys:exit() raised SystemExit: it called sys.exit(None)"),
    ("exits_on_import:SPEC", "cannot import module 'exits_on_import' (SystemExit: it called sys.exit(0))"),
    ("interrupts_on_import:SPEC", "cannot import module 'interrupts_on_import' (KeyboardInterrupt)"),
    ("user_hooks:leave", "calling user_hooks:leave() raised SystemExit: it called sys.exit(0)"),
    ("user_hooks:interrupt", "calling user_hooks:interrupt() raised KeyboardInterrupt"),
])
def test_an_env_import_path_that_exits_or_interrupts_is_one_line_naming_it(user_modules, path, reason):
    message = _error([f"env.name={path}", "dry_run=true"])
    assert message.startswith(f"bad value for 'env.name': {path!r}; {reason}"), message


# ------------------------------------------------------------------ rltf.objective
def test_an_objective_module_that_exits_on_import_is_one_line_naming_it(user_modules):
    message = _error(["rltf.objective=exits_on_import:f", "dry_run=true"])
    assert message.startswith("bad value for 'rltf.objective': 'exits_on_import:f'; cannot import module "
                              "'exits_on_import' (SystemExit: it called sys.exit(0))"), message


def test_an_objective_that_calls_sys_exit_while_training_is_one_line_naming_it(user_modules):
    from rltf.algorithms.choice import ObjectiveError, load_objective

    spec = load_objective("user_hooks:leave")
    with pytest.raises(ObjectiveError, match=r"^the objective user_hooks:leave \(rltf.objective\) raised SystemExit: "
                                             r"it called sys.exit\(0\)$"):
        spec.loss(None, None)


# ------------------------------------------------------------------ env.tools
def test_a_tool_module_that_raises_on_import_is_one_line_naming_it(user_modules):
    from envs.config import EnvConfigError
    from envs.openagi.factory import resolve_tool_hook

    for entry, reason in [("raises_on_import:register", "RuntimeError: tool module boom"),
                          ("exits_on_import:register", "SystemExit: it called sys.exit(0)")]:
        with pytest.raises(EnvConfigError) as info:
            resolve_tool_hook(entry)
        module = entry.split(":")[0]
        assert str(info.value) == f"'env.tools' entry {entry!r}: cannot import module {module!r} ({reason})"


def test_a_tool_hook_that_exits_is_one_line_naming_it(user_modules):
    from envs.config import EnvConfigError
    from envs.openagi.factory import apply_tools
    from envs.openagi.registry import ToolRegistry

    with pytest.raises(EnvConfigError, match=r"'env.tools' entry 'user_hooks:leave' failed on the env's registry: "
                                             r"SystemExit: it called sys.exit\(0\)"):
        apply_tools(ToolRegistry(), ["user_hooks:leave"])


def test_a_dry_run_checks_the_tool_modules_as_it_checks_env_name(user_modules, tmp_path):
    from rltf.stages.describe import describe_run

    for entry, reason in [("nosuchmodule_rltf_test:register", "cannot import module 'nosuchmodule_rltf_test'"),
                          ("raises_on_import:register", "RuntimeError: tool module boom"),
                          ("user_hooks:nothing", "'user_hooks' has no attribute 'nothing'")]:
        cfg = load_config([f"env.tools=[{entry}]", "dry_run=true", f"output_dir={tmp_path}"])
        with pytest.raises(ConfigError, match=reason):
            describe_run(cfg)


# ------------------------------------------------------------------ ${oc.env:...}
SECRET = "sk-live-0123456789abcdef"


def test_environment_interpolation_is_off_by_default(monkeypatch, tmp_path):
    monkeypatch.setenv("RLTF_TEST_SECRET", SECRET)
    message = _error(["run_name=${oc.env:RLTF_TEST_SECRET}", f"output_dir={tmp_path}"])
    assert message.startswith("bad value for 'run_name': '${oc.env:RLTF_TEST_SECRET}' reads the environment variable "
                              "RLTF_TEST_SECRET"), message
    assert "env_interpolation=true" in message and SECRET not in message
    config = tmp_path / "c.yaml"
    config.write_text("planner:\n  model: ${oc.env:RLTF_TEST_SECRET}\n")
    assert "'planner.model'" in _error([f"config={config}"])
    assert "'env_interpolation'" in _error(["env_interpolation=${oc.env:RLTF_TEST_SECRET}"])


def test_a_value_read_from_the_environment_is_saved_as_its_interpolation(monkeypatch, tmp_path):
    monkeypatch.setenv("RLTF_TEST_SECRET", SECRET)
    monkeypatch.setenv("RLTF_TEST_SEED", "7")
    cfg = load_config(["env_interpolation=true", "flow.backend.model=${oc.env:RLTF_TEST_SECRET}",
                       "seed=${oc.env:RLTF_TEST_SEED}", "planner.lora.target_modules=['${oc.env:RLTF_TEST_SECRET}',v]",
                       f"output_dir={tmp_path}"])
    assert (cfg.flow.backend.model, cfg.seed, cfg.planner.lora.target_modules) == (SECRET, 7, [SECRET, "v"])
    text = config_to_yaml(cfg)  # what config.yaml, the checkpoints and the tracker receive
    assert SECRET not in text
    saved = yaml.safe_load(text)
    assert saved["flow"]["backend"]["model"] == "${oc.env:RLTF_TEST_SECRET}"
    assert saved["seed"] == "${oc.env:RLTF_TEST_SEED}"
    path = save_config(cfg, tmp_path / "config.yaml")
    assert SECRET not in path.read_text()
    again = load_config([f"config={path}"])  # (its env_interpolation: true is saved with it)
    assert (again.flow.backend.model, again.seed) == (SECRET, 7)


# ------------------------------------------------------------------ values that cannot run
def test_a_5000_deep_list_is_one_line(tmp_path):
    deep = "[" * 5000 + "]" * 5000
    config = tmp_path / "deep.yaml"
    config.write_text(f"run_name: {deep}\n")
    assert "nested more than 32 levels" in _error([f"config={config}"])
    assert "nested more than 32 levels" in _error([f"run_name={deep}"])
    assert "nested more than 32 levels" in _error(["planner.lora.target_modules=" + "[" * 40 + "]" * 40])


def test_names_and_paths_too_long_for_the_file_system_are_one_line(tmp_path):
    message = _error(["run_name=" + "a" * 256, f"output_dir={tmp_path}"])
    assert message.startswith("bad value for 'run_name': 'aaaa") and "at most 255 bytes" in message and "256" in message
    assert "at most 255" in _error([f"output_dir={tmp_path / ('b' * 300)}"])
    message = _error([f"output_dir={tmp_path}/" + "/".join(["c" * 200] * 25)])
    assert "expected at most 3840" in message and "4096" in message
    assert load_config(["run_name=" + "é" * 127, f"output_dir={tmp_path}"])  # 254 bytes: a valid name


@pytest.mark.parametrize("arg, expected", [
    ("eval.num_beams=1000000", "bad value for 'eval.num_beams': 1000000; expected an integer > 0 and <= 1024"),
    ("rltf.tasks_per_batch=1000000000", "'rltf.tasks_per_batch' (1000000000) x 'rltf.k_samples' (8) is 8000000000 "
                                        "plans per step; expected at most 1048576"),
    ("rltf.lr=1e300", "bad value for 'rltf.lr': 1e+300; expected a number > 0 and <= 1"),
    ("sft.lr=2.0", "bad value for 'sft.lr': 2.0; expected a number > 0 and <= 1"),
    ("seed=4294967296", "bad value for 'seed': 4294967296; expected an integer from 0 to 4294967295"),
    ("rltf.steps=100000000000000000000", "bad value for 'rltf.steps': 100000000000000000000; expected an integer "
                                         "of at most 9223372036854775807"),
])
def test_values_that_cannot_run_are_refused_naming_the_limit(arg, expected):
    assert _error([arg]).startswith(expected)


@pytest.mark.parametrize("value", ["a\nb", "a\rb", "a\tb"], ids=["newline", "carriage return", "tab"])
def test_a_control_character_in_an_override_is_refused_not_folded(value):
    message = _error([f"run_name={value}"])
    assert message.startswith(f"cannot parse override {'run_name=' + value!r}: control characters")
