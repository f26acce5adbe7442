"""The offline image experts of the lite zoo, one module a job.

- :mod:`.common`: the input check of every expert and the YCbCr conversions.
- :mod:`.caching`: learned experts' arrays, trained once per config and cached on disk.
- :mod:`.super_resolution`, :mod:`.denoising`, :mod:`.deblurring`: the classical restorers.
- :mod:`.colorization`, :mod:`.classification`: the two learned experts (trained on the TRAIN
  photos and digits of :mod:`envs.openagi.task_data.images`).

:mod:`envs.openagi.lite.image_experts` says why each method was chosen, registers the five under
their OpenAGI names, and prints their quality figures (``python -m envs.openagi.lite.image_experts``).
"""
