"""The pure maths of RLTF's update, below the run config: advantage baselines, per-decision credit and
the objectives, each a :class:`~rltf.algorithms.registry.Registry` of plain callables or small specs
whose names the config reads (``rltf.baseline``, ``flow.credit``, ``rltf.ratio``, ``rltf.objective``;
:mod:`~rltf.algorithms.choice` resolves the last, a user's import path included). numpy and torch
only: no config, no model, no trainer (those are :mod:`rltf.rl`, which calls these)."""
