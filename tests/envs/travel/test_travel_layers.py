"""envs/travel's layout (issue 22): imports only go down the layers of ``envs/travel/__init__.py``,
no module of the package is in an import circle, the command lines are ``__main__`` modules and the
documented ``python -m`` commands still run, and the reward is defined once."""

from __future__ import annotations

import ast
import subprocess
import sys
from pathlib import Path

import pytest

from tests.project.test_layout import import_circles

ROOT = Path(__file__).resolve().parents[3]
PACKAGE = ROOT / "envs" / "travel"
# envs/travel/__init__.py's layers, lowest first: a module may import its own layer and those before it
LAYERS = [
    {"schema", "vocab", "geography", "text", "verdicts"},
    {"query", "plans", "tasks", "sandbox", "config", "reward", "hub", "reference_info", "cli"},
    {"index"},
    {"eval_mode", "tools", "candidates", "meal_costs"},
    {"commonsense", "hard_rules", "route_costs"},
    {"evaluator", "official_metrics", "submission", "solver", "grammar", "grammar_memo", "row_by_row_eval"},
    {"queries", "simple_planners"},
    {"split"},
    {"interchange"},
    {"env"},
    {"factory"},
    {"solver.__main__", "sandbox.__main__", "split.__main__"},
]
LAYER = {name: i for i, names in enumerate(LAYERS) for name in names}


def _modules() -> dict[str, Path]:
    out = {}
    for path in PACKAGE.rglob("*.py"):
        parts = list(path.relative_to(PACKAGE).with_suffix("").parts)
        if parts[-1] == "__init__":
            parts = parts[:-1]
        out[".".join(parts)] = path
    return out


def _imports(name: str, path: Path, modules: dict[str, Path]) -> set[str]:
    """The package's modules ``name`` imports (any import statement, at any depth; a package's
    ``__main__`` importing its own package does not count)."""
    found = set()
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        if isinstance(node, ast.Import):
            targets = [a.name for a in node.names]
        elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            targets = [node.module] + [f"{node.module}.{a.name}" for a in node.names]
        else:
            continue
        for t in targets:
            if not t.startswith("envs.travel."):
                continue
            t = t[len("envs.travel."):]
            while t and t not in modules:
                t = t.rpartition(".")[0]
            if t and t != name and not name.startswith(t + "."):
                found.add(t)
    return found


def test_imports_only_go_down_the_layers():
    modules = _modules()
    missing = sorted(set(LAYER) - set(modules))
    assert not missing, f"layered modules that no longer exist: {missing}"
    up = []
    for name, path in modules.items():
        if name not in LAYER:
            continue  # a module not in the layer table yet: only the circle check below covers it
        for target in _imports(name, path, modules):
            if target in LAYER and LAYER[target] > LAYER[name]:
                up.append(f"{name} (layer {LAYER[name] + 1}) imports {target} (layer {LAYER[target] + 1})")
    assert not up, "imports that go up:\n" + "\n".join(sorted(up))


def test_no_import_circle_in_the_package():
    modules = _modules()
    graph = {name: _imports(name, path, modules) for name, path in modules.items()}
    circles = import_circles(graph)
    assert not circles, f"import circles: {circles}"


def test_library_modules_hold_no_command_line():
    """A command line imports what it reports with (the evaluator, the split ...): inside a library
    module it made the module import upwards; it lives in the package's ``__main__``."""
    for name, path in _modules().items():
        if name.endswith("__main__"):
            continue
        tree = ast.parse(path.read_text(encoding="utf-8"))
        assert not any(isinstance(n, (ast.Import, ast.ImportFrom)) and "argparse" in
                       ([a.name for a in n.names] if isinstance(n, ast.Import) else [n.module or ""])
                       for n in ast.walk(tree)), f"envs/travel/{name} parses a command line"


@pytest.mark.parametrize("command", [
    ["envs.travel.solver", "--help"], ["envs.travel.sandbox", "--help"], ["envs.travel.split", "--help"],
])
def test_documented_commands_run(command):
    out = subprocess.run([sys.executable, "-m", *command], cwd=ROOT, capture_output=True, text=True, timeout=120)
    assert out.returncode == 0, out.stderr
    assert f"usage: python -m {command[0]}" in out.stdout


@pytest.mark.slow
def test_solver_command_solves_and_reports(tmp_path):
    out = subprocess.run([sys.executable, "-m", "envs.travel.solver", "--split", "test", "--limit", "6"],
                         cwd=ROOT, capture_output=True, text=True, timeout=600)
    assert out.returncode == 0, out.stderr
    assert out.stdout.strip().splitlines()[-1] == "solver final pass rate: 1.000 on 6 queries"


def test_the_reward_is_defined_once_and_counts_its_constraints():
    """One definition of the weights (config.RewardSettings) and one of the formula (reward.py) serve
    the run config, the factory and the env; the commonsense term is divided by the number of
    commonsense constraints, not a literal."""
    from envs.travel.config import RewardSettings, TravelEnvConfig
    from envs.travel.factory import describe_env
    from envs.travel.reward import plan_reward
    from envs.travel.verdicts import COMMONSENSE, PASS, PlanEvaluation, fail

    sources = {p.name: p.read_text(encoding="utf-8") for p in PACKAGE.glob("*.py")}
    assert [n for n, s in sources.items() if "class RewardSettings" in s or "class RewardWeights" in s] == ["config.py"]
    assert [n for n, s in sources.items() if "def plan_reward" in s or "def reward(" in s] == ["reward.py"]
    assert "/ 8" not in sources["env.py"] and "passed/8" not in sources["factory.py"]
    w = RewardSettings(final_pass=0.0, commonsense=1.0, hard=0.0)
    for k in range(len(COMMONSENSE) + 1):
        ev = PlanEvaluation(0, True, commonsense={c: PASS if i < k else fail("x") for i, c in enumerate(COMMONSENSE)})
        assert plan_reward(w, ev) == pytest.approx(k / len(COMMONSENSE))
    assert f"commonsense passed/{len(COMMONSENSE)}" in " ".join(describe_env(TravelEnvConfig()))
