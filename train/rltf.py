"""Main job: fine-tuning warm start -> RLTF -> held-out evaluation.

    accelerate launch train/rltf.py [config=configs/<name>.yaml] [key=value ...]
    python train/rltf.py rltf.steps=50 seed=1

With no arguments it runs the offline embedded default (``configs/default.yaml``) on the CPU.
"""

import os
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # run from a checkout without installing
os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")

from rltf.config import load_config  # noqa: E402
from rltf.pipeline import dry_run, run  # noqa: E402


def main(argv: list[str] | None = None) -> None:
    cfg = load_config(sys.argv[1:] if argv is None else argv)
    if cfg.dry_run:
        dry_run(cfg)
        return
    run(cfg)


if __name__ == "__main__":
    main()
