"""The one interface every flow backend implements, and what it returns.

A backend turns chat messages into text. ``generate`` takes a *batch* of message lists (so a
local model can run them in one forward pass) and optionally a grammar per item; it returns one
:class:`Completion` per item with the token usage the flow engine accounts per node.

Grammars: an item's grammar is ``None`` (free generation), a
:class:`constrained_decoding.protocol.Grammar` built for the backend's own tokenizer, or a
:class:`Choices` (a list of option strings) that a backend with a tokenizer turns into a
:class:`rltf.flows.engine.choice.ChoiceGrammar` itself. A backend that cannot constrain its output
(``supports_grammar = False``, e.g. a remote endpoint) refuses grammars; the engine then asks it
for free text and validates a :class:`Choices` answer instead, retrying with the options listed.
"""

from __future__ import annotations

import dataclasses
import math
import numbers
from collections.abc import Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Protocol, Union, runtime_checkable

if TYPE_CHECKING:
    from constrained_decoding.decode import DecodedPlan
    from constrained_decoding.protocol import Grammar

__all__ = ["Backend", "BackendError", "Choices", "Completion", "GrammarArg", "Message", "Messages", "Sampling",
           "check_messages", "check_usage_and_logprob", "per_item", "render_plain"]

Message = dict[str, str]
"""One chat message: ``{"role": "system" | "user" | "assistant", "content": str}``."""
Messages = list[Message]


class BackendError(RuntimeError):
    """A backend that cannot do what it was asked (bad configuration, unsupported grammar)."""


@dataclass(frozen=True)
class Choices:
    """The answer must be exactly one of ``options`` (a grammar in spirit, tokenizer-free). An
    option listed twice is one option (the answer is a string: two entities that write the same
    plan string, like two table rows with one name, are the same answer): ``options`` keeps the
    first of each, in order."""

    options: tuple[str, ...]

    def __init__(self, options: Sequence[str]):
        opts = tuple(options)
        if not opts or not all(isinstance(o, str) and o for o in opts):
            raise ValueError(f"Choices needs a non-empty list of non-empty strings, got {options!r}")
        object.__setattr__(self, "options", tuple(dict.fromkeys(opts)))


GrammarArg = Union["Grammar", Choices, None]


@dataclass(frozen=True)
class Sampling:
    """How to decode: greedy by default (``do_sample=False``); sampling at ``temperature`` with
    optional ``top_k`` (0: off) / ``top_p`` (1: off) filtering. ``max_new_tokens`` bounds free
    generation (a grammar bounds its own rows; a local causal model also stops at its last position)."""

    max_new_tokens: int = 256
    do_sample: bool = False
    temperature: float = 1.0
    top_p: float = 1.0
    top_k: int = 0

    def __post_init__(self) -> None:
        if self.max_new_tokens < 1:
            raise ValueError(f"Sampling.max_new_tokens={self.max_new_tokens}: expected at least 1")
        if not self.temperature > 0:
            raise ValueError(f"Sampling.temperature={self.temperature}: expected > 0 (do_sample=False is greedy)")
        if not 0 < self.top_p <= 1:
            raise ValueError(f"Sampling.top_p={self.top_p}: expected in (0, 1]")
        if self.top_k < 0:
            raise ValueError(f"Sampling.top_k={self.top_k}: expected >= 0")

    def replace(self, **changes: Any) -> Sampling:
        return dataclasses.replace(self, **changes)


@dataclass
class Completion:
    """One generated answer.

    ``logprob``: log-probability of the answer's tokens under the distribution it was decoded
    from (None when the backend cannot say). For constrained decoding it is exactly log π_c of
    the action, and ``decoded`` (rows, start states, grammar), ``prompt`` (the description the
    decoder was conditioned on) and ``temperature`` are what
    :func:`constrained_decoding.logprobs.plan_logprobs` needs to re-score it with gradients
    (see :func:`rltf.flows.backends.planner.rescore`)."""

    text: str
    prompt_tokens: int
    completion_tokens: int
    logprob: float | None = None
    decoded: DecodedPlan | None = None
    prompt: str | None = None
    temperature: float = 1.0
    value: Any = None  # the grammar's action (for a ChoiceGrammar: the option string), when constrained

    def __post_init__(self) -> None:
        check_usage_and_logprob(self.prompt_tokens, self.completion_tokens, self.logprob, "Completion")


