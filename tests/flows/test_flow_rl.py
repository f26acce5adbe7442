"""RL inside flows: a pass is a trajectory of constrained decisions with exact log-probs; the
update weights each decision by its trajectory's advantage (plus its meta-task's local result
under local+global credit); the flow trainer checkpoints, resumes exactly and trains per-role
LoRA adapters; the main job runs a flow end to end."""

import contextlib
import copy
import io
import json
import math

import numpy as np
import pytest
import torch

import envs as env_factory
from constrained_decoding.logprobs import plan_logprobs
from envs.travel.flows.domain import TRAVEL_FLOWS
from envs.travel.flows.mtp import TravelMTP
from envs.travel.flows.teacher import SolverTeacher
from rltf.config.loading import ConfigError, load_config
from rltf.flows import Flow
from rltf.flows.backends.base import Sampling
from rltf.flows.backends.planner import PlannerBackend, rescore
from rltf.flows.engine.choice import choice_grammar
from rltf.flows.training.teacher import TeacherBackend, collect_demonstrations
from rltf.flows.training.trajectory import Decision, Trajectory, decision_weights, roll_out
from rltf.planners.loading import load_planner
from rltf.planners.tokenizer import tokenizer_texts_for

# the travel flows cut their prompts to planner.max_prompt_tokens by design (their recipe,
# rltf/flows/evaluate.py, filters the same class); tests/rl/test_rl_correctness.py asserts the warning itself
pytestmark = [pytest.mark.usefixtures("one_torch_thread"),
              pytest.mark.filterwarnings("ignore::constrained_decoding.prompts.PromptTruncationWarning")]

TINY = ["config=configs/travel-mtp.yaml", "env.travel.days=[3]", "env.travel.levels=[easy]",
        "planner.embedded.d_model=32", "planner.embedded.d_ff=64", "planner.embedded.num_layers=1",
        "planner.embedded.num_heads=2", "planner.embedded.vocab_size=2000", "sft.epochs=1", "sft.batch_size=16",
        "rltf.steps=2", "rltf.tasks_per_batch=2", "rltf.k_samples=2", "rltf.lr=0.01", "rltf.checkpoint_every=1",
        "rltf.lr_schedule=constant", "rltf.entropy_coef=0.05", "flow.limit=2", "flow.trace_queries=1",
        "logging.progress_bar=false"]


def tiny_cfg(tmp_path, *extra):
    return load_config([*TINY, f"output_dir={tmp_path}", f"planner.embedded.dir={tmp_path / 'embedded'}", *extra])


@pytest.fixture(scope="module")
def world(tmp_path_factory):
    """The tiny travel config, its envs and an embedded planner (tests copy it before training)."""
    tmp = tmp_path_factory.mktemp("flow_rl")
    cfg = tiny_cfg(tmp)
    train, held = env_factory.make_train_and_held_out(cfg.env)
    planner = load_planner(cfg.planner, tokenizer_texts_for(train))
    return tmp, cfg, train, held, planner


# ------------------------------------------------------------------ trajectories are exact
def _two_step_flow(backend):
    """A tiny flow: pick a colour, then a shade of that colour (options depend on the first answer)."""
    flow = Flow(backend)
    flow.add_node("colour", "Pick a colour: red, blue or green.", choices=["red", "blue", "green"])
    flow.add_node("shade", "Pick a shade of the colour.", needs=["colour"],
                  compose=lambda ctx: [{"role": "user", "content": f"Pick a shade of {ctx.dependencies[0].answer}."}],
                  choices=lambda ctx: [f"dark {ctx.dependencies[0].answer}", f"light {ctx.dependencies[0].answer}"])
    return flow


def _forced_logprob(planner, path):
    """log π_c of one path of the tiny flow, computed apart: each decision forced, prompts recorded,
    then scored teacher-forced under its choice grammar."""
    answers = iter(path)
    teacher = TeacherBackend(PlannerBackend(planner).describe, lambda options: next(answers))
    result = _two_step_flow(teacher).run()
    comps = [result[n].completion for n in ("colour", "shade")]
    grammars = [choice_grammar(planner.tokenizer, teacher.options[(c.prompt, c.text)]) for c in comps]
    with torch.no_grad():
        lp = plan_logprobs(planner.model, planner.tokenizer, [c.prompt for c in comps], grammars,
                           [c.text for c in comps])
    return float(lp.sum())


