"""Run by tests/rl/test_processes.py under ``torchrun --nproc_per_node 2``: a few RLTF steps and the
held-out schemas on the toy env, recording which samples each process executed plans on in training
(the execution is shared by sample) and which tasks it evaluated."""

import json
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

import torch  # noqa: E402
from accelerate import Accelerator  # noqa: E402

from rltf.config.loading import load_config  # noqa: E402
from rltf.evaluation import schemas as ev  # noqa: E402
from rltf.planners.planner import Planner  # noqa: E402
from rltf.rl.steps import draw_step  # noqa: E402
from rltf.rl.trainer import RLTFTrainer  # noqa: E402
from tests.tiny_models import tiny_t5, unigram_tokenizer  # noqa: E402
from tests.toy_env import toy_env  # noqa: E402


def make_planner() -> Planner:
    tok = unigram_tokenizer()
    return Planner(tiny_t5(tok, seed=0), tok, True, "tiny-t5")


def recording(env) -> list[int]:
    """The ids of the tasks ``env`` executes plans for, from now on."""
    executed: list[int] = []
    reward_plans = env.reward_plans

    def recorded(pairs, *args, **kwargs):
        executed.extend(t.id for t, _ in pairs)
        return reward_plans(pairs, *args, **kwargs)

    env.reward_plans = recorded
    return executed


def recording_samples(env) -> list[str]:
    """The uids of the samples ``env`` executes plans on, from now on."""
    executed: list[str] = []
    run = env.executor.run

    def recorded(plan, samples):
        executed.extend(s.uid for s in samples)
        return run(plan, samples)

    env.executor.run = recorded
    return executed


def evaluate_all(planner: Planner, env, acc) -> dict:
    """The constrained, reference and oracle schemas of every toy task (JSON-ready)."""
    tasks = env.tasks()
    found = [ev.constrained_schema("finetuned", planner, env, tasks, num_beams=2), ev.reference_schema(env, tasks),
             ev.oracle_schema(env, tasks)]
    return {r.schema: {"plans": r.plans, "scores": r.scores, "valid": r.valid} for r in found}


def main(out: str) -> None:
    torch.set_num_threads(1)
    acc = Accelerator(cpu=True)
    cfg = load_config([f"output_dir={out}", "run_name=procs", "rltf.steps=3", "rltf.tasks_per_batch=2",
                       "rltf.k_samples=3", "rltf.eval_every=0", "logging.progress_bar=false"])
    planner, train, held_out = make_planner(), toy_env(), toy_env()
    train_executed, eval_executed = recording_samples(train), recording(held_out)
    trainer = RLTFTrainer(cfg, planner, train, acc)
    while trainer.step < cfg.rltf.steps:
        trainer.train_step()
    # the last step's rewards, as this process alone would have computed them (its draw's subsets)
    last = trainer.last_batch
    draw = draw_step(cfg.seed, trainer.step - 1, trainer.train_ids, cfg.rltf.tasks_per_batch, acc.process_index,
                     acc.num_processes)
    alone = toy_env().reward_plans(list(zip(last.task_ids, last.plans)), rng=draw.env_rng)
    results = evaluate_all(make_planner(), held_out, acc)
    Path(out, f"rank{acc.process_index}.json").write_text(json.dumps({
        "world": acc.num_processes, "train_executed": sorted(set(train_executed)),
        "eval_executed": sorted(set(eval_executed)), "results": results,
        "rewards": last.rewards.tolist(), "rewards_alone": [r.reward for r in alone]}))
    acc.wait_for_everyone()  # leave together, then close the gloo group (see tests/weights_worker.py)
    torch.distributed.destroy_process_group()


if __name__ == "__main__":
    main(sys.argv[1])
