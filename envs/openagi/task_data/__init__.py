"""The offline task data: what the lite suite's samples are made of, and how task inputs are degraded.

- :mod:`.images`: clean photos and coloured digits shipped inside installed packages (a TASK pool
  for samples, a disjoint TRAIN pool for learned experts) and the four image degradations
  (:func:`~envs.openagi.task_data.images.degrade_image`).
- :mod:`.texts`: the English corpus written for rltf (``corpus/*.json``: an EXPERT partition for
  learned experts, a TASK partition for samples) and the cloze degradation
  (:func:`~envs.openagi.task_data.texts.cloze`).

Both suites use them: the lite suite (:func:`envs.openagi.suite.build_suite`) for its samples,
the hf backend's full suite to degrade its hub records. The offline expert zoo
(:mod:`envs.openagi.lite`) trains on the TRAIN / EXPERT parts.

``rewordings.json`` (:data:`REWORDINGS_FILE`) holds three hand-written rewordings of every held-out
task's description, for the robustness check of :mod:`rltf.evaluation.rewordings`.
"""

from pathlib import Path

REWORDINGS_FILE = Path(__file__).with_name("rewordings.json")
