"""The travel env's shaped reward, defined once: a plan's evaluation and the reward weights
(:class:`envs.travel.config.RewardSettings`, the ``env.travel.reward`` settings) -> a number in [0, 1].

The env (:meth:`envs.travel.env.TravelPlannerEnv.reward_plans`) scores with :func:`plan_reward`
and the factory's ``describe`` prints :func:`reward_formula`::

    reward = (final_pass * passed all + commonsense * commonsense passed / len(COMMONSENSE)
              + hard * hard passed / hard set) / (final_pass + commonsense + hard)
"""

from __future__ import annotations

from envs.travel.config import RewardSettings
from envs.travel.verdicts import COMMONSENSE, PlanEvaluation


def plan_reward(weights: RewardSettings, ev: PlanEvaluation) -> float:
    """The plan's reward in [0, 1]: ``(final_pass * passed all + commonsense * commonsense passed /
    len(COMMONSENSE) + hard * hard passed / hard set) / (sum of the weights)``, where the hard set
    counts the budget plus the local constraints the query sets (hard constraints not judged count
    as failed); 0 for a plan that is not delivered."""
    if not ev.delivered:
        return 0.0
    w = weights
    r = (w.final_pass * float(ev.final_pass) + w.commonsense * ev.commonsense_passed / len(COMMONSENSE)
         + w.hard * ev.hard_passed / max(1, ev.hard_applicable))
    return float(r / (w.final_pass + w.commonsense + w.hard))


def reward_formula(weights: RewardSettings) -> str:
    """The reward with these weights, as text (what ``describe`` prints)."""
    w = weights
    return (f"({w.final_pass:g}*final pass + {w.commonsense:g}*commonsense passed/{len(COMMONSENSE)} + "
            f"{w.hard:g}*hard passed/set) / {w.final_pass + w.commonsense + w.hard:g}")
