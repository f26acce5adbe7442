"""A scripted backend: canned answers in order, for testing flows without a model.

It implements the backend interface exactly (a test double): every message list it receives is
recorded in ``calls`` (with its grammar in ``grammars``), and each item consumes the next entry
of the script: a string (the answer), an exception instance (raised, as a failing endpoint
would), or a callable ``messages -> str`` (an answer computed from the prompt). A callable script
answers every item; an exhausted script is a :class:`BackendError` (not retried). Token counts are whitespace-separated
words, so tests can predict them.
"""

from __future__ import annotations

from collections import deque
from collections.abc import Callable, Iterable, Sequence

from rltf.flows.backends.base import BackendError, Completion, GrammarArg, Message, Sampling, check_messages, per_item

__all__ = ["ScriptedBackend", "word_count"]

Script = str | BaseException | Callable[[list[Message]], str]


def word_count(messages: Sequence[Message]) -> int:
    """The scripted backend's prompt token count: whitespace-separated words of every message."""
    return sum(len(m["content"].split()) for m in messages)


class ScriptedBackend:
    """Canned answers (see the module docstring). ``supports_grammar``: whether the engine may
    hand it grammars (it records them and answers from the script regardless)."""

    def __init__(self, script: Iterable[Script] | Callable[[list[Message]], str], *, supports_grammar: bool = False):
        self.supports_grammar = supports_grammar
        self._fn = script if callable(script) else None
        self._script: deque[Script] = deque() if callable(script) else deque(script)
        self.calls: list[list[Message]] = []
        self.grammars: list[GrammarArg] = []
        self.samplings: list[Sampling | None] = []

    @property
    def remaining(self) -> int:
        """Script entries not consumed yet."""
        return len(self._script)

    def generate(self, messages_batch: Sequence[Sequence[Message]], grammar: GrammarArg | Sequence[GrammarArg] = None,
                 *, sampling: Sampling | None = None) -> list[Completion]:
        batch = check_messages(messages_batch)
        out = []
        for messages, g in zip(batch, per_item(grammar, len(batch))):
            self.calls.append(messages)
            self.grammars.append(g)
            self.samplings.append(sampling)
            if self._fn is not None:
                entry: Script = self._fn
            elif self._script:
                entry = self._script.popleft()
            else:
                raise BackendError(f"ScriptedBackend: script exhausted after {len(self.calls) - 1} answers")
            if isinstance(entry, BaseException):
                raise entry
            text = entry(messages) if callable(entry) else entry
            out.append(Completion(text=text, prompt_tokens=word_count(messages), completion_tokens=len(text.split())))
        return out
