"""Outside the core: the TRL GRPO baseline and the tool that compares training recipes over seeds.

- :mod:`~rltf.comparison.grpo`: GRPO (TRL) on the same tasks and reward, the baseline of ``train/grpo.py``;
  :mod:`~rltf.comparison.grpo_trainer`: its trainer with rltf's prompt ids and, for
  ``grpo.sampling=constrained``, our plan grammar as the logits processor of TRL's sampling.
- The comparison tool (``train/compare.py``), one module per step:
  :mod:`~rltf.comparison.suites` (a suite's arms and rows, read from YAML and checked),
  :mod:`~rltf.comparison.runs` (every arm x seed as its own process, resumable),
  :mod:`~rltf.comparison.results` (the finished runs read back),
  :mod:`~rltf.comparison.aggregate` (mean ± std over seeds, bootstrap intervals, curves),
  :mod:`~rltf.comparison.paired` (paired per-task differences between arms, two-way bootstrap over tasks and seeds),
  :mod:`~rltf.comparison.report` (``compare.md``, ``compare.png``, ``compare.json``).
"""
