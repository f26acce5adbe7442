"""Free-form solutions are mapped onto valid plans with MiniLM sentence similarity, or fail clearly."""

from __future__ import annotations

import pytest

from envs.openagi.freeform import FreeTextMappingError, map_free_text_to_plan, map_steps_to_tools, split_steps
from envs.openagi.plans import LinearPlan, NonlinearPlan, PlanLimits, format_plan
from envs.openagi.registry import IMAGE, TEXT
from envs.openagi.tools import signature_registry

REG = signature_registry()


pytestmark = pytest.mark.usefixtures("one_torch_thread")


def test_split_steps():
    text = "Step 1: remove the noise.\nStep 2: sharpen the image; then describe it"
    assert split_steps(text) == ["remove the noise", "sharpen the image", "describe it"]
    assert split_steps("1. Denoise\n2) Caption") == ["Denoise", "Caption"]
    assert split_steps("...") == []


@pytest.mark.parametrize("text,sig,want", [
    ("Step 1: remove the noise from the image. Step 2: make the blurry image sharp. "
     "Step 3: describe the image in a sentence.", ((IMAGE,), TEXT),
     LinearPlan(("Image Denoising", "Image Deblurring", "Image Captioning"))),
    ("Image Denoising, Image Deblurring, Image Classification", ((IMAGE,), TEXT),
     LinearPlan(("Image Denoising", "Image Deblurring", "Image Classification"))),
    ("First upscale the low-resolution image, then add colour to the grayscale picture.", ((IMAGE,), IMAGE),
     LinearPlan(("Image Super Resolution", "Colorization"))),
    ("1. Denoise the image\n2. Answer the question about the image\n3. Translate the answer to German",
     ((IMAGE, TEXT), TEXT),
     NonlinearPlan(((("Image Denoising",)), ()), "Visual Question Answering", ("Machine Translation",))),
    ("Step 1: fill in the missing word of the document. Step 2: answer the question based on the document.",
     ((TEXT, TEXT), TEXT), NonlinearPlan((("Fill Mask",), ()), "Question Answering")),
])
def test_free_text_maps_to_the_described_plan(text, sig, want):
    assert map_free_text_to_plan(text, REG, sig) == want


def test_repeated_steps_are_merged_and_unrelated_steps_dropped():
    text = "Step 1: denoise the image. Step 2: remove noise again. Step 3: be happy. Step 4: caption the image."
    steps = map_steps_to_tools(text, REG)
    assert [t for _, t, _ in steps] == ["Image Denoising", "Image Denoising", "Image Captioning"]
    assert format_plan(map_free_text_to_plan(text, REG, ((IMAGE,), TEXT))) == "Image Denoising, Image Captioning"


@pytest.mark.parametrize("text,sig,reason,match", [
    ("I like turtles and pizza.", ((IMAGE,), TEXT), "unmappable", "resembles a tool"),
    ("Step 1: translate the text to German.", ((IMAGE,), TEXT), "bad_start", "Machine Translation"),
    ("Step 1: denoise the image. Step 2: caption it.", ((IMAGE, TEXT), TEXT), "unmappable", "multi-input"),
    ("Step 1: caption the image. Step 2: answer the question about the image.", ((IMAGE, TEXT), TEXT),
     "modality_mismatch", "Visual Question Answering"),
])
def test_unmappable_text_fails_clearly(text, sig, reason, match):
    with pytest.raises(FreeTextMappingError, match=match) as e:
        map_free_text_to_plan(text, REG, sig)
    assert e.value.reason == reason


def test_limits_are_enforced():
    text = "Denoise the image, deblur it, upscale it, colorize it, then caption it"
    assert len(map_free_text_to_plan(text, REG, ((IMAGE,), TEXT))) == 5
    with pytest.raises(FreeTextMappingError, match="at most 2"):
        map_free_text_to_plan(text, REG, ((IMAGE,), TEXT), PlanLimits(max_tools=2))
