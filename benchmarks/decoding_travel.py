"""The travel section of ``benchmarks/decoding.py`` (issue #12 item 6): the TravelPlanner plan grammar
against the OpenAGI grammar under the embedded planner -- (a) grammar build time per query, (b) the
constraint's cost per row-step of ours against an unconstrained HF ``generate`` of the same row-steps
and average batch shape.
"""

from __future__ import annotations

import functools
import statistics
import time
from collections.abc import Callable

import torch

from benchmarks.decoding_common import (
    LIMITS,
    TASKS,
    constrained_search,
    count_passes,
    generate_args,
    measure,
    mode_title,
)
from envs.openagi.grammar import build_grammar, plan_grammars
from envs.openagi.tools import signature_registry
from envs.travel.env import TravelPlannerEnv
from envs.travel.grammar import build_travel_grammar
from rltf.config.loading import EmbeddedSettings
from rltf.planners.embedded import build_embedded_planner
from rltf.planners.tokenizer import default_tokenizer_texts

TRAVEL_DAYS = (3, 5, 7)


def travel_tokenizer_texts(env) -> list[str]:
    """What the embedded tokenizer is trained on here: the travel env's own tokenizer texts
    (``env.tokenizer_texts()``, what training trains a travel planner's tokenizer on), then the
    OpenAGI defaults (one planner for both grammars)."""
    return list(dict.fromkeys(list(env.tokenizer_texts()) + default_tokenizer_texts()))


def build_embedded(texts: list[str]):
    """The embedded planner of configs/default.yaml (T5 d_model 128, 2+2 layers, seed 0) on ``texts``."""
    planner = build_embedded_planner(EmbeddedSettings(), texts)
    return planner.model, planner.tokenizer


def travel_queries(env, days: int, n: int) -> list:
    return [q for q in env.queries() if q.days == days][:n]


def timed(fn: Callable[[], object], repeats: int) -> float:
    """Median wall time of ``repeats`` calls."""
    ts = []
    for _ in range(repeats):
        t = time.perf_counter()
        fn()
        ts.append(time.perf_counter() - t)
    return statistics.median(ts)


def entity_count(c) -> int:
    """Distinct entity names and transport strings among a query's candidates."""
    names = {n for table in (c.restaurants, c.attractions, c.accommodations) for ns in table.values() for n in ns}
    return len(names) + len({t for per_day in c.transport.values() for opts in per_day.values() for t in opts})


def build_times(env, tok, n_queries: int, repeats: int) -> None:
    """(a) Grammar build time per query (uncached builders), travel by trip length and OpenAGI."""
    print(f"\n(a) grammar build time (median over queries of the median of {repeats} builds; uncached)")
    print(f"  {'grammar':<22}{'queries':>8}{'build ms':>10}{'(min-max)':>16}{'entities':>10}{'routes':>8}"
          f"{'langs':>7}{'rows':>8}{'states':>8}{'D':>5}")

    def row(name, times, stats):
        def med(k):
            return int(statistics.median(x[k] for x in stats))

        print(f"  {name:<22}{len(times):>8d}{1e3 * statistics.median(times):>10.1f}"
              f"{f'({1e3 * min(times):.0f}-{1e3 * max(times):.0f})':>16}{med(0):>10d}{med(1):>8d}{med(2):>7d}"
              f"{med(3):>8d}{med(4):>8d}{med(5):>5d}")

    for days in TRAVEL_DAYS:
        times, stats = [], []
        for q in travel_queries(env, days, n_queries):
            c = env.candidates(q.id)
            times.append(timed(functools.partial(build_travel_grammar, tok, c, env.max_attractions), repeats))
            g = build_travel_grammar(tok, c, env.max_attractions)
            n_rows = sum(g.rows.size(k) for k in range(len(g.rows.starts)))
            stats.append((entity_count(c), len(g.routes), len(g.rows.starts), n_rows, g.dfa.num_states, g.dfa.width))
        row(f"travel {days}-day", times, stats)
    registry = signature_registry()
    times, stats = [], []
    for sig in dict.fromkeys((t[1], t[2]) for t in TASKS):
        times.append(timed(functools.partial(build_grammar, tok, registry, *sig, LIMITS), repeats))
        g = build_grammar(tok, registry, *sig, LIMITS)
        n_rows = sum(g.rows.size(k) for k in range(len(g.rows.starts)))
        stats.append((len(registry.names), len(g.heads), len(g.rows.starts), n_rows, g.dfa.num_states, g.dfa.width))
    row("openagi (signature)", times, stats)
    print("  (entities: travel = candidate names + transport strings; openagi = tools. rows: row texts "
          "enumerated; D: widest state)")


