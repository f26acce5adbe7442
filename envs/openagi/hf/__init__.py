"""The `hf` expert backend: the 15 OpenAGI tools on Hugging Face hub models, and the paper's metrics.

For GPU machines with hub access; proven offline on tiny random checkpoints (tests/hf_tiny.py).
``diffusers`` is an optional extra (Text to Image Generation, Colorization).
"""

from envs.openagi.hf.backend import HFBackend, build_hf_registry, describe_models
from envs.openagi.hf.config import HFBackendConfig
from envs.openagi.hf.experts import HFExperts, normalise_label
from envs.openagi.hf.loader import Loaded, MemoryBudgetError, ModelCache, ModelLoadError, load_model
from envs.openagi.hf.metrics import (
    HFMetricModels,
    ScoreSummary,
    TaskScore,
    bertscore_f1,
    clip_score,
    summarize_scores,
    vit_score,
)
from envs.openagi.hf.models import DEFAULT_EXPERTS, DEFAULT_METRIC_MODELS, ExpertModel

__all__ = [
    "DEFAULT_EXPERTS",
    "DEFAULT_METRIC_MODELS",
    "ExpertModel",
    "HFBackend",
    "HFBackendConfig",
    "HFExperts",
    "HFMetricModels",
    "Loaded",
    "MemoryBudgetError",
    "ModelCache",
    "ModelLoadError",
    "ScoreSummary",
    "TaskScore",
    "bertscore_f1",
    "build_hf_registry",
    "clip_score",
    "describe_models",
    "load_model",
    "normalise_label",
    "summarize_scores",
    "vit_score",
]
