"""Run by tests/rl/test_rl_correctness.py under ``torchrun --nproc_per_node 2``: each process computes
the loss weights of its shard of one fixed global batch (two consecutive steps)."""

import json
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

import torch  # noqa: E402
from accelerate import Accelerator  # noqa: E402

from rltf.rl.trainer import RLTFTrainer  # noqa: E402
from tests.rl.test_rl_correctness import WEIGHT_OVERRIDES, make_cfg, t5_planner, weights_for  # noqa: E402
from tests.toy_env import toy_env  # noqa: E402


def main(out: str) -> None:
    torch.set_num_threads(1)
    acc = Accelerator(cpu=True)
    trainer = RLTFTrainer(make_cfg(Path(out) / "two", *WEIGHT_OVERRIDES), t5_planner(), toy_env(), acc)
    weights = weights_for(trainer, acc.num_processes, acc.process_index)
    Path(out, f"weights{acc.process_index}.json").write_text(json.dumps(weights))
    # leave together and close the gloo group: a rank exiting while the other still holds the
    # group open aborted once in CI ("terminate called without an active exception")
    acc.wait_for_everyone()
    torch.distributed.destroy_process_group()


if __name__ == "__main__":
    main(sys.argv[1])
