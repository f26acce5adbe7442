"""Issue 16, the OpenAGI env's edge inputs: a huge invalid plan gives a short error, a bool task id
is refused, the lite suite on the hf backend fails validation, non-finite images score zero."""


import numpy as np
import pytest

pytestmark = pytest.mark.usefixtures("one_torch_thread")


@pytest.fixture(scope="module")
def lite_env():
    from envs.openagi.env import OpenAGIEnv

    return OpenAGIEnv(n_samples=2, cache_bytes=0)


@pytest.mark.parametrize("plan", ["x" * 1_000_000, "Image Denoising; " * 60_000,
                                  "(Image Denoising) (" + "y" * 500_000 + ") Visual Question Answering"],
                         ids=["one-huge-name", "no-commas", "unclosed-branch"])
def test_a_huge_invalid_plan_gives_a_short_error(lite_env, plan):
    result = lite_env.reward_plans([(lite_env.tasks()[0], plan)])[0]
    assert not result.valid and result.reward == 0.0
    assert len(result.error) <= 1000 and "…" in result.error


@pytest.mark.parametrize("task", [True, False, np.bool_(True)])
def test_a_bool_task_id_is_refused(lite_env, task):
    with pytest.raises(ValueError, match="is a bool, not a task"):
        lite_env.reward_plans([(task, "Image Denoising")])


def test_the_lite_suite_on_the_hf_backend_fails_validation():
    from envs.openagi.config import EnvConfigError, OpenAGIEnvConfig

    with pytest.raises(EnvConfigError, match="suite='lite' runs on the lite backend only"):
        OpenAGIEnvConfig(suite="lite", backend="hf").validate()


@pytest.mark.parametrize("value", [float("nan"), float("inf"), -float("inf")])
def test_non_finite_images_score_zero(value):
    from envs.openagi.metrics.image import image_similarity

    rng = np.random.default_rng(0)
    target = rng.random((16, 16, 3)).astype(np.float32)
    smooth = np.full_like(target, 0.5)
    broken = smooth.copy()
    broken[3, 4, 1] = value
    assert image_similarity(broken, target) == 0.0
    assert image_similarity(np.full_like(target, value), target) == 0.0
    assert image_similarity(target, target) == pytest.approx(1.0)
