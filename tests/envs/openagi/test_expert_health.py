"""Issue 16, expert health (envs.openagi.registry / executor): a permanently failing expert is not
retried per sample forever, a recovered one is called again, a sample-specific failure does not
take an expert down."""


import pytest

pytestmark = pytest.mark.usefixtures("one_torch_thread")


def _counting_registry(fail):
    from envs.openagi.registry import TEXT, ToolRegistry

    calls = []

    def tool(xs):
        calls.append(len(xs))
        if fail():
            raise RuntimeError("weights missing")
        return [x.upper() for x in xs]

    reg = ToolRegistry()
    reg.register("Fill Mask", TEXT, TEXT, tool)
    return reg, calls


def _samples(n, first=0):
    from envs.openagi.tasks import Sample

    return [Sample(uid=f"s{first + i}", inputs=(f"text {i}",), target="") for i in range(n)]


def test_a_permanently_failing_expert_is_not_retried_per_sample_forever():
    from envs.openagi.executor import PlanExecutor
    from envs.openagi.plans import LinearPlan
    from envs.openagi.registry import DOWN_LIMIT, PROBE_EVERY

    reg, calls = _counting_registry(lambda: True)
    ex = PlanExecutor(reg)
    for i in range(DOWN_LIMIT):  # a batch of 4, then each sample alone
        assert all("Fill Mask raised RuntimeError: weights missing" == e
                   for e in ex.run(LinearPlan(("Fill Mask",)), _samples(4, 10 * i)).errors)
    assert len(calls) == 5 * DOWN_LIMIT and reg.health("Fill Mask").down
    for i in range(4 * PROBE_EVERY + 1):
        run = ex.run(LinearPlan(("Fill Mask",)), _samples(4, 1000 + 10 * i))
        assert all(e.startswith("Fill Mask raised RuntimeError: weights missing") for e in run.errors)
    assert len(calls) == 5 * DOWN_LIMIT + 5 * 4  # one probe (a batch and its samples) per PROBE_EVERY requests
    assert "not called" in run.errors[0]


def test_a_recovered_expert_is_called_again():
    from envs.openagi.executor import PlanExecutor
    from envs.openagi.plans import LinearPlan
    from envs.openagi.registry import DOWN_LIMIT, PROBE_EVERY

    broken = [True]
    reg, calls = _counting_registry(lambda: broken[0])
    ex = PlanExecutor(reg)
    for i in range(DOWN_LIMIT):
        ex.run(LinearPlan(("Fill Mask",)), _samples(2, 10 * i))
    broken[0] = False  # back (a transient outage)
    results = [ex.run(LinearPlan(("Fill Mask",)), _samples(2, 1000 + 10 * i)) for i in range(PROBE_EVERY + 2)]
    assert all(e is not None for r in results[: PROBE_EVERY - 1] for e in r.errors)  # answered at once
    assert all(r.errors == [None, None] for r in results[PROBE_EVERY - 1 :])  # the probe worked: called again
    assert not reg.health("Fill Mask").down


def test_a_sample_specific_failure_does_not_take_an_expert_down():
    from envs.openagi.executor import PlanExecutor
    from envs.openagi.plans import LinearPlan
    from envs.openagi.registry import DOWN_LIMIT, TEXT, ToolRegistry

    def tool(xs):
        if any("bad" in x for x in xs):
            raise ValueError("cannot read this one")
        return list(xs)

    reg = ToolRegistry()
    reg.register("Fill Mask", TEXT, TEXT, tool)
    ex = PlanExecutor(reg)
    from envs.openagi.tasks import Sample

    for i in range(3 * DOWN_LIMIT):
        samples = [Sample(uid=f"{i}-{j}", inputs=("bad" if j == 0 else "good",), target="") for j in range(3)]
        assert [e is None for e in ex.run(LinearPlan(("Fill Mask",)), samples).errors] == [False, True, True]
