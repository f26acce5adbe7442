"""The flow engine (rltf.flows.engine.flow) against a scripted backend (a test double of the backend
interface; the real backends are tested in tests/flows/test_flow_backends.py)."""

from __future__ import annotations

import json

import pytest

from rltf.flows import (
    BackendError,
    Backoff,
    Choices,
    Database,
    Edge,
    Flow,
    FlowConfig,
    GraphCycleError,
    GraphEditError,
    GraphError,
    Node,
    NodeFail,
    NodeRetry,
    PlaceholderError,
    ScriptedBackend,
    find_cycle,
    load_trace,
)
from rltf.flows.backends.scripted import word_count


def user_text(messages) -> str:
    return "\n".join(m["content"] for m in messages if m["role"] == "user")


def as_int(ctx, answer):
    if not answer.strip().isdigit():
        raise NodeRetry(f"{answer!r} is not a number: answer with digits only.")
    return int(answer)


# ------------------------------------------------------------------------------- database
def test_database_dotted_keys_and_placeholders():
    db = Database({"task": "trip", "plan": {"day1": {"city": "Boise"}, "days": ["a", "b"]}})
    db["plan.day2.city"] = "Nampa"
    assert db["plan.day1.city"] == "Boise" and db.get("plan.days.1") == "b" and "plan.day2" in db
    assert db.fill("$db.task$: $db.plan.day1.city$ then $db.plan.day2$ / $db.plan.days.0$") == \
        'trip: Boise then {"city": "Nampa"} / a'
    with pytest.raises(PlaceholderError, match=r"node 'x': placeholder \$db\.plan\.day9\$ names no database value"):
        db.fill("$db.plan.day9$", where="node 'x'")
    with pytest.raises(KeyError, match="holds a str"):
        db["task.sub"] = 1
    db.begin()
    db["plan.day1.city"] = "Eagle"
    db["new.deep.key"] = 1
    del db["task"]
    db.rollback()
    assert db.to_dict() == {"task": "trip", "plan": {"day1": {"city": "Boise"}, "day2": {"city": "Nampa"},
                                                     "days": ["a", "b"]}}


# -------------------------------------------------------------------------------- compose
def test_compose_fills_placeholders_and_passes_dependency_prompts_and_answers():
    b = ScriptedBackend(["Boise", "Idaho", "done"])
    flow = Flow(b, db={"task": {"origin": "Seattle", "days": 3}},
                config=FlowConfig(system="You plan $db.task.days$-day trips."))
    flow.add_node("dest", "Where to go from $db.task.origin$?")
    flow.add_node("state", "Which state is it in?", needs=["dest"])
    flow.add_node("plan", "Plan $db.task.days$ days ($db.task$).", needs=["dest", "state"])
    res = flow.run()
    assert res.ok and res.order == ["dest", "state", "plan"]
    assert b.calls[0] == [{"role": "system", "content": "You plan 3-day trips."},
                          {"role": "user", "content": "Where to go from Seattle?"}]
    assert b.calls[1][1]["content"] == "Where to go from Seattle?\nBoise\n\nWhich state is it in?"
    assert b.calls[2][1]["content"] == ("Where to go from Seattle?\nBoise\n\nWhich state is it in?\nIdaho\n\n"
                                        'Plan 3 days ({"origin": "Seattle", "days": 3}).')
    assert res["plan"].prompt == 'Plan 3 days ({"origin": "Seattle", "days": 3}).'


def test_custom_compose_and_missing_placeholder_is_a_clear_node_failure():
    b = ScriptedBackend(["ok"])
    flow = Flow(b, config=FlowConfig(on_failure="continue"))
    flow.add_node("a", "say ok", compose=lambda ctx: [{"role": "user", "content": ctx.fill("custom: $db.x$")}])
    flow.db["x"] = "X"
    flow.add_node("b", "uses $db.nothing.here$")
    res = flow.run()
    assert b.calls == [[{"role": "user", "content": "custom: X"}]]
    assert res["a"].ok and res["b"].status == "failed"
    assert "compose" in res["b"].error and "$db.nothing.here$" in res["b"].error and res["b"].attempts == 0


