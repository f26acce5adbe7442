"""benchmarks/results_pages.py: the committed results pages (docs/results/) are what the JSONs under
benchmarks/results/ give now, every page is in the docs site's nav, and each states its provenance."""

import json

import pytest

from benchmarks import results_pages as rp

REPO = rp.REPO


def test_committed_pages_are_up_to_date_with_the_jsons():
    rendered = rp.render_all()  # regenerated in memory, compared with the committed files
    stale = [str(path.relative_to(REPO)) for path, text in rendered.items()
             if not path.is_file() or path.read_text() != text]
    assert not stale, f"out of date (run python benchmarks/results_pages.py): {stale}"


def test_every_results_json_has_a_page():
    sources = {p.source for p in rp.PAGES} | {rp.sidecar_of(p.source) for p in rp.PAGES}
    covered = {path for path in rp.RESULTS.rglob("*.json")
               if any(path == s or s in path.parents for s in sources)}
    loose = sorted(str(p.relative_to(REPO)) for p in rp.RESULTS.rglob("*.json") if p not in covered)
    assert not loose, f"results with no page in benchmarks/results_pages.py PAGES: {loose}"


def test_every_page_is_in_the_site_nav_and_states_its_provenance():
    nav = (REPO / "mkdocs.yml").read_text()
    for path, text in rp.render_all().items():
        rel = path.relative_to(REPO / "docs").as_posix()
        assert rel in nav, f"{rel} is not in mkdocs.yml's nav"
        if path.name != "index.md":
            for label in ("date", "commit", "library versions", "machine"):
                assert f"| {label} | " in text, f"{rel}: no {label} row"


def test_provenance_prefers_the_json_then_the_sidecar_then_not_recorded(tmp_path, monkeypatch):
    monkeypatch.setattr(rp, "REPO", tmp_path)
    src = tmp_path / "r.json"
    src.write_text("{}")
    sidecar = tmp_path / "r.provenance.json"
    sidecar.write_text(json.dumps({"date": "2026-01-02", "machine": "a laptop"}))
    lines = "\n".join(rp.provenance_block([src], {"machine": "H200"}, sidecar))
    assert "| date | 2026-01-02 (stated by hand" in lines
    assert "| machine | H200 (recorded in the JSON) |" in lines
    assert "| commit | not recorded |" in lines and "| library versions | not recorded |" in lines


def test_an_unreadable_json_is_one_clear_error(tmp_path, monkeypatch):
    monkeypatch.setattr(rp, "REPO", tmp_path)
    (tmp_path / "compare.json").write_text("{not json")
    with pytest.raises(rp.ResultsError, match=r"compare\.json: JSONDecodeError"):
        rp.render_compare(tmp_path)


def test_check_mode_exit_status(capsys):
    assert rp.main(["--check"]) == 0
