"""The per-query tables the passes of one query share (envs.travel.catalog_memo, Catalog.derived):
the K passes of a query hit them (each search made once per query, each route option derived once),
a pass that mutates what it was handed does not leak into another pass, each pass's lookup table is
the one a lone catalog builds, and an MTP / OKR pass plans exactly what it did on its own catalog."""

from __future__ import annotations

import math
import random

import pytest

import envs
from envs.travel import catalog_memo
from envs.travel.catalog import Catalog, Option, money
from envs.travel.config import TravelEnvConfig
from envs.travel.flows.mtp import run_mtp
from envs.travel.flows.okr import run_okr
from envs.travel.registration import TravelSection
from envs.travel.routes import city_orders, families, schedules
from envs.travel.text import entity, flight_text
from envs.travel.trip_costs import TripCosts
from rltf.flows import Choices, Completion

ENV_CFG = TravelSection(travel=TravelEnvConfig(days=[3, 5]))


@pytest.fixture(scope="module")
def sandbox():
    train, _ = envs.make_train_and_held_out(ENV_CFG)
    ids = [t.id for t in train.tasks()]
    five = [i for i in ids if train.get_query(i).days == 5][:2]
    return train, [ids[0], *five]


@pytest.fixture(autouse=True)
def cold_memo():
    catalog_memo.clear()
    yield
    catalog_memo.clear()


class Picker:
    """Picks a seeded-random option at every choice (passes with different seeds take different
    routes), answering like a constrained decoder (value = the option)."""

    supports_grammar = True

    def __init__(self, seed: int):
        self.rng = random.Random(seed)

    def generate(self, batch, grammar=None, *, sampling=None):
        assert isinstance(grammar, Choices), grammar
        return [Completion(t, 0, 1, value=t) for t in [self.rng.choice(list(grammar.options)) for _ in batch]]


def _lone(env, query):
    """The reference: a catalog with tables of its own (what every pass had before the memo)."""
    return Catalog(env, query)


def test_the_passes_of_a_query_share_its_searches_and_route_options(sandbox, monkeypatch):
    env, ids = sandbox
    qid = ids[1]
    views = [catalog_memo.shared_catalog(env, qid) for _ in range(4)]
    assert all(v.tables is views[0].tables for v in views) and len({id(v) for v in views}) == 4
    assert catalog_memo.shared_catalog(env, ids[2]).tables is not views[0].tables  # another query: its own

    searches = []
    real = views[0].tools.flight_records
    monkeypatch.setattr(views[0].tools, "flight_records", lambda *a: searches.append(a) or real(*a))
    derived = []
    orig = Catalog.derived

    def counting(self, key, compute):
        return orig(self, key, lambda: derived.append(key) or compute())
    monkeypatch.setattr(Catalog, "derived", counting)

    first = city_orders(views[0])
    n_searches, n_derived = len(searches), len(derived)
    assert first and n_searches > 0 and ("routes.city_orders" in derived)
    for v in views[1:]:
        assert city_orders(v) == first
        assert [list(schedules(v, c)) for c in first] == [schedules(views[0], c) for c in first]
    assert len(searches) == n_searches and len(derived) == n_derived  # the other passes hit the tables


def test_a_pass_mutating_what_it_was_handed_does_not_leak(sandbox):
    env, ids = sandbox
    a, b = (catalog_memo.shared_catalog(env, ids[1]) for _ in range(2))
    orders = city_orders(a)
    route = schedules(a, orders[0])[0]
    _, day, x, y = route.legs()[0]
    want_transport, want_fams = list(a.transport(x, y, day)), families(a, route)

    a.transport(x, y, day).clear()
    a.hotels(route.cities[0]).append("junk")
    orders.clear()
    schedules(a, route.cities).clear()
    families(a, route).append("Teleport")

    assert b.transport(x, y, day) == want_transport and "junk" not in b.hotels(route.cities[0])
    assert city_orders(b) and city_orders(b)[0] == route.cities
    assert schedules(b, route.cities)[0] == route and families(b, route) == want_fams
    assert city_orders(a)[0] == route.cities  # the view's own derived copies are fresh too


def test_a_view_looks_texts_up_as_a_lone_catalog_does(sandbox):
    env, ids = sandbox
    for qid in ids:
        warm = catalog_memo.shared_catalog(env, qid)
        for c in city_orders(warm):  # another pass warmed the tables, in its own order
            for r in reversed(schedules(warm, c)):
                families(warm, r)
        view, lone = catalog_memo.shared_catalog(env, qid), _lone(env, qid)
        for cat in (view, lone):
            orders = city_orders(cat)
            r = schedules(cat, orders[-1])[-1]
            families(cat, r)
            cat.attractions(r.cities[0])
        assert list(view.by_text.items()) == list(lone.by_text.items())
        assert list(view._cache) == list(lone._cache)