def test_trajectory_logprob_is_the_sum_of_its_decisions_and_sums_to_one(world):
    _, _, _, _, planner = world
    paths = [(c, f"{s} {c}") for c in ("red", "blue", "green") for s in ("dark", "light")]
    probs = {p: math.exp(_forced_logprob(planner, p)) for p in paths}
    assert sum(probs.values()) == pytest.approx(1.0, rel=1e-4)  # π_c over every trajectory of the query
    backend = PlannerBackend(planner, sampling=Sampling(do_sample=True, temperature=1.0), seed=3)
    for _ in range(4):
        result = _two_step_flow(backend).run()
        steps = result.constrained()
        assert [n for n, _ in steps] == ["colour", "shade"]
        sampled = sum(c.logprob for _, c in steps)
        path = (steps[0][1].text, steps[1][1].text)
        assert sampled == pytest.approx(math.log(probs[path]), rel=1e-4, abs=1e-5)
        with torch.no_grad():
            again = rescore(planner.model, planner.tokenizer, [c for _, c in steps])
        assert float(again.sum()) == pytest.approx(sampled, rel=1e-4, abs=1e-5)


def test_the_update_moves_each_trajectory_in_the_direction_of_its_advantage(world):
    _, _, _, _, base = world
    planner = copy.deepcopy(base)
    backend = PlannerBackend(planner, sampling=Sampling(do_sample=True, temperature=1.0), seed=0)
    trajs, seen = [], set()
    while len(trajs) < 2:  # two different trajectories of the tiny flow
        steps = _two_step_flow(backend).run().constrained()
        key = tuple(c.text for _, c in steps)
        if key not in seen:
            seen.add(key)
            trajs.append(Trajectory(0, [Decision(n, "agent", c) for n, c in steps], 0.0, False))
    weights, _ = decision_weights(np.array([1.0, -1.0]), trajs, "global")
    assert list(weights) == [1.0, 1.0, -1.0, -1.0]  # every decision of a trajectory gets its advantage

    def traj_logps():
        with torch.no_grad():
            lp = rescore(planner.model, planner.tokenizer, [d.completion for t in trajs for d in t.decisions])
        return [float(lp[:2].sum()), float(lp[2:].sum())]

    before = traj_logps()
    opt = torch.optim.SGD(planner.model.parameters(), lr=0.05)
    lp = rescore(planner.model, planner.tokenizer, [d.completion for t in trajs for d in t.decisions])
    loss = -(torch.as_tensor(weights, dtype=torch.float32) * lp).sum() / 2
    loss.backward()
    opt.step()
    after = traj_logps()
    assert after[0] > before[0] and after[1] < before[1]


# ----------------------------------------------------------------------------- credit
def _mtp_pass(world, query_index=0):
    _, cfg, train, _, planner = world
    q = train.tasks()[query_index].id
    mtp = TravelMTP(train, q, PlannerBackend(planner), cfg.flow.mtp)
    fr = mtp.run()
    assert fr.plan is not None, fr.error
    return mtp, fr


def test_local_results_blame_only_the_meta_tasks_that_break_their_constraints(world):
    mtp, fr = _mtp_pass(world)
    local = fr.extra["local"]
    assert set(local) == set(mtp.outcomes) and all(0.0 <= v <= 1.0 for v in local.values())
    assert not any(k.startswith("manager") or k == "deliverer" for k in local)
    meals = [t for t in mtp.tasks.values() if t.kind == "meal" and not t.optional]
    a, b = meals[0].id, meals[1].id
    assert local[a] == local[b] == 1.0  # the executors only see options meeting their local constraints
    mtp.outcomes[b] = dict(mtp.outcomes[b], choice=mtp.outcomes[a]["choice"])  # the same restaurant twice
    changed = {k for k, v in mtp.local_results().items() if v != local[k]}
    wanted_cuisine = bool(mtp.q.local_constraint.get("cuisine"))
    assert {a, b} <= changed and (changed == {a, b} or wanted_cuisine and all(mtp.tasks[k].kind == "meal"
                                                                               for k in changed))


def test_local_credit_reaches_only_its_meta_tasks_decisions(world):
    _, cfg, train, _, planner = world
    traj = roll_out("mtp", train, train.tasks()[0].id, PlannerBackend(planner), cfg.flow)
    nodes = [d.node for d in traj.decisions]
    assert nodes[:3] == ["manager.route", "manager.schedule", "manager.transport"] and nodes[-1] == "deliverer"
    assert [d.local is None for d in traj.decisions] == [n.startswith("manager") or n == "deliverer" for n in nodes]
    for d in traj.decisions:
        if d.local is not None:
            d.local = 1.0
    ref, _ = decision_weights(np.array([0.3]), [traj], "local+global", local_mean=1.0)
    stay = nodes.index("stay1")
    traj.decisions[stay].local = 0.0
    w, _ = decision_weights(np.array([0.3]), [traj], "local+global", local_mean=1.0)
    assert np.flatnonzero(w != ref).tolist() == [stay] and w[stay] == pytest.approx(0.3 - 1.0)
    g, _ = decision_weights(np.array([0.3]), [traj], "global")
    assert np.all(g == 0.3)  # global credit: the trajectory's advantage everywhere


