"""The flat planner's grammar over a sample of a query's options (env.travel.max_options,
max_cities; issue 36): the solver's plan always inside, the caps kept, the sample seeded, the
evaluator untouched -- on the real tables, whose 5-7 day queries route over up to twenty cities."""

import pytest

from envs.travel.candidates import capped_candidates
from envs.travel.config import TravelEnvConfig
from envs.travel.factory import make_envs
from envs.travel.plans import parse_plan
from rltf.planners.tokenizer import tokenizer_texts_for, train_plan_tokenizer


def _options(c):
    per_city = [v for table in (c.restaurants, c.attractions, c.accommodations) for v in table.values()]
    return per_city + [v for days in c.transport.values() for v in days.values()]


@pytest.fixture(scope="module")
def real_envs(real_travel_db):
    cfg = TravelEnvConfig(database_dir=str(real_travel_db), queries_source="generated", max_options=6, max_cities=3)
    return make_envs(cfg)


def test_the_caps_keep_the_solvers_plan_and_are_seeded(real_envs):
    train, _ = real_envs
    long = [t for t in train.tasks() if train.get_query(t.id).days == 7 and t.reference_plan][:4]
    assert long
    for t in long:
        full = train.candidates(t.id)
        capped = capped_candidates(full, 6, t.reference_plan, 0, cities=3)
        assert capped == capped_candidates(full, 6, t.reference_plan, 0, cities=3)  # seeded
        assert len(full.route_cities) > 3 >= len(capped.route_cities)
        assert set(capped.route_cities) <= set(full.route_cities)
        for options in _options(capped):  # the cap, or the solver plan's own options beyond it
            assert len(options) <= 6 or all(o in t.reference_plan for o in options[6:])
        visited = {c for c in full.route_cities if f"({c})" in t.reference_plan or f"to {c}" in t.reference_plan}
        assert visited <= set(capped.route_cities)


def test_the_env_grammar_uses_the_caps_and_still_parses_the_taught_plan(real_envs):
    train, _ = real_envs
    tok = train_plan_tokenizer(tokenizer_texts_for(train), vocab_size=4000)  # (what the embedded planner reads)
    for days in (5, 7):
        for t in [t for t in train.tasks() if t.reference_plan and train.get_query(t.id).days == days][:2]:
            g = train.grammar(tok, t)
            assert g.rows_for(parse_plan(t.reference_plan))  # the plan SFT teaches is inside the grammar
            assert len(g.candidates.route_cities) <= 3 and g.dfa.num_states < 10_000


def test_no_cap_is_the_candidates_themselves(real_envs):
    train, _ = real_envs
    c = train.candidates(train.tasks()[0].id)
    assert capped_candidates(c, 0, "", 0) is c
