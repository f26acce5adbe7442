"""Agent flows on the travel sandbox (envs.travel.flows: mtp / okr / react / flat; evaluate), offline on a
tiny random T5 planner (and scripted backends where a test needs to steer the choices): MTP and
OKR-Agent deliver valid itineraries with every decision a constrained completion, traces written;
ReAct's tool loop runs the tools and feeds the observations back; the flat baseline; the
evaluation entry (config, dry run, table, traces)."""

from __future__ import annotations

import contextlib
import dataclasses
import io
import json
import re
from pathlib import Path

import pytest
import torch
import yaml

import envs
from envs.travel.config import TravelEnvConfig
from envs.travel.flows.flat import run_flat
from envs.travel.flows.mtp import TravelMTP, run_mtp
from envs.travel.flows.okr import OBJECTIVES, run_okr
from envs.travel.flows.react import FINISH, TravelReAct, run_react
from envs.travel.registration import TravelSection
from rltf.config.flow import MTPSettings, OKRSettings, ReActSettings
from rltf.config.loading import ConfigError
from rltf.flows import ChoiceGrammar, Choices, Completion, ScriptedBackend, load_trace
from rltf.flows.backends.planner import PlannerBackend, rescore
from rltf.flows.evaluate import describe_flows, load_flow_config, main
from rltf.flows.evaluation import evaluate_flows
from rltf.planners.planner import Planner
from rltf.planners.tokenizer import train_plan_tokenizer
from tests.tiny_models import tiny_t5

# the travel flows cut their prompts to planner.max_prompt_tokens by design (their recipe,
# rltf/flows/evaluate.py, filters the same class); tests/rl/test_rl_correctness.py asserts the warning itself
pytestmark = [pytest.mark.usefixtures("one_torch_thread"),
              pytest.mark.filterwarnings("ignore::constrained_decoding.prompts.PromptTruncationWarning")]

ENV_CFG = TravelSection(travel=TravelEnvConfig(days=[3]))


@pytest.fixture(scope="module")
def sandbox():
    train, held = envs.make_train_and_held_out(ENV_CFG)
    return train, held, envs.split_ids(ENV_CFG)["test"]


@pytest.fixture(scope="module")
def planner(sandbox):
    train, _, _ = sandbox
    tok = train_plan_tokenizer(train.tokenizer_texts(), vocab_size=1500, required=[])
    tok.model_max_length = 256
    return Planner(tiny_t5(tok, seed=0), tok, True, "tiny-t5")


@pytest.fixture(scope="module")
def backend(planner):
    return PlannerBackend(planner)


def _queries(held, ids, levels=("easy", "medium", "hard")):
    """One 3-day test query per level (the hard ones set three local constraints)."""
    out = []
    for level in levels:
        out.append(next(i for i in ids if held.get_query(i).level == level))
    return out


def _options(messages) -> list[str]:
    """The option texts a prompt lists ('- text (note)' lines)."""
    out = []
    for line in messages[-1]["content"].splitlines():
        if line.startswith("- "):
            t = line[2:]
            out.append(t.rsplit(" (", 1)[0] if t.endswith(")") and " (" in t else t)
    return out


class Steered:
    """A backend whose choices a test makes (``pick(messages, options)``) and whose grammar nodes
    the planner decodes: a model that picks deliberately, with a tokenizer for plan grammars."""

    supports_grammar = True

    def __init__(self, inner: PlannerBackend, pick):
        self.inner, self.pick = inner, pick
        self.tokenizer = inner.tokenizer
        self.calls: list = []

    def generate(self, batch, grammar=None, *, sampling=None):
        out = []
        for messages in batch:
            self.calls.append(messages)
            if isinstance(grammar, Choices):
                text = self.pick(messages, list(grammar.options))
                out.append(Completion(text, 0, 1, value=text))
            else:
                out += self.inner.generate([messages], grammar, sampling=sampling)
        return out


