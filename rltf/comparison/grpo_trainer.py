"""TRL's ``GRPOTrainer`` fed rltf's prompt ids, and optionally sampling under rltf's plan grammar.

:class:`PlannerGRPOTrainer` changes two things of ``trl.GRPOTrainer`` and nothing of its loss:

* **Prompt ids.** TRL tokenises a text prompt with ``processing_class(text=...)``, which adds the
  tokenizer's special tokens (a BOS before a chat template's text, for some tokenizers) and never
  cuts a long prompt. Here prompts become ids through
  :func:`constrained_decoding.prompts.encode_formatted`, the one function rltf's sampling, scoring,
  SFT and beam search use: GRPO conditions on exactly the ids the RLTF planner is trained and
  evaluated with (the dataset's texts are :func:`constrained_decoding.prompts.format_prompt` of the
  task description with the planner's tokenizer: its chat template for an instruct LLM).
* **Constrained sampling** (``grammars`` given: ``grpo.sampling=constrained``). Each completion is
  sampled under a :class:`GrammarLogitsProcessor` that masks every token not continuing a valid
  plan's canonical text for its task (the plans of the env's grammar, :func:`plan_text_language`),
  so every completion is a valid plan — what a TRL user gets today from vLLM's structured outputs
  (``vllm_structured_outputs_regex``), here on ``transformers.generate``. TRL's loss still uses
  the *unconstrained* log-probabilities log π(token) of its own forward pass: the gradient is that of
  log π(plan) for plans drawn from π_c, not of log π_c, a biased estimator of the policy gradient
  of the constrained policy (``log π = log π_c + log Z``: the missing ``∇ log Z`` term pushes mass
  onto tokens the grammar allows whatever the reward). RLTF (:mod:`rltf.rl`) samples from π_c and
  differentiates log π_c, the same distribution.

The grammar's language is every valid plan's canonical text tokenised whole (``grammar.format``
of each of ``grammar.enumerate()``) then EOS, as one left-to-right row: what TRL's single-sequence
sampler can follow (rltf's own decoder writes a nonlinear plan's branches as parallel rows; the
plan texts are the same). It enumerates the plans, so it suits small plan languages (OpenAGI's:
at most a few thousand plans per task signature). A grammar that cannot be enumerated (a travel
itinerary) is followed lazily instead (``separator`` given): its rows one after the other as one
sequence, a separator token between rows (:mod:`rltf.comparison.lazy_grammar`), every completion
a valid plan whose canonical text the reward judges.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence

import torch
from transformers import LogitsProcessor, LogitsProcessorList
from trl import GRPOTrainer

from constrained_decoding.dfa import TokenDFA, build_dfa
from constrained_decoding.prompts import encode_formatted
from constrained_decoding.protocol import Grammar
from constrained_decoding.rows import encode_texts, special_ids
from rltf.comparison.lazy_grammar import LazyGrammarLogitsProcessor


def plan_text_language(tokenizer, grammars: Sequence[Grammar]) -> tuple[TokenDFA, dict[int, int]]:
    """One minimal DFA over the canonical plan texts of every grammar (each plan's text tokenised
    whole, then EOS) and each grammar's start state, keyed by ``id(grammar)``."""
    eos, pad = special_ids(tokenizer)
    distinct = list({id(g): g for g in grammars}.values())
    languages = []
    for g in distinct:
        texts = sorted({g.format(action) for action in g.enumerate()})
        languages.append([tuple(ids) + (eos,) for ids in encode_texts(tokenizer, texts)])
    dfa, starts = build_dfa(languages, pad_id=pad)
    return dfa, {id(g): s for g, s in zip(distinct, starts)}


