"""Tests never touch a hub: force every HF library offline before anything imports them."""

import os
from pathlib import Path

os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("TRANSFORMERS_OFFLINE", "1")
os.environ.setdefault("HF_DATASETS_OFFLINE", "1")
os.environ.setdefault("WANDB_MODE", "offline")
os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")


import pytest  # noqa: E402

from tests.checkpoints_guard import checkpoints_left_alone  # noqa: E402, F401  (no test writes into checkpoints/)
from tests.smollm2_model import smollm2_folder  # noqa: E402, F401  (the SmolLM2 tests' session fixture)
from tests.warnings_guard import (  # noqa: E402, F401  (the hooks failing a test on a warning of ours)
    pytest_runtest_call,
    pytest_runtest_setup,
    pytest_runtest_teardown,
)


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


# ------------------------------------------------------------------ the real TravelPlanner tables
REAL_TRAVEL_DB_SETTING = "RLTF_TRAVELPLANNER_DB"


def real_travel_db_dir():
    """The folder of the TravelPlanner benchmark's public tables (accommodations/, attractions/,
    restaurants/, googleDistanceMatrix/, background/), read in place: ``$RLTF_TRAVELPLANNER_DB``, or
    ``../shared/data/travelplanner-db`` beside the checkout (where CI has them); None when neither
    holds them."""
    setting = os.environ.get(REAL_TRAVEL_DB_SETTING)
    folder = Path(setting) if setting else Path(__file__).resolve().parents[2] / "shared/data/travelplanner-db"
    return folder if (folder / "accommodations").is_dir() else None


REAL_TRAVEL_QUERIES_SETTING = "RLTF_TRAVELPLANNER_QUERIES"


@pytest.fixture(scope="session")
def real_travel_queries():
    """The folder of the benchmark's real train queries (hub CSV with reference information and annotated plans):
    ``$RLTF_TRAVELPLANNER_QUERIES``, or ``../shared/data/travelplanner-queries`` beside the checkout; the test is
    skipped naming the setting when neither holds ``train.csv``."""
    setting = os.environ.get(REAL_TRAVEL_QUERIES_SETTING)
    folder = Path(setting) if setting else Path(__file__).resolve().parents[2] / "shared/data/travelplanner-queries"
    if not (folder / "train.csv").is_file():
        pytest.skip(f"the real TravelPlanner train queries were not found: set {REAL_TRAVEL_QUERIES_SETTING}")
    return folder


@pytest.fixture(scope="session")
def real_travel_db():
    """:func:`real_travel_db_dir`, or the test is skipped naming the setting that finds the tables."""
    folder = real_travel_db_dir()
    if folder is None:
        pytest.skip(f"the real TravelPlanner tables were not found: set {REAL_TRAVEL_DB_SETTING} to the folder of "
                    "the benchmark's database (github.com/OSU-NLP-Group/TravelPlanner, database/)")
    return folder
