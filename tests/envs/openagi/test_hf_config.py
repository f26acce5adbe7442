"""The `hf` backend of the OpenAGI env (envs.openagi.hf), proven offline on tiny random checkpoints
(tests/hf_tiny.py, loaded back through the backend exactly as a hub id would be; fixtures in
tests/envs/openagi/conftest.py, helpers in tests/hf_experts.py): the backend's config, its errors
(no download, a clear error for a missing checkpoint or extra) and the model listing."""

from __future__ import annotations

import os

os.environ["HF_HUB_OFFLINE"] = "1"  # before anything imports huggingface_hub
os.environ["TRANSFORMERS_OFFLINE"] = "1"

import sys

import pytest

from envs.openagi.hf import (
    DEFAULT_EXPERTS,
    HFBackend,
    HFBackendConfig,
    ModelLoadError,
    describe_models,
)
from envs.openagi.tools import OPENAGI_TOOLS
from tests.hf_experts import make_config

pytestmark = pytest.mark.usefixtures("one_torch_thread")


def test_config_rejects_unknown_names_and_values():
    with pytest.raises(ValueError, match="unknown name 'Image Clasification'"):
        HFBackendConfig(model_ids={"Image Clasification": "x"})
    with pytest.raises(ValueError, match="dtype='float8'"):
        HFBackendConfig(dtype="float8")
    with pytest.raises(ValueError, match=r"unknown option\(s\) \['treshold'\]"):
        HFBackendConfig(options={"Object Detection": {"treshold": 0.5}})
    with pytest.raises(ValueError, match="unknown hf backend setting"):
        HFBackendConfig.from_dict({"devices": "cpu"})
    with pytest.raises(ValueError, match="batch size for 'Fill Mask'"):
        HFBackendConfig(batch_sizes={"Fill Mask": 0})
    cfg = HFBackendConfig.from_dict({"model_ids": {"Machine Translation": "t5-large"}, "batch_size": 4})
    assert cfg.expert("Machine Translation").model_id == "t5-large"
    assert cfg.expert("Fill Mask").model_id == DEFAULT_EXPERTS["Fill Mask"].model_id
    assert cfg.tool_batch_size("Text to Image Generation") == 4


def test_missing_checkpoint_is_a_clear_error_and_no_download(tmp_path, tiny):
    missing = str(tmp_path / "no-such-model")
    reg = HFBackend(make_config(tiny, model_ids={**tiny[0], "Fill Mask": missing})).registry()
    with pytest.raises(ModelLoadError, match=r"'Fill Mask' model .*no-such-model"):
        reg["Fill Mask"](["a [MASK]"])


def test_missing_diffusers_is_a_clear_error(tiny, monkeypatch):
    monkeypatch.setitem(sys.modules, "diffusers", None)  # `import diffusers` now raises ImportError
    reg = HFBackend(make_config(tiny)).registry()
    with pytest.raises(ModelLoadError, match=r"Text to Image Generation.*`pip install diffusers`"):
        reg["Text to Image Generation"](["a cat"])


def test_describe_models_lists_everything_and_loads_nothing(tiny):
    rows = describe_models(make_config(tiny))
    assert [r["name"] for r in rows] == [s.name for s in OPENAGI_TOOLS] + ["bertscore", "vit", "clip"]
    assert {r["model_id"] for r in rows if r["name"] == "Fill Mask"} == {tiny[0]["Fill Mask"]}
    defaults = {r["name"]: r for r in describe_models()}
    assert defaults["Image Denoising"]["model_id"] == "caidas/swin2SR-realworld-sr-x4-64-bsrgan-psnr"
    assert defaults["Text to Image Generation"]["library"] == "diffusers"
    gpu = describe_models(HFBackendConfig(device="cuda", dtype="bfloat16"))  # fine on a CPU-only box too
    assert {r["device"].split(":")[0] for r in gpu} == {"cuda"}
