"""Run by tests/rl/test_rltf_ddp.py under ``torchrun --nproc_per_node 2``: a few RLTF steps on CPU.

    torchrun --nproc_per_node 2 tests/ddp_worker.py OUT [key=value ...]
    torchrun --nproc_per_node 2 tests/ddp_worker.py OUT --runs '{"plain": [], "set": ["rltf.baseline=unordered_set"]}'

``--runs``: each named list of overrides in turn into ``OUT/<name>``, in the same two processes (one
launch instead of one per run: ~15 CPU s of process starts fewer each)."""

import json
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

import torch  # noqa: E402
from accelerate import Accelerator  # noqa: E402

from rltf.config.loading import load_config  # noqa: E402
from rltf.planners.planner import Planner  # noqa: E402
from rltf.rl.trainer import RLTFTrainer  # noqa: E402
from tests.tiny_models import tiny_t5, unigram_tokenizer  # noqa: E402
from tests.toy_env import toy_env  # noqa: E402


def train(out: str, acc: Accelerator, *overrides: str) -> None:
    cfg = load_config([f"output_dir={out}", "run_name=ddp", "rltf.steps=3", "rltf.tasks_per_batch=2",
                       "rltf.k_samples=4", "rltf.lr=0.01", "rltf.eval_every=0", "rltf.checkpoint_every=2",
                       "logging.progress_bar=false", *overrides])
    tok = unigram_tokenizer()
    planner = Planner(tiny_t5(tok, seed=0), tok, True, "tiny-t5")
    trainer = RLTFTrainer(cfg, planner, toy_env(), acc)
    seen = []
    while trainer.step < cfg.rltf.steps:
        trainer.train_step()
        seen.append(sorted(set(trainer.last_batch.task_ids)))
    trainer.save()
    flat = torch.cat([p.detach().flatten() for p in planner.model.parameters()])
    Path(out, f"rank{acc.process_index}.json").write_text(json.dumps({
        "world": acc.num_processes, "tasks": seen, "params": flat[:64].tolist(), "sum": float(flat.double().sum())}))
    acc.wait_for_everyone()


def main(out: str, *args: str) -> None:
    torch.set_num_threads(1)
    acc = Accelerator(cpu=True)
    if args[:1] == ("--runs",):
        for name, overrides in json.loads(args[1]).items():
            Path(out, name).mkdir(parents=True, exist_ok=True)
            train(str(Path(out, name)), acc, *overrides)
    else:
        train(out, acc, *args)
    acc.wait_for_everyone()  # leave together, then close the gloo group (see tests/weights_worker.py)
    torch.distributed.destroy_process_group()


if __name__ == "__main__":
    main(sys.argv[1], *sys.argv[2:])
