"""ReAct (Yao et al. 2023) as a pattern, TravelPlanner's two-stage baseline: a think / act / observe
loop over a domain's tools, then a plan written from what was gathered.

One query is one pass of a flow written as a program (:mod:`rltf.flows.engine.program`). Step ``k``:

* ``step<k>.think`` (``think_tokens > 0``): a free-text thought;
* ``step<k>.act``: the next tool invocation, a choice among the domain's actions for the steps left
  (:meth:`~ReActAgent.options`: the searches not made yet that keep a plan within reach, and
  :data:`FINISH` once one is; constrained with the planner backend: an exact log-prob per action);
* the domain runs the action (:meth:`~ReActAgent.observe`) and the observation is fed back: the
  next steps' prompts show the most recent ones (``observations``).

After ``Finish`` (or ``max_steps``) the domain's :meth:`~ReActAgent.plan` writes the plan from what
was gathered (a node ``plan``), or says why it cannot (``db["react.undelivered"]``). The travel
sandbox's ReAct (its flow plug-in) subclasses it.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

from rltf.config.flow import ReActSettings
from rltf.flows.agents.agent_setup import AgentSetup, delivered
from rltf.flows.agents.domain import FlowRun
from rltf.flows.backends.base import Sampling
from rltf.flows.engine.database import Database
from rltf.flows.engine.program import Ask, run_program

__all__ = ["FINISH", "ReActAgent"]

FINISH = "Finish"


class ReActAgent:
    """The ReAct pattern for one query (see the module docstring). A domain subclasses it with its
    actions, observations and plan; ``system`` is the role system message (``system_prompts``)."""

    system: str = "You are an agent: act with the tools, then plan."

    def __init__(self, setup: AgentSetup, settings: ReActSettings | None = None):
        self.setup = setup
        self.settings = settings or ReActSettings()
        self.db = Database()
        self.trajectory: list[dict[str, Any]] = []

    # --------------------------------------------------------------- the domain's part
    def options(self, called: set[str], left: int) -> list[str]:
        """The actions offered with ``left`` steps left (``called``: the actions taken), :data:`FINISH` among them
        when the agent may stop."""
        raise NotImplementedError

    def observe(self, action: str) -> str:
        """Run ``action``; its observation (the domain remembers what it found for the plan)."""
        raise NotImplementedError

    def plan(self) -> Iterator[Ask]:
        """The plan from what was gathered (a node ``plan``), or None with ``db["react.undelivered"]`` saying why."""
        raise NotImplementedError

    # ---------------------------------------------------------------------------- program
    def _ask(self, name: str, body: str, **kw: Any) -> Ask:
        msgs = self.setup.messages(self.system, f"{self.setup.head()}\n{body}")
        return Ask(name, body.splitlines()[-1], messages=msgs, **kw)

    def _scratchpad(self) -> str:
        st = self.settings
        recent = self.trajectory[-st.observations:] if st.observations else []
        if not recent:
            return "Observations: none yet."
        lines = []
        for t in recent:
            obs = t["observation"]
            obs = obs if len(obs) <= st.observation_chars else obs[: st.observation_chars] + " ..."
            lines.append(f"Action {t['step']}: {t['action']}\nObservation {t['step']}: {obs}")
        return "\n".join(lines)

    def program(self) -> Iterator[Ask]:
        st = self.settings
        called: set[str] = set()
        for step in range(1, st.max_steps + 1):
            thought = None
            if st.think_tokens:
                thought = yield self._ask(f"step{step}.think", f"{self._scratchpad()}\nThought {step}:",
                                          sampling=Sampling(max_new_tokens=st.think_tokens))
            options = self.options(called, left=st.max_steps - step + 1)
            listing = "\n".join(f"- {a}" for a in options)
            act = yield self._ask(f"step{step}.act", (
                f"Actions:\n{listing}\n{self._scratchpad()}\n"
                + (f"Thought {step}: {thought.strip()}\n" if thought else "") + f"Action {step}:"), choices=options)
            if act == FINISH:
                break
            called.add(act)
            obs = self.observe(act)
            self.trajectory.append({"step": step, "thought": thought, "action": act, "observation": obs})
            self.db["react.trajectory"] = [{k: v for k, v in t.items() if k != "observation"} | {
                "observation": t["observation"][:200]} for t in self.trajectory]
        plan = yield from self.plan()
        return plan

    def run(self, trace_path: str | Path | None = None) -> FlowRun:
        self.db["task"] = self.setup.task
        pr = run_program(self.setup.backend, self.program(), db=self.db, config=self.setup.config,
                         name=f"react-q{self.setup.query_id}", trace_path=trace_path)
        plan, error = delivered(pr, self.db.get("react.undelivered"))
        return FlowRun(plan, pr.result, error, {"steps": len(self.trajectory),
                                                "actions": [t["action"] for t in self.trajectory]})
