"""TravelPlanner-style sandbox: a seeded synthetic database in the real benchmark's schema, seeded
feasible queries with a persisted split, the official evaluator's rules on indexed lookups, an
exact minimum-cost solver, search tools, and the Gymnasium env ``TravelPlanner-Sandbox-v0``.

Modules: ``sandbox`` (database: generate / export / load), ``index`` (dict lookups), ``query`` and
``queries`` (queries, hub loader), ``split``, ``plans`` (plan text), ``evaluator`` (+ metrics),
``reference_eval`` (a row-by-row DataFrame re-implementation, the speed baseline), ``solver``,
``candidates`` (per-query entities for a grammar), ``tools`` (search tools), ``interchange``
(export of queries and plans), ``env``.
"""
