"""The travel evaluator's text parsers (``envs/travel/text.py``): the same results as the official
regular expressions they replace, in linear time, and every plan input bounded (issue 25, item 1)."""

from __future__ import annotations

import json
import random
import re

import pytest

from envs.travel import text as T
from envs.travel.env import TravelPlannerEnv
from envs.travel.plans import MAX_PLAN_CHARS, PlanParseError, fenced_block, parse_plan

# the official patterns (evaluation/*.py and utils/func.py of OSU-NLP-Group/TravelPlanner)
OFFICIAL_FROM_TO = re.compile(r"from\s+(.+?)\s+to\s+([^,]+)(?=[,\s]|$)")
OFFICIAL_PAREN = re.compile(r"^(.*?)\([^)]*\)")
OFFICIAL_NAME_CITY = re.compile(r"(.*?),\s*([^,]+)(\(\w[\w\s]*\))?$")


def official_from_to(text):
    m = OFFICIAL_FROM_TO.search(text)
    return m.groups()[:2] if m else (None, None)


def official_before_paren(text):
    m = OFFICIAL_PAREN.search(text)
    return m.group(1) if m else text


def official_name_city(text):
    m = OFFICIAL_NAME_CITY.search(text)
    if not m:
        return "-", "-"
    return m.group(1).strip(), official_before_paren(m.group(2).strip()).strip()


# from_to runs the official search itself on short texts and from_to_scan on long ones: both checked
PAIRS = [(T.from_to, official_from_to), (T.from_to_scan, official_from_to), (T.before_paren, official_before_paren),
         (T.name_city, official_name_city)]
# pieces that exercise every branch of the patterns: whitespace of several kinds (a newline stops
# '.', a non-breaking space is whitespace too), commas, parentheses, 'from' / 'to' and near misses
PIECES = ["from", "to", " ", "  ", "   ", "\n", "\t", ",", "(", ")", "x", "A", "t", "o", "f", "from ", " to ",
          "\u00a0", "rom", "B", ", ", "(CA)"]

REAL = [
    "from Dallas to Austin", "from Dallas(Texas) to Austin(Texas), duration: 3 hours",
    "Flight Number: F3573659, from Dallas to Austin, Departure Time: 07:02, Arrival Time: 08:21",
    "Self-driving, from A to B, duration: 1 hour, distance: 50 km, cost: 9", "Austin", "Austin(Texas)",
    "The Pig, Austin", "Cafe, Bar, Austin(TX)", "Hotel, ", "no comma", "-", "", "from  to x", "from   to x",
    "from x to ,y", "from a to  ,", "A, B\nC, D", "x\n(y)", "(a)(b)", "from\nA to B", "from A\nB to C",
]


@pytest.mark.parametrize("fn,official", PAIRS, ids=[f.__name__ for f, _ in PAIRS])
def test_parsers_give_the_official_patterns_results(fn, official):
    for s in REAL:
        assert fn(s) == official(s), s
    rng = random.Random(0)
    for _ in range(20000):
        s = "".join(rng.choice(PIECES) for _ in range(rng.randint(0, 16)))
        assert fn(s) == official(s), repr(s)


FENCE = re.compile(r"```(?:json|python|JSON)?\s*\n?(.*?)```", re.S)  # what parse_plan searched before


def test_fenced_block_is_the_fence_pattern_s_block():
    rng = random.Random(1)
    pieces = ["```", "`", "``", "json", "JSON", "python", "js", " ", "\n", "\t", "x", "[", "]", "jsonx"]
    for _ in range(20000):
        s = "".join(rng.choice(pieces) for _ in range(rng.randint(0, 12)))
        m = FENCE.search(s)
        got = fenced_block(s)
        assert (None if got is None else got.strip()) == (m.group(1).strip() if m else None), repr(s)
    # an unclosed fence before a long run of whitespace: the pattern backtracks over the run once per
    # character of it (4 s at 20k characters); the scan does not
    with pytest.raises(PlanParseError) as e:
        parse_plan("```" + " " * (MAX_PLAN_CHARS - 4) + "x")
    assert e.value.reason == "syntax"


HOSTILE = ["A" * 50_000, "from " * 10_000, "from x " * 7_000 + " to B", " " * 50_000, "(" * 50_000,
           "from" + " " * 50_000 + "to x", "from \n" * 8_000 + "to y", "," * 50_000, "A, " + "B" * 50_000]


def test_parsers_scan_hostile_fields_once(monkeypatch):
    """The official patterns backtrack: on the fields above each search costs time quadratic in the
    length (seconds to minutes at 50k characters). The parsers read each character a bounded number
    of times; counted here as the searches for 'to' (one per valid 'to' at most, not one per 'from')."""
    searches = []
    real = T._TO

    class Counting:
        def search(self, s, pos=0):
            searches.append(pos)
            return real.search(s, pos)

        def match(self, s, pos=0):
            return real.match(s, pos)

    monkeypatch.setattr(T, "_TO", Counting())
    for s in HOSTILE:
        searches.clear()
        T.from_to(s), T.name_city(s), T.before_paren(s)
        assert len(searches) <= 2, (s[:20], len(searches))
    # and the results are still the official ones, at a size the official patterns finish quickly
    monkeypatch.setattr(T, "_TO", real)
    for s in HOSTILE:
        small = s[:400] + s[-30:]  # over from_to's short-text limit: scanned
        assert len(small) > T._SHORT
        for fn, official in PAIRS:
            assert fn(small) == official(small), (fn.__name__, small[:20])


