"""The planner's prompt format, shared by decoding, scoring and training code.

An encoder-decoder planner (T5) reads the task description as its encoder input and writes the
plan on the decoder side. A causal planner (LLaMA-style) reads the description followed by
:data:`PLAN_SEPARATOR` and continues with the plan. The plan is tokenised on its own
(``add_special_tokens=False``) and appended to the tokenised prompt, so a plan's tokens never
depend on the prompt it follows.

Prompt length: ``tokenizer.model_max_length`` (rltf sets it from ``planner.max_prompt_tokens``)
bounds every encoded prompt. A longer prompt loses tokens from the LEFT of its text (as TRL
truncates prompts: the end of a few-shot prompt is the task itself), keeping the tokenizer's
special tokens and the plan separator, and a warning says how many prompts were cut.
"""

from __future__ import annotations

import warnings
from collections.abc import Sequence

PLAN_SEPARATOR = "\nPlan:"


def format_prompt(description: str, encoder_decoder: bool) -> str:
    """The text the model is conditioned on for a task description."""
    if not isinstance(description, str):
        raise TypeError(f"a prompt must be a task description string, got {type(description).__name__}")
    return description if encoder_decoder else description + PLAN_SEPARATOR


def encode_prompts(tokenizer, descriptions: Sequence[str], encoder_decoder: bool) -> list[list[int]]:
    """Token ids of each formatted prompt, with the tokenizer's own special tokens (BOS / EOS)."""
    return encode_formatted(tokenizer, [format_prompt(d, encoder_decoder) for d in descriptions], encoder_decoder)


def encode_formatted(tokenizer, texts: Sequence[str], encoder_decoder: bool) -> list[list[int]]:
    """Token ids of already formatted prompts, each at most ``tokenizer.model_max_length`` long."""
    ids = [list(x) for x in tokenizer(list(texts), add_special_tokens=True)["input_ids"]] if texts else []
    for t, x in zip(texts, ids):
        if not x:
            raise ValueError(f"prompt {t!r} encodes to no tokens")
    limit = getattr(tokenizer, "model_max_length", None)
    if not limit or all(len(x) <= limit for x in ids):
        return ids
    frame = list(tokenizer([format_prompt("", encoder_decoder)], add_special_tokens=True)["input_ids"][0])
    out, cut = [], 0
    for x in ids:
        if len(x) > limit:
            x, cut = left_truncate(x, frame, limit), cut + 1
        out.append(x)
    warnings.warn(f"{cut} of {len(ids)} prompt(s) are longer than {limit} tokens (planner.max_prompt_tokens / "
                  "tokenizer.model_max_length): their text was truncated from the left", stacklevel=3)
    return out


def left_truncate(ids: list[int], frame: list[int], limit: int) -> list[int]:
    """``ids`` cut to ``limit`` tokens from the left of the text, keeping what every prompt shares
    with the empty prompt's ids ``frame`` at its start (BOS) and end (separator, EOS)."""
    head = 0
    while head < min(len(ids), len(frame)) and ids[head] == frame[head]:
        head += 1
    tail = 0
    while tail < min(len(ids), len(frame)) - head and ids[-1 - tail] == frame[-1 - tail]:
        tail += 1
    if head + tail >= limit:
        raise ValueError(f"max_prompt_tokens={limit} leaves no room for text: the prompt template alone takes "
                         f"{head + tail} tokens")
    body = ids[head : len(ids) - tail]
    return ids[:head] + body[len(body) - (limit - head - tail):] + ids[len(ids) - tail:]
