"""The planner's prompt format, shared by decoding, scoring and training code.

An encoder-decoder planner (T5) reads the task description as its encoder input and writes the
plan on the decoder side. A causal planner (LLaMA-style) reads the description followed by
:data:`PLAN_SEPARATOR` and continues with the plan. The plan is tokenised on its own
(``add_special_tokens=False``) and appended to the tokenised prompt, so a plan's tokens never
depend on the prompt it follows.

Prompt length: ``tokenizer.model_max_length`` (rltf sets it from ``planner.max_prompt_tokens``)
bounds every encoded prompt. A longer prompt loses tokens from the LEFT of its text (as TRL
truncates prompts: the end of a few-shot prompt is the task itself), keeping the tokenizer's
special tokens and the plan separator, and a :class:`PromptTruncationWarning` says prompts are cut (its
text is the same for every call with the same limit, so Python's default filter shows it once where it
is raised; code that cuts prompts by design, such as the travel flows, filters the class).

Chat models: a causal planner whose tokenizer has a chat template (``tokenizer.chat_template``,
e.g. SmolLM2-Instruct) reads its prompt the way it was instruction-tuned: the template around the
messages of a :class:`Conversation` (instructions as the system message, solved examples as
earlier user / assistant turns, the task as the last user message), with the assistant turn
opened; the plan is the assistant's answer and ends with the template's end-of-turn token (the
tokenizer's EOS, which the grammar appends). A plain description is the conversation of that task
alone (the template's own default system message, if it has one). This happens in
:func:`encode_prompts`, the one function that turns prompts into ids for sampling, teacher-forced
scoring, SFT and beam search alike, so training and evaluation read the same text. Planners
without a template (the embedded planners, T5, base LLaMA) keep the plain format above; their
:class:`Conversation` prompts are ``Task: <q>\nPlan: <a>\n\n`` per example, then ``Task: <task>``
(the instructions are not shown: a model without instruction tuning is not told, it is shown).
"""

from __future__ import annotations

import collections
import threading
import warnings
import weakref
from collections.abc import Sequence
from dataclasses import dataclass

PLAN_SEPARATOR = "\nPlan:"


class PromptTruncationWarning(UserWarning):
    """Prompts longer than ``tokenizer.model_max_length`` (``planner.max_prompt_tokens``) were cut from
    the left (:func:`encode_formatted`). Its own class, so that runs and tests whose prompts are cut by
    design (the travel flows' short limits) can filter or expect exactly this warning."""


@dataclass(frozen=True)
class Conversation:
    """A prompt with more than the task: ``instructions`` (what the planner is told first: the env's
    :meth:`~envs.protocol.RLTFEnv.plan_instructions`), solved ``examples`` as ``(task, plan text)``
    pairs, then the ``task`` itself. A chat planner reads them as messages; a plain one as text
    (see the module docstring). Hashable: equal conversations are one prompt to the decoder."""

    task: str
    instructions: str = ""
    examples: tuple[tuple[str, str], ...] = ()

    def messages(self) -> list[dict[str, str]]:
        """The chat messages: system (when there are instructions), a user / assistant pair per
        example, the task as the last user message."""
        head = [{"role": "system", "content": self.instructions}] if self.instructions else []
        shots = [{"role": role, "content": text} for q, a in self.examples
                 for role, text in (("user", q), ("assistant", a))]
        return [*head, *shots, {"role": "user", "content": self.task}]

    def plain_text(self) -> str:
        """The plain format: ``Task: <q>\nPlan: <a>\n\n`` per example, then ``Task: <task>`` (the
        bare task without examples); the instructions are not part of it."""
        if not self.examples:
            return self.task
        shots = "".join(f"Task: {q}\nPlan: {a}\n\n" for q, a in self.examples)
        return f"{shots}Task: {self.task}"


def uses_chat_template(tokenizer, encoder_decoder: bool) -> bool:
    """Whether a planner's prompts are chat-formatted: a causal model whose tokenizer has a chat template."""
    return not encoder_decoder and bool(getattr(tokenizer, "chat_template", None))


def format_prompt(description: str | Conversation, encoder_decoder: bool, tokenizer=None) -> str:
    """The text the model is conditioned on for a task description (or a :class:`Conversation`).

    With a ``tokenizer`` that has a chat template (causal models only): the template around the
    conversation's messages, assistant turn opened. Otherwise the plain format: the text itself
    (encoder-decoder) or the text followed by :data:`PLAN_SEPARATOR` (causal)."""
    if isinstance(description, Conversation):
        conversation = description
    elif isinstance(description, str):
        conversation = Conversation(description)
    else:
        raise TypeError(f"a prompt must be a task description string or a Conversation, "
                        f"got {type(description).__name__}")
    if tokenizer is not None and uses_chat_template(tokenizer, encoder_decoder):
        return tokenizer.apply_chat_template(conversation.messages(), tokenize=False, add_generation_prompt=True)
    text = conversation.plain_text()
    return text if encoder_decoder else text + PLAN_SEPARATOR