def check_usage_and_logprob(prompt_tokens: Any, completion_tokens: Any, logprob: Any, what: str) -> None:
    """Token counts are integers >= 0 and a log-probability is None or a finite number <= 0 (up to
    rounding): a backend answering otherwise is broken, and its numbers would poison the usage
    accounting or the policy gradient. A ``ValueError`` naming ``what`` and the bad value."""
    for name, n in (("prompt_tokens", prompt_tokens), ("completion_tokens", completion_tokens)):
        if isinstance(n, bool) or not isinstance(n, numbers.Integral) or n < 0:
            raise ValueError(f"{what}: {name}={n!r}; expected an integer >= 0 (a token count)")
    if logprob is None:
        return
    if isinstance(logprob, bool) or not isinstance(logprob, numbers.Real) or not math.isfinite(logprob) \
            or logprob > LOGPROB_ROUNDING:
        raise ValueError(f"{what}: logprob={logprob!r}; expected a finite log-probability <= 0 (or None when the "
                         "backend cannot say)")


LOGPROB_ROUNDING = 1e-4  # a sum of token log-probabilities may round a little above 0


@runtime_checkable
class Backend(Protocol):
    """``generate(messages_batch, grammar=None, *, sampling=None) -> list[Completion]``.

    ``grammar``: one :data:`GrammarArg` for every item, or a sequence of them (one per item).
    ``sampling``: overrides the backend's default :class:`Sampling` for this call.
    Exceptions raised here are what the engine retries with exponential backoff."""

    supports_grammar: bool

    def generate(self, messages_batch: Sequence[Sequence[Message]], grammar: GrammarArg | Sequence[GrammarArg] = None,
                 *, sampling: Sampling | None = None) -> list[Completion]: ...


def check_messages(messages_batch: Sequence[Sequence[Message]]) -> list[Messages]:
    """The batch as lists of ``{"role", "content"}`` dicts of strings; a clear error otherwise."""
    if isinstance(messages_batch, (str, dict)):
        raise TypeError("generate takes a batch: a list of message lists, e.g. [[{'role': 'user', 'content': 'hi'}]]")
    out = []
    for i, messages in enumerate(messages_batch):
        if isinstance(messages, (str, dict)) or not messages:
            raise TypeError(f"item {i} of the batch is not a non-empty list of messages: {messages!r}")
        for m in messages:
            if not isinstance(m, dict) or not isinstance(m.get("role"), str) or not isinstance(m.get("content"), str):
                raise TypeError(f"item {i}: expected messages {{'role': str, 'content': str}}, got {m!r}")
        out.append([{"role": m["role"], "content": m["content"]} for m in messages])
    return out


def per_item(grammar: GrammarArg | Sequence[GrammarArg], n: int) -> list[GrammarArg]:
    """One grammar argument per batch item."""
    if grammar is None or isinstance(grammar, Choices) or not isinstance(grammar, (list, tuple)):
        return [grammar] * n
    if len(grammar) != n:
        raise ValueError(f"got {n} message lists but {len(grammar)} grammars; expected one per item (or one for all)")
    return list(grammar)


def render_plain(messages: Sequence[Message], assistant_cue: bool = True) -> str:
    """The plain transcript of messages, one ``role: content`` line each (then ``assistant:`` when
    ``assistant_cue``, so a causal model continues as the assistant): what a model without a chat
    template is conditioned on."""
    text = "\n".join(f"{m['role']}: {m['content']}" for m in messages)
    return text + "\nassistant:" if assistant_cue else text
