"""The travel reward's official micro pass term (env.travel.reward.constraints, constraint_weights; issue 51):
on a real query of the benchmark's train split it is the plan's pass fraction over the constraints eval.py
counts for the query (8 commonsense, the budget, the local constraints of its level it sets), a hard
constraint not judged failing, each constraint weighted by constraint_weights; the default reward is
unchanged. Skipped without the real train queries (RLTF_TRAVELPLANNER_QUERIES)."""

from __future__ import annotations

import json

import pytest

from envs.travel.config import RewardSettings, TravelConfigError, TravelEnvConfig
from envs.travel.factory import make_env
from envs.travel.official_metrics import counted_constraints, counted_hard_constraints, metrics
from envs.travel.reward import micro_pass, plan_reward
from envs.travel.verdicts import COMMONSENSE

MICRO = {"final_pass": 0.0, "commonsense": 0.0, "hard": 0.0, "constraints": 1.0}


@pytest.fixture(scope="module")
def hard_query(real_travel_queries):
    """The train part's hard query that sets the most local constraints, its env and its solver's plan."""
    config = TravelEnvConfig(database_dir="reference_information", queries_source=str(real_travel_queries),
                             queries_split="train", track="benchmark", official_quirks=True,
                             reward=RewardSettings(**MICRO))
    env = make_env(config, split="train:re-split:train")
    q = max((q for q in env.queries() if q.level == "hard"),
            key=lambda q: sum(v is not None for v in q.local_constraint.values()))
    return env, q, json.loads(env.reference_plan(q))


def _broken(plan: list[dict]) -> list[dict]:
    """Day 1 without transportation: fails non-conflicting transportation and complete information
    (so the hard constraints are not judged)."""
    days = [dict(d) for d in plan]
    days[0]["transportation"] = "-"
    return days


def test_the_micro_term_is_the_official_micro_pass_fraction(hard_query):
    env, q, plan = hard_query
    assert len(counted_constraints(q)) == len(COMMONSENSE) + counted_hard_constraints(q) >= len(COMMONSENSE) + 2
    for days, expected_fail in ((plan, set()), (_broken(plan), {"non_conflicting_transportation"})):
        ev = env.evaluator.evaluate(q, days)
        assert expected_fail <= set(ev.violations())
        m = metrics([q], [ev])  # eval.py's counts for one plan: micro rates over 8 and over the counted hard set
        h = counted_hard_constraints(q)
        official = (m["commonsense_micro"] * len(COMMONSENSE) + m["hard_micro"] * h) / (len(COMMONSENSE) + h)
        assert micro_pass(RewardSettings(**MICRO), ev, counted_constraints(q)) == pytest.approx(official)
        assert env.reward_plans([(q, days)])[0].reward == pytest.approx(official)  # the env pays it
    assert env.reward_plans([(q, plan)])[0].reward == 1.0
    assert env.reward_plans([(q, _broken(plan))])[0].reward < 8 / 12  # the hard constraints not judged: failed


def test_constraint_weights_put_the_reward_on_the_named_constraints(hard_query):
    env, q, plan = hard_query
    ev = env.evaluator.evaluate(q, _broken(plan))
    weights = {"non_conflicting_transportation": 5.0, "within_sandbox": 0.0}
    w = RewardSettings(**MICRO, constraint_weights=weights)
    verdicts = ev.verdicts()
    names = counted_constraints(q)
    total = sum(weights.get(c, 1.0) for c in names)
    expected = sum(weights.get(c, 1.0) for c in names if verdicts[c] is True) / total
    counted = counted_constraints(q)
    assert plan_reward(w, ev, counted) == pytest.approx(expected)
    assert plan_reward(w, ev, counted) < micro_pass(RewardSettings(**MICRO), ev, counted)  # the failure weighs more


def test_the_default_reward_is_unchanged(hard_query):
    env, q, plan = hard_query
    ev = env.evaluator.evaluate(q, _broken(plan))
    default = RewardSettings()
    assert default.constraints == 0 and default.constraint_weights == {}
    old = (0.5 * ev.final_pass + 0.25 * ev.commonsense_passed / 8 + 0.25 * ev.hard_passed / ev.hard_applicable)
    assert plan_reward(default, ev) == plan_reward(default, ev, counted_constraints(q)) == pytest.approx(old)
    with pytest.raises(ValueError, match="needs the constraints counted"):
        plan_reward(RewardSettings(**MICRO), ev)


def test_bad_constraint_weights_are_named():
    with pytest.raises(TravelConfigError, match="unknown constraint 'min_nights'.*minimum_nights_stay"):
        RewardSettings(constraint_weights={"min_nights": 1}).validate()
    with pytest.raises(TravelConfigError, match="'reward.constraint_weights.budget'"):
        RewardSettings(constraint_weights={"budget": -1}).validate()
    with pytest.raises(TravelConfigError, match="sum to 0"):
        RewardSettings(final_pass=0, commonsense=0, hard=0, constraints=0).validate()
    RewardSettings(final_pass=0, commonsense=0, hard=0, constraints=1).validate()