# ---------------------------------------------------------------------------------- retries
def test_retry_appends_the_failed_answer_and_the_message_and_undoes_its_writes_and_edits():
    seen_attempts = []

    def after(ctx, answer):
        seen_attempts.append(ctx.attempt)
        ctx.db["scratch"] = answer  # written, then undone when the attempt is rejected
        ctx.add_node(Node(f"extra{ctx.attempt}", "extra"), needs=["n"])
        return as_int(ctx, answer)

    b = ScriptedBackend(["seven", "7.0", "7", "fine"])
    flow = Flow(b, db={"scratch": "before"})
    flow.add_node("n", "How many?", after_query=after, output_key="count")
    res = flow.run()
    assert res.ok and res["n"].value == 7 and res["n"].attempts == 3 and seen_attempts == [1, 2, 3]
    assert b.calls[1] == [{"role": "user", "content": "How many?"}, {"role": "assistant", "content": "seven"},
                          {"role": "user", "content": "'seven' is not a number: answer with digits only."}]
    assert b.calls[2][-2:] == [{"role": "assistant", "content": "7.0"},
                               {"role": "user", "content": "'7.0' is not a number: answer with digits only."}]
    assert flow.db["scratch"] == "7" and flow.db["count"] == 7
    assert res.order == ["n", "extra3"]  # the rejected attempts' nodes were undone
    assert [e["node"] for e in res.trace.edits if e["op"] == "add_node"] == ["extra3"]
    t = res.trace.node("n")
    assert [a.error for a in t.attempts] == ["'seven' is not a number: answer with digits only.",
                                             "'7.0' is not a number: answer with digits only.", None]
    assert t.retries == 2


def test_bounded_retries_then_failure_in_trace_and_the_pass_stops(tmp_path):
    b = ScriptedBackend(["x", "y", "z"])
    flow = Flow(b, config=FlowConfig(max_attempts=3))
    flow.add_node("n", "number?", after_query=as_int)
    flow.add_node("later", "after", needs=["n"])
    res = flow.run(trace_path=tmp_path / "t.json")
    assert not res.ok and res.status == "failed" and len(b.calls) == 3
    assert res["n"].status == "failed" and "no valid answer after 3 attempt(s)" in res["n"].error
    assert "'z' is not a number" in res["n"].error and res["later"].status == "not_run"
    t = load_trace(tmp_path / "t.json")
    assert t.status == "failed" and t.node("n").status == "failed" and len(t.node("n").attempts) == 3
    assert t.node("later").status == "not_run"


def test_node_max_attempts_overrides_and_node_fail_is_immediate():
    def refuse(ctx, answer):
        raise NodeFail("the model refused")

    b = ScriptedBackend(["a", "b", "no", "kept"])
    flow = Flow(b, config=FlowConfig(max_attempts=5, on_failure="continue"))
    flow.add_node("n", "number?", after_query=as_int, max_attempts=2)
    flow.add_node("m", "go", after_query=refuse)
    flow.add_node("k", "next", needs=["n", "m"])
    res = flow.run()
    assert res["n"].attempts == 2 and res["m"].attempts == 1 and res["m"].error == "the model refused"
    # on_failure=continue: the dependent still runs and sees the failures instead of answers
    assert res["k"].ok and "(no answer: no valid answer after 2 attempt(s)" in b.calls[-1][0]["content"]
    assert ("number?\n(no answer:" in b.calls[-1][0]["content"]
            and "go\n(no answer: the model refused)" in b.calls[-1][0]["content"])


def test_on_failure_skip_skips_everything_downstream():
    b = ScriptedBackend(["bad", "bad", "side"])
    flow = Flow(b, config=FlowConfig(max_attempts=2, on_failure="skip"))
    flow.add_node("n", "number?", after_query=as_int)
    flow.add_node("child", "c", needs=["n"])
    flow.add_node("grandchild", "g", after=["child"])
    flow.add_node("side", "independent")
    res = flow.run()
    assert [res[n].status for n in ("n", "child", "grandchild", "side")] == ["failed", "skipped", "skipped", "ok"]
    assert res["child"].error == "dependency 'n' did not answer" and len(b.calls) == 3


