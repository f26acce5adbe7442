"""Run by tests/flows/test_flow_rl.py under ``torchrun --nproc_per_node 2``: two RLTF steps of the MTP flow on CPU."""

import json
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

import torch  # noqa: E402
from accelerate import Accelerator  # noqa: E402

import envs as env_factory  # noqa: E402
from rltf.flows.training.trainer import FlowRLTFTrainer  # noqa: E402
from rltf.planners.planner import Planner  # noqa: E402
from tests.flows.test_flow_rl import tiny_cfg  # noqa: E402


def main(out: str, planner_dir: str) -> None:
    torch.set_num_threads(1)
    acc = Accelerator(cpu=True)
    cfg = tiny_cfg(Path(out), "run_name=ddp", "rltf.tasks_per_batch=2")
    train, _ = env_factory.make_train_and_held_out(cfg.env)
    planner = Planner.from_pretrained(planner_dir)
    trainer = FlowRLTFTrainer(cfg, planner, train, acc)
    seen, rewards = [], []
    while trainer.step < cfg.rltf.steps:
        row = trainer.train_step()
        seen.append(sorted(set(trainer.last_batch.task_ids)))
        rewards.append(row["train/reward"])
    trainer.save()
    flat = torch.cat([p.detach().flatten() for p in planner.model.parameters()])
    Path(out, f"rank{acc.process_index}.json").write_text(json.dumps({
        "world": acc.num_processes, "tasks": seen, "rewards": rewards, "params": flat[:64].tolist(),
        "sum": float(flat.double().sum())}))
    acc.wait_for_everyone()  # leave together, then close the gloo group
    torch.distributed.destroy_process_group()


if __name__ == "__main__":
    main(sys.argv[1], sys.argv[2])