# --------------------------------------------------------------------------------------- MTP
def test_mtp_delivers_valid_itineraries_with_the_manager_graph_decoded_under_a_grammar(sandbox, planner, backend,
                                                                                        tmp_path):
    _, held, ids = sandbox
    for qid in _queries(held, ids):
        q = held.get_query(qid)
        path = tmp_path / f"mtp-{qid}.json"
        fr = run_mtp(held, qid, backend, trace_path=path)
        assert fr.plan is not None and fr.error is None and fr.result.ok
        ev = held.reward_plans([(qid, fr.plan)])[0].evaluation
        assert ev.delivered and ev.commonsense_pass, ev.violations()  # every commonsense rule holds by construction
        for k in ("room_rule", "room_type", "transportation"):  # local constraints, met by the executors
            assert ev.hard[k].passed is not False, (k, ev.hard[k].reason)
        delivered = fr.extra["delivered"]
        assert delivered["cost"] == pytest.approx(ev.total_cost)  # the deliverer's arithmetic is the budget's
        assert delivered["within_budget"] == ev.hard["budget"].passed

        # the manager's graph: three constrained choices, then the meta-tasks it added to the pass
        trace = load_trace(path)
        names = [n.name for n in trace.nodes]
        assert names[:3] == ["manager.route", "manager.schedule", "manager.transport"] and names[-1] == "deliverer"
        graph = trace.db["mtp"]["graph"]
        tasks = graph["tasks"]
        assert set(tasks) == set(names[3:-1]) and graph["global"] == [f"budget: ${q.budget} for the whole trip"]
        assert {n["node"] for n in trace.edits if n["op"] == "add_node"} == set(tasks) | {"deliverer"}
        assert all(e["by"] == "manager.transport" for e in trace.edits)
        assert {t["kind"] for t in tasks.values()} == {"transport", "stay", "meal", "attraction"}
        node = {n.name: n for n in trace.nodes}
        assert (node["stay1"].needs == ["leg1"] and node["leg2"].needs == ["leg1"]
                and node["leg1"].after == ["manager.transport"])
        assert node["day2.lunch"].needs == ["day2.breakfast"] and node["deliverer"].needs == list(tasks)
        if q.local_constraint.get("room type"):
            assert any("room type" in c for c in tasks["stay1"]["local"])
        # the supervisor rewrote each meta-task with its predecessors' outcomes before it ran
        assert f"Arriving by {node['leg1'].answer}" in node["stay1"].attempts[0].messages[-1]["content"]
        lunch = node["day2.lunch"].attempts[0].messages
        assert f"Already chosen (not again): {node['day2.breakfast'].answer}." in lunch[-1]["content"]
        assert node["day2.breakfast"].answer not in _options(lunch)  # local constraint: no repeat

        # every decision is a constrained completion with its exact log-prob (what RL re-scores)
        steps = fr.result.constrained()
        assert [n for n, _ in steps] == [n for n in names]
        route = dict(steps)["manager.route"]
        assert isinstance(route.decoded.grammar, ChoiceGrammar) and route.text in route.decoded.grammar.options
        assert node["manager.route"].attempts[0].logprob == pytest.approx(route.logprob)
        lp = rescore(planner.model, planner.tokenizer, [c for _, c in steps])
        assert torch.allclose(lp, torch.tensor([c.logprob for _, c in steps]), rtol=1e-4, atol=1e-4)


def test_mtp_deliverer_repairs_the_budget_and_the_supervisor_can_be_a_model(sandbox, backend):
    _, held, ids = sandbox
    qid = _queries(held, ids, ["medium"])[0]
    q = held.get_query(qid)

    def pick(messages, options):  # the manager and the deliverer take the first option, executors the dearest
        text = messages[-1]["content"]
        return options[-1] if "Meta-task" in text else options[0]

    fr = run_mtp(held, qid, ScriptedBackend(lambda m: pick(m, _options(m))))  # no grammar: answers validated
    assert fr.plan is not None
    mtp = TravelMTP(held, qid, backend)
    # a budget the dearest choices exceed: the deliverer offers only repaired itineraries within it
    tight = dataclasses.replace(q, budget=int(fr.extra["delivered"]["cost"] * 0.8))
    mtp = TravelMTP(held, tight, ScriptedBackend(lambda m: pick(m, _options(m))))
    out = mtp.run()
    delivered = out.extra["delivered"]
    offer = mtp.variants["offer"]
    chosen = mtp._cost({t: o["choice"] for t, o in mtp.outcomes.items()})
    assert chosen > tight.budget and delivered["cost"] < chosen
    if delivered["within_budget"]:
        assert all(v["within_budget"] and not v["label"].startswith("over budget") for v in offer)
        ev = held.reward_plans([(tight, out.plan)])[0].evaluation
        assert ev.hard["budget"].passed and ev.commonsense_pass
    else:
        assert len(offer) == 1 and offer[0]["label"].startswith("over budget")

    # supervisor=model: a free-text supervisor node before each executor, its answer in the executor's prompt
    fr = run_mtp(held, qid, backend, MTPSettings(supervisor="model", supervisor_tokens=4))
    assert fr.plan is not None
    res = fr.result
    sup = [n for n in res.order if n.startswith("supervise.")]
    assert len(sup) == len([n for n in res.order if n in res.trace.db["mtp"]["graph"]["tasks"]])
    assert res.order.index("supervise.stay1") > res.order.index("leg1") > res.order.index("supervise.leg1")
    assert res["supervise.stay1"].completion.decoded is None  # free text: not a constrained decision
    msg = res.trace.node("stay1").attempts[0].messages[-1]["content"]
    assert f"Supervisor: {res['supervise.stay1'].answer.strip()}" in msg


