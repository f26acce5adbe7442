"""The `hf` backend of the OpenAGI env (envs.openagi.hf), proven offline on tiny random checkpoints
(tests/hf_tiny.py, loaded back through the backend exactly as a hub id would be; fixtures in
tests/envs/openagi/conftest.py, helpers in tests/hf_experts.py): the LRU model cache under its
memory budget."""

from __future__ import annotations

import os

os.environ["HF_HUB_OFFLINE"] = "1"  # before anything imports huggingface_hub
os.environ["TRANSFORMERS_OFFLINE"] = "1"


import pytest
import torch

from envs.openagi.hf import (
    HFBackend,
    MemoryBudgetError,
    ModelCache,
    load_model,
)
from tests.hf_experts import make_config

pytestmark = pytest.mark.usefixtures("one_torch_thread")


def test_lru_evicts_least_recently_used_under_the_budget(tiny):
    config = make_config(tiny)
    specs = {t: config.expert(t) for t in ("Sentiment Analysis", "Fill Mask", "Text Generation")}
    sizes = {t: load_model(s, torch.float32, local_files_only=True).nbytes for t, s in specs.items()}
    calls = []

    def loader(tool):
        def load():
            calls.append(tool)
            return load_model(specs[tool], torch.float32, local_files_only=True)
        return load

    a, b, c = specs
    budget = sizes[a] + sizes[b] + sizes[c] - min(sizes.values()) // 2  # any two fit, not three
    cache = ModelCache("cpu", budget)
    cache.get(a, loader(a))
    cache.get(b, loader(b))
    cache.get(a, loader(a))  # touch a: b is now the least recently used
    cache.get(c, loader(c))
    assert cache.keys() == [a, c] and cache.evictions == 1 and cache.used_bytes <= budget
    cache.get(b, loader(b))  # b again: reloaded, a evicted
    assert cache.keys() == [c, b] and calls == [a, b, c, b] and cache.hits == 1

    with pytest.raises(MemoryBudgetError, match="more than the whole memory budget"):
        ModelCache("cpu", sizes[a] // 2).get(a, loader(a))


def test_backend_respects_its_memory_budget(tiny):
    config = make_config(tiny, memory_budget_gib=1e-9 * 1)  # far below any model
    reg = HFBackend(config).registry()
    with pytest.raises(MemoryBudgetError):
        reg["Sentiment Analysis"](["good"])
