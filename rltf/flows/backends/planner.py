"""``planner``: rltf's own trainable planner as a flow backend, constrained where a node needs it.

A node whose answer must come from a grammar (a :class:`constrained_decoding.protocol.Grammar`
for the planner's tokenizer, or :class:`~rltf.flows.backends.base.Choices`) is decoded by the
constrained decoder: the completion's text is the action's canonical text, ``logprob`` is exactly
log π_c(action | prompt) (at the sampling temperature; 1 for greedy), and ``decoded`` / ``prompt``
/ ``temperature`` let a trainer re-score the same answer with gradients later (:func:`rescore`,
i.e. :func:`constrained_decoding.logprobs.plan_logprobs` on the decoded rows). Nodes without a
grammar get free generation conditioned on the same prompt format the planner is trained on
(:func:`constrained_decoding.prompts.format_prompt` of the rendered messages).

Messages are rendered without a chat template by default (rltf planners are trained on plain
task descriptions): a lone user message is the description itself, several are a ``role: content``
transcript; ``chat_template="auto"`` uses the tokenizer's template when it has one.
"""

from __future__ import annotations

from collections.abc import Sequence

import torch
from torch import nn

from constrained_decoding.encoder_memo import EncoderMemo
from constrained_decoding.logprobs import plan_logprobs
from rltf.flows.backends.base import BackendError, Completion, Message, Sampling
from rltf.flows.backends.local import ChatTemplate, LocalModelBackend

__all__ = ["PlannerBackend", "rescore"]


class PlannerBackend(LocalModelBackend):
    """A :class:`rltf.planners.planner.Planner` (``.model``, ``.tokenizer``, ``.is_encoder_decoder``) as a backend.

    The planner is used as it is (same object: training it changes what the backend generates)."""

    def __init__(self, planner, *, sampling: Sampling | None = None, seed: int = 0,
                 chat_template: ChatTemplate = False, batch_size: int = 16):
        for attr in ("model", "tokenizer", "is_encoder_decoder"):
            if not hasattr(planner, attr):
                raise BackendError(f"PlannerBackend needs a planner with .model, .tokenizer and .is_encoder_decoder; "
                                   f"{type(planner).__name__} has no .{attr}")
        self.planner = planner
        super().__init__(planner.model, planner.tokenizer, planner.is_encoder_decoder, sampling=sampling, seed=seed,
                         chat_template=chat_template, plan_separator=True, batch_size=batch_size)

    def describe(self, messages: Sequence[Message]) -> str:
        """A lone user message is the task description as it is (what the planner is trained on)."""
        if not self.use_chat_template and len(messages) == 1 and messages[0]["role"] == "user":
            return messages[0]["content"]
        return super().describe(messages)

    def __repr__(self) -> str:
        return f"PlannerBackend({getattr(self.planner, 'source', type(self.planner.model).__name__)!r})"


def rescore(model: nn.Module, tokenizer, completions: Sequence[Completion], *,
            through_forward: bool = False, encoder_memo: EncoderMemo | None = None) -> torch.Tensor:
    """``[n]`` tensor of log π_c of constrained completions under ``model`` now, with gradients:
    :func:`~constrained_decoding.logprobs.plan_logprobs` on their decoded rows, prompts and
    grammars, at the temperature they were decoded at (all must share it). Right after decoding,
    with the same weights, it equals each ``completion.logprob``. ``encoder_memo``: the prompts'
    encoder states the sampler read them with (same weights), reused with their graph."""
    comps = list(completions)
    missing = [i for i, c in enumerate(comps) if c.decoded is None or c.prompt is None]
    if missing:
        raise ValueError(f"completions {missing} were not constrained-decoded (no decoded rows): nothing to re-score")
    temps = {c.temperature for c in comps}
    if len(temps) > 1:
        raise ValueError(f"completions decoded at different temperatures {sorted(temps)}: re-score each group apart")
    if not comps:
        return torch.zeros(0)
    return plan_logprobs(model, tokenizer, [c.prompt for c in comps], [c.decoded.grammar for c in comps],
                         [c.decoded for c in comps], temps.pop(), through_forward=through_forward,
                         encoder_memo=encoder_memo)