# --------------------------------------------------------------------------------------- OKR
def test_okr_delivers_valid_itineraries_with_agents_criteria_reviews_and_rounds(sandbox, planner, backend, tmp_path):
    _, held, ids = sandbox
    for qid in _queries(held, ids, ["easy", "hard"]):
        q = held.get_query(qid)
        path = tmp_path / f"okr-{qid}.json"
        fr = run_okr(held, qid, backend, OKRSettings(levels=2, rounds=2), trace_path=path)
        assert fr.plan is not None and fr.result.ok
        ev = held.reward_plans([(qid, fr.plan)])[0].evaluation
        for k in ("within_sandbox", "complete_information", "within_current_city", "reasonable_city_route"):
            assert ev.commonsense[k].passed, ev.violations()
        trace = load_trace(path)
        okr = trace.db["okr"]
        # the leading agent's objectives (a constrained choice), each expanded into key results
        assert trace.nodes[0].name == "lead.objectives" and okr["objectives"][0] == "route"
        assert sorted(okr["objectives"]) == sorted(OBJECTIVES)
        assert [n.name for n in trace.nodes[1:7]] == [f"{o}.key_results" for o in okr["objectives"]]
        agents = okr["agents"]
        assert {a["name"] for a in agents if a["level"] == 1} == set(OBJECTIVES)
        assert all(a["criterion"].startswith("An excellent") for a in agents)
        assert all(a["parent"] in okr["objectives"] for a in agents if a["level"] == 2)
        if q.local_constraint.get("cuisine"):
            assert any("cuisine" in a["constraints"] for a in agents) or "cuisine" not in json.dumps(agents)
        # the solution keyed by the objectives; a review per agent per round; the best round kept
        assert set(okr["solution"]) == set(OBJECTIVES)
        assert set(okr["reviews"]["r1"]) == {a["name"].replace("/", "-") for a in agents}
        scores = [v["score"] for v in fr.extra["versions"]]
        assert okr["best_round"] == 1 + scores.index(max(scores))
        steps = fr.result.constrained()
        assert steps[0][0] == "lead.objectives" and steps[0][1].logprob is not None
        assert len(steps) == len(fr.result.order)  # every node is a constrained decision here


def test_okr_revises_what_its_review_finds_and_expands_key_results_per_day(sandbox, backend):
    _, held, ids = sandbox
    qid = _queries(held, ids, ["easy"])[0]
    # a model that always takes the first option: the cheapest restaurant for every meal -> repeats
    first = ScriptedBackend(lambda m: (_options(m) or [", ".join(OBJECTIVES)])[0])  # (the lead lists no options)
    fr = run_okr(held, qid, first, OKRSettings(levels=2, rounds=2))
    res = fr.result
    revisions = [n for n in res.order if ".revise" in n]
    assert revisions, res.order
    reviews = res.trace.db["okr"]["reviews"]["r1"]
    assert any("diverse_restaurants" in r["failed"] for r in reviews.values())
    ev = held.reward_plans([(qid, fr.plan)])[0].evaluation
    assert ev.commonsense["diverse_restaurants"].passed, ev.violations()
    # levels=3: one key-result agent per day under every key result (route and budget excepted)
    fr3 = run_okr(held, qid, backend, OKRSettings(levels=3, rounds=1))
    agents = fr3.result.trace.db["okr"]["agents"]
    day_agents = [a for a in agents if a["level"] == 3]
    assert day_agents and {a["day"] for a in day_agents} == {1, 2, 3}
    assert fr3.plan is not None
    # criteria=model: the model writes each agent's criterion and judges the solution against it
    frm = run_okr(held, qid, backend, OKRSettings(levels=1, rounds=1, criteria="model", criterion_tokens=4))
    names = frm.result.order
    assert [n for n in names if n.endswith(".criterion")] == [f"{o}.criterion" for o in
                                                              frm.result.trace.db["okr"]["objectives"]]
    assert sum(n.endswith(".review") for n in names) == len(OBJECTIVES) and frm.plan is not None


