"""The travel sandbox's agent flows: a plug-in of rltf's flow patterns (:mod:`rltf.flows.agents`).

The patterns -- Meta-Task Planning, OKR-Agent, ReAct, the flat planner -- live in the core and ask
a domain for what they do not know; this package is the travel domain: the flows' prompts and texts
(:mod:`~envs.travel.flows.texts`, ``*_prompts``), the catalog each flow looks the sandbox up in
(:mod:`~envs.travel.flows.setup`), MTP's meta-task graph, executor options, supervisor rewrite and
local credit (``mtp_*``), OKR-Agent's tree, solution and reviews (``okr_*``), ReAct's reachable
searches (:mod:`~envs.travel.flows.react_reach`), the solver as the warm start's teacher
(:mod:`~envs.travel.flows.teacher`) and the domain the env hands to the core
(:data:`envs.travel.flows.domain.TRAVEL_FLOWS`, :meth:`envs.travel.env.TravelPlannerEnv.flow_domain`).
"""
