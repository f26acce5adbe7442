"""User-facing errors share one base (common.errors.UserError) and the CLI wrapper catches it by type."""

from __future__ import annotations

import importlib

import pytest

from common.errors import UserError
from rltf.run.cli import EXIT_USER_ERROR, run_cli

USER_ERRORS = [  # (module, class, the builtin base an ``except`` elsewhere may rely on)
    ("rltf.config.loading", "ConfigError", ValueError),
    ("rltf.config.flow", "FlowSettingsError", ValueError),
    ("rltf.planners.hf_models", "PlannerError", ValueError),
    ("rltf.planners.minilm_weights", "EncoderWeightsError", ValueError),
    ("rltf.planners.smollm2", "Smollm2Unavailable", RuntimeError),
    ("rltf.run.folders", "RunFolderError", ValueError),
    ("rltf.run.folders", "DiskWriteError", ValueError),
    ("rltf.run.lock", "RunFolderInUseError", ValueError),
    ("rltf.run.checkpoint", "DamagedCheckpointError", ValueError),
    ("rltf.run.tracking", "DamagedFileError", ValueError),
    ("envs.config", "EnvConfigError", ValueError),
    ("envs.travel.config", "TravelConfigError", ValueError),
    ("envs.openagi.hf.loader", "ModelLoadError", RuntimeError),
    ("envs.openagi.hf.loader", "MemoryBudgetError", RuntimeError),
    ("envs.openagi.hf.sources", "DatasetAccessError", RuntimeError),
    ("constrained_decoding.search", "NonFiniteLogitsError", FloatingPointError),
    ("rltf.rl.update", "NonFiniteLossError", FloatingPointError),
    ("rltf.rl.sft", "NonFiniteSFTLossError", FloatingPointError),
    ("rltf.flows.evaluation", "BackendUnreachableError", RuntimeError),
]


@pytest.mark.parametrize("module,name,builtin", USER_ERRORS, ids=[n for _, n, _ in USER_ERRORS])
def test_a_user_facing_error_is_a_user_error_and_keeps_its_builtin_base(module, name, builtin):
    cls = getattr(importlib.import_module(module), name)
    assert issubclass(cls, UserError) and issubclass(cls, builtin)


def test_run_cli_catches_any_user_error_by_type(capsys):
    class Fresh(UserError):  # declared nowhere else: no table to register it in
        pass

    def main(argv):
        raise Fresh("bad value for 'x': 3\n  expected 1")

    with pytest.raises(SystemExit) as info:
        run_cli(main, [])
    assert info.value.code == EXIT_USER_ERROR
    assert capsys.readouterr().err == "error: bad value for 'x': 3 expected 1\n"


def test_run_cli_keeps_the_traceback_of_other_errors():
    def main(argv):
        raise ValueError("a bug")

    with pytest.raises(ValueError, match="a bug"):
        run_cli(main, [])
