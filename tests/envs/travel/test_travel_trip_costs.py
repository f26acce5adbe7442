"""The travel domain the agent flows use, beside the solver (envs/travel: catalog, routes,
trip_costs, repair, blame): trip costs agree with the exact solver, the budget repair keeps the
local constraints, blame names the items a failed constraint points at."""

from __future__ import annotations

from dataclasses import dataclass

import pytest

import envs
from envs.travel.blame import blamed_items
from envs.travel.catalog import SKIP, Catalog
from envs.travel.config import TravelEnvConfig
from envs.travel.local_checks import covered_cuisines, transport_problems
from envs.travel.registration import TravelSection
from envs.travel.repair import repair, repaired_variants, valid_swap
from envs.travel.route_costs import RouteCosts
from envs.travel.routes import Route, city_orders, families, schedules
from envs.travel.solver import TravelSolver
from envs.travel.trip_costs import TripCosts, choice_cost, plan_cost

ENV_CFG = TravelSection(travel=TravelEnvConfig(days=[3, 5]))


@dataclass
class Item:
    kind: str
    city: str = ""
    day: int = 1
    days: tuple[int, ...] = ()
    leg: tuple[str, str] = ("", "")


@pytest.fixture(scope="module")
def sandbox():
    train, _ = envs.make_train_and_held_out(ENV_CFG)
    ids = [t.id for t in train.tasks()]
    five = next(i for i in ids if train.get_query(i).days == 5)
    return train, ids[0], five


def _solved(env, qid):
    cat = Catalog(env, qid)
    res = TravelSolver(env.index).solve(cat.q)
    route = Route(cat.q.org, tuple(res.cities), tuple(res.move_days), cat.q.days)
    for _, day, a, b in route.legs():  # the catalog knows an option once a tool call returned it
        cat.transport(a, b, day)
    for c in route.cities:
        cat.hotels(c), cat.restaurants(c), cat.attractions(c)
    return cat, res, route


def test_trip_costs_bound_the_solver_and_plan_cost_is_the_budgets_arithmetic(sandbox):
    env, _, qid = sandbox
    cat, res, route = _solved(env, qid)
    costs = TripCosts(env, cat)
    assert plan_cost(cat, res.plan) == pytest.approx(res.cost, rel=1e-9)
    bound = costs.route(route)
    assert bound == RouteCosts(env.index, cat.q).lower_bound(route.cities, route.moves)
    assert bound <= res.cost + 1e-6  # a lower bound of the optimum along the optimum's own route
    # a city order costs its cheapest schedule; the optimum's order is among the ones the sandbox allows
    assert route.cities in city_orders(cat)
    assert costs.city_order(route.cities) == min(costs.route(r) for r in schedules(cat, route.cities)) <= bound
    for fam in families(cat, route):
        per_leg = [min(o.cost for o in cat.transport(a, b, d) if not transport_problems(o, cat.q, fam))
                   for _, d, a, b in route.legs()]
        assert costs.family_transport(route, fam) == pytest.approx(sum(per_leg), rel=1e-12)
    assert costs.family_transport(route, "self-driving") == float("inf") or "self-driving" in families(cat, route)


def _dearest_meals(env, qid):
    """A 5-day trip's full-day meals, each the dearest restaurant not chosen before, plus its stays."""
    cat, _, route = _solved(env, qid)
    items, choice, alternatives = {}, {}, {}
    for j, c, first, n in route.stays():
        sid = f"stay{j}"
        items[sid] = Item("stay", c, first, tuple(range(first, first + n)))
        alternatives[sid] = sorted(cat.hotels(c), key=lambda o: o.cost)
        choice[sid] = alternatives[sid][-1].text
    for d, c in route.full_days():
        for m in ("breakfast", "lunch", "dinner"):
            mid = f"day{d}.{m}"
            items[mid] = Item("meal", c, d)
            alternatives[mid] = sorted(cat.restaurants(c), key=lambda o: o.cost)
            choice[mid] = next(o.text for o in reversed(alternatives[mid]) if o.text not in choice.values())
    return cat, items, choice, alternatives


def test_repair_swaps_to_cheaper_options_without_repeating_a_restaurant(sandbox):
    env, _, qid = sandbox
    cat, items, choice, alternatives = _dearest_meals(env, qid)
    dear = choice_cost(cat, choice, items)
    stays = sum(cat.lookup(t).cost * len(items[k].days) for k, t in choice.items() if items[k].kind == "stay")
    assert dear == pytest.approx(stays + sum(cat.lookup(t).cost for k, t in choice.items()
                                             if items[k].kind == "meal"), rel=1e-12)
    cheapest = repair(cat, 0.0, choice, items, alternatives, ("stay", "meal"))  # as cheap as the swaps go
    budget = (dear + choice_cost(cat, cheapest, items)) / 2
    fixed = repair(cat, budget, choice, items, alternatives, ("stay", "meal"))
    assert choice_cost(cat, fixed, items) <= budget < dear
    meals = [t for k, t in fixed.items() if items[k].kind == "meal"]
    assert len(meals) == len(set(meals))  # no restaurant twice
    assert covered_cuisines(cat, meals) >= covered_cuisines(cat, [t for k, t in choice.items()
                                                                  if items[k].kind == "meal"])
    only_meals = repair(cat, budget, choice, items, alternatives, ("meal",))
    assert all(only_meals[k] == choice[k] for k in items if items[k].kind == "stay")
    # a meal swap to a restaurant another meal holds is refused; skipping a meal never repeats one
    a, b = [k for k in items if items[k].kind == "meal"][:2]
    assert not valid_swap(cat, items, choice, a, cat.lookup(choice[b]))
    assert valid_swap(cat, items, choice, a, SKIP) == (not cat.q.local_constraint.get("cuisine"))
    # the offered variants: distinct itineraries within the budget, or the cheapest marked over budget
    offer = repaired_variants(cat, budget, choice, items, alternatives)
    assert offer and all(v["within_budget"] and v["cost"] <= budget for v in offer)
    (over,) = repaired_variants(cat, 0.0, choice, items, alternatives)
    assert over["label"].startswith("over budget: ") and not over["within_budget"]


def test_blame_names_the_repeats_and_the_dearest_savings(sandbox):
    env, _, qid = sandbox
    cat, items, choice, alternatives = _dearest_meals(env, qid)
    meals = sorted((k for k in items if items[k].kind == "meal"), key=lambda k: (items[k].day, k))
    first, later = meals[0], meals[-1]
    repeated = dict(choice, **{later: choice[first]})
    assert blamed_items(cat, items, repeated, "diverse_restaurants") == [later]
    assert blamed_items(cat, items, choice, "diverse_restaurants") == []
    savings = blamed_items(cat, items, choice, "budget")
    saved = {k: (cat.lookup(choice[k]).cost - alternatives[k][0].cost) * max(1, len(items[k].days)) for k in savings}
    assert savings and all(v > 0 for v in saved.values())
    assert [saved[k] for k in savings] == sorted(saved.values(), reverse=True)  # the largest saving first
    cheapest = {k: alternatives[k][0].text for k in choice}
    assert blamed_items(cat, items, cheapest, "budget") == []