def constraint_cost(model, tok, prompts: list[str], grammars: list, mode: str, width: int,
                    repeats: int) -> dict[str, tuple[float, int, int, object, int]]:
    """(b) ``ours`` (and ``ours (full head)``) against an unconstrained generate of the same row-steps
    and average batch shape (see ``benchmarks/decoding.py``'s docstring); the median runs."""
    decoder = model.get_decoder()
    ours = constrained_search(model, tok, prompts, grammars, mode, width)
    passes, row_steps = count_passes(ours, decoder)  # the same every run (seeded sampling, beam search)
    per_prompt = max(1, round(row_steps / passes / len(prompts)))
    batch = tok(prompts, return_tensors="pt", padding=True)
    common = {"input_ids": batch["input_ids"], "attention_mask": batch["attention_mask"], "max_new_tokens": passes,
              "min_new_tokens": passes, **generate_args(tok, mode, per_prompt, beams_returned=1)}
    fns = {"unconstrained": lambda: model.generate(**common), "ours": ours,
           "ours (full head)": lambda: ours(head="full")}
    return measure(fns, decoder, repeats)


def travel_section(args) -> list[str]:
    """Travel vs OpenAGI grammars under the embedded planner: build times, per-step constraint cost."""
    t0 = time.perf_counter()
    env = TravelPlannerEnv("all")
    model, tok = build_embedded(travel_tokenizer_texts(env))
    print(f"\n== travel vs openagi grammar, embedded planner: T5 d_model {model.config.d_model}, "
          f"{model.config.num_layers}+{model.config.num_decoder_layers} layers, "
          f"{sum(q.numel() for q in model.parameters()) / 1e6:.2f}M params, vocab {len(tok)}; "
          f"{args.threads} thread(s); setup {time.perf_counter() - t0:.1f} s ==")
    build_times(env, tok, args.build_queries, args.build_repeats)

    qs = [q for days in TRAVEL_DAYS for q in travel_queries(env, days, args.travel_queries)]
    travel = ([q.query for q in qs], [env.grammar(tok, q.id) for q in qs])
    tasks = [TASKS[i % len(TASKS)] for i in range(args.prompts)]
    registry = signature_registry()
    openagi = ([t[0] for t in tasks], plan_grammars(tok, [(t[1], t[2]) for t in tasks], registry, LIMITS))
    print(f"\n(b) time per row-step: {len(qs)} travel queries ({'/'.join(map(str, TRAVEL_DAYS))} days: "
          f"{', '.join(str(g.dfa.num_states) for g in travel[1])} states), {len(tasks)} OpenAGI prompts; "
          "unconstrained = HF generate, same row-steps and mean rows per pass; median of "
          f"{args.repeats}. Row-steps: rows x passes; token-steps: the tokens the passes read (ours "
          "prefills forced text, several tokens per row in one pass; HF generate reads one)")
    summary = []
    with torch.inference_mode():
        for mode, width in (("sample", args.samples), ("beam", args.beams)):
            if mode not in args.modes:
                continue
            print(mode_title(mode, width))
            print(f"  {'grammar':<9}{'method':<18}{'total s':>9}{'passes':>8}{'row-steps':>11}{'rows/pass':>11}"
                  f"{'ms/pass':>9}{'us/row-step':>13}{'token-steps':>13}{'us/token-step':>15}")
            for name, (prompts, grammars) in (("travel", travel), ("openagi", openagi)):
                res = constraint_cost(model, tok, prompts, grammars, mode, width, args.repeats)
                for method, (t, n, r, _, k) in res.items():
                    print(f"  {name:<9}{method:<18}{t:>9.3f}{n:>8d}{r:>11d}{r / n:>11.1f}{1e3 * t / n:>9.2f}"
                          f"{1e6 * t / r:>13.1f}{k:>13d}{1e6 * t / k:>15.1f}")
                step = {k: v[0] / v[2] for k, v in res.items()}
                read = {k: v[0] / v[4] for k, v in res.items()}
                summary.append(f"{name} constrained/unconstrained per step: "
                               f"{step['ours'] / step['unconstrained']:.2f} ({mode}; full head: "
                               f"{step['ours (full head)'] / step['unconstrained']:.2f}; per token-step: "
                               f"{read['ours'] / read['unconstrained']:.2f})")
                if name == "travel":
                    best = res["ours"][3][-1][0]
                    print(f"  e.g. travel, {qs[-1].days}-day query: {len(best.rows)} rows, "
                          f"{sum(map(len, best.rows))} tokens, log-prob {best.logprob:.1f}")
    return summary
