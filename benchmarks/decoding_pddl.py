"""The pddl section of ``benchmarks/decoding.py`` (issue #50 item 2; ``--sections pddl``): the cost of the
pddl env's two plan grammars per decoding step, and the share of the ``legal`` grammar's lazy expansion.

The embedded planner (:func:`rltf.planners.embedded.build_embedded_planner`, default settings, random
weights: T5 d_model 128, 2+2 layers, a BPE trained on the env's tokenizer texts) decodes the held-out
test tasks of generated Blocksworld sets (``--pddl-sizes``, ``--prompts`` tasks, a cap of 32 actions)
under ``syntax`` (any ground action) and ``legal`` (only applicable actions: a lazily expanded
automaton, :mod:`constrained_decoding.lazy_dfa`), timed per row-step against an unconstrained HF
``generate`` of the same row-steps and batch shape, as the travel section does
(:func:`benchmarks.decoding_travel.constraint_cost`; median of ``--repeats``, after a warm-up run:
the legal grammar's states met by then are expanded). The expansion's share: the same legal decode
from freshly built grammars (every state it reaches expanded on the way, the rows laid out in new
tables) against the same decode again (nothing new), ``(cold - warm) / cold``.
"""

from __future__ import annotations

import time

import torch

import envs
from benchmarks.decoding_common import constrained_search, mode_title
from benchmarks.decoding_travel import build_embedded, constraint_cost
from envs.pddl.grammar import GRAMMAR_KINDS

CAP = 32  # env.pddl.max_plan_length's default


def pddl_setup(args):
    """The held-out test tasks of a generated Blocksworld set (``args.pddl_sizes`` blocks) and the
    embedded planner on the set's tokenizer texts."""
    lo, hi = args.pddl_sizes
    settings = {"name": "pddl", "pddl": {"sizes": [lo, hi], "long_sizes": [hi + 1, hi + 1], "train_size": 4,
                                         "validation_size": 0, "test_size": args.prompts, "test_long_size": 0,
                                         "max_plan_length": CAP}}
    train, held_out = envs.make_train_and_held_out(settings)
    test = set(envs.split_ids(settings)["test"])
    tasks = [t for t in held_out.tasks() if t.id in test][: args.prompts]
    model, tok = build_embedded(held_out.tokenizer_texts())
    return held_out, tasks, model, tok


def grammars_of(env, tasks, tok, kind: str) -> list:
    """Freshly built grammars of ``kind``, one per task (not the env's cached ones)."""
    return [GRAMMAR_KINDS[kind].build(tok, env.instances[t.id].task, CAP) for t in tasks]


def pddl_section(args) -> list[str]:
    t0 = time.perf_counter()
    env, tasks, model, tok = pddl_setup(args)
    prompts = [t.description for t in tasks]
    print(f"\n== pddl grammars, embedded planner: T5 d_model {model.config.d_model}, vocab {len(tok)}; "
          f"{len(tasks)} Blocksworld test tasks of {args.pddl_sizes[0]}-{args.pddl_sizes[1]} blocks, cap {CAP}; "
          f"{args.threads} thread(s); setup {time.perf_counter() - t0:.1f} s ==")
    summary = []
    with torch.inference_mode():
        for mode, width in (("sample", args.samples), ("beam", args.beams)):
            if mode not in args.modes:
                continue
            print(mode_title(mode, width))
            print(f"  {'grammar':<9}{'method':<18}{'total s':>9}{'passes':>8}{'row-steps':>11}{'rows/pass':>11}"
                  f"{'us/row-step':>13}")
            ratios = {}
            for kind in GRAMMAR_KINDS:
                grammars = grammars_of(env, tasks, tok, kind)
                if kind == "legal":  # cold: every state met expanded on the way; then the same decode again
                    run = constrained_search(model, tok, prompts, grammars, mode, width)
                    t = time.perf_counter()
                    run()
                    cold = time.perf_counter() - t
                    t = time.perf_counter()
                    run()
                    warm = time.perf_counter() - t
                    expanded = sum(g.expansions for g in grammars)
                res = constraint_cost(model, tok, prompts, grammars, mode, width, args.repeats)
                for method, (t, n, r, _, _) in res.items():
                    print(f"  {kind:<9}{method:<18}{t:>9.3f}{n:>8d}{r:>11d}{r / n:>11.1f}{1e6 * t / r:>13.1f}")
                step = {k: v[0] / v[2] for k, v in res.items()}
                ratios[kind] = step["ours"] / step["unconstrained"]
            share = (cold - warm) / cold
            print(f"  legal cold (fresh grammars) {cold:.3f} s, warm {warm:.3f} s: expansion share {share:.2f} "
                  f"({expanded} states expanded, {1e6 * (cold - warm) / max(1, expanded):.0f} us each)")
            summary.append(f"pddl constrained/unconstrained per row-step ({mode}): syntax {ratios['syntax']:.2f}, "
                           f"legal {ratios['legal']:.2f}; legal expansion share {share:.2f}")
    return summary
