"""Tests never touch a hub: force every HF library offline before anything imports them."""

import os

os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("TRANSFORMERS_OFFLINE", "1")
os.environ.setdefault("HF_DATASETS_OFFLINE", "1")
os.environ.setdefault("WANDB_MODE", "offline")
os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")


import pytest  # noqa: E402


@pytest.fixture(scope="module")
def one_torch_thread():
    """Tiny models on 2 shared cores: one intra-op thread avoids thread contention (up to 10x
    faster here). Modules opt in with ``pytestmark = pytest.mark.usefixtures("one_torch_thread")``."""
    import torch

    n = torch.get_num_threads()
    torch.set_num_threads(1)
    yield
    torch.set_num_threads(n)
