"""The planner's prompt format, shared by decoding, scoring and training code.

An encoder-decoder planner (T5) reads the task description as its encoder input and writes the
plan on the decoder side. A causal planner (LLaMA-style) reads the description followed by
:data:`PLAN_SEPARATOR` and continues with the plan. The plan is tokenised on its own
(``add_special_tokens=False``) and appended to the tokenised prompt, so a plan's tokens never
depend on the prompt it follows.
"""

from __future__ import annotations

from collections.abc import Sequence

PLAN_SEPARATOR = "\nPlan:"


def format_prompt(description: str, encoder_decoder: bool) -> str:
    """The text the model is conditioned on for a task description."""
    if not isinstance(description, str):
        raise TypeError(f"a prompt must be a task description string, got {type(description).__name__}")
    return description if encoder_decoder else description + PLAN_SEPARATOR


def encode_prompts(tokenizer, descriptions: Sequence[str], encoder_decoder: bool) -> list[list[int]]:
    """Token ids of each formatted prompt, with the tokenizer's own special tokens (BOS / EOS)."""
    texts = [format_prompt(d, encoder_decoder) for d in descriptions]
    ids = [list(x) for x in tokenizer(texts, add_special_tokens=True)["input_ids"]] if texts else []
    for d, x in zip(descriptions, ids):
        if not x:
            raise ValueError(f"prompt {d!r} encodes to no tokens")
    return ids
