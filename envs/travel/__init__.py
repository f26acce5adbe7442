"""TravelPlanner-style sandbox: a seeded synthetic database in the real benchmark's schema, seeded
feasible queries with a persisted split, the official evaluator's rules on indexed lookups, an
exact minimum-cost solver, search tools, and the Gymnasium env ``TravelPlanner-Sandbox-v0``.

Modules, in layers: a module imports only from layers above it in this list (lower layers), never
from one below (``tests/envs/travel/test_travel_layers.py`` checks every import statement, at any depth).

1. words and formats: ``schema`` (file layout, columns, constraint vocabularies), ``vocab``,
   ``geography``, ``text`` (entity strings, parsed as the official code does), ``verdicts``
   (constraint names, a plan's evaluation)
2. data: ``query`` (one query), ``plans`` (plan text), ``tasks``, ``sandbox`` (the database:
   generate / export / load), ``config`` (the env's settings), ``reward`` (the shaped reward),
   ``hub`` (the hub dataset's files read strictly; split names), ``reference_info`` (a query's
   ``reference_information`` as its candidate database: sole-planning), ``cli`` (the commands' data
   options and one-line errors)
3. ``index`` (dict lookups over the database)
4. lookups per query: ``eval_mode``, ``tools`` (search tools), ``candidates`` (per-query entities
   for a grammar), ``meal_costs``
5. rules and costs: ``commonsense``, ``hard_rules`` (one function per constraint; their tables
   ``COMMONSENSE_RULES`` / ``HARD_RULES``), ``route_costs``
6. ``evaluator``, ``official_metrics`` (the benchmark's metrics), ``submission`` (its file),
   ``solver`` (exact minimum cost), ``grammar`` (constrained decoding), ``grammar_memo`` (one
   grammar per query and tokenizer, shared by envs), ``row_by_row_eval`` (a row-by-row DataFrame
   re-implementation of the official evaluator, the speed baseline and the agreement check)
7. ``queries`` (the query generator, which prices each query with the solver, and the hub
   loader), ``simple_planners`` (greedy / random / perturbed plans for tests and benchmarks)
8. ``split`` (the persisted train / validation / test split)
9. ``interchange`` (export of the database, queries and plans in the official files)
10. ``env``, then ``factory``
11. command lines, each its package's ``__main__``: ``python -m envs.travel.solver``,
    ``python -m envs.travel.sandbox --export DIR``, ``python -m envs.travel.split``
"""
