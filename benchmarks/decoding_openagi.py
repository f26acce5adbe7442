"""The OpenAGI section of ``benchmarks/decoding.py``: the d_model 256 planner, beam search and
sampling, three ways -- HF ``generate`` unconstrained (forced to the constrained run's length), HF
``generate`` with ``prefix_allowed_tokens_fn`` (:class:`PrefixFn`), and ours -- per decoder pass and
per row-step; ``ours (full head)`` computes the full-vocabulary logits like the other two.
"""

from __future__ import annotations

import torch

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
from constrained_decoding.dfa import build_dfa
from constrained_decoding.rows import special_ids
from envs.openagi.grammar import plan_grammars


class PrefixFn:
    """``prefix_allowed_tokens_fn`` for HF generate: the canonical plans of each prompt's signature
    as one precomputed DFA per signature, walked from the root over the row's decoded tokens."""

    def __init__(self, tok, registry, signatures, rows_per_prompt: int):
        _, pad = special_ids(tok)
        self.rows_per_prompt = rows_per_prompt
        self.pad = pad
        langs, self.sig_index = plan_languages(tok, registry, signatures)
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




def openagi_section(args) -> list[str]:
    """The d_model 256 planner on the OpenAGI prompts: ours vs unconstrained vs prefix_fn (summary lines)."""
    model, tok, registry, prompts, sigs, enc = openagi_setup(args)
    eos, _ = special_ids(tok)
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
            common = generate_args(tok, mode, width)
            prefix = PrefixFn(tok, registry, sigs, rows_per_prompt=1 if mode == "beam" else width)
            constrained = lambda: model.generate(**enc, **common, prefix_allowed_tokens_fn=prefix,  # noqa: E731
                                                 renormalize_logits=True, max_new_tokens=96)
            torch.manual_seed(0)
            steps = constrained().shape[1] - 1  # (a) runs as many steps as (b)
            grammars = plan_grammars(tok, sigs, registry, LIMITS)  # what the env hands the decoder
            ours = constrained_search(model, tok, prompts, grammars, mode, width)
            fns = {
                "unconstrained": lambda: model.generate(**enc, **common, max_new_tokens=steps, min_new_tokens=steps),
                "prefix_fn": constrained,
                "ours": ours,
                "ours (full head)": lambda: ours(head="full"),  # the full-vocabulary logits path (the ablation)
            }
            measured = measure(fns, decoder, args.repeats)
            results[mode] = {k: v[:3] for k, v in measured.items()}
            out_b, out_c = measured["prefix_fn"][3], measured["ours"][3]
            print(mode_title(mode, width))
            print_times(results[mode])
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
