"""The README and the docs site (issue 35, item 5): the README stays short, its links resolve, CI runs
exactly its install and test commands, and every docs page is in mkdocs.yml's nav (the strict
`mkdocs build` in .ci/run checks links and anchors too, where mkdocs is installed)."""

import re
from pathlib import Path

import yaml

REPO = Path(__file__).resolve().parents[2]
README = (REPO / "README.md").read_text()


def test_the_readme_is_short():
    assert len(README.splitlines()) <= 250


def test_the_readme_links_resolve():
    targets = re.findall(r"\]\(([^)#\s]+)(?:#[^)]*)?\)", README)
    local = [t for t in targets if not re.match(r"[a-z]+://", t)]
    assert local, "the README links the docs"
    missing = [t for t in local if not (REPO / t).exists()]
    assert not missing, f"README links to missing files: {missing}"


def test_ci_runs_the_readmes_install_and_test_commands():
    ci = (REPO / ".ci" / "run").read_text()
    installs = re.findall(r"^python -m (pip install .+)$", ci, re.M)
    assert installs and all(cmd in README for cmd in installs), installs
    test = re.search(r"^(python -m pytest -q.*)$", ci, re.M).group(1)
    assert test in ("python -m pytest -q", "python -m pytest -q -n 2") and f"\n{test}\n" in README
    env = re.search(r"^export (HF_HUB_OFFLINE=.+)$", ci, re.M).group(1)
    assert env in README
    assert "mkdocs build --strict" in ci and "mkdocs build --strict" in README


def _nav_files(node) -> list[str]:
    if isinstance(node, str):
        return [node]
    if isinstance(node, list):
        return [f for item in node for f in _nav_files(item)]
    if isinstance(node, dict):
        return [f for v in node.values() for f in _nav_files(v)]
    return []


def test_every_docs_page_is_in_the_nav_and_every_nav_entry_exists():
    config = yaml.safe_load((REPO / "mkdocs.yml").read_text())
    nav = set(_nav_files(config["nav"]))
    pages = {p.relative_to(REPO / "docs").as_posix() for p in (REPO / "docs").rglob("*.md")}
    assert pages == nav, f"not in nav: {sorted(pages - nav)}; in nav, no file: {sorted(nav - pages)}"


def test_the_configs_point_at_where_defaults_live():
    for path in (REPO / "configs").rglob("*.yaml"):
        text = path.read_text()
        assert "defaults in rltf/config/loading.py" not in text, path
        assert "meaning: rltf/config/loading.py" not in text, path
