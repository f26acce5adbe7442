"""The agent patterns run over a domain the env hands to the core (issue 49 item 2): an env defined in
the tests (sorting three words) offers its own flow methods -- rltf's flat pattern and a one-choice
flow -- through ``flow_domain()``; the core runs them by name, scores their plans with the domain's
metrics, asks their roles, takes the warm start's answers from the domain's teacher, and refuses,
naming the env and the methods it offers, a method the domain does not offer or an env without
flows."""

from __future__ import annotations

import itertools
from collections.abc import Sequence

import pytest

from rltf.algorithms.registry import Registry
from rltf.config.flow import FlowSettings
from rltf.config.loading import ConfigError, load_config
from rltf.flows import ScriptedBackend
from rltf.flows.agents.agent_setup import delivered
from rltf.flows.agents.dispatch import run_method
from rltf.flows.agents.domain import FlowDomain, FlowMethod, FlowRun, check_methods, flow_domain_of
from rltf.flows.agents.flat import WholePlan, run_flat
from rltf.flows.engine.database import Database
from rltf.flows.engine.program import Ask, run_program
from rltf.flows.evaluation import evaluate_method, table_columns, table_markdown
from rltf.flows.training.teacher import TeacherBackend, plain_describe
from rltf.stages.flow_job import check_flow_job
from tests.envs.test_third_env import SortEnv


def _flat(env, query, backend, flow, **kw) -> FlowRun:
    task = env.get_task(query)
    plan = WholePlan(task, task.id, task.description, "You sort words.", "Answer with the words in order.",
                     parse=lambda text: text.strip())
    return run_flat(env, plan, backend, **kw)


def _choose(env, query, backend, flow, *, config=None, system_prompts=False, trace_path=None) -> FlowRun:
    """One choice among every order of the task's words."""
    task = env.get_task(query)
    orders = [" ".join(p) for p in itertools.permutations(task.words)]

    def program():
        return (yield Ask("sorter.order", task.description, choices=orders))

    pr = run_program(backend, program(), db=Database({"task": task.description}), config=config,
                     name=f"choose-q{task.id}", trace_path=trace_path)
    plan, error = delivered(pr)
    return FlowRun(plan, pr.result, error)


class SortTeacher:
    def __init__(self, env, query):
        self.answer = env.get_task(query).reference_plan

    def pick(self, options: Sequence[str]) -> str:
        return self.answer if self.answer in options else options[0]


class SortFlows:
    name = "sorting"
    methods = Registry("flow method", {
        "flat": FlowMethod("flat", _flat),
        "choose": FlowMethod("choose", _choose, lambda node: node.split(".")[0], ("sorter",), trainable=True),
    })
    columns = ("sorted",)

    def teacher(self, env, query) -> SortTeacher:
        return SortTeacher(env, query)

    def metrics(self, env, pairs) -> dict[str, float]:
        return {"sorted": sum(map(self.passed, env.reward_plans(pairs))) / len(pairs)}

    def passed(self, result) -> bool:
        return result.reward == 1.0

    def violations(self, result) -> dict[str, str]:
        return {} if result.valid else {"order": result.error}


class SortEnvWithFlows(SortEnv):
    def flow_domain(self) -> SortFlows:
        return SortFlows()


@pytest.fixture
def env():
    return SortEnvWithFlows(0, list(range(14)))


def test_the_core_runs_a_domains_methods_by_name(env):
    assert isinstance(env.flow_domain(), FlowDomain)
    task = env.get_task(3)
    backend = ScriptedBackend(lambda messages: " ".join(sorted(task.words)))
    fr = run_method("flat", env, 3, backend, FlowSettings())  # rltf's flat pattern on the domain's query
    assert fr.plan == task.reference_plan and fr.error is None
    assert backend.calls[0] == [{"role": "user", "content": f"{task.description}\nAnswer with the words in order."}]
    assert env.reward_plans([(3, fr.plan)])[0].reward == 1.0
    fr = run_method("choose", env, 3, ScriptedBackend(lambda messages: " ".join(task.words)), FlowSettings())
    assert fr.plan == " ".join(task.words)
    with pytest.raises(ValueError, match="unknown flow method 'mtp'; expected one of flat, choose"):
        run_method("mtp", env, 3, backend, FlowSettings())


def test_the_flow_table_scores_a_domains_plans_with_its_metrics(env):
    words = {i: env.get_task(i).words for i in (1, 2)}
    backend = ScriptedBackend(lambda m: " ".join(sorted(words[1])) if " ".join(words[1]) in m[-1]["content"]
                              else "not words")
    row, records = evaluate_method("flat", env, [1, 2], backend, FlowSettings(trace_queries=0))
    assert list(row) == list(table_columns(SortFlows())) and row["sorted"] == 0.5 and row["reward"] == 0.5
    assert [r["final_pass"] for r in records] == [True, False]
    assert records[1]["violations"] == {"order": "not an order of the task's words"}
    assert table_markdown({"flat": row}, "t").splitlines()[2].startswith("| method | sorted | reward |")


def test_the_warm_start_and_the_roles_come_from_the_domain(env):
    domain = flow_domain_of(env)
    method = domain.methods.lookup("choose")
    teacher_backend = TeacherBackend(plain_describe, domain.teacher(env, 5).pick)
    fr = method.run(env, 5, teacher_backend, FlowSettings())
    assert fr.plan == env.get_task(5).reference_plan  # the teacher's answer
    assert [method.role_of(n) for n in fr.result.results] == ["sorter"] and method.roles == ("sorter",)


def test_methods_the_domain_does_not_offer_are_refused_naming_the_env(env, tmp_path):
    domain = flow_domain_of(env, "sorting")
    with pytest.raises(ConfigError, match="the env 'sorting' offers the flow methods flat, choose"):
        check_methods(domain, ["flat", "okr"], "sorting")
    cfg = load_config([f"output_dir={tmp_path}", "config=configs/travel-mtp.yaml", "flow.methods=[flat]"])
    with pytest.raises(ConfigError, match="offers the trainable flow methods choose"):
        check_flow_job(cfg, domain)
    with pytest.raises(ConfigError, match="the env 'sorting' has no agent flows"):
        flow_domain_of(SortEnv(0, [0]), "sorting")  # the base class: no flow domain


def test_a_domains_own_method_names_pass_the_run_config(tmp_path):
    cfg = load_config([f"output_dir={tmp_path}", "config=configs/travel-mtp.yaml", "flow.methods=[choose]"])
    assert check_flow_job(cfg, SortFlows()) == "choose"  # the domain, not the config, knows its methods
    with pytest.raises(ConfigError, match="'flow.methods'"):
        load_config([f"output_dir={tmp_path}", "config=configs/travel-mtp.yaml", "flow.methods=[]"])