# -------------------------------------------------------------------------- warm start
def test_the_solver_teacher_demonstrates_passing_decompositions(world):
    _, cfg, train, _, planner = world
    ids = [t.id for t in train.tasks()[:3]]
    demos, taught = collect_demonstrations(train, ids, "mtp", PlannerBackend(planner).describe, cfg.flow)
    assert taught == {"final_pass": 1.0, "queries": 3.0}
    assert {d.role for d in demos} == {"manager", "executor", "deliverer"}
    teacher = SolverTeacher(train, ids[0])
    first = [d for d in demos if d.query == ids[0]]
    assert all(d.reference_plan in d.options for d in demos)
    assert sum(d.reference_plan in teacher.targets for d in first) >= len(first) - 2  # the solver's own choices


def test_the_managers_options_show_what_the_cheapest_trip_through_them_costs(world):
    import dataclasses
    import re

    _, cfg, train, _, planner = world
    i = train.tasks()[0].id
    on, _ = collect_demonstrations(train, [i], "mtp", PlannerBackend(planner).describe, cfg.flow)
    off_flow = dataclasses.replace(cfg.flow, mtp=dataclasses.replace(cfg.flow.mtp, cost_hints=False))
    off, _ = collect_demonstrations(train, [i], "mtp", PlannerBackend(planner).describe, off_flow)
    budget = train.get_query(i).budget
    for d_on, d_off in zip(on, off):
        if d_on.node.startswith("manager."):
            lines = [ln for ln in d_on.description.splitlines() if ln.startswith("- ")]
            assert lines and all(re.search(rf"from \$\d+, budget \${budget}\)$", ln) for ln in lines), lines
            assert "budget $" not in "".join(ln for ln in d_off.description.splitlines() if ln.startswith("- "))
        else:
            assert d_on.description == d_off.description


def test_the_managers_options_can_be_the_cheapest_first(world, tmp_path):
    import dataclasses
    import re

    planner = world[4]
    cfg = tiny_cfg(tmp_path, "env.travel.days=[5]")  # 2-city trips: several routes and schedules
    train, _ = env_factory.make_train_and_held_out(cfg.env)
    describe = PlannerBackend(planner).describe

    answers = {}

    def manager_options(flow, i):
        demos, _ = collect_demonstrations(train, [i], "mtp", describe, flow)
        answers.update({(flow.mtp.manager_options, d.node): (d.reference_plan, d.options) for d in demos})
        return {d.node: [ln for ln in d.description.splitlines() if ln.startswith("- ")]
                for d in demos if d.node in ("manager.route", "manager.schedule")}

    every = dataclasses.replace(cfg.flow, mtp=dataclasses.replace(cfg.flow.mtp, manager_options=0))
    two = dataclasses.replace(cfg.flow, mtp=dataclasses.replace(cfg.flow.mtp, manager_options=2))
    # a query whose route has several options (a multi-city trip)
    i = next(t.id for t in train.tasks() if len(manager_options(every, t.id).get("manager.route", [])) >= 3)
    full, short = manager_options(every, i), manager_options(two, i)
    cost = lambda ln: int(re.search(r"from \$(\d+),", ln).group(1))  # noqa: E731
    assert len(short["manager.route"]) == 2
    assert [cost(ln) for ln in short["manager.route"]] == sorted(cost(ln) for ln in full["manager.route"])[:2]
    assert [cost(ln) for ln in short["manager.schedule"]] == sorted(cost(ln) for ln in short["manager.schedule"])
    assert 1 <= len(short["manager.schedule"]) <= 2
    # the choices are the options shown, and the teacher's (the minimum-cost solver's) route is among them
    answer, options = answers[(2, "manager.route")]
    assert len(options) == 2 and all(ln[2:].startswith(o) for ln, o in zip(short["manager.route"], options))
    assert answer in options and answer == answers[(0, "manager.route")][0]


# ----------------------------------------------------------------------------- trainer
def _trainer(world, tmp, *extra, planner=None, roles=None):
    from accelerate import Accelerator

    from rltf.flows.training.trainer import FlowRLTFTrainer

    _, _, train, _, base = world
    cfg = tiny_cfg(tmp, "run_name=flow", *extra)
    planner = planner if planner is not None else copy.deepcopy(base)
    return FlowRLTFTrainer(cfg, planner, train, Accelerator(cpu=True), roles=roles), planner


