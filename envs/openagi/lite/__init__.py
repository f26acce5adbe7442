"""The offline "lite" expert zoo: real classical / small learned methods, no downloads."""

from __future__ import annotations

from envs.openagi.lite.image_experts import register_image_experts
from envs.openagi.lite.text_experts import register_text_experts
from envs.openagi.registry import ToolRegistry


def build_lite_registry(batched: bool = True) -> ToolRegistry:
    """All lite experts. Learned ones train on first use (on data disjoint from task samples).

    ``batched=False`` runs the experts that have a batched implementation sample by sample instead
    (same outputs, bit for bit: the reference ``benchmarks/reward_share.py`` times them against):
    the image restorers image by image, the classifier's ink maps image by image, Fill Mask's
    candidates one by one."""
    registry = ToolRegistry()
    register_image_experts(registry, batched=batched)
    register_text_experts(registry, batched=batched)
    return registry
