"""``python -m envs.travel.split [--seed 0 ...] [--real DATABASE_DIR]``: write the persisted travel
query split: the synthetic sandbox's (``envs/travel/splits/seed{seed}.json``,
:func:`envs.travel.split.build_split_file`), or with ``--real`` the split of queries generated over
the benchmark's real tables in DATABASE_DIR (``envs/travel/splits/real-seed{seed}.json``,
:mod:`envs.travel.real_sandbox`)."""

from __future__ import annotations

import argparse
import json

from common.atomic import write_atomic
from envs.travel import real_sandbox
from envs.travel.split import SPLIT_DIR, SPLITS, build_split_file, split_path


def main(argv: list[str] | None = None) -> None:
    ap = argparse.ArgumentParser(prog="python -m envs.travel.split",
                                 description="Write the persisted travel query split.")
    ap.add_argument("--seed", type=int, action="append", help="database/query seed (default: 0)")
    ap.add_argument("--real", metavar="DATABASE_DIR",
                    help="the folder of the benchmark's real tables: write the split of queries generated over them")
    args = ap.parse_args(argv)
    SPLIT_DIR.mkdir(exist_ok=True)
    for seed in args.seed or [0]:
        if args.real:
            index = real_sandbox.real_index(args.real, "generated", seed)
            data = real_sandbox.build_split_file(index, seed)
            path = real_sandbox.real_split_path(seed)
            write_atomic(path, json.dumps(data, indent=1, ensure_ascii=False) + "\n")
            print(f"{path}: {data['n_queries']} queries over {index.db.source}; "
                  + ", ".join(f"{k} {len(data[k])}" for k in SPLITS))
            continue
        data = build_split_file(seed)
        split_path(seed).write_text(json.dumps(data, indent=1) + "\n")
        print(f"seed {seed}:", {k: len(data[k]) for k in SPLITS}, "->", split_path(seed))


if __name__ == "__main__":
    main()
