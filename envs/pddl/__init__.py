"""Classical planning as an rltf env: any STRIPS domain in PDDL (``env.name: pddl``).

Parsing (:mod:`~envs.pddl.parsing`, on the ``pddl`` package) -> typed grounding to bitsets
(:mod:`~envs.pddl.grounding`) -> the simulator (:mod:`~envs.pddl.simulator`), the planner of the reference
plans (:mod:`~envs.pddl.search`), the generators and renamings of instances (:mod:`~envs.pddl.generators`,
:mod:`~envs.pddl.renaming`, :mod:`~envs.pddl.instances`), the plan grammars (:mod:`~envs.pddl.grammar`) and
the env (:mod:`~envs.pddl.env`, built by :mod:`~envs.pddl.factory`, registered by
:mod:`~envs.pddl.registration`). docs/envs/pddl.md describes it.
"""