# ------------------------------------------------------------------------------------- ReAct
def test_react_calls_tools_and_feeds_observations_back(sandbox, backend, tmp_path):
    _, held, ids = sandbox
    qid = _queries(held, ids, ["easy"])[0]
    q = held.get_query(qid)
    dest = held.candidates(qid).route_cities[0]
    script = [f"AccommodationSearch[{dest}]", f"RestaurantSearch[{dest}]", f"AttractionSearch[{dest}]",
              f"GoogleDistanceMatrix[{q.org}, {dest}, self-driving]",
              f"GoogleDistanceMatrix[{dest}, {q.org}, self-driving]", FINISH]
    steer = Steered(backend,
                    lambda messages, options: script[sum("Action" in m[-1]["content"] for m in steer.calls) - 1])
    path = tmp_path / "react.json"
    fr = run_react(held, qid, steer, trace_path=path)
    assert fr.extra["actions"] == script[:-1]
    trace = load_trace(path)
    assert [n.name for n in trace.nodes] == [f"step{k}.act" for k in range(1, 7)] + ["plan"]
    # each observation is the tool's own output, fed into the next step's prompt
    first_obs = held.tools.call(script[0])
    prompt2 = trace.node("step2.act").attempts[0].messages[-1]["content"]
    assert f"Action 1: {script[0]}" in prompt2 and first_obs[:100] in prompt2
    assert f"Action 3: {script[2]}" in trace.node("step4.act").attempts[0].messages[-1]["content"]
    assert script[0] not in _options(trace.node("step2.act").attempts[0].messages)  # no search twice
    # the plan is decoded under the grammar of the gathered entities only
    assert fr.plan is not None
    ev = held.reward_plans([(qid, fr.plan)])[0].evaluation
    assert ev.delivered and ev.commonsense["within_sandbox"].passed and ev.commonsense["complete_information"].passed
    gathered = {r.text for r in TravelReAct(held, qid, backend).cat.restaurants(dest)}
    assert {d[m] for d in fr.plan for m in ("breakfast", "lunch", "dinner")} - {"-"} <= gathered
    assert all("Self-driving" in d["transportation"] for d in fr.plan if d["transportation"] != "-")
    step_plan = dict(fr.result.constrained())["plan"]
    rescored = rescore(backend.model, backend.tokenizer, [step_plan]).detach()  # (it keeps the graph, for training)
    assert float(rescored) == pytest.approx(step_plan.logprob, abs=1e-4)

    # with the planner choosing: its actions are constrained choices, observations fed back, the loop bounded
    fr = run_react(held, qid, backend, ReActSettings(max_steps=3, think_tokens=3))
    order = fr.result.order
    assert order[:2] == ["step1.think", "step1.act"] and len([n for n in order if n.endswith(".act")]) <= 3
    for k, action in enumerate(fr.extra["actions"], 1):
        nxt = fr.result.trace.node(f"step{k + 1}.act") if f"step{k + 1}.act" in order else None
        if nxt is not None:
            assert f"Action {k}: {action}" in nxt.attempts[0].messages[-1]["content"]
    if fr.plan is None:  # it did not gather enough for a complete itinerary: nothing delivered
        assert "not enough" in fr.error


# -------------------------------------------------------------------------------------- flat
def test_flat_baseline_is_one_constrained_decode_of_the_whole_plan(sandbox, planner, backend):
    _, held, ids = sandbox
    qid = ids[0]
    fr = run_flat(held, qid, backend)
    assert fr.result.order == ["plan"] and fr.plan is not None
    assert held.reward_plans([(qid, fr.plan)])[0].evaluation.delivered
    (_, c), = fr.result.constrained()
    assert c.decoded.grammar is held.grammar(planner.tokenizer, qid)
    assert float(rescore(planner.model, planner.tokenizer, [c]).detach()) == pytest.approx(c.logprob, abs=1e-4)
    # a backend without grammars writes JSON text, re-asked with the parse error when it is not a plan
    ref = held.reference_plan(qid)
    scripted = ScriptedBackend(["a plan", ref])
    fr = run_flat(held, qid, scripted)
    assert fr.plan == json.loads(ref) and "That is not a plan" in scripted.calls[1][-1]["content"]