def test_choices_are_validated_for_a_backend_without_grammars_and_constrained_otherwise():
    b = ScriptedBackend(["Maybe", " yes "])
    flow = Flow(b)
    flow.add_node("q", "Go?", choices=["yes", "no"])
    res = flow.run()
    assert res["q"].value == "yes" and b.grammars == [None, None]
    assert b.calls[1][-1]["content"] == "Answer with exactly one of these options and nothing else: yes, no"
    g = ScriptedBackend(["no"], supports_grammar=True)
    flow = Flow(g, db={"opts": ["yes", "no"]})
    flow.add_node("q", "Go?", choices=lambda ctx: ctx.db["opts"])
    assert flow.run()["q"].value == "no" and g.grammars == [Choices(["yes", "no"])]
    with pytest.raises(BackendError, match="cannot constrain"):
        f = Flow(ScriptedBackend(["x"]))
        f.add_node("g", "?", grammar=object())
        f.run()


# --------------------------------------------------------------------------- backend errors
def test_backend_errors_are_retried_with_bounded_exponential_backoff():
    sleeps: list[float] = []
    backoff = Backoff(max_attempts=4, base_delay=0.5, factor=3.0, max_delay=2.0, sleep=sleeps.append)
    b = ScriptedBackend([ConnectionError("down"), TimeoutError("slow"), "fine"])
    flow = Flow(b, config=FlowConfig(backoff=backoff))
    flow.add_node("n", "hi")
    res = flow.run()
    assert res.ok and res["n"].answer == "fine" and sleeps == [0.5, 1.5]
    assert res.trace.node("n").attempts[0].backend_errors == ["ConnectionError: down", "TimeoutError: slow"]
    assert res["n"].usage.calls == 1

    sleeps.clear()
    b = ScriptedBackend([RuntimeError(f"boom {i}") for i in range(10)])
    flow = Flow(b, config=FlowConfig(backoff=backoff, on_failure="continue"))
    flow.add_node("n", "hi")
    res = flow.run()
    assert len(b.calls) == 4 and sleeps == [0.5, 1.5, 2.0] and b.remaining == 6  # never forever
    assert res["n"].status == "failed" and res["n"].error == "backend failed 4 times; last: RuntimeError: boom 3"
    assert res.trace.node("n").attempts[0].backend_errors[-1] == "RuntimeError: boom 3"


def test_misconfiguration_is_not_retried_and_the_trace_says_error(tmp_path):
    sleeps: list[float] = []
    b = ScriptedBackend([BackendError("no API key"), "never"])
    flow = Flow(b, config=FlowConfig(backoff=Backoff(sleep=sleeps.append)))
    flow.add_node("n", "hi")
    with pytest.raises(BackendError, match="no API key"):
        flow.run(trace_path=tmp_path / "t.json")
    t = load_trace(tmp_path / "t.json")
    assert sleeps == [] and t.status == "error" and t.error == "BackendError: no API key"


# ----------------------------------------------------------------------------- dynamic graph
def test_dynamic_nodes_and_edges_are_reverted_after_the_pass():
    def branch(ctx, answer):
        if answer == "risky":
            ctx.add_node(Node("avoid", "How to avoid it?"), needs=["check"])
            ctx.add_edge("avoid", "act", "data")
            ctx.remove_node("optional")
            ctx.update_node("act", prompt="Act carefully.")

    b = ScriptedBackend(["risky", "slow down", "braking", "safe", "opt", "driving"])
    flow = Flow(b)
    flow.add_node("check", "Any risk?", after_query=branch)
    flow.add_node("optional", "Optional step", needs=["check"])
    flow.add_node("act", "Act.", needs=["check"])
    nodes_before, edges_before = dict(flow.nodes), list(flow.edges)
    first = flow.run()
    assert first.order == ["check", "avoid", "act"] and first["avoid"].temporary
    assert ("How to avoid it?\nslow down" in b.calls[2][0]["content"]
            and b.calls[2][0]["content"].endswith("Act carefully."))
    assert [e["op"] for e in first.trace.edits] == ["add_node", "add_edge", "add_edge", "remove_node", "update_node"]
    assert flow.nodes == nodes_before and flow.edges == edges_before  # the flow's graph is untouched
    second = flow.run()
    assert second.order == ["check", "optional", "act"] and b.calls[-1][0]["content"].endswith("Act.")
    assert second.trace.edits == [] and flow.passes == 2


