"""Stratified train / validation / test split, shared by the envs' persisted splits
(``envs/openagi/split.py`` by task modality, ``envs/travel/split.py`` by query level and days).

A pure function of the items' strata, a seed and the fractions: each stratum (in sorted order) is
shuffled with one ``numpy`` generator and cut into validation, test and train, so the persisted
split files are reproducible from the code.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Hashable, Sequence

import numpy as np

SPLITS = ("train", "validation", "test")
# eval.splits=[non_train]: every item of the suite not in its train split (OpenAGI's full suite: the 165
# tasks outside its 20 train tasks, most in no split; lite: validation + test), the comparisons' held-out set
NON_TRAIN = "non_train"


def check_fractions(fractions: dict[str, float]) -> None:
    """Every key a split name with a value in [0, 1); validation + test leave training items."""
    for k, v in fractions.items():
        if k not in SPLITS or not 0 <= v < 1:
            raise ValueError(f"bad split fraction {k}={v!r}: expected train/validation/test in [0, 1)")
    held_out = fractions["validation"] + fractions["test"]
    if held_out >= 1 or held_out + fractions.get("train", 0) > 1 + 1e-9:
        raise ValueError(f"validation + test fractions {fractions} leave no training tasks")


def stratified_split(strata: Sequence[Hashable], seed: int, fractions: dict[str, float],
                     ids: Sequence[int] | None = None) -> dict[str, list[int]]:
    """``{"train": [...], "validation": [...], "test": [...]}`` of the items' ids (their indices
    when ``ids`` is None), each sorted. ``strata[i]`` is item i's stratum (sortable keys); a
    stratum of three or more items keeps at least one train, validation and test item, one of two
    a train and a test item. ``fractions`` holds "validation" and "test"; with a "train" fraction
    at most that share of a stratum trains and the rest is left out of all three parts."""
    check_fractions(fractions)
    ids = range(len(strata)) if ids is None else ids
    rng = np.random.default_rng(seed)
    groups: dict[Hashable, list[int]] = defaultdict(list)
    for i, s in zip(ids, strata):
        groups[s].append(i)
    out: dict[str, list[int]] = {k: [] for k in SPLITS}
    for s in sorted(groups):
        idx = [groups[s][j] for j in rng.permutation(len(groups[s]))]
        n = len(idx)
        n_val = max(1, round(fractions["validation"] * n)) if n >= 3 else 0
        n_test = max(1, round(fractions["test"] * n)) if n >= 2 else 0
        out["validation"] += idx[:n_val]
        out["test"] += idx[n_val : n_val + n_test]
        rest = idx[n_val + n_test :]
        if "train" in fractions:
            rest = rest[: max(1, round(fractions["train"] * n))]
        out["train"] += rest
    return {k: sorted(v) for k, v in out.items()}
