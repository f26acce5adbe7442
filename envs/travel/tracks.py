"""The travel env's tracks (``env.travel.track``): what a planner may read and what may touch its plan.

* ``benchmark`` -- TravelPlanner's sole-planning track as the benchmark defines it. A planner reads a
  query through :class:`envs.travel.query.QueryView` only (its text, level, days and its own
  ``reference_information`` notes; its prompt the official sole-planning prompt of the two,
  :attr:`~envs.travel.query.QueryView.prompt`); only a train query holds a plan (the solver's, for
  SFT); its grammar and option lists are built from that query's own
  notes (:mod:`envs.travel.query_view`), never from another query's notes or from any plan; the
  gym reset's ``info`` holds no structured field (budget, people, room rules...); no repair, filter,
  cost ranking, evaluator call or hint prompt touches the output (the scaffolded flows are refused).
* ``scaffolded`` -- the benchmark's queries with the project's scaffolds (MTP's option filters, cost
  ranking and budget repair; OKR-Agent's evaluator reviews; ReAct's look-ahead), the structured
  query fields in prompts and ``info``.
* ``sandbox`` -- the project's own setting (the default): the synthetic sandbox or queries generated
  over the real tables, everything of ``scaffolded`` allowed.

In every track an option cap (``max_options`` / ``max_cities``) of a query outside the train split
reads no plan: it is a seeded sample of that query's own options. ``cap_keep: train_plans`` lets the
cap keep the solver's plan's options of the *train* queries (the plans the warm start teaches stay
inside their grammars); the benchmark track refuses it (``cap_keep: sample``).
"""

from __future__ import annotations

from common.errors import UserError

BENCHMARK, SCAFFOLDED, SANDBOX = "benchmark", "scaffolded", "sandbox"
TRACKS = (BENCHMARK, SCAFFOLDED, SANDBOX)
TRAIN_PLANS, SAMPLE = "train_plans", "sample"
CAP_KEEPS = (TRAIN_PLANS, SAMPLE)

TRACK_TEXT = {BENCHMARK: "sole-planning on each query's text and own reference_information; no plan, no repair",
              SCAFFOLDED: "the benchmark's queries with the structured fields and the flows' scaffolds",
              SANDBOX: "the project's sandbox setting: structured fields and scaffolds"}
"""Each track in one line (the dry run's description)."""

SCAFFOLDS = {"mtp": "MTP's option filters, cost ranking and budget repair",
             "okr": "OKR-Agent's evaluator reviews of partial plans",
             "react": "ReAct's look-ahead pruning of its menu"}
"""The flow methods that run a scaffold on the model's output, and what it is."""


class TrackError(UserError, ValueError):
    """Something the env's track forbids (one line naming the key)."""


def check_track(track: str, key: str = "env.travel.track") -> str:
    """``track`` itself; a :class:`TrackError` naming ``key`` when it is not a track."""
    if track not in TRACKS:
        raise TrackError(f"bad value for '{key}': {track!r}; expected one of {list(TRACKS)}")
    return track


def refuse_scaffold(track: str, method: str) -> None:
    """A :class:`TrackError` when ``method`` needs a scaffold the ``track`` forbids (the benchmark track)."""
    if track == BENCHMARK and method in SCAFFOLDS:
        raise TrackError(f"flow method {method!r} runs {SCAFFOLDS[method]}, which 'env.travel.track: benchmark' "
                         "forbids (nothing but the model may shape the scored plan); use flow.methods=[flat] or "
                         "env.travel.track=scaffolded")