def test_evaluated_nodes_cannot_be_modified(tmp_path):
    def make(op):
        def after(ctx, answer):
            op(ctx)
        return after

    cases = {
        "remove": (lambda ctx: ctx.remove_node("first"), "node 'first' is already evaluated"),
        "update": (lambda ctx: ctx.update_node("first", prompt="new"), "node 'first' is already evaluated"),
        "edge_in": (lambda ctx: ctx.add_edge("second", "first"), "node 'first' is already evaluated"),
        "self": (lambda ctx: ctx.remove_node("second"), "node 'second' is being evaluated"),
        "drop_in": (lambda ctx: ctx.remove_edge("first", "second"), "node 'second' is being evaluated"),
    }
    for name, (op, message) in cases.items():
        flow = Flow(ScriptedBackend(["a", "b"]))
        flow.add_node("first", "1")
        flow.add_node("second", "2", needs=["first"], after_query=make(op))
        with pytest.raises(GraphEditError, match=message):
            flow.run(trace_path=tmp_path / f"{name}.json")
        t = load_trace(tmp_path / f"{name}.json")
        assert t.status == "error" and t.node("first").status == "ok"
        assert t.node("second").status == "failed" and "GraphEditError" in t.node("second").error
        assert t.node("second").attempts[0].answer == "b"
        assert (t.prompt_tokens, t.node("second").prompt_tokens, flow.usage.calls) == (4, 3, 2)  # "1", "1 a 2"
        assert list(flow.nodes) == ["first", "second"]


def test_graph_edits_only_in_after_query_and_permanent_edits_not_during_a_pass():
    def compose(ctx):
        ctx.add_node(Node("x", "x"))
        return []

    flow = Flow(ScriptedBackend(["a"]))
    flow.add_node("n", "n", compose=compose)
    with pytest.raises(GraphEditError, match="only inside an after-query"):
        flow.run()
    flow = Flow(ScriptedBackend(["a"]))
    flow.add_node("n", "n", after_query=lambda ctx, a: flow.add_node("late", "late"))
    with pytest.raises(GraphEditError, match="cannot change during a pass"):
        flow.run()


# ------------------------------------------------------------------------------ edges, order
def test_order_edges_only_order_and_data_edges_pass_answers():
    b = ScriptedBackend(lambda messages: "ANSWER-" + messages[-1]["content"].split()[-1])
    flow = Flow(b)
    flow.add_node("late", "prompt late")  # added first: the order comes from the edges
    flow.add_node("order_src", "prompt order")
    flow.add_node("data_src", "prompt data")
    flow.add_edge("data_src", "late", "data")
    flow.add_edge("order_src", "late", "order")
    res = flow.run()
    assert res.order == ["order_src", "data_src", "late"]
    last = b.calls[-1][0]["content"]
    assert last == "prompt data\nANSWER-data\n\nprompt late" and "order" not in last
    assert res.trace.node("late").needs == ["data_src"] and res.trace.node("late").after == ["order_src"]


def test_kahn_order_is_deterministic_insertion_order_among_ready_nodes():
    flow = Flow(ScriptedBackend(lambda m: "ok"))
    for n in ["c", "a", "b", "d"]:
        flow.add_node(n, n)
    flow.add_edge("c", "d", "order")
    flow.add_edge("b", "a", "order")
    assert flow.run().order == ["c", "b", "d", "a"]


def test_a_cycle_is_a_clear_error_naming_its_nodes():
    flow = Flow(ScriptedBackend([]))
    for n in "abcd":
        flow.add_node(n, n)
    flow.add_edge("a", "b")
    flow.add_edge("b", "c", "order")
    flow.add_edge("c", "d")
    with pytest.raises(GraphCycleError, match=r"add_edge\('d' -> 'b'\) would close a cycle: d -> b -> c -> d") as e:
        flow.add_edge("d", "b")
    assert e.value.cycle == ["d", "b", "c", "d"] and len(flow.edges) == 3
    with pytest.raises(GraphCycleError, match="a -> a"):
        flow.add_edge("a", "a")
    assert find_cycle("xy", []) is None
    assert find_cycle("abc", [Edge("a", "b"), Edge("b", "c"), Edge("c", "b")]) == ["b", "c", "b"]

    def close(ctx, answer):
        ctx.add_node(Node("t", "t"), needs=["y"])
        ctx.add_edge("t", "y")

    flow = Flow(ScriptedBackend(["1", "2"]))
    flow.add_node("x", "x", after_query=close)
    flow.add_node("y", "y", needs=["x"])
    with pytest.raises(GraphCycleError, match=r"add_edge\('t' -> 'y'\) would close a cycle: t -> y -> t"):
        flow.run()


