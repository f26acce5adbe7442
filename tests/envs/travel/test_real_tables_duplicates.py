"""Names the real tables repeat within a city (read in place through the ``real_travel_db``
fixture): 'Subway' is two restaurants of Rockford, and a plan can only write 'Subway, Rockford'.
The flat planner's grammar, the flows' option lists (``Choices``, ``ChoiceGrammar``, the catalog)
and MTP / OKR-Agent treat the two rows as one option, the one the evaluator judges (the first);
the decoder's error for two rows with the same tokens names a row listed twice as such."""

from __future__ import annotations

import pytest
from tokenizers import Tokenizer, decoders, models, pre_tokenizers, trainers
from transformers import PreTrainedTokenizerFast

from constrained_decoding.rows import GrammarError, RowText, build_row_languages
from envs.travel.catalog import Catalog
from envs.travel.env import TravelPlannerEnv
from envs.travel.flows.mtp import run_mtp
from envs.travel.flows.okr import run_okr
from envs.travel.grammar import enumerate_routes, head_text, slot_options, slot_text
from envs.travel.query import TravelQuery, empty_constraints
from envs.travel.solver import TravelSolver
from rltf.config.flow import MTPSettings, OKRSettings
from rltf.flows import Choices, Completion
from rltf.flows.engine.choice import ChoiceGrammar
from tests.envs.travel.test_real_tables_evaluator import DATES, _drivable, real_index

SUBWAY = "Subway, Rockford"


@pytest.fixture(scope="module")
def rockford(real_travel_db):
    """A 3-day trip to Rockford over the real tables and its env."""
    ix = real_index(real_travel_db)
    assert [r.name for r in ix.restaurants.by_city["Rockford"]].count("Subway") == 2
    org = next(c for c in sorted(ix.city_state)
               if ix.city_state[c] != ix.city_state["Rockford"] and _drivable(ix, c, "Rockford"))
    q = TravelQuery(0, org, "Rockford", 3, 1, DATES[:3], 1, empty_constraints(), budget=10**6)
    return TravelPlannerEnv("all", index=ix, queries=[q]), q


def byte_bpe(texts: list[str]) -> PreTrainedTokenizerFast:
    """A byte-level BPE trained on ``texts`` (any character of the real names encodes)."""
    tok = Tokenizer(models.BPE())
    tok.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    tok.decoder = decoders.ByteLevel()
    tok.train_from_iterator(texts, trainers.BpeTrainer(vocab_size=800, special_tokens=["<pad>", "</s>"],
                                                       initial_alphabet=pre_tokenizers.ByteLevel.alphabet(),
                                                       show_progress=False))
    return PreTrainedTokenizerFast(tokenizer_object=tok, pad_token="<pad>", eos_token="</s>")


def test_the_flat_planners_grammar_builds_with_one_subway(rockford):
    env, q = rockford
    c = env.candidates(q)
    assert c.restaurants["Rockford"].count(SUBWAY) == 1
    texts = [t for names in c.restaurants.values() for t in names] + [head_text(r) for r in enumerate_routes(c)]
    tok = byte_bpe(texts + [slot_text(2, "Rockford", "lunch", SUBWAY)])
    g = env.grammar(tok, q)
    lunch = slot_options(c, 2, "Rockford", "lunch")
    assert lunch.count(SUBWAY) == 1
    plan = TravelSolver(env.index).solve(q).plan
    plan[1]["lunch"] = SUBWAY
    assert g.rows_for(plan)  # the plan naming Subway is in the grammar


def test_the_catalog_and_choices_list_subway_once(rockford):
    env, q = rockford
    cat = Catalog(env, q)
    texts = [o.text for o in cat.restaurants("Rockford")]
    assert texts.count(SUBWAY) == 1 and len(texts) == len(set(texts))
    first = next(r for r in env.index.restaurants.by_city["Rockford"] if r.name == "Subway")
    assert cat.lookup(SUBWAY).cost == first.cost * q.people_number  # priced as the evaluator prices it
    assert Choices(texts).options == tuple(texts)
    assert Choices([SUBWAY, "-", SUBWAY]).options == (SUBWAY, "-")
    g = ChoiceGrammar(byte_bpe(texts), [*texts, SUBWAY])
    assert g.options == tuple(texts) and g.rows_for(SUBWAY)


class PicksSubway:
    """A backend that answers every choice with 'Subway, Rockford' when it is offered, else the
    first option."""

    supports_grammar = True

    def __init__(self):
        self.offered: list[tuple[str, ...]] = []

    def generate(self, batch, grammar=None, *, sampling=None):
        out = []
        for g in (grammar if isinstance(grammar, (list, tuple)) else [grammar] * len(batch)):
            assert isinstance(g, Choices), f"a node without options: {g!r}"
            self.offered.append(g.options)
            text = SUBWAY if SUBWAY in g.options else g.options[0]
            out.append(Completion(text, 0, 1, value=text))
        return out


@pytest.mark.parametrize("run, settings", [(run_mtp, MTPSettings(max_options=100)),
                                           (run_okr, OKRSettings(max_options=100))], ids=["mtp", "okr"])
def test_mtp_and_okr_deliver_a_plan_with_subway(rockford, run, settings):
    """Every option shown (both Subway rows would be, at $26 and $42)."""
    env, q = rockford
    backend = PicksSubway()
    fr = run(env, q, backend, settings)
    assert fr.error is None and fr.plan is not None
    assert any(SUBWAY in opts for opts in backend.offered)
    assert all(len(set(opts)) == len(opts) for opts in backend.offered)
    meals = [d[m] for d in fr.plan for m in ("breakfast", "lunch", "dinner")]
    assert meals.count(SUBWAY) == 1
    ev = env.evaluator.evaluate(q, fr.plan)
    assert ev.delivered and ev.commonsense["within_sandbox"].passed and ev.commonsense["diverse_restaurants"].passed


def test_a_row_listed_twice_is_named_as_such():
    tok = byte_bpe(["Subway, Rockford", "subway, rockford", "Olive Garden, Rockford"])
    rows = [RowText(0, SUBWAY), RowText(1, "Olive Garden, Rockford"), RowText(2, SUBWAY)]
    with pytest.raises(GrammarError, match=r"lists the row 'Subway, Rockford' twice") as err:
        build_row_languages(tok, [rows], where="travel query 7")
    assert "lowercasing" not in str(err.value) and "travel query 7" in str(err.value)
