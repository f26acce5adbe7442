"""The keys of the periodic validation's values in a training step's row (``rltf.eval_every``).

A module of its own, importing nothing, so that readers of a run's history (the comparison tool,
the GRPO recipe's validation callback) need not import the trainer and its torch / transformers."""

VALIDATION_PREFIX = "eval/validation/"  # the keys of the periodic validation's values in a step's row
VALIDATION_SCORE = "eval/validation/score"  # the key of the periodic validation score in a step's row
VALIDATION_TIEBREAK = "eval/validation/reward"  # optional: breaks ties of the score (a flow's mean reward)
