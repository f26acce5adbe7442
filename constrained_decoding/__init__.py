"""Constrained decoding of plans: only valid plans, with their exact constrained log-probabilities.

The distribution
----------------
A planner defines token distributions softmax(z / τ). The *constrained policy* π_c masks them to
the tokens the grammar allows in the current grammar state and renormalises:
π_c(a | s) = exp(z_a/τ) / Σ_{a' ∈ A(s)} exp(z_{a'}/τ). Everything here — sampling, beam search,
greedy and the teacher-forced scorer — uses this one distribution, written once
(:func:`constrained_decoding.masking.constrained_logprobs`), and the grammar states are a
deterministic function of the decoded prefix, so :func:`plan_logprobs` recomputes exactly the
log-probabilities :func:`sample_plans` reports, and Σ_{valid plans} π_c(plan) = 1.

*Linear task* (one input): one decoder row, the canonical plan text then EOS::

    π_c(plan) = Π_t π_c(y_t | prompt, y_<t),   y = tokens("A, B, C") + EOS

*Nonlinear task* (n inputs), semi-autoregressive: a head row, then n branch rows decoded in
parallel (they join the batch of running rows as soon as their head row has finished)::

    π_c(plan) = π_c(head | prompt) · Π_i π_c(branch_i | prompt, head, i)
    head row     tokens("J, T1, T2") + EOS                      (join tool J and tail T1, T2)
    branch row i tokens("J, T1, T2; branch i: (B1, B2)")        (the head text is a forced prefix)

The decoded rows assemble into the canonical text ``(B1, B2) (C1) J, T1, T2``. Why the join and
tail come first: ``check_plan`` couples the branches only through the join (its input
modalities) and the tail (no branch may reuse a tail tool). Once the head is fixed, the valid
plans are exactly the product of per-branch sets (chains from input i to the join's input i
avoiding J and the tail), so the branches are conditionally independent and can be decoded as
parallel rows with no dead end, and every decision sequence ends at a valid plan: the sum over
valid plans is 1. Decoding branches first and the join after cannot be exact: independent
branches can end in modalities no join accepts (with OpenAGI's tools, a text branch ending in an
image) or use up every tool a tail needs, and removing those dead ends would need a normaliser
over all branch tuples. Only heads with at least one valid branch per input are allowed.

The grammar is the env's
-------------------------
The decoder knows no env. The factorisation above is OpenAGI's plan grammar (the OpenAGI
env's ``grammar`` module); the decoder only sees the :class:`Grammar` protocol
(:mod:`constrained_decoding.protocol`): a token automaton, a root start state, the branch rows a
finished root row forks, and how rows become an action and back. Callers pass one grammar per
prompt, from the env (``env.grammar(tokenizer, task)``); there is no default.

Public API
----------
- :func:`sample_plans`, :func:`beam_search_plans`, :func:`greedy_plans` -> :class:`DecodedPlan`
  (the action, its rows and start states, its log-probability)
- :func:`sample_distinct_plans` -> :class:`DistinctPlans`: K distinct actions per prompt, an exact
  sample without replacement from π_c (stochastic beam search), their perturbed keys and threshold
- :func:`plan_logprobs`: differentiable ``[n]`` tensor of log π_c(action) (of actions, or of
  DecodedPlans, whose rows are reused)
- :class:`Grammar` (the protocol), :func:`build_row_languages` / :class:`RowText` (the minimal
  DFA of enumerated row texts, tokenised in context), :class:`TokenDFA` / :func:`build_dfa`,
  :class:`LazyTokenDFA` (an automaton expanded as rows reach its states)
- :func:`format_prompt`, :data:`PLAN_SEPARATOR`: the prompt format (causal models append it);
  :func:`encode_prompts`: its token ids

Modules, by job:

- grammars: ``protocol`` (Grammar), ``dfa`` (TokenDFA), ``rows`` (row languages from texts),
  ``lazy_dfa`` (LazyTokenDFA: states expanded on demand), ``tables`` (a batch's automata as tensors),
  ``lazy_tables`` (a batch's tables growing as rows reach lazy states), ``finish_bounds`` (how soon
  a row can finish: when the searches must read the device);
- the distribution: ``head`` (allowed-token logits), ``masking`` (π_c's log-probabilities from
  them), ``row_draws`` (per-row random streams), ``gumbel_keys`` (stochastic beam search's keys);
- the model: ``runner`` (step-wise features over the running rows), ``teacher_forcing`` (every
  position of given rows at once), ``prompts`` (the prompt format), ``encoder_memo`` (encoder
  states read once for sampling and scoring), ``cross_attention`` / ``prompt_attention`` (the
  prompts' cross-attention keys and values made once and read in place), ``gathered_rows`` (a
  scoring call's token-matrix rows read once);
- the row store: ``kv_rows`` (re-stacked rows, forks), ``slot_rows`` (rows in preallocated slots),
  ``device_policy`` (where rows live and how they move: the one place that decides),
  ``uploads`` (host data to the device), ``host_reads`` (what a step reads back, packed by name);
- the searches: ``search`` (sampling, and the row machinery beam search shares), ``beam`` (beam
  search, and stochastic beam search on perturbed keys), ``without_replacement`` (K distinct plans);
- the API: ``decode`` (sampling, beam search, greedy), ``logprobs`` (the scorer).

Models: HF encoder-decoder (T5) or causal (LLaMA-style) models, plain or PEFT-wrapped.
"""

from constrained_decoding.decode import DecodedPlan, beam_search_plans, greedy_plans, sample_plans
from constrained_decoding.dfa import TokenDFA, build_dfa
from constrained_decoding.lazy_dfa import LazyTokenDFA
from constrained_decoding.logprobs import plan_logprobs
from constrained_decoding.prompts import PLAN_SEPARATOR, encode_prompts, format_prompt
from constrained_decoding.protocol import Grammar
from constrained_decoding.rows import GrammarError, RowLanguages, RowText, build_row_languages, special_ids
from constrained_decoding.without_replacement import DistinctPlans, sample_distinct_plans

__all__ = [
    "DecodedPlan",
    "DistinctPlans",
    "Grammar",
    "GrammarError",
    "LazyTokenDFA",
    "PLAN_SEPARATOR",
    "RowLanguages",
    "RowText",
    "TokenDFA",
    "beam_search_plans",
    "build_dfa",
    "build_row_languages",
    "encode_prompts",
    "format_prompt",
    "greedy_plans",
    "sample_distinct_plans",
    "sample_plans",
    "plan_logprobs",
    "special_ids",
]