def _weights(model):
    return torch.cat([p.detach().flatten() for p in model.parameters()])


def test_flow_training_step_and_kill_and_resume_equality(world, tmp_path):
    a, planner_a = _trainer(world, tmp_path / "a")
    rows = [a.train_step() for _ in range(2)]
    a.save()
    for row in rows:
        assert 0.0 <= row["train/reward"] <= 1.0 and row["train/decisions"] >= 11
        assert row["train/logprob_mismatch"] < 1e-3  # the sampler's log π_c is the scorer's
        assert {"role/manager/reward", "role/executor/reward", "role/deliverer/reward"} <= set(row)
    assert not torch.equal(_weights(planner_a.model), _weights(world[4].model))  # it learned something
    # killed after step 1, resumed: the same weights as the uninterrupted run
    b, _ = _trainer(world, tmp_path / "b", "rltf.steps=1")
    b.train()
    c, planner_c = _trainer(world, tmp_path / "b")
    assert c.resume() and c.step == 1
    c.train()
    assert c.step == 2
    torch.testing.assert_close(_weights(planner_c.model), _weights(planner_a.model), rtol=1e-5, atol=1e-7)


def test_local_plus_global_credit_trains(world, tmp_path):
    t, _ = _trainer(world, tmp_path, "flow.credit=local+global")
    row = t.train_step()
    assert 0.0 <= row["train/local"] <= 1.0


def test_per_role_lora_adapters_train_together_and_reload(world, tmp_path):
    from rltf.flows.training.roles import RoleAdapters
    from rltf.planners.loading import apply_lora
    from rltf.planners.planner import Planner
    from rltf.run.checkpoint import MODEL_DIR

    _, _, _, _, base = world
    planner = copy.deepcopy(base)
    planner.model = apply_lora(planner.model, load_config(["planner.lora.enabled=true"]).planner.lora, True)
    roles = RoleAdapters.attach(planner, TRAVEL_FLOWS.methods["mtp"])
    before = {r: [p.detach().clone() for p in roles.parameters(r)] for r in roles.names}
    t, _ = _trainer(world, tmp_path, "planner.lora.enabled=true", "flow.roles=lora", planner=planner, roles=roles)
    t.train_step()
    # a role's adapter moves iff one of its decisions had a real choice (a single option has log π = 0)
    chose = {r: any(len(d.completion.decoded.grammar.options) > 1 for tr in t.last_trajectories
                    for d in tr.decisions if roles.role_of(d.node) == r) for r in roles.names}
    assert chose["manager"] and chose["executor"]
    for r in roles.names:  # the adapters of every role that chose moved, in one optimizer step
        moved = any(not torch.equal(p, q) for p, q in zip(roles.parameters(r), before[r]))
        assert moved == chose[r], r
    t.save()
    ckpt = tmp_path / "flow" / "rltf" / "checkpoint-1" / MODEL_DIR
    assert all((ckpt / r).is_dir() for r in roles.names)
    again = Planner.from_pretrained(ckpt)
    reloaded = RoleAdapters.attach(again, TRAVEL_FLOWS.methods["mtp"])
    reloaded.load(ckpt)
    for r in roles.names:
        for p, q in zip(roles.parameters(r), reloaded.parameters(r)):
            torch.testing.assert_close(p, q)


@pytest.mark.parametrize("roles", ["shared", "lora"])
def test_kl_to_the_start_policy_in_flow_training(world, tmp_path, roles):
    """rltf.kl_coef > 0 in a flow: the reference is the policy training starts from (a frozen copy,
    or the base with every role adapter disabled), so the first step's KL is 0 and, once the
    weights moved, the KL of the next step's trajectories is not; the reference itself stays put."""
    from rltf.flows.training.roles import RoleAdapters
    from rltf.planners.loading import apply_lora

    _, _, _, _, base = world
    extra, planner, role_adapters = ["rltf.kl_coef=0.5"], copy.deepcopy(base), None
    if roles == "lora":
        planner.model = apply_lora(planner.model, load_config(["planner.lora.enabled=true"]).planner.lora, True)
        role_adapters = RoleAdapters.attach(planner, TRAVEL_FLOWS.methods["mtp"])
        extra += ["planner.lora.enabled=true", "flow.roles=lora"]
    t, planner = _trainer(world, tmp_path, *extra, planner=planner, roles=role_adapters)
    start = _weights(base.model)
    first = t.train_step()
    assert first["train/kl"] == pytest.approx(0.0, abs=1e-5)
    second = t.train_step()
    assert abs(second["train/kl"]) > 1e-6 and math.isfinite(second["train/kl"])
    ids = torch.tensor([[3, 4, 5, 6]])
    with t.state.reference() as ref_model:  # still the start policy: the same outputs as the untouched base
        torch.testing.assert_close(ref_model(input_ids=ids, decoder_input_ids=ids).logits,
                                   base.model(input_ids=ids, decoder_input_ids=ids).logits, rtol=1e-5, atol=1e-6)
    assert not torch.allclose(planner.model(input_ids=ids, decoder_input_ids=ids).logits,
                              base.model(input_ids=ids, decoder_input_ids=ids).logits)
    assert start.equal(_weights(base.model))