class GrammarLogitsProcessor(LogitsProcessor):
    """Masks, for every row of a ``generate`` batch, the tokens that do not continue a valid plan
    from its start state ``starts[row]`` in ``dfa``; a finished row (EOS written) may only write the
    pad token, which ``generate`` puts there anyway. The first call puts every row at its start
    state; each later call advances it by the token the row just wrote (one processor per
    ``generate`` call)."""

    def __init__(self, dfa: TokenDFA, starts: Sequence[int]):
        self.dfa, self.starts = dfa, list(starts)
        self.states: torch.Tensor | None = None
        self.tables: tuple[torch.Tensor, ...] | None = None

    def __call__(self, input_ids: torch.Tensor, scores: torch.Tensor) -> torch.Tensor:
        device = scores.device
        if self.tables is None or self.tables[0].device != device:  # the DFA's arrays, once per device
            self.tables = tuple(torch.as_tensor(a, device=device) for a in
                                (self.dfa.allowed, self.dfa.valid, self.dfa.next_state))
        allowed, valid, next_state = self.tables
        if self.states is None:
            if input_ids.shape[0] != len(self.starts):
                raise ValueError(f"generate runs {input_ids.shape[0]} rows; the processor has start states for "
                                 f"{len(self.starts)}")
            self.states = torch.tensor(self.starts, dtype=torch.long, device=device)
        else:
            last = input_ids[:, -1].to(device)
            hit = (allowed[self.states] == last[:, None]) & valid[self.states]
            if not bool(hit.any(-1).all()):
                rows = torch.nonzero(~hit.any(-1)).flatten().tolist()
                raise RuntimeError(f"rows {rows} wrote a token the plan grammar does not allow (another "
                                   "processor after this one changed the scores?)")
            self.states = next_state[self.states, hit.int().argmax(-1)]
        rows_valid = valid[self.states]
        vocab = scores.shape[1]  # padding slots point past the vocabulary (pad may be an allowed token: EOS)
        index = torch.where(rows_valid, allowed[self.states], vocab)
        keep = torch.zeros((scores.shape[0], vocab + 1), dtype=torch.bool, device=device)
        keep.scatter_(1, index, rows_valid)
        return scores.masked_fill(~keep[:, :vocab], float("-inf"))


class PlannerGRPOTrainer(GRPOTrainer):
    """``trl.GRPOTrainer`` whose prompt ids are rltf's (:func:`encode_formatted`) and which, given
    ``grammars`` (task id -> the env's grammar of that task), samples under the plan grammar (see
    the module docstring): over its enumerated plan texts, or, with ``separator`` (a token id:
    :func:`rltf.comparison.lazy_grammar.separator_id`), lazily row by row. The train dataset needs a
    ``task_id`` column for constrained sampling."""

    def __init__(self, *args, encoder_decoder: bool = False, grammars: Mapping[int, Grammar] | None = None,
                 separator: int | None = None, **kwargs):
        super().__init__(*args, **kwargs)
        self.encoder_decoder = encoder_decoder
        self.grammars = dict(grammars) if grammars is not None else None
        self.separator = separator
        self._row_tasks: list[int] | None = None
        self.plan_dfa, self.plan_starts = (plan_text_language(self._tokenizer, list(self.grammars.values()))
                                           if self.grammars is not None and separator is None else (None, {}))
        if self.grammars is not None and self.use_vllm:
            raise ValueError("constrained GRPO sampling runs on transformers' generate; with vLLM use TRL's "
                             "vllm_structured_outputs_regex instead")

    def _tokenize_prompts(self, prompts: list):
        if prompts and isinstance(prompts[0], str):
            return encode_formatted(self._tokenizer, prompts, self.encoder_decoder), None, {}
        return super()._tokenize_prompts(prompts)

    def _generate_and_score_completions(self, inputs):
        self._row_tasks = [int(x["task_id"]) for x in inputs] if self.grammars is not None else None
        try:
            return super()._generate_and_score_completions(inputs)
        finally:
            self._row_tasks = None

    def _generate_single_turn(self, prompt_ids, *args, **kwargs):
        if self.grammars is None:
            return super()._generate_single_turn(prompt_ids, *args, **kwargs)
        if self._row_tasks is None or len(self._row_tasks) != len(prompt_ids):
            raise RuntimeError(f"constrained GRPO sampling: {len(prompt_ids)} prompts to generate for, "
                               f"task ids known for {len(self._row_tasks or [])}")
        missing = sorted(set(self._row_tasks) - set(self.grammars))
        if missing:
            raise KeyError(f"constrained GRPO sampling: no grammar for task id(s) {missing}")
        if self.separator is not None:  # the grammar's rows as one sequence, never enumerated
            processor = LazyGrammarLogitsProcessor([self.grammars[t] for t in self._row_tasks], self.separator)
        else:
            processor = GrammarLogitsProcessor(self.plan_dfa,
                                               [self.plan_starts[id(self.grammars[t])] for t in self._row_tasks])
        model = self.accelerator.unwrap_model(self.model_wrapped)
        generate = model.generate  # TRL calls unwrapped_model.generate(**inputs, generation_config=...)

        def constrained_generate(*a, **kw):
            return generate(*a, **kw, logits_processor=LogitsProcessorList([processor]))

        if "generate" in vars(model):
            raise RuntimeError(f"{type(model).__name__}.generate is already patched on the instance")
        model.generate = constrained_generate
        try:
            return super()._generate_single_turn(prompt_ids, *args, **kwargs)
        finally:
            del model.generate  # the class's method again
