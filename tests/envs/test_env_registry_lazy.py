"""The shipped envs are plug-ins the env interface never imports (issue 49): ``import envs`` registers
them by import path, ``registry.names()`` lists them without importing them, the first lookup of one
imports that one alone, and Gymnasium's ids work from the entry-point strings ``import envs`` registers.
Run in a fresh interpreter: this process has imported both envs already."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from envs import registry
from envs.registry import EnvSpec

ROOT = Path(__file__).resolve().parents[2]
PROBE = r'''
import sys
loaded = lambda: sorted({m.split(".")[1] for m in sys.modules if m.startswith("envs.") and m.count(".") >= 2})
import envs
from envs import registry
print("import", loaded(), registry.names()[:2])
print("travel", registry.spec("travel").name, loaded())
import gymnasium as gym
print("gym", [gym.spec(i).entry_point for i in ("OpenAGI-Lite-v0", "TravelPlanner-Sandbox-v0")])
'''


def test_import_envs_imports_no_concrete_env_until_one_is_looked_up():
    """(``gym.make`` of both ids: tests/envs/test_env_protocol.py, tests/envs/travel/.)"""
    done = subprocess.run([sys.executable, "-c", PROBE], cwd=ROOT, capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stderr[-3000:]
    assert done.stdout.splitlines() == [
        "import [] ('openagi', 'travel')", "travel travel ['travel']",
        "gym ['envs.openagi.factory:gym_entry_point', 'envs.travel.env:TravelPlannerEnv']"], done.stdout
    assert registry.spec_of_section(registry.spec("openagi").section()).name == "openagi"


def test_a_lazy_entry_is_imported_on_lookup_and_checked():
    registry.register_lazy("sorting-lazy", "tests.envs.test_env_registry_lazy:LAZY_SPEC")
    try:
        assert "sorting-lazy" in registry.names()
        assert registry.spec("sorting-lazy").section.__name__ == "SortSectionLazy"  # imported now
        with pytest.raises(ValueError, match="already registered"):
            registry.register_lazy("sorting-lazy", "somewhere.else:SPEC")
    finally:
        registry.unregister("sorting-lazy")
    registry.register_lazy("misnamed", "tests.envs.test_env_registry_lazy:LAZY_SPEC")
    try:
        with pytest.raises(TypeError, match="not the EnvSpec of an env named 'misnamed'"):
            registry.spec("misnamed")
    finally:
        registry.unregister("misnamed")
    with pytest.raises(ValueError, match="is not an import path"):
        registry.register_lazy("bad", "no colon here")


def _lazy_spec() -> EnvSpec:
    from tests.envs.test_third_env import SPEC, SortSection

    return EnvSpec(**{**SPEC.__dict__, "name": "sorting-lazy", "section": _section_named(SortSection, "sorting-lazy")})


def _section_named(cls, name):
    import dataclasses

    return dataclasses.make_dataclass(f"{cls.__name__}Lazy", [("name", str, dataclasses.field(default=name))],
                                      bases=(cls,))


LAZY_SPEC = _lazy_spec()