# ------------------------------------------------------------------------------- evaluation
def test_flow_config_overrides_errors_and_dry_run(tmp_path):
    cfg, flow = load_flow_config(["config=configs/travel-mtp.yaml", "seed=3", "flow.methods=[mtp,okr]",
                                  "flow.limit=2", "flow.okr.levels=3", "env.travel.days=[3]"])
    assert cfg.env.name == "travel" and cfg.env.travel.days == [3] and cfg.seed == 3
    assert flow.methods == ["mtp", "okr"] and flow.limit == 2 and flow.okr.levels == 3
    assert flow.backend.seed == 3  # ${seed} in the flow section sees the overridden seed
    for args, message in ((["flow.methods=[]"], "'flow.methods'"), (["flow.okr.levels=4"], "'flow.okr.levels'"),
                          (["flow.mtp.nope=1"], "flow.mtp.nope"), (["flow.backend.kind=hf"], "'flow.backend.model'"),
                          (["rltf.stepz=3"], "'rltf.stepz'")):
        with pytest.raises(ConfigError, match=re.escape(message)):
            load_flow_config(["config=configs/travel-mtp.yaml", *args])
    def check(section: dict, obj, prefix="flow."):  # every key a shipped config mentions is set
        for key, value in section.items():
            got = getattr(obj, key)
            if isinstance(value, dict):
                check(value, got, f"{prefix}{key}.")
            elif not (isinstance(value, str) and value.startswith("${")):
                assert got == value, f"{prefix}{key}"

    for name in ("travel-mtp", "travel-okr", "travel-react", "travel-flat-flow", "travel-mtp-hf", "travel-okr-hf",
                 "travel-react-hf", "travel-mtp-openai", "travel-okr-openai", "travel-react-openai"):
        cfg, flow = load_flow_config([f"config=configs/{name}.yaml"])
        check(yaml.safe_load(Path(f"configs/{name}.yaml").read_text())["flow"], flow)
        assert cfg.env.name == "travel" and flow.enabled and flow.methods == [name.split("-")[1]]
    out = io.StringIO()
    with contextlib.redirect_stdout(out):
        assert main(["config=configs/travel-mtp-hf.yaml", "dry_run=true", "flow.methods=[mtp,okr,react,flat]"]) is None
    text = out.getvalue()
    assert "nothing was loaded" in text and "backend     hf:" in text
    for node in ("manager.route", "supervise.<task>", "deliverer", "lead.objectives", "step<k>.act", "plan"):
        assert node in text
    assert "supervise.<task>" not in describe_flows(*load_flow_config(["config=configs/travel-mtp.yaml"]))


def test_evaluate_flows_writes_the_table_and_traces(sandbox, backend, tmp_path):
    train, held, _ = sandbox
    cfg, flow = load_flow_config(["config=configs/travel-mtp.yaml", f"output_dir={tmp_path}", "run_name=ev",
                                  "env.travel.days=[3]", "flow.methods=[mtp,okr,react,flat]", "flow.limit=2",
                                  "flow.trace_queries=1", "flow.react.max_steps=2"])
    lines: list[str] = []
    summary = evaluate_flows(cfg, flow, backend=backend, envs_pair=(train, held), log=lines.append)
    table = summary["table"]
    assert list(table) == ["mtp", "okr", "react", "flat", "solver"]
    assert table["solver"]["final pass"] == 1.0 and table["mtp"]["delivery"] == 1.0
    assert table["mtp"]["decisions/query"] >= 10 and table["mtp"]["tokens/query"] > 0
    md = (tmp_path / "ev" / "flow_eval.md").read_text()
    assert "| method | delivery | commonsense micro" in md and "| okr |" in md
    data = json.loads((tmp_path / "ev" / "flow_eval.json").read_text())
    rec = data["results"]["mtp"][0]
    assert rec["trace"] == "traces/mtp/query0.json" or rec["trace"].startswith("traces/mtp/")  # in the run folder
    assert load_trace(tmp_path / "ev" / rec["trace"]).node("deliverer").status == "ok"
    assert data["results"]["mtp"][1]["trace"] is None and rec["plan"] is not None
    assert lines[-1].startswith("held-out final pass: mtp=")
