"""Tests never touch a hub: force every HF library offline before anything imports them."""

import os

os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("TRANSFORMERS_OFFLINE", "1")
os.environ.setdefault("HF_DATASETS_OFFLINE", "1")
os.environ.setdefault("WANDB_MODE", "offline")
os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")


import pytest  # noqa: E402


@pytest.fixture(scope="session", autouse=True)
def one_torch_thread_for_the_session():
    """Tiny models on 2 shared cores: one intra-op thread for every test. With torch's default (one
    thread per core) its threads spin-wait on a busy box: test_rltf.py's training tests took 314 s
    instead of 9 s. Results are unchanged in kind (float sums may reorder; no test compares across
    thread counts); subprocesses keep their own settings."""
    import torch

    n = torch.get_num_threads()
    torch.set_num_threads(1)
    yield
    torch.set_num_threads(n)


@pytest.fixture(scope="module")
def one_torch_thread():
    """Kept for modules that name it (``pytestmark = pytest.mark.usefixtures("one_torch_thread")``);
    :func:`one_torch_thread_for_the_session` already sets one thread for every test."""
    import torch

    n = torch.get_num_threads()
    torch.set_num_threads(1)
    yield
    torch.set_num_threads(n)