# ------------------------------------------------------------------- every plan input is bounded
@pytest.fixture(scope="module")
def env_and_plan():
    env = TravelPlannerEnv(split="test")
    q = env.queries()[0]
    env.reset(options={"query": q.id})
    return env, json.loads(env.reference_plan(q.id))


def test_a_plan_given_as_day_records_over_the_limit_is_rejected(env_and_plan):
    """Plan text over MAX_PLAN_CHARS was rejected; the same plan given as a list was evaluated
    whatever its size. Now both are 'too_long', with the limit in the message."""
    env, plan = env_and_plan
    big = [dict(day) for day in plan]
    for day in big:  # every field just long enough that the plan is over the limit
        for k in ("breakfast", "lunch", "dinner", "attraction"):
            day[k] = "A" * (MAX_PLAN_CHARS // (4 * len(big)) + 10)
    _, reward, _, _, info = env.step(big)
    assert reward == 0.0 and not info["valid"]
    assert info["error_reason"] == "too_long"
    assert f"{MAX_PLAN_CHARS:,}" in info["error"] and "day records" in info["error"]
    assert len(info["plan"]) < 500  # the oversized plan is not written out into the info
    _, reward, _, _, info = env.step(json.dumps(big))
    assert reward == 0.0 and info["error_reason"] == "too_long"
    with pytest.raises(PlanParseError, match="more than 100,000 characters"):
        parse_plan([{}] * (MAX_PLAN_CHARS // 2 + 1))  # many empty days count too


def test_a_long_field_under_the_limit_is_judged_the_same_as_text_and_as_records(env_and_plan):
    env, plan = env_and_plan
    p = [dict(day) for day in plan]
    p[0]["breakfast"] = "A" * 20_000  # comma-free: the official name-city pattern's worst case
    p[1]["current_city"] = "from " * 4_000
    results = env.reward_plans([(env.query, p), (env.query, json.dumps(p))])
    assert results[0].valid and results[1].valid
    assert results[0].evaluation.verdicts() == results[1].evaluation.verdicts()
    violations = results[0].evaluation.violations()
    assert {"within_sandbox", "within_current_city"} <= set(violations)
    assert "'from' but is not 'from A to B'" in violations["reasonable_city_route"]


# ---------------------------------------------------------- bad text is 'syntax', never 'internal'
@pytest.mark.parametrize("text,why", [
    ("[" * 100_000, "nested too deeply"),
    ("[" * 50_000 + "]" * 50_000, "nested too deeply"),
    ('[{"days": ' + "1" * 5000 + "}]", "integer string conversion"),
    ("[{'days': -" + "9" * 5000 + "}]", "neither JSON nor a Python literal"),
], ids=["unclosed", "closed", "json-int", "literal-int"])
def test_deep_nesting_and_huge_integers_are_syntax_errors(env_and_plan, text, why):
    """json.loads raises RecursionError / ValueError (not JSONDecodeError) on these: the env
    reported them as 'internal' errors; they are the planner's syntax."""
    env, _ = env_and_plan
    _, reward, _, _, info = env.step(text)
    assert reward == 0.0 and not info["valid"]
    assert info["error_reason"] == "syntax", info["error"]
    assert why in info["error"]


def test_huge_integers_that_parse_are_rejected_not_crashed(env_and_plan):
    """A Python literal may hold a hex integer (no digit limit) and a list plan any int: the
    evaluator could not write them out (ValueError -> 'internal'); they are 'too_long' now."""
    env, plan = env_and_plan
    p = [dict(day) for day in plan]
    p[0]["days"] = 10 ** 5000
    for action in (p, "[{'days': 0x" + "f" * 5000 + "}]"):
        _, reward, _, _, info = env.step(action)
        assert reward == 0.0 and info["error_reason"] == "too_long", info["error"]
        assert "integer" in info["error"]
    with pytest.raises(PlanParseError, match="too long to show"):  # an error message never writes it out
        parse_plan("{0x" + "f" * 5000 + ": 1}")


@pytest.mark.parametrize("text, official, whole", [
    ("Peaceful, beautiful home away , Denver", ("Peaceful, beautiful home away", "Denver"),
     ("Peaceful, beautiful home away", "Denver")),
    ("1 Bedroom , Beautiful Spacious Brownstone\n Apt, Austin", ("Apt", "Austin"),
     ("1 Bedroom , Beautiful Spacious Brownstone\n Apt", "Austin")),
    ("Subway, Rockford(Illinois)", ("Subway", "Rockford"), ("Subway", "Rockford")),
    ("no comma", ("-", "-"), ("-", "-")),
])
def test_the_default_reading_keeps_a_name_whole_where_the_official_keeps_its_last_line(text, official, whole):
    """Issue #36's names: the official pattern's name stops at a newline; the default evaluator's
    reading (``entity_name_city``) keeps the whole name, and ``name_key`` makes whitespace and
    Unicode normal form not matter."""
    assert T.name_city(text) == official_name_city(text) == official
    assert T.entity_name_city(text) == whole
    assert T.name_key(whole[0]) == T.name_key(" ".join(whole[0].split()) + " ")
    assert T.name_key("Cafe\u0301 Daniel") == T.name_key("Caf\u00e9  Daniel") != T.name_key("Cafe Daniel")
