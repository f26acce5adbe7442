"""``openai``: any OpenAI-compatible chat endpoint (OpenAI, vLLM, llama.cpp, TGI...) as a backend.

Uses the ``openai`` client package (``pip install openai``). The base URL and model come from the
configuration; the API key from an environment variable (``OPENAI_API_KEY`` unless configured:
any value will do for a local server that checks none). The client is created on first use, not
at import or construction, and with its own retries off: the flow engine retries failed calls
with bounded exponential backoff, so one policy governs every backend.

Greedy (``do_sample=False``) is sent as ``temperature=0``. Token usage comes from the response's
``usage``; ``logprobs=True`` asks for token log-probabilities and reports their sum. Remote
endpoints cannot take a constrained_decoding grammar (``supports_grammar = False``); the engine
validates :class:`~rltf.flows.backends.base.Choices` answers itself.

The API key is held as a secret (:mod:`common.held_secrets`): an error or an answer in which the
server echoes it (the request's ``Authorization`` header) has it replaced by ``[redacted $NAME]``
before the engine, the traces or the ``error:`` line see it.

Bounded: an answer longer than ``max_answer_chars`` is cut to it, and an error whose message is
longer is raised again as a ``RuntimeError`` holding its first ``max_answer_chars`` characters, so a
server sending megabytes cannot fill the memory or the flow traces (which hold answers and errors).
"""

from __future__ import annotations

import os
from collections.abc import Sequence
from concurrent.futures import ThreadPoolExecutor
from typing import Any

from common.held_secrets import hold, redact
from rltf.flows.backends.base import BackendError, Completion, GrammarArg, Message, Sampling, check_messages, per_item

__all__ = ["OpenAIBackend"]


class OpenAIBackend:
    """Chat completions from ``model`` at ``base_url`` (None: the client's default, api.openai.com).

    ``max_concurrency`` requests of a batch run at once (threads); ``timeout`` seconds to wait for
    a response (reading it); ``connect_timeout`` seconds to open the connection, short so that a
    dead or unreachable endpoint fails in seconds, not after ``timeout``; ``extra_body`` is sent
    with every request (server-specific options); ``max_answer_chars`` bounds an answer's text and
    an error's message (see the module docstring)."""

    supports_grammar = False

    def __init__(self, model: str, base_url: str | None = None, *, api_key_env: str = "OPENAI_API_KEY",
                 sampling: Sampling | None = None, timeout: float = 120.0, connect_timeout: float = 10.0,
                 max_concurrency: int = 4,
                 logprobs: bool = False, seed: int | None = None, extra_body: dict[str, Any] | None = None,
                 max_answer_chars: int = 20000):
        if not model:
            raise BackendError("the openai backend needs a model name")
        if max_concurrency < 1:
            raise BackendError(f"max_concurrency={max_concurrency}: expected at least 1")
        if isinstance(max_answer_chars, bool) or not isinstance(max_answer_chars, int) or max_answer_chars < 1:
            raise BackendError(f"max_answer_chars={max_answer_chars!r}: expected an integer >= 1")
        for name, seconds in (("timeout", timeout), ("connect_timeout", connect_timeout)):
            if isinstance(seconds, bool) or not isinstance(seconds, (int, float)) or not 0 < seconds < float("inf"):
                raise BackendError(f"{name}={seconds!r}: expected a finite number of seconds > 0")
        self.model = model
        self.base_url = base_url
        self.api_key_env = api_key_env
        self.sampling = sampling or Sampling()
        self.timeout = timeout
        self.connect_timeout = connect_timeout
        self.max_concurrency = max_concurrency
        self.logprobs = logprobs
        self.seed = seed
        self.extra_body = dict(extra_body or {})
        self.max_answer_chars = max_answer_chars
        self._client = None

    @property
    def client(self):
        """The ``openai.OpenAI`` client, created on first use (its own retries off)."""
        if self._client is None:
            try:
                import httpx  # optional: the openai backend's client
                import openai  # optional: the openai backend's client
            except ImportError:
                raise BackendError("the openai backend needs the openai package: pip install openai") from None
            key = os.environ.get(self.api_key_env)
            if not key:
                raise BackendError(f"the openai backend reads its API key from ${self.api_key_env}, which is not set "
                                   "(any non-empty value will do for a local server that checks none)")
            hold(key, self.api_key_env)  # redacted from whatever the server sends back (common/held_secrets.py)
            timeout = httpx.Timeout(self.timeout, connect=min(self.connect_timeout, self.timeout))
            self._client = openai.OpenAI(api_key=key, base_url=self.base_url, timeout=timeout, max_retries=0)
        return self._client

    def generate(self, messages_batch: Sequence[Sequence[Message]], grammar: GrammarArg | Sequence[GrammarArg] = None,
                 *, sampling: Sampling | None = None) -> list[Completion]:
        """One chat completion per item (``max_concurrency`` at a time); grammars are refused."""
        batch = check_messages(messages_batch)
        if any(g is not None for g in per_item(grammar, len(batch))):
            raise BackendError("the openai backend cannot constrain its output to a grammar (supports_grammar=False)")
        s = sampling or self.sampling
        client = self.client
        if len(batch) == 1 or self.max_concurrency == 1:
            return [self._one(client, m, s) for m in batch]
        with ThreadPoolExecutor(min(self.max_concurrency, len(batch))) as pool:
            return list(pool.map(lambda m: self._one(client, m, s), batch))

    def _one(self, client, messages: list[Message], s: Sampling) -> Completion:
        kwargs: dict[str, Any] = dict(model=self.model, messages=messages, max_tokens=s.max_new_tokens,
                                      temperature=s.temperature if s.do_sample else 0.0)
        if s.do_sample and s.top_p < 1.0:
            kwargs["top_p"] = s.top_p
        if self.seed is not None:
            kwargs["seed"] = self.seed
        if self.logprobs:
            kwargs["logprobs"] = True
        if self.extra_body:
            kwargs["extra_body"] = self.extra_body
        try:
            resp = client.chat.completions.create(**kwargs)
        except Exception as e:
            message = str(e)
            shown = redact(message)  # a server echoing the Authorization header: never the key
            if len(shown) <= self.max_answer_chars and shown == message:
                raise
            if len(shown) > self.max_answer_chars:
                shown = f"{shown[: self.max_answer_chars]} [... {len(shown)} characters, cut]"
            raise RuntimeError(f"{type(e).__name__}: {shown}") from None
        if not resp.choices:
            raise RuntimeError(f"{self.base_url or 'the endpoint'} returned no choices for model {self.model!r}")
        choice = resp.choices[0]
        usage = resp.usage
        logprob = None
        content = getattr(getattr(choice, "logprobs", None), "content", None)
        if content:
            logprob = float(sum(t.logprob for t in content))
        text = redact(choice.message.content or "")  # (an answer echoing the key: never the key)
        if len(text) > self.max_answer_chars:  # a runaway server: the answer is cut, the flow goes on
            text = text[: self.max_answer_chars]
        return Completion(text=text,
                          prompt_tokens=int(getattr(usage, "prompt_tokens", 0) or 0),
                          completion_tokens=int(getattr(usage, "completion_tokens", 0) or 0),
                          logprob=logprob, temperature=s.temperature if s.do_sample else 1.0)

    @property
    def endpoint(self) -> str:
        """Where the requests go: the base URL (the client's default: api.openai.com)."""
        return self.base_url or "https://api.openai.com/v1"

    def __repr__(self) -> str:
        return f"OpenAIBackend({self.model!r}, base_url={self.base_url!r})"
