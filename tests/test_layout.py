"""The layout's rules, checked on the source (issue 22): imports only go down the layers, no import
circle anywhere, no drawer files.

Layers, lowest first (a module may import its own layer and those below it):

========================  ===================================================================
``constrained_decoding``  the decoder: imports neither ``envs`` nor ``rltf``
``envs``                  the environments: import ``constrained_decoding``, never ``rltf``
``rltf.config``           the run config (its ``env:`` section is the env's own config class)
``rltf.planners``         planners and their loading
``rltf.run``              run plumbing: checkpoints, processes, tracking, the CLI error wrapper
``rltf.rl``               the RL algorithm: trainer, shared step functions, baselines, SFT
``rltf.evaluation``       the paper's evaluation schemas and their tables
``rltf.flows.<core>``     agent-flow engine and backends (one layer: a backend's base is below
                          the engine, the engine's choice grammar below the local backend)
``rltf.flows.agents``     MTP, OKR-Agent, ReAct, flat, and the dispatch by method name
``rltf.flows.training``   RL on flow trajectories
``rltf.flows``            the flows' evaluation and its CLI
``rltf.stages``           the stages recipes call
``rltf.comparison``       arms x seeds comparisons and the TRL GRPO baseline
========================  ===================================================================

Every import statement counts, at any depth (a function-level import is still a dependency).
"""

from __future__ import annotations

import ast
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
PACKAGES = ("constrained_decoding", "envs", "rltf")
LAYERS = [
    ("constrained_decoding",),
    ("envs",),
    ("rltf.config",),
    ("rltf.planners",),
    ("rltf.run",),
    ("rltf.rl",),
    ("rltf.evaluation",),
    ("rltf.flows.engine", "rltf.flows.backends"),
    ("rltf.flows.agents",),
    ("rltf.flows.training",),
    ("rltf.flows",),
    ("rltf.stages",),
    ("rltf.comparison",),
    ("rltf",),
]
MAX_LINES = 450  # outside tests; a longer file is a drawer to split


def _modules() -> dict[str, Path]:
    out = {}
    for top in PACKAGES:
        for path in (ROOT / top).rglob("*.py"):
            parts = list(path.relative_to(ROOT).with_suffix("").parts)
            if parts[-1] == "__init__":
                parts = parts[:-1]
            out[".".join(parts)] = path
    return out


def _resolve(name: str, modules: dict) -> str | None:
    while name:
        if name in modules:
            return name
        name = name.rpartition(".")[0]
    return None


def _imports(path: Path, modules: dict) -> set[str]:
    found = set()
    for node in ast.walk(ast.parse(path.read_text(), str(path))):
        names = []
        if isinstance(node, ast.Import):
            names = [a.name for a in node.names]
        elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            names = [f"{node.module}.{a.name}" for a in node.names] + [node.module]
        for name in names:
            target = _resolve(name, modules)
            if target is not None:
                found.add(target)
    return found


def _layer(module: str) -> int:
    best, best_len = None, -1
    for i, prefixes in enumerate(LAYERS):
        for prefix in prefixes:
            if (module == prefix or module.startswith(prefix + ".")) and len(prefix) > best_len:
                best, best_len = i, len(prefix)
    assert best is not None, f"{module} is in no layer of tests/test_layout.py"
    return best


def _graph() -> dict[str, set[str]]:
    modules = _modules()
    # a package's __init__ importing its own submodules is not a dependency of those submodules
    return {m: {t for t in _imports(p, modules) if t != m} for m, p in modules.items()}


def test_imports_only_go_down_the_layers():
    upward = []
    for module, targets in sorted(_graph().items()):
        for target in sorted(targets):
            if _layer(target) > _layer(module) and not module.startswith(target + "."):
                upward.append(f"{module} -> {target}")
    assert not upward, "upward imports:\n" + "\n".join(upward)


def import_circles(graph: dict[str, set[str]]) -> list[list[str]]:
    """The strongly connected components of more than one module (Tarjan), each sorted."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    circles = []

    def visit(v: str) -> None:
        index[v] = low[v] = len(index)
        stack.append(v)
        on_stack.add(v)
        for w in graph[v]:
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in on_stack:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            component = []
            while True:
                w = stack.pop()
                on_stack.discard(w)
                component.append(w)
                if w == v:
                    break
            if len(component) > 1:
                circles.append(sorted(component))

    for v in sorted(graph):
        if v not in index:
            visit(v)
    return circles


def test_no_import_cycles():
    # a package and its own submodules (``__init__`` re-exporting them) are not a circle
    cycles = [c for c in import_circles(_graph()) if not _package_and_children(c)]
    assert not cycles, "import cycles:\n" + "\n".join(", ".join(c) for c in cycles)


def _package_and_children(component: list[str]) -> bool:
    shortest = min(component, key=len)
    return all(m == shortest or m.startswith(shortest + ".") for m in component) and \
        (ROOT / shortest.replace(".", "/") / "__init__.py").exists()


def test_no_drawer_files():
    long = []
    for top in (*PACKAGES, "train", "benchmarks"):
        for path in sorted((ROOT / top).rglob("*.py")):
            n = len(path.read_text().splitlines())
            if n > MAX_LINES:
                long.append(f"{path.relative_to(ROOT)}: {n} lines")
    assert not long, f"files over {MAX_LINES} lines:\n" + "\n".join(long)


def test_the_checker_catches_an_upward_import(tmp_path, monkeypatch):
    """The layer rule is not vacuous: a planner module importing the trainer is reported."""
    modules = _modules()
    fake = tmp_path / "fake.py"
    fake.write_text("def f():\n    from rltf.rl.trainer import RLTFTrainer\n")
    targets = _imports(fake, modules)
    assert "rltf.rl.trainer" in targets
    assert _layer("rltf.rl.trainer") > _layer("rltf.planners.fake")
