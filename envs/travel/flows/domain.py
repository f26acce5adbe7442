"""The travel sandbox's flow domain (:class:`rltf.flows.agents.domain.FlowDomain`): the methods
``flow.methods`` names -- ``mtp`` (:mod:`envs.travel.flows.mtp`), ``okr`` (:mod:`envs.travel.flows.okr`),
``react`` (:mod:`envs.travel.flows.react`), ``flat`` (:mod:`envs.travel.flows.flat`) -- each node's
role, which ones RLTF trains, the solver as the warm start's teacher (:mod:`envs.travel.flows.teacher`),
and the evaluator's scores as the flow table's metrics. :meth:`envs.travel.env.TravelPlannerEnv.flow_domain`
hands it to the core.

The scaffolded methods (``mtp``, ``okr``, ``react``: :data:`envs.travel.tracks.SCAFFOLDS`) refuse an
env of the benchmark track (``env.travel.track: benchmark``) in one line, before anything runs: only
``flat`` plans there, and nothing but the model shapes its plan."""

from __future__ import annotations

from envs.travel.flows.flat import run_flat
from envs.travel.flows.mtp import run_mtp
from envs.travel.flows.okr import run_okr
from envs.travel.flows.react import run_react
from envs.travel.flows.teacher import SolverTeacher
from envs.travel.tracks import SANDBOX, refuse_scaffold
from rltf.algorithms.registry import Registry
from rltf.flows.agents.domain import FlowMethod

__all__ = ["TRAVEL_FLOWS", "TravelFlows", "mtp_role", "okr_role", "react_role"]


def mtp_role(node: str) -> str:
    """The MTP agent a node belongs to."""
    if node.startswith("manager."):
        return "manager"
    if node.startswith("supervise."):
        return "supervisor"
    return "deliverer" if node == "deliverer" else "executor"


def okr_role(node: str) -> str:
    """The OKR-Agent role a node plays: the lead (objectives, key results, criteria), a reviewer, an executor."""
    if node.startswith("lead.") or node.endswith(".key_results") or node.endswith(".criterion"):
        return "lead"
    if ".revise" in node or node.endswith(".review"):
        return "reviewer"
    return "executor"


def react_role(node: str) -> str:
    """ReAct's actor (thoughts and actions) or planner (the plan)."""
    return "actor" if node.endswith(".act") or node.endswith(".think") else "planner"


def _mtp_untrainable(flow) -> str | None:
    if flow.mtp.supervisor != "template":
        return ("'flow.mtp.supervisor: model' adds free-text nodes the planner cannot be trained on; "
                "use supervisor: template")
    return None


def _okr_untrainable(flow) -> str | None:
    if flow.okr.criteria != "evaluator":
        return ("'flow.okr.criteria: model' adds free-text nodes the planner cannot be trained on; "
                "use criteria: evaluator")
    return None


def _scaffold(method: str, run):
    """``run`` after the track's check (:func:`envs.travel.tracks.refuse_scaffold`)."""
    def checked(env, query, backend, flow, **kw):
        refuse_scaffold(getattr(env, "track", SANDBOX), method)
        return run(env, query, backend, flow, **kw)
    return checked


METHODS: Registry[FlowMethod] = Registry("flow method", {
    "mtp": FlowMethod("mtp", _scaffold("mtp", lambda env, query, backend, flow, **kw:
                                       run_mtp(env, query, backend, flow.mtp, **kw)),
                      mtp_role, ("manager", "executor", "deliverer"), trainable=True, local_credit=True,
                      untrainable=_mtp_untrainable),
    "okr": FlowMethod("okr", _scaffold("okr", lambda env, query, backend, flow, **kw:
                                       run_okr(env, query, backend, flow.okr, **kw)),
                      okr_role, ("lead", "executor", "reviewer"), trainable=True, untrainable=_okr_untrainable),
    "react": FlowMethod("react", _scaffold("react", lambda env, query, backend, flow, **kw:
                                           run_react(env, query, backend, flow.react, **kw)),
                        react_role),
    "flat": FlowMethod("flat", lambda env, query, backend, flow, **kw: run_flat(env, query, backend, **kw)),
})


# the official metrics (TravelPlannerEnv.metrics' keys) by the flow table's column names, in order
METRICS = {"delivery_rate": "delivery", "commonsense_micro": "commonsense micro",
           "commonsense_macro": "commonsense macro", "hard_micro": "hard micro", "hard_macro": "hard macro",
           "final_pass": "final pass"}


class TravelFlows:
    """The travel flow domain (see the module docstring)."""

    name = "travel"
    methods: Registry[FlowMethod] = METHODS
    columns = tuple(METRICS.values())

    def teacher(self, env, query) -> SolverTeacher:
        """The solver's answers on ``query`` (a ``ValueError`` when it finds no plan)."""
        return SolverTeacher(env, query)

    def metrics(self, env, pairs) -> dict[str, float]:
        """The official metrics (delivery, commonsense / hard micro and macro, final pass)."""
        m = env.metrics(pairs)
        return {column: float(m[key]) for key, column in METRICS.items()}

    def passed(self, result) -> bool:
        """The evaluator's final pass of the plan."""
        return result.evaluation.final_pass

    def violations(self, result) -> dict[str, str]:
        """The evaluator's failed checks, with their reasons."""
        return result.evaluation.violations()


TRAVEL_FLOWS = TravelFlows()
