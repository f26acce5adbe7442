"""Train / validation / test split by task, stratified by input -> output modality, persisted.

The split is a pure function of the task list and a seed; the lite split is also written to
``envs/openagi/splits/lite.json`` (regenerate with ``python -m envs.openagi.split``) so that every
run and every later tool sees the same tasks in each part, and so that a change of the suite that
would silently move tasks between parts is caught (:func:`load_split` checks descriptions).
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from pathlib import Path

from common.atomic import write_atomic
from envs.openagi.suite import task_specs
from envs.splitting import SPLITS, stratified_split

# Per suite. Without a "train" fraction every task not held out trains; with one (the paper's
# 10% / 10% split of the full suite), the rest is left out of all three parts.
SUITE_FRACTIONS = {
    "lite": {"validation": 0.2, "test": 0.3},
    "full": {"train": 0.1, "validation": 0.1, "test": 0.1},
}
SPLIT_DIR = Path(__file__).parent / "splits"


def _stratum(inputs: Sequence[str], target: str) -> str:
    return f"{'+'.join(inputs)}->{target}"


def make_split(
    strata: Sequence[str], seed: int = 0, fractions: dict[str, float] | None = None
) -> dict[str, list[int]]:
    """Assign task indices to splits (:func:`envs.splitting.stratified_split`); each stratum keeps
    at least one train, val and test task when it has three or more tasks."""
    return stratified_split(strata, seed, {"validation": 0.2, "test": 0.3, **(fractions or {})})


def split_for_suite(suite: str = "lite", seed: int = 0) -> dict:
    specs = task_specs(suite)
    fractions = SUITE_FRACTIONS[suite]
    parts = make_split([_stratum(s.inputs, s.target) for s in specs], seed, fractions)
    return {
        "suite": suite,
        "seed": seed,
        "fractions": fractions,
        **{k: [{"id": i, "description": specs[i].description} for i in v] for k, v in parts.items()},
    }


def split_path(suite: str) -> Path:
    return SPLIT_DIR / f"{suite}.json"


def load_split(suite: str = "lite", path: str | Path | None = None) -> dict[str, list[int]]:
    """The persisted split as ``{"train": [ids], "validation": [...], "test": [...]}``."""
    path = Path(path) if path else split_path(suite)
    if not path.exists():
        raise FileNotFoundError(f"no split file for suite {suite!r} at {path}; run python -m envs.openagi.split")
    data = json.loads(path.read_text())
    specs = task_specs(data.get("suite", suite))
    out = {}
    for part in SPLITS:
        ids = []
        for entry in data[part]:
            i = entry["id"]
            if i >= len(specs) or specs[i].description != entry["description"]:
                raise ValueError(
                    f"split file {path} is stale: task {i} is {entry['description']!r} there but "
                    f"{specs[i].description if i < len(specs) else 'missing'!r} in the suite; "
                    "regenerate it with python -m envs.openagi.split"
                )
            ids.append(i)
        out[part] = ids
    return out


def main() -> None:
    SPLIT_DIR.mkdir(exist_ok=True)
    for suite in ("lite", "full"):
        data = split_for_suite(suite)
        write_atomic(split_path(suite), json.dumps(data, indent=1) + "\n")
        print(suite, {k: len(data[k]) for k in SPLITS})


if __name__ == "__main__":
    main()
