"""The offline text experts of the lite zoo, one module a job.

- :mod:`.common`: sentence splitting, LM tokens, content words, the input check of every expert.
- :mod:`.ngram`: the Kneser-Ney trigram model and the trigger (word association) model, both
  trained once per process on the EXPERT partition; :mod:`.ngram_batch`: the trigram model's
  probabilities of many candidate words at once (bit for bit), what Fill Mask scores with.
- :mod:`.fill_mask`, :mod:`.generation`: the two experts built on those models.
- :mod:`.sentiment`, :mod:`.summarization`, :mod:`.qa`: the other three experts.

:mod:`envs.openagi.lite.text_experts` says why each method was chosen, registers the five under
their OpenAGI names, and prints their quality figures (``python -m envs.openagi.lite.text_experts``).
"""
