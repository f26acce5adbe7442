"""The pure maths of RLTF's update, below the run config: advantage baselines, per-decision credit and
the surrogate objectives, each a :class:`~rltf.algorithms.registry.Registry` of plain callables whose
names the config reads (``rltf.baseline``, ``flow.credit``, ``rltf.ratio``). numpy and torch only: no
config, no model, no trainer (those are :mod:`rltf.rl`, which calls these)."""
