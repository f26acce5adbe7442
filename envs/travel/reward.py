"""The travel env's shaped reward, defined once: a plan's evaluation and the reward weights
(:class:`envs.travel.config.RewardSettings`, the ``env.travel.reward`` settings) -> a number in [0, 1].

The env (:meth:`envs.travel.env.TravelPlannerEnv.reward_plans`) scores with :func:`plan_reward`
and the factory's ``describe`` prints :func:`reward_formula`::

    reward = (final_pass * passed all + commonsense * commonsense passed / len(COMMONSENSE)
              + hard * hard passed / hard set + constraints * weighted micro pass) / (sum of the weights)

The default weights (0.5 / 0.25 / 0.25 / 0) leave out the last term. The *weighted micro pass*
(:func:`micro_pass`) is the plan's official micro pass fraction over every constraint ``eval.py``
counts for the query -- 8 commonsense, the budget and the local constraints of the query's level it
sets (:func:`envs.travel.official_metrics.counted_constraints`, which the env passes in) -- each
weighted by ``constraint_weights`` (1 when not named).
"""

from __future__ import annotations

from collections.abc import Sequence

from envs.travel.config import RewardSettings
from envs.travel.verdicts import COMMONSENSE, PlanEvaluation


def micro_pass(weights: RewardSettings, ev: PlanEvaluation, counted: Sequence[str]) -> float:
    """The plan's weighted micro pass fraction: ``sum w_c * passed_c / sum w_c`` over ``counted``, the
    constraints ``eval.py`` counts for the plan's query
    (:func:`envs.travel.official_metrics.counted_constraints`), ``w_c = constraint_weights.get(c, 1)``;
    a hard constraint not judged counts as failed; 0 for a plan that is not delivered (or no weight)."""
    if not ev.delivered:
        return 0.0
    verdicts = {**{k: v.passed for k, v in ev.commonsense.items()},
                **({} if ev.hard is None else {k: v.passed for k, v in ev.hard.items()})}
    cw = weights.constraint_weights
    names = tuple(counted)
    weight = {c: float(cw.get(c, 1.0)) for c in names}
    total = sum(weight.values())
    if total <= 0:
        return 0.0
    return sum(w for c, w in weight.items() if verdicts.get(c) is True) / total


def plan_reward(weights: RewardSettings, ev: PlanEvaluation, counted: Sequence[str] | None = None) -> float:
    """The plan's reward in [0, 1]: ``(final_pass * passed all + commonsense * commonsense passed /
    len(COMMONSENSE) + hard * hard passed / hard set + constraints * micro_pass) / (sum of the
    weights)``, where the hard set counts the budget plus the local constraints the query sets (hard
    constraints not judged count as failed); 0 for a plan that is not delivered. ``counted`` (the
    constraints ``eval.py`` counts for the plan's query) is needed only when ``weights.constraints`` is
    set (:func:`micro_pass`)."""
    if not ev.delivered:
        return 0.0
    w = weights
    r = (w.final_pass * float(ev.final_pass) + w.commonsense * ev.commonsense_passed / len(COMMONSENSE)
         + w.hard * ev.hard_passed / max(1, ev.hard_applicable))
    if w.constraints:
        if counted is None:
            raise ValueError("reward.constraints is set: plan_reward needs the constraints counted for the query")
        r += w.constraints * micro_pass(w, ev, counted)
    return float(r / w.total)


def reward_formula(weights: RewardSettings) -> str:
    """The reward with these weights, as text (what ``describe`` prints)."""
    w = weights
    extra = ""
    if w.constraints:
        named = ", ".join(f"{k} {v:g}" for k, v in sorted(w.constraint_weights.items()))
        extra = f" + {w.constraints:g}*micro pass over eval.py's constraints" + (f" (weights {named})" if named else "")
    return (f"({w.final_pass:g}*final pass + {w.commonsense:g}*commonsense passed/{len(COMMONSENSE)} + "
            f"{w.hard:g}*hard passed/set{extra}) / {w.total:g}")