@pytest.mark.slow
def test_two_process_flow_training(world, tmp_path):
    from tests.two_processes import torchrun2

    _, _, _, _, planner = world
    planner.save_pretrained(tmp_path / "planner")
    torchrun2("tests/flow_ddp_worker.py", tmp_path, tmp_path / "planner")
    r0, r1 = (json.loads((tmp_path / f"rank{r}.json").read_text()) for r in (0, 1))
    assert r0["world"] == r1["world"] == 2
    assert r0["params"] == r1["params"] and r0["sum"] == r1["sum"]  # gradients were averaged
    assert r0["rewards"] == r1["rewards"]  # the logged reward is every process's trajectories'
    assert all(a != b for a, b in zip(r0["tasks"], r1["tasks"]))  # each rank ran its own queries
    assert sorted(p.name for p in (tmp_path / "ddp" / "rltf").iterdir()) == ["checkpoint-2", "latest"]


# --------------------------------------------------------------------------------- config
@pytest.mark.parametrize("override, message", [
    ("flow.methods=[mtp,okr]", "'flow.methods'"),
    ("flow.methods=[react]", "'flow.methods'"),
    ("flow.credit=local+global flow.methods=[okr]", "local\\+global"),
    ("flow.roles=lora", "planner.lora.enabled"),
    ("flow.credit=sideways", "flow.credit"),
])
def test_flow_job_settings_that_cannot_train_are_refused(tmp_path, override, message):
    from rltf.stages.flow_job import check_flow_job

    with pytest.raises(ConfigError, match=message):
        check_flow_job(tiny_cfg(tmp_path, *override.split()), TRAVEL_FLOWS)


# ------------------------------------------------------------------------------- main job
@pytest.mark.slow
def test_the_main_job_trains_a_flow_end_to_end(tmp_path):
    from train.rltf import run

    out = io.StringIO()
    with contextlib.redirect_stdout(out):
        summary = run(tiny_cfg(tmp_path, "run_name=mtp"))
    last = out.getvalue().strip().splitlines()[-1]
    assert last.startswith("held-out final pass: finetuned=") and " rltf=" in last and last.endswith("solver=1.0000")
    assert set(summary["table"]) == {"finetuned", "rltf", "solver"}
    run_dir = tmp_path / "mtp"
    for name in ("flow_results.md", "flow_results.json", "rewards.png", "role_rewards.png", "rltf_history.json",
                 "sft/rltf_planner.json", "rltf/checkpoint-2"):
        assert (run_dir / name).exists(), name
    from rltf.comparison.suites import Arm, load_suite
    from rltf.stages.flow_job import read_flow_results

    back = read_flow_results(run_dir, Arm("mtp", "train/rltf.py", results="flow_results.json"))
    assert back["rows"]["solver"]["final pass"] == 1.0 and set(back["scores"]["rltf"]) == {str(i) for i in
                                                                                          summary["queries"]}
    assert set(back["task_values"]["solver"]["final pass"].values()) == {1.0}
    assert [a.name for a in load_suite("travel-flows").arms] == ["flat", "mtp-global", "mtp-local", "okr"]
    history = json.loads((run_dir / "rltf_history.json").read_text())
    assert len(history) == 2 and "role/executor/reward" in history[0]
    # resume=true after the end: SFT is reused, RLTF is finished, the table is the same
    out = io.StringIO()
    with contextlib.redirect_stdout(out):
        again = run(tiny_cfg(tmp_path, "run_name=mtp", "resume=true"))
    scores = lambda row: {k: v for k, v in row.items() if not k.endswith("/query") or k == "decisions/query"}  # noqa: E731
    assert scores(again["table"]["rltf"]) == scores(summary["table"]["rltf"])