def _dataframe_options(cat: Catalog, kind: str, *args) -> list[Option]:
    """What the catalog built from the search tools' DataFrames before it read the index's records."""
    p, t = cat.people, cat.tools
    if kind == "restaurants":
        (city,) = args
        df = t.restaurants(city)
        return [Option("restaurant", entity(str(n), city), float(c) * p,
                       f"{money(float(c))} per person, {', '.join(cu)}", city, cuisines=cu)
                for n, c, cu in zip(df["Name"].tolist(), df["Average Cost"].tolist(),
                                    [tuple(x.strip() for x in str(v).split(",") if x.strip()) for v in df["Cuisines"]])]
    if kind == "hotels":
        (city,) = args
        df = t.accommodations(city)
        return [Option("hotel", entity(str(n), city), float(pr) * math.ceil(p / max(1, int(oc))),
                       f"{money(float(pr))} per night for {int(oc)}, {rt}, {ru}, minimum {int(float(mn))} nights", city,
                       room_type=str(rt), house_rules=str(ru), min_nights=float(mn))
                for n, pr, rt, ru, mn, oc in zip(df["NAME"].tolist(), df["price"].tolist(), df["room type"].tolist(),
                                                 df["house_rules"].tolist(), df["minimum nights"].tolist(),
                                                 df["maximum occupancy"].tolist())]
    if kind == "attractions":
        (city,) = args
        return [Option("attraction", entity(str(n), city), 0.0, "", city) for n in t.attractions(city)["Name"].tolist()]
    a, b, day = args
    df = t.flights(a, b, cat.q.date[day - 1])
    return [Option("flight", flight_text(str(no), a, b, str(d), str(r)), float(pr) * p,
                   f"{money(float(pr))} per person", b, mode="Flight")
            for no, pr, d, r in zip(df["Flight Number"].tolist(), df["Price"].tolist(), df["DepTime"].tolist(),
                                    df["ArrTime"].tolist())]


def test_the_catalog_reads_the_rows_the_search_tools_return(sandbox):
    env, ids = sandbox
    db = env.index.db
    cities = sorted(set(db.accommodations["city"]) | set(db.restaurants["City"]) | set(db.attractions["City"]))
    for qid in ids:  # 1 to 8 people: every cost rule
        cat = _lone(env, qid)
        for city in [*cities[qid % 3::3], "Atlantis"]:  # a third of the cities per query
            for kind in ("restaurants", "hotels", "attractions"):
                assert getattr(cat, f"_{kind}")(city) == _dataframe_options(cat, kind, city), (kind, city)
        legs = list(env.tools._flight_rows)[qid % 150::150]
        for a, b, _ in [*legs, ("Nowhere", "Atlantis", "")]:
            for day in (1, cat.q.days):
                want = _dataframe_options(cat, "transport", a, b, day)
                assert [o for o in cat._transport(a, b, day) if o.kind == "flight"] == want


def test_trip_costs_share_the_querys_bounds_and_refuse_another_env(sandbox):
    env, ids = sandbox
    a, b = (catalog_memo.shared_catalog(env, ids[1]) for _ in range(2))
    ca, cb, lone = TripCosts(env, a), TripCosts(env, b), TripCosts(env, _lone(env, ids[1]))
    for c in city_orders(a):
        assert ca.city_order(c) == cb.city_order(c) == lone.city_order(c)
    other, _ = envs.make_train_and_held_out(ENV_CFG)
    with pytest.raises(ValueError, match="not the catalog's env"):
        TripCosts(other, a)


def test_a_changed_query_gets_new_tables_and_the_memo_is_bounded(sandbox, monkeypatch):
    import dataclasses

    env, ids = sandbox
    t = catalog_memo.query_tables(env, ids[0])
    assert catalog_memo.query_tables(env, ids[0]) is t
    q = env.get_query(ids[0])
    assert catalog_memo.query_tables(env, dataclasses.replace(q, budget=q.budget + 1)) is not t
    monkeypatch.setattr(catalog_memo, "LIMIT", 2)
    first = catalog_memo.query_tables(env, ids[1])
    catalog_memo.query_tables(env, ids[2])
    catalog_memo.query_tables(env, ids[0])
    assert catalog_memo.query_tables(env, ids[1]) is not first  # evicted: the least recently used


@pytest.mark.parametrize("run", [run_mtp, run_okr], ids=["mtp", "okr"])
def test_passes_on_shared_tables_plan_what_they_planned_alone(sandbox, monkeypatch, run):
    env, ids = sandbox
    passes = [(qid, seed) for qid in ids[1:] for seed in range(3)]

    def plans():
        out = []
        for qid, seed in passes:
            fr = run(env, qid, Picker(seed))
            out.append((fr.plan, fr.error, repr(fr.extra), [(n, c.text) for n, c in fr.result.constrained()],
                        [[a.messages for a in n.attempts] for n in fr.result.trace.nodes]))
        return out

    shared = plans()
    monkeypatch.setattr(catalog_memo, "query_tables", lambda env, query: catalog_memo.QueryTables())
    assert shared == plans()
    assert any(p[0] is not None for p in shared) and len({repr(p[0]) for p in shared}) > 1
