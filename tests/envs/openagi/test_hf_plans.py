"""The `hf` backend of the OpenAGI env (envs.openagi.hf), proven offline on tiny random checkpoints
(tests/hf_tiny.py, loaded back through the backend exactly as a hub id would be; fixtures in
tests/envs/openagi/conftest.py, helpers in tests/hf_experts.py): linear and nonlinear plans through
the executor and the environment, end to end."""

from __future__ import annotations

import os

os.environ["HF_HUB_OFFLINE"] = "1"  # before anything imports huggingface_hub
os.environ["TRANSFORMERS_OFFLINE"] = "1"


import pytest

from envs.openagi.plans import PlanLimits, check_plan, parse_plan
from envs.openagi.registry import IMAGE, TEXT
from tests import hf_tiny
from tests.hf_experts import DOCS, HAS_DIFFUSERS, QUERIES, gray, rand_images

pytestmark = pytest.mark.usefixtures("one_torch_thread")


PLANS = [
    ("Image Super Resolution, Image Denoising, Image Deblurring, Image Classification", (IMAGE,), TEXT),
    ("Colorization, Image Captioning, Machine Translation", (IMAGE,), TEXT),
    ("Fill Mask, Text Summarization, Sentiment Analysis", (TEXT,), TEXT),
    ("Text Generation, Text to Image Generation, Object Detection", (TEXT,), TEXT),
    ("(Image Denoising, Colorization) (Fill Mask) Visual Question Answering, Machine Translation", (IMAGE, TEXT), TEXT),
    ("() (Fill Mask) Question Answering, Machine Translation", (TEXT, TEXT), TEXT),
]


@pytest.mark.parametrize("text,inputs,target", PLANS, ids=[p[0][:40] for p in PLANS])
def test_linear_and_nonlinear_plans_run_through_the_executor(registry, text, inputs, target):
    from envs.openagi.executor import PlanExecutor
    from envs.openagi.tasks import Sample

    plan = parse_plan(text, registry)
    if not HAS_DIFFUSERS and set(plan.all_tools) & set(hf_tiny.DIFFUSERS_TOOLS):
        pytest.skip("diffusers (optional extra) not installed")
    check_plan(plan, registry, inputs, target, PlanLimits(max_tools=6, max_branch=3, max_tail=2))
    data = {IMAGE: [gray(x) for x in rand_images(8)], TEXT: ["the [MASK] sits on the grass.", "a good dog", "what"]}
    if inputs == (TEXT, TEXT):
        data = {0: DOCS, 1: QUERIES}
    columns = [data[i] if inputs == (TEXT, TEXT) else data[m] for i, m in enumerate(inputs)]
    samples = [Sample(uid=f"s{i}", inputs=tuple(col[i] for col in columns), target="") for i in range(3)]
    run = PlanExecutor(registry).run(plan, samples)
    assert run.errors == [None, None, None]
    assert all(isinstance(o, str) for o in run.outputs)


def test_a_plan_through_the_environment_end_to_end(registry):
    from envs.openagi.env import OpenAGIEnv
    from envs.openagi.plans import LinearPlan, NonlinearPlan
    from envs.openagi.tasks import Sample, Task

    images = rand_images(9)
    restore = Task(0, "Given noisy blurry image, how to return the regular image step by step?", (IMAGE,), IMAGE,
                   "image_similarity", "restoration", (("noisy", "blurry"),),
                   LinearPlan(("Image Denoising", "Image Deblurring")),
                   [Sample(f"r{i}", (x,), x) for i, x in enumerate(images)])
    qa = Task(1, "Given English document and clozed English query, how to answer the question in English step by step?",
              (TEXT, TEXT), TEXT, "token_f1", "qa", ((), ("clozed",)),
              NonlinearPlan(((), ("Fill Mask",)), "Question Answering"),
              [Sample(f"q{i}", (d, q), d.split(" ")[0] if d else "") for i, (d, q) in enumerate(zip(DOCS, QUERIES))])
    env = OpenAGIEnv(registry=registry, tasks=[restore, qa], split="all")
    for task in (restore, qa):
        env.reset(options={"task": task.id})
        _, reward, terminated, _, info = env.step(str(task.reference_plan))
        assert terminated and info["valid"] and info["sample_errors"] == [None] * 3, info
        assert 0.0 <= reward <= 1.0 and len(info["scores"]) == 3
    # the same plan again is served from the execution cache: no new expert calls
    calls = env.executor.tool_calls
    env.reset(options={"task": 0})
    env.step(str(restore.reference_plan))
    assert env.executor.tool_calls == calls
