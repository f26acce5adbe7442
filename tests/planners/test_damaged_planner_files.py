"""Issue 16: a damaged planner folder (weights, JSON files, missing tokenizer files) or embedded
planner build names itself or is rebuilt."""


import pytest

from rltf.planners.planner import Planner
from tests.toy_run import make_planner

pytestmark = pytest.mark.usefixtures("one_torch_thread")


# ------------------------------------------------------------------ corrupted caches
def test_a_damaged_embedded_planner_build_is_rebuilt(tmp_path):
    from rltf.config.loading import EmbeddedSettings
    from rltf.planners.embedded import ensure_embedded_planner

    settings = EmbeddedSettings(d_model=16, d_ff=32, num_layers=1, num_heads=2, dir=str(tmp_path))
    texts = ["Image Denoising, Image Classification", "Given noisy image, how to return the class label?"]
    path = ensure_embedded_planner(settings, texts)
    weights = path / "model.safetensors"
    good = weights.read_bytes()
    weights.write_bytes(good[:100])
    with pytest.warns(RuntimeWarning, match="embedded planner.*damaged"):
        again = ensure_embedded_planner(settings, texts)
    assert again == path and weights.read_bytes() == good
    Planner.from_pretrained(path)


# ------------------------------------------------------------------ damaged files name themselves
@pytest.fixture
def saved_planner(tmp_path):
    return make_planner().save_pretrained(tmp_path / "planner")


@pytest.mark.parametrize("cut", ["empty", "header", "half", "one byte"])
def test_a_truncated_model_safetensors_names_itself(saved_planner, cut):
    from rltf.planners.hf_models import PlannerError

    weights = saved_planner / "model.safetensors"
    good = weights.read_bytes()
    weights.write_bytes({"empty": b"", "header": good[:100], "half": good[: len(good) // 2],
                         "one byte": good[:-1]}[cut])
    with pytest.raises(PlannerError, match=r"model\.safetensors is damaged \(.*\).*save or copy it again"):
        Planner.from_pretrained(saved_planner)


@pytest.mark.parametrize("name", ["rltf_planner.json", "config.json", "tokenizer_config.json"])
def test_a_damaged_json_file_of_a_planner_names_itself(saved_planner, name):
    from rltf.planners.hf_models import PlannerError

    (saved_planner / name).write_text('{"format": 1, "arch":')
    with pytest.raises(PlannerError, match=rf"{name} is damaged \(not valid JSON"):
        Planner.from_pretrained(saved_planner)


# ------------------------------------------------------------------ missing tokenizer files
def test_a_planner_folder_without_tokenizer_files_is_a_clear_error(saved_planner):
    from rltf.planners.hf_models import PlannerError, load_tokenizer

    for name in ("tokenizer.json", "tokenizer_config.json"):
        (saved_planner / name).unlink()
    with pytest.raises(PlannerError, match=r"planner directory .*planner' has no tokenizer files \(expected one "
                                           r"of: tokenizer\.json, tokenizer_config\.json"):
        Planner.from_pretrained(saved_planner)
    with pytest.raises(PlannerError, match="has no tokenizer files"):
        load_tokenizer(str(saved_planner), True)
