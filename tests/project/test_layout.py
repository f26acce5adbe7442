"""The layout's rules, checked on the source (issue 22): imports only go down the layers, no import
circle anywhere, no drawer files, and an import inside a function says why it is there.

Layers, lowest first (a module may import its own layer and those below it):

========================  ===================================================================
``common``                generic helpers (user errors, atomic writes, the cache folder, settings
                          fields, the MiniLM location): imports no other package of the project
``constrained_decoding``  the decoder: imports neither ``envs`` nor ``rltf``
env interface             ``envs`` itself and :data:`ENV_INTERFACE` (protocol, base class,
                          registry, checker, the ``env:`` section, episodes, splitting):
                          imports ``constrained_decoding``, never a concrete env nor ``rltf``
``rltf.algorithms``       the update's pure maths (baselines, credit, objectives): numpy / torch
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
plug-ins                  the concrete envs, every package under ``envs/`` that is not the
                          interface (``envs.openagi``, ``envs.travel``, any later env), and
                          ``examples``: they may import everything below; nothing below imports
                          them (the registry names the shipped envs by import-path strings,
                          ``envs/registry.py``), and no plug-in imports another
========================  ===================================================================

There is no exception to any rule. Every import statement counts, at any depth (a function-level
import is still a dependency). An import inside a function body is only for an optional or heavy
dependency (or a subprocess entry point's own imports): it carries a comment, on its line or the
line above, saying why.
"""

from __future__ import annotations

import ast
import re
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
PACKAGES = ("common", "constrained_decoding", "envs", "rltf", "examples")
CORE = ("common", "constrained_decoding", "rltf")  # below the plug-ins, with the env interface
ENV_INTERFACE = ("envs", "envs.protocol", "envs.base", "envs.registry", "envs.checker", "envs.config",
                 "envs.episodes", "envs.splitting")
LAYERS = [
    ("common",),
    ("constrained_decoding",),
    ("envs",),  # the env interface (a concrete env is a plug-in: _plugin)
    ("rltf.algorithms",),
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
PLUGINS = len(LAYERS)  # the layer of the plug-ins: above everything
MAX_LINES = 450  # outside tests; a longer file is a drawer to split
CONCRETE_ENV_TEXT = re.compile(r"envs.(openagi|travel)")  # as `grep -E` reads it: the dot matches / too


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


def _plugin(module: str) -> str | None:
    """The plug-in ``module`` belongs to (``envs.travel``, ``examples``), None for the core and the env interface."""
    parts = module.split(".")
    if parts[0] == "examples":
        return "examples"
    if parts[0] == "envs" and len(parts) > 1 and ".".join(parts[:2]) not in ENV_INTERFACE:
        return ".".join(parts[:2])
    return None


def _layer(module: str) -> int:
    if _plugin(module) is not None:
        return PLUGINS
    best, best_len = None, -1
    for i, prefixes in enumerate(LAYERS):
        for prefix in prefixes:
            if (module == prefix or module.startswith(prefix + ".")) and len(prefix) > best_len:
                best, best_len = i, len(prefix)
    assert best is not None, f"{module} is in no layer of tests/project/test_layout.py"
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


def function_imports(source: str) -> list[tuple[int, bool]]:
    """``(line, explained)`` of every import statement inside a function body of ``source``;
    explained: a comment on its (first) line or on the line just above."""
    lines = source.splitlines()
    found = []

    def visit(node: ast.AST, in_function: bool) -> None:
        for child in ast.iter_child_nodes(node):
            inside = in_function or isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.Lambda))
            if inside and isinstance(child, (ast.Import, ast.ImportFrom)):
                line = lines[child.lineno - 1]
                above = lines[child.lineno - 2].strip() if child.lineno > 1 else ""
                found.append((child.lineno, "#" in line or above.startswith("#")))
            visit(child, inside)

    visit(ast.parse(source), False)
    return found


def test_function_level_imports_say_why():
    """An import inside a function is for an optional / heavy dependency (or a subprocess entry
    point) and says so; every other import sits at the top of its module."""
    silent = []
    for top in (*PACKAGES, "train", "benchmarks"):
        for path in sorted((ROOT / top).rglob("*.py")):
            for line, explained in function_imports(path.read_text()):
                if not explained:
                    silent.append(f"{path.relative_to(ROOT)}:{line}")
    assert not silent, f"{len(silent)} imports inside functions without a comment saying why:\n" + "\n".join(silent)


