"""Issue 25, no silent zeros: an expert returning nothing usable (None, NaN, a wrong type or shape)
is a recorded error, for text, images and modalities registered from outside."""

from __future__ import annotations

import math

import numpy as np
import pytest

pytestmark = pytest.mark.usefixtures("one_torch_thread")


def _expert_env(output):
    from envs.openagi.env import OpenAGIEnv
    from envs.openagi.plans import LinearPlan, PlanLimits
    from envs.openagi.registry import IMAGE, TEXT, ToolRegistry
    from envs.openagi.tasks import Sample, Task

    reg = ToolRegistry()
    reg.register("Odd Text", TEXT, TEXT, lambda xs: [output if x == "b" else x for x in xs])
    reg.register("Odd Image", IMAGE, IMAGE, lambda xs: [output if float(x[0, 0, 0]) > 0.5 else x for x in xs])
    text = Task(0, "Given text, how to return the text?", (TEXT,), TEXT, "toy_equal", "toy", ((),),
                LinearPlan(("Odd Text",)))
    text.samples = [Sample(f"t/{i}", (s,), s) for i, s in enumerate(["a", "b", "c"])]
    image = Task(1, "Given an image, how to return the image?", (IMAGE,), IMAGE, "toy_close", "toy", ((),),
                 LinearPlan(("Odd Image",)))
    images = [np.full((4, 4, 3), v, dtype=np.float32) for v in (0.2, 0.8, 0.3)]
    image.samples = [Sample(f"i/{i}", (x,), x) for i, x in enumerate(images)]
    return OpenAGIEnv(registry=reg, tasks=[text, image], limits=PlanLimits(1, 1, 1),
                      metrics={"toy_equal": lambda p, t: [float(isinstance(a, str) and a == b) for a, b in zip(p, t)],
                               "toy_close": lambda p, t: [float(isinstance(a, np.ndarray) and a.shape == b.shape)
                                                          for a, b in zip(p, t)]})


@pytest.mark.parametrize("output, why", [
    (None, "returned None"), (float("nan"), "returned a float, not text (str)"),
    (math.inf, "returned a float, not text (str)"), (3, "returned an int, not text (str)"),
    (np.zeros(0), "returned a ndarray, not text (str)"),
])
def test_an_expert_returning_nothing_usable_is_a_recorded_error_not_a_silent_zero(output, why):
    env = _expert_env(output)
    result = env.reward_plans([(0, "Odd Text")])[0]
    assert result.scores == [1.0, 0.0, 1.0]
    assert result.sample_errors[0] is None and result.sample_errors[2] is None
    assert result.sample_errors[1] == f"Odd Text {why}"


@pytest.mark.parametrize("output, why", [
    (None, "returned None"), (float("nan"), "returned nan"), (-math.inf, "returned -inf"),
    (np.zeros((0, 2)), "returned an empty array (shape (0, 2))"),
    (np.array([1.0, np.inf]), "returned an array holding NaN or infinite values"),
])
def test_an_output_of_a_modality_registered_from_outside_is_checked_too(output, why):
    from envs.openagi.outputs import output_problem

    assert output_problem(output, "audio") == why
    assert output_problem(np.zeros(3), "audio") is None and output_problem(0.5, "audio") is None


@pytest.mark.parametrize("output, why", [
    (None, "returned None"), ("a caption", "returned a str, not an image"),
    (np.zeros((0, 4, 3), dtype=np.float32), "returned an array of shape (0, 4, 3), not an image"),
    (np.full((4, 4, 3), np.nan, dtype=np.float32), "returned an array holding NaN or infinite values"),
    (np.zeros((4, 4), dtype=np.float32), "returned an array of shape (4, 4), not an image"),
])
def test_an_image_expert_returning_nothing_usable_is_a_recorded_error(output, why):
    result = _expert_env(output).reward_plans([(1, "Odd Image")])[0]
    assert result.scores == [1.0, 0.0, 1.0] and result.sample_errors[1].startswith(f"Odd Image {why}")
    assert result.sample_errors[0] is None