def test_graph_errors_are_clear():
    flow = Flow(ScriptedBackend([]))
    flow.add_node("a", "a")
    with pytest.raises(GraphError, match="already exists"):
        flow.add_node("a", "again")
    with pytest.raises(GraphError, match="no node 'zzz'"):
        flow.add_node("b", "b", needs=["zzz"])
    assert list(flow.nodes) == ["a"]  # the half-added node is gone
    with pytest.raises(GraphError, match="kind 'weird'"):
        flow.add_node("c", "c")
        flow.add_edge("a", "c", "weird")


# ------------------------------------------------------------------------- accounting, trace
def test_token_usage_is_counted_per_node_per_pass_and_per_flow():
    b = ScriptedBackend(["one two", "3 4 5", "6", "seven eight"])
    flow = Flow(b)
    flow.add_node("a", "first prompt")
    flow.add_node("b", "second", needs=["a"], after_query=as_int)
    res = flow.run()
    calls = b.calls
    expect_a = (word_count(calls[0]), 2)
    expect_b = (word_count(calls[1]) + word_count(calls[2]), 3 + 1)
    assert (res["a"].usage.prompt_tokens, res["a"].usage.completion_tokens) == expect_a
    assert (res["b"].usage.prompt_tokens, res["b"].usage.completion_tokens, res["b"].usage.calls) == (*expect_b, 2)
    assert (res.usage.prompt_tokens, res.usage.completion_tokens) == (expect_a[0] + expect_b[0], 6)
    t = res.trace
    assert (t.prompt_tokens, t.completion_tokens) == (res.usage.prompt_tokens, 6)
    assert [(a.prompt_tokens, a.completion_tokens) for a in t.node("b").attempts] == \
        [(word_count(calls[1]), 3), (word_count(calls[2]), 1)]
    flow.nodes.pop("b")
    flow.edges.clear()
    flow.run()
    assert flow.usage.prompt_tokens == res.usage.prompt_tokens + word_count(calls[3])
    assert flow.usage.completion_tokens == 8 and flow.usage.calls == 4


def test_trace_is_written_where_asked_and_reloads(tmp_path):
    class Parsed:
        def __repr__(self):
            return "Parsed()"

    b = ScriptedBackend(["nope", "12", "done", "13", "again"])
    flow = Flow(b, db={"task": "t"}, config=FlowConfig(trace_dir=str(tmp_path / "traces")), name="demo")
    flow.add_node("n", "count for $db.task$", after_query=as_int, output_key="out.n")
    flow.add_node("m", "obj", needs=["n"], after_query=lambda ctx, a: Parsed())
    res = flow.run()
    path = tmp_path / "traces" / "demo-pass00000.json"
    assert res.trace_path == path and path.is_file()
    raw = json.loads(path.read_text())
    assert raw["format"] == 1 and raw["db"] == {"task": "t", "out": {"n": 12}}
    t = load_trace(path)
    assert t == load_trace(path) and t.to_dict() == res.trace.to_dict()
    n = t.node("n")
    assert (t.flow, t.pass_index, t.status) == ("demo", 0, "ok")
    assert n.prompt == "count for t" and n.answer == "12" and n.value == 12 and n.retries == 1
    assert n.attempts[0].messages == [{"role": "user", "content": "count for t"}]
    assert n.attempts[0].error.startswith("'nope' is not a number") and n.attempts[1].messages[-1]["role"] == "user"
    assert all(a.seconds >= 0 for a in n.attempts) and n.seconds >= sum(a.seconds for a in n.attempts) * 0.99
    assert t.node("m").value == "Parsed()" and t.node("m").needs == ["n"]
    res2 = flow.run(trace_path=tmp_path / "explicit.json")
    assert res2.ok and res2.trace_path == tmp_path / "explicit.json" and load_trace(res2.trace_path).pass_index == 1
    assert not (tmp_path / "traces" / "demo-pass00001.json").exists()