def test_the_function_import_check_is_not_vacuous():
    source = ("import os\n"
              "def f():\n    import json\n"
              "def g():\n    import wandb  # optional: only with report_to=wandb\n"
              "def h():\n    # optional: the hf backend\n    import diffusers\n")
    assert function_imports(source) == [(3, False), (5, True), (8, True)]


def test_common_is_the_lowest_layer():
    assert _layer("common.errors") == 0 < _layer("constrained_decoding.search")
    for module, targets in _graph().items():
        if module.startswith("common"):
            assert all(t.startswith("common") for t in targets), f"{module} imports {targets}"


def test_the_checker_catches_an_upward_import(tmp_path, monkeypatch):
    """The layer rule is not vacuous: a planner module importing the trainer is reported."""
    modules = _modules()
    fake = tmp_path / "fake.py"
    fake.write_text("def f():\n    from rltf.rl.trainer import RLTFTrainer\n")
    targets = _imports(fake, modules)
    assert "rltf.rl.trainer" in targets
    assert _layer("rltf.rl.trainer") > _layer("rltf.planners.fake")


def test_the_core_and_the_env_interface_import_no_concrete_env():
    """``common``, ``constrained_decoding``, ``rltf`` and the env interface import no plug-in (no
    ``envs.openagi``, ``envs.travel`` nor any later env): what they need of an env they ask through the
    interface (``envs/protocol.py``, ``envs/base.py``) or the env's ``EnvSpec`` (``envs/registry.py``)."""
    found = []
    for module, targets in sorted(_graph().items()):
        if _plugin(module) is None:
            found += [f"{module} -> {t}" for t in sorted(targets) if _plugin(t) is not None]
    assert not found, "imports of a concrete env below the plug-ins:\n" + "\n".join(found)


def test_no_plugin_imports_another():
    found = []
    for module, targets in sorted(_graph().items()):
        mine = _plugin(module)
        if mine is not None:
            found += [f"{module} -> {t}" for t in sorted(targets) if _plugin(t) not in (None, mine)]
    assert not found, "plug-ins importing each other:\n" + "\n".join(found)


def core_files_naming_a_concrete_env() -> list[str]:
    """``path:line`` of every line of the core's sources (``common/``, ``constrained_decoding/``, ``rltf/``)
    that ``grep -E 'envs.openagi|envs.travel'`` finds: an import, a module named in a docstring, a file path."""
    found = []
    for top in CORE:
        for path in sorted((ROOT / top).rglob("*.py")):
            for i, line in enumerate(path.read_text().splitlines(), 1):
                if CONCRETE_ENV_TEXT.search(line):
                    found.append(f"{path.relative_to(ROOT)}:{i}: {line.strip()}")
    return found


def test_the_core_names_no_concrete_env():
    found = core_files_naming_a_concrete_env()
    assert not found, f"{len(found)} lines of the core name a concrete env:\n" + "\n".join(found)


def test_the_env_interface_is_what_envs_holds_besides_the_plugins():
    """Every module directly in ``envs/`` is in :data:`ENV_INTERFACE` (a new one is classified here), and
    every package under ``envs/`` is a plug-in."""
    modules = {"envs"} | {f"envs.{p.stem}" for p in (ROOT / "envs").glob("*.py") if p.stem != "__init__"}
    assert modules == set(ENV_INTERFACE), sorted(modules ^ set(ENV_INTERFACE))
    packages = [p.name for p in (ROOT / "envs").iterdir() if (p / "__init__.py").exists()]
    assert {"openagi", "travel"} <= set(packages) and all(_plugin(f"envs.{p}") == f"envs.{p}" for p in packages)


def test_the_plugin_checks_are_not_vacuous(tmp_path):
    """A core module or an interface module importing a concrete env is an upward import; the text check
    finds a docstring's module path and a file path."""
    modules = _modules()
    fake = tmp_path / "fake.py"
    fake.write_text("def f():\n    from envs.travel.plans import format_plan  # deferred\n")
    assert "envs.travel.plans" in _imports(fake, modules)
    for importer in ("rltf.rl.fake", "envs.registry", "constrained_decoding.fake", "common.fake"):
        assert _layer("envs.travel.plans") > _layer(importer), importer
    assert _plugin("envs.sokoban.env") == "envs.sokoban" and _layer("envs.sokoban.env") == PLUGINS  # a later env
    assert _plugin("examples.minimal_env") == "examples" and _plugin("envs.registry") is None
    assert _layer("envs.registry") < _layer("rltf.algorithms")
    for line in (":mod:`envs.openagi.plans`", "see envs/travel/hub.py", "import envs.travel"):
        assert CONCRETE_ENV_TEXT.search(line), line
    assert not CONCRETE_ENV_TEXT.search("import envs.registry")
