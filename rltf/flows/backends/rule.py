"""``rule``: no model at all -- every choice answered with the cheapest option the scaffold shows.

The no-model baseline of a scaffolded flow (issue #51): what the scaffold alone scores, so a
scaffolded figure can be printed beside it. The rule reads nothing but the options -- the answer
space the engine hands it and, for a choice, the lines of the prompt that list those options -- no
evaluator, no plan, no query text, no other line of the prompt:

* a choice (:class:`~rltf.flows.backends.base.Choices`, or a grammar with ``options``, such as a
  :class:`~rltf.flows.engine.choice.ChoiceGrammar`): the **cheapest option shown** -- the option
  whose ``- <option> ...`` line of the last message shows the lowest first dollar amount after the
  option's text (MTP's cost hints "from $734", an executor's "$17 per person", the deliverer's
  "total $4669"); the first option when no line shows one, and the first of the cheapest on a tie
  (:func:`cheapest_shown`). The scaffolds list their options cheapest first where they rank them
  (MTP's executors, MTP's manager with ``manager_options``), so there it is the first option;
* a grammar that can list its actions (``enumerate()``, e.g. the travel domain's plan grammar that
  ReAct builds over the gathered entities): its first action (its first route, the first option of
  every slot). A grammar that cannot list them is a :class:`BackendError`;
* free text (a free-text supervisor, a criterion, a thought): the **empty answer**, which each
  scaffold documents as keeping its own text -- OKR-Agent keeps its template criterion
  (``text.strip() or a.criterion``), MTP's executor still reads the template rewrite of its
  meta-task, ReAct's step has no thought. (A node that parses free text as a plan -- an
  endpoint's JSON plan -- gets nothing it can parse and fails: give the rule a grammar.)

``tokenizer``: a byte-level tokenizer (:func:`byte_tokenizer`, built here: 256 byte tokens, no
merges, no training, nothing downloaded), only so a scaffold that builds a grammar for its backend's
tokenizer (ReAct's plan) can build one; the rule never encodes a prompt. Token counts are 0 (no
model read or wrote anything); ``logprob`` is 0 for choices and grammar answers (the rule is
deterministic) and None for free text.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from functools import cache
from typing import Any

from rltf.flows.backends.base import (
    BackendError,
    Choices,
    Completion,
    GrammarArg,
    Message,
    Sampling,
    check_messages,
    per_item,
)

__all__ = ["RuleBackend", "byte_tokenizer", "cheapest_shown", "first_answer"]

_DOLLARS = re.compile(r"\$\s?(\d[\d,]*(?:\.\d+)?)")


def cheapest_shown(options: Sequence[str], text: str) -> str:
    """The option of ``options`` whose listing line in ``text`` (``- <option>`` then, after the
    option's own text, a dollar amount) shows the lowest amount; the first option when none shows
    one; the earliest listed of the cheapest on a tie. A line is the listing of the longest option
    it starts with; options not listed count as showing no amount."""
    by_length = sorted(options, key=len, reverse=True)
    shown: dict[str, float] = {}
    for line in text.splitlines():
        if not line.startswith("- "):
            continue
        body = line[2:]
        option = next((o for o in by_length if body.startswith(o)), None)
        if option is None or option in shown:
            continue
        m = _DOLLARS.search(body, len(option))
        if m is not None:
            shown[option] = float(m.group(1).replace(",", ""))
    if not shown:
        return options[0]
    low = min(shown.values())
    return next(o for o in options if shown.get(o) == low)


@cache
def byte_tokenizer():
    """A fast tokenizer with one token per byte (ids 3..258; ``<pad>`` 0, ``</s>`` 1, ``<unk>`` 2):
    every text encodes, so any grammar of entity names builds on it; nothing is trained or read."""
    # deferred: tokenizers and transformers load only when a scaffold asks for a tokenizer (ReAct's plan)
    from tokenizers import Tokenizer, decoders, models, pre_tokenizers
    from transformers import PreTrainedTokenizerFast  # (the same deferral)

    alphabet = sorted(pre_tokenizers.ByteLevel.alphabet())
    vocab = {"<pad>": 0, "</s>": 1, "<unk>": 2, **{ch: i for i, ch in enumerate(alphabet, 3)}}
    tok = Tokenizer(models.BPE(vocab=vocab, merges=[], unk_token="<unk>"))
    tok.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False, use_regex=False)
    tok.decoder = decoders.ByteLevel()
    return PreTrainedTokenizerFast(tokenizer_object=tok, pad_token="<pad>", eos_token="</s>", unk_token="<unk>")


def first_answer(grammar: GrammarArg, messages: Sequence[Message] = ()) -> tuple[str, Any]:
    """The rule's answer to one item: (its text, its value) -- see the module docstring. ``messages``:
    the item's messages, of which only the last one's option lines are read (for a choice)."""
    if grammar is None:
        return "", None
    listing = messages[-1]["content"] if messages else ""
    if isinstance(grammar, Choices):
        return cheapest_shown(grammar.options, listing), None
    options = getattr(grammar, "options", None)
    if isinstance(options, (list, tuple)) and options and all(isinstance(o, str) for o in options):
        pick = cheapest_shown(tuple(options), listing)
        return pick, pick
    actions = getattr(grammar, "enumerate", None)
    if not callable(actions):
        raise BackendError(f"the rule backend answers choices and grammars that list their actions; "
                           f"{type(grammar).__name__} has neither options nor enumerate()")
    action = next(iter(actions()), None)
    if action is None:
        raise BackendError(f"{type(grammar).__name__} lists no action: the rule has nothing to answer")
    return grammar.format(action), action


class RuleBackend:
    """The no-model baseline backend (see the module docstring): the cheapest option shown of every choice."""

    supports_grammar = True

    def __init__(self, *, sampling: Sampling | None = None):
        self.sampling = sampling or Sampling()  # accepted for the config's uniformity; the rule does not sample
        self.calls = 0

    @property
    def tokenizer(self):
        return byte_tokenizer()

    def generate(self, messages_batch: Sequence[Sequence[Message]], grammar: GrammarArg | Sequence[GrammarArg] = None,
                 *, sampling: Sampling | None = None) -> list[Completion]:
        batch = check_messages(messages_batch)  # checked, never read
        out = []
        for messages, g in zip(batch, per_item(grammar, len(batch))):
            text, value = first_answer(g, messages)
            out.append(Completion(text=text, prompt_tokens=0, completion_tokens=0,
                                  logprob=None if g is None else 0.0, value=value))
        self.calls += len(batch)
        return out

    def __repr__(self) -> str:
        return "RuleBackend(cheapest option shown)"