def encode_prompts(tokenizer, descriptions: Sequence[str | Conversation], encoder_decoder: bool) -> list[list[int]]:
    """Token ids of each formatted prompt (:func:`format_prompt` with ``tokenizer``: chat-formatted
    when it has a chat template), with the tokenizer's own special tokens (BOS / EOS) in the plain
    format. The one place prompts become ids for sampling, scoring, SFT and beam search."""
    return encode_formatted(tokenizer, [format_prompt(d, encoder_decoder, tokenizer) for d in descriptions],
                            encoder_decoder)


def encode_formatted(tokenizer, texts: Sequence[str], encoder_decoder: bool) -> list[list[int]]:
    """Token ids of already formatted prompts, each at most ``tokenizer.model_max_length`` long.

    A tokenizer with a chat template (causal models) adds no special tokens: the template's text
    holds them (texts are expected from :func:`format_prompt` with that tokenizer)."""
    chat = uses_chat_template(tokenizer, encoder_decoder)
    ids = _token_ids(tokenizer, list(texts), add_special_tokens=not chat)
    for t, x in zip(texts, ids):
        if not x:
            raise ValueError(f"prompt {t!r} encodes to no tokens")
    limit = getattr(tokenizer, "model_max_length", None)
    if not limit or all(len(x) <= limit for x in ids):
        return ids
    frame = _token_ids(tokenizer, [format_prompt("", encoder_decoder, tokenizer)], add_special_tokens=not chat)[0]
    out, cut = [], 0
    for x in ids:
        if len(x) > limit:
            x, cut = left_truncate(x, frame, limit), cut + 1
        out.append(x)
    # one text per limit: Python's default filter shows it once per place it is raised from, not
    # on every call of a run whose prompts are cut by design (the travel flows' 160 tokens)
    warnings.warn(f"prompts longer than {limit} tokens (planner.max_prompt_tokens / tokenizer.model_max_length) "
                  "are truncated from the left, keeping their end", PromptTruncationWarning, stacklevel=3)
    return out


_IDS: weakref.WeakKeyDictionary = weakref.WeakKeyDictionary()  # tokenizer -> (settings, LRU of text -> ids)
_IDS_LOCK = threading.Lock()
_IDS_PER_TOKENIZER = 8192  # texts remembered per tokenizer (a flow step tokenizes ~200 prompts, most twice)


def _token_ids(tokenizer, texts: list[str], add_special_tokens: bool) -> list[list[int]]:
    """``tokenizer(texts, add_special_tokens=...)["input_ids"]``, each text tokenised once per
    tokenizer: sampling and re-scoring read the same prompts, and so do a query's passes. Asked
    with ``verbose=False``: the tokenizer's "longer than the maximum" notice would be wrong here, since
    the caller cuts the ids to the limit and says so itself. The
    memo (of uncut ids: the length limit applies after it) starts afresh when the tokenizer's
    vocabulary size, special tokens or BOS / EOS settings change; a tokenizer changed in another way (its normalizer,
    say) needs :func:`forget_ids`."""
    if not texts:
        return []
    settings = (len(tokenizer), tuple(getattr(tokenizer, "all_special_ids", ())),
                getattr(tokenizer, "add_bos_token", None), getattr(tokenizer, "add_eos_token", None))
    try:
        held = _IDS.get(tokenizer)
    except TypeError:  # a tokenizer that cannot be weakly referenced: no memo
        return [list(x) for x in tokenizer(texts, add_special_tokens=add_special_tokens, verbose=False)["input_ids"]]
    keys = [(add_special_tokens, t) for t in texts]
    with _IDS_LOCK:  # (flow passes run in threads)
        if held is None or held[0] != settings:
            held = _IDS[tokenizer] = (settings, collections.OrderedDict())
        memo: collections.OrderedDict = held[1]
        missing = list(dict.fromkeys(k for k in keys if k not in memo))
        if missing:
            new = tokenizer([t for _, t in missing], add_special_tokens=add_special_tokens, verbose=False)["input_ids"]
            memo.update(zip(missing, map(tuple, new)))
        out = []
        for k in keys:
            memo.move_to_end(k)
            out.append(list(memo[k]))
        while len(memo) > _IDS_PER_TOKENIZER:
            memo.popitem(last=False)
    return out


def forget_ids(tokenizer=None) -> None:
    """Drop the remembered ids of ``tokenizer`` (of every tokenizer: ``None``)."""
    with _IDS_LOCK:
        if tokenizer is None:
            _IDS.clear()
        else:
            _IDS.pop(tokenizer, None)


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
