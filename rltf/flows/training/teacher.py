"""Warm-start demonstrations for a flow: every choice the flow asks, answered the domain's reference way.

The env's flow domain (:class:`rltf.flows.agents.domain.FlowDomain`) knows, for a train query, a
reference answer -- the travel sandbox's exact solver: the cheapest plan passing every constraint --
and its :meth:`~rltf.flows.agents.domain.FlowDomain.teacher` turns it into an answer for any choice
node of a flow (:class:`~rltf.flows.agents.domain.Teacher`).
:class:`TeacherBackend` answers a whole pass that way, and :func:`collect_demonstrations` runs the flow
on the train queries and keeps every decision as a (prompt, options, answer) triple: the decomposition
and choices a planner is warm-started on (``rltf.stages.flow_job.warm_start``) before RL.

The prompts are the planner backend's own rendering (``describe``), so the warm start fits the
exact text the planner is conditioned on when it decodes the same node in RL and evaluation.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass

from rltf.flows.agents.dispatch import run_method
from rltf.flows.agents.domain import flow_domain_of
from rltf.flows.backends.base import (
    BackendError,
    Choices,
    Completion,
    GrammarArg,
    Message,
    Sampling,
    check_messages,
    per_item,
    render_plain,
)
from rltf.flows.engine.choice import choice_grammar

__all__ = ["Demonstration", "TeacherBackend", "collect_demonstrations", "plain_describe"]


def plain_describe(messages: Sequence[Message]) -> str:
    """What the planner backend without a chat template conditions on (its ``describe``): a lone
    user message is the text itself, several a ``role: content`` transcript."""
    if len(messages) == 1 and messages[0]["role"] == "user":
        return messages[0]["content"]
    return render_plain(messages, assistant_cue=False)


class TeacherBackend:
    """A backend whose every choice is ``pick(options)``; it remembers the options of each answer.

    ``describe(messages)`` is the planner backend's prompt rendering (what a demonstration's
    prompt is). Free-text nodes and grammars other than choices cannot be demonstrated: a
    :class:`BackendError` naming the node's prompt."""

    supports_grammar = True

    def __init__(self, describe: Callable[[Sequence[Message]], str], pick: Callable[[Sequence[str]], str]):
        self.describe = describe
        self.pick = pick
        self.options: dict[tuple[str, str], tuple[str, ...]] = {}  # (prompt, answer) -> the options offered

    def generate(self, messages_batch: Sequence[Sequence[Message]], grammar: GrammarArg | Sequence[GrammarArg] = None,
                 *, sampling: Sampling | None = None) -> list[Completion]:
        out = []
        for messages, g in zip(check_messages(messages_batch), per_item(grammar, len(messages_batch))):
            if not isinstance(g, Choices):
                raise BackendError("the solver teacher answers choice nodes only; got a node without options: "
                                   f"{messages[-1]['content'][:120]!r}")
            answer = self.pick(g.options)
            c = Completion(text=answer, prompt_tokens=0, completion_tokens=0, logprob=0.0,
                           prompt=self.describe(messages), value=answer)
            self.options[(c.prompt, answer)] = g.options
            out.append(c)
        return out


@dataclass
class Demonstration:
    """One decision of a flow on a train query, answered by the solver teacher. ``description`` /
    ``reference_plan`` make it a task :func:`rltf.rl.sft.supervised_finetune` fits (under the choice
    grammar of ``options``: see :class:`DemonstrationGrammars`)."""

    query: int
    node: str
    role: str
    description: str  # the prompt the planner decodes this node from
    options: tuple[str, ...]
    reference_plan: str  # the teacher's answer


class DemonstrationGrammars:
    """The ``env.grammar(tokenizer, task)`` view SFT uses: a demonstration's choice grammar."""

    def grammar(self, tokenizer, task: Demonstration):
        return choice_grammar(tokenizer, task.options)


def collect_demonstrations(env, query_ids: Sequence[int], method: str, describe: Callable[[Sequence[Message]], str],
                           flow) -> tuple[list[Demonstration], dict[str, float]]:
    """Run ``method``'s flow on every query with the domain's teacher; every decision of every pass
    as a :class:`Demonstration`, and how the taught flow scores (``final_pass``, ``queries``: the
    share of queries whose taught pass passes every constraint, and how many were taught)."""
    domain = flow_domain_of(env)
    role_of = domain.methods.lookup(method).role_of
    demos: list[Demonstration] = []
    plans = []
    for i in query_ids:
        try:
            teacher = domain.teacher(env, i)
        except ValueError:
            continue  # no solution: nothing to demonstrate
        backend = TeacherBackend(describe, teacher.pick)
        fr = run_method(method, env, i, backend, flow)
        if fr.result is None:
            continue
        for name, r in fr.result.results.items():
            c = r.completion
            if r.ok and c is not None and (c.prompt, c.text) in backend.options:
                demos.append(Demonstration(int(i), name, role_of(name), c.prompt,
                                           backend.options[(c.prompt, c.text)], c.text))
        plans.append((i, fr.plan if fr.plan is not None else ""))
    passed = [domain.passed(r) for r in env.reward_plans(plans)] if plans else []
    return demos, {"final_pass": sum(passed) / max(1, len(passed)), "queries": float(len(plans))}
