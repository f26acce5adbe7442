"""Issue 16, corrupted caches: a damaged learned-expert cache is retrained with a warning; a damaged
full-suite build names itself."""

import warnings

import numpy as np
import pytest

pytestmark = pytest.mark.usefixtures("one_torch_thread")


@pytest.mark.parametrize("content", [b"", b"PK\x03\x04 truncated zip", b"garbage"])
def test_a_damaged_learned_expert_cache_is_retrained_with_a_warning(tmp_path, monkeypatch, content):
    from envs.openagi.lite.image import caching

    monkeypatch.setattr(caching, "rltf_cache_dir", lambda kind: tmp_path)
    calls = []

    def train(config):
        calls.append(config)
        return {"w": np.arange(3.0)}

    first = caching._cached("expert", {"a": 1}, train)
    path = next(tmp_path.glob("expert-*.npz"))
    good = path.read_bytes()
    path.write_bytes(content if content != b"PK\x03\x04 truncated zip" else good[: len(good) // 2])
    with pytest.warns(RuntimeWarning, match=str(path.name)) as seen:
        again = caching._cached("expert", {"a": 1}, train)
    assert not [str(w.message) for w in seen if w.category is ResourceWarning]  # the damaged file was closed
    assert len(calls) == 2 and np.array_equal(again["w"], first["w"])
    assert path.read_bytes() == good  # rewritten whole
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        caching._cached("expert", {"a": 1}, train)  # intact now: loaded, not retrained
    assert len(calls) == 2


def test_a_damaged_full_suite_build_names_itself(tmp_path):
    from envs.openagi.hf import suite

    root = suite.full_suite_dir(tmp_path, 2, 0)
    root.mkdir(parents=True)
    (root / suite.MANIFEST).write_text("{ not json")
    with pytest.raises(ValueError, match=f"{root.name}.*damaged or stale.*JSONDecodeError"):
        suite.build_full_suite(tmp_path, 2, 0, None)
