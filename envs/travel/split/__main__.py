"""``python -m envs.travel.split [--seed 0 ...]``: write the persisted travel query split
(``envs/travel/splits/seed{seed}.json``, :func:`envs.travel.split.build_split_file`)."""

from __future__ import annotations

import argparse
import json

from envs.travel.split import SPLIT_DIR, SPLITS, build_split_file, split_path


def main(argv: list[str] | None = None) -> None:
    ap = argparse.ArgumentParser(prog="python -m envs.travel.split",
                                 description="Write the persisted travel query split.")
    ap.add_argument("--seed", type=int, action="append", help="database/query seed (default: 0)")
    args = ap.parse_args(argv)
    SPLIT_DIR.mkdir(exist_ok=True)
    for seed in args.seed or [0]:
        data = build_split_file(seed)
        split_path(seed).write_text(json.dumps(data, indent=1) + "\n")
        print(f"seed {seed}:", {k: len(data[k]) for k in SPLITS}, "->", split_path(seed))


if __name__ == "__main__":
    main()
