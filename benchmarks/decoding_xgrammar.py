"""The XGrammar section of ``benchmarks/decoding.py`` (issue #15 item 6): ours against HF ``generate``
constrained by XGrammar (``benchmarks/xgrammar_peer.py``) on the same plan language, with an
unconstrained HF ``generate`` of as many steps, per row-step; grammar compile time apart.
"""

from __future__ import annotations

import importlib.util
import os
import sys
from importlib.metadata import version

import torch
from transformers import LogitsProcessorList

from benchmarks.decoding_common import (
    LIMITS,
    constrained_search,
    generate_args,
    measure,
    mode_title,
    openagi_setup,
    plan_languages,
    print_times,
)
from constrained_decoding.rows import special_ids
from envs.openagi.grammar import plan_grammars


def load_xgrammar_peer():
    """``benchmarks/xgrammar_peer.py``, loaded by path as the module ``xgrammar_peer`` (as its tests load
    it); ``None`` if ``xgrammar`` is not installed."""
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


def xgrammar_section(args, peer) -> list[str]:
    """The d_model 256 planner on the OpenAGI prompts: ours vs HF generate + XGrammar (summary lines).
    ``peer``: :func:`load_xgrammar_peer`'s module; ``None`` prints a skip line."""
    if peer is None:
        print('\n== xgrammar: skipped: xgrammar is not installed (pip install -e ".[bench]") ==')
        return ['ours/xgrammar per row-step: skipped (xgrammar is not installed: pip install -e ".[bench]")']

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
            common = dict(generate_args(tok, mode, width), renormalize_logits=True, max_new_tokens=96)
            grammars = plan_grammars(tok, sigs, registry, LIMITS)
            ours = constrained_search(model, tok, prompts, grammars, mode, width)

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
            print(mode_title(mode, width))
            print_times(measured)
            for name, (t, n, r, (_, proc_s), *_) in [(k, v) for k, v in measured.items() if k.startswith("xgrammar")]:
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
