"""Issue 38 item 2: held-out evaluation says when failing experts lowered a row (results.md's footnote,
the table's ``expert_failures`` in results.json), and the warning names the tool that failed, also
for an unusable output (``"<tool> returned ..."``, a tool name holding spaces)."""

from __future__ import annotations

from envs.openagi.diagnostics import error_tool, expert_failures
from envs.openagi.env import OpenAGIEnv
from envs.openagi.plans import PlanLimits
from envs.openagi.registry import TEXT, ToolRegistry
from rltf.evaluation import schemas as ev
from tests.toy_env import toy_env, toy_tasks


def _env(translation) -> OpenAGIEnv:
    reg = ToolRegistry()
    reg.register("Fill Mask", TEXT, TEXT, lambda xs: [x.replace("[MASK]", "cat") for x in xs])
    reg.register("Machine Translation", TEXT, TEXT, translation)
    reg.register("Question Answering", (TEXT, TEXT), TEXT, lambda ds, qs: [d.split()[-1] for d in ds])
    return OpenAGIEnv(registry=reg, tasks=toy_tasks(), limits=PlanLimits(2, 1, 1),
                      metrics={"toy_equal": lambda p, t: [float(a == b) for a, b in zip(p, t)]})


def _raises(xs):
    raise RuntimeError("weights missing")


def test_failing_experts_are_counted_per_row_and_footnoted():
    env = _env(_raises)
    tasks = env.tasks()
    res = ev.reference_schema(env, tasks)
    assert res.failed == {0: 4, 1: 0} and res.executed == {0: 4, 1: 4}  # the translation task fails, QA does not
    table = ev.results_table([res], tasks, env)
    f = table["expert_failures"]["reference"]
    assert (f["failed_samples"], f["executed_samples"], f["tasks"]) == (4, 8, 1)
    assert any("'Machine Translation' failed on every call" in n for n in f["notes"])
    md = ev.table_markdown(table, "held-out")
    assert "expert failures" in md and "failed on 4 of 8 executed samples (1 task(s))" in md
    assert "'Machine Translation' failed on every call" in md


def test_a_healthy_evaluation_has_no_footnote():
    env = toy_env()
    tasks = env.tasks()
    table = ev.results_table([ev.reference_schema(env, tasks)], tasks, env)
    assert "expert_failures" not in table and "expert failures" not in ev.table_markdown(table, "held-out")


def test_the_warning_names_the_tool_of_an_unusable_output():
    env = _env(lambda xs: [None for _ in xs])  # "Machine Translation returned None"
    tasks = env.tasks()
    results = env.reward_plans([(t, t.reference_plan) for t in tasks])
    rate, warnings = expert_failures(results)
    assert rate == 0.5
    assert len(warnings) == 1
    assert warnings[0].startswith("expert 'Machine Translation' failed on every call (4 samples)"), warnings
    assert error_tool("Image Deblurring returned an array holding NaN or infinite values",
                      {"Image Denoising", "Image Deblurring"}) == "Image Deblurring"
