"""Run by tests/rl/test_rltf_sharded.py under ``torchrun --nproc_per_node 2``: RLTF with FSDP2-sharded
parameters or a DeepSpeed ZeRO-2 engine, on CPU (gloo), against the replicated (DDP-style) trainer,
plus checkpoint and resume.

Three runs from the same initial weights, 3 steps each (checkpoints every step):
``replicated`` (explicit gradient averaging), ``sharded`` (FSDP2 or ZeRO-2), ``resumed`` (a fresh
model resumed from the ``sharded`` run's checkpoint-2, then step 3). Rank 0 writes the full weights.

    torchrun --nproc_per_node 2 tests/sharded_worker.py OUT {fsdp|deepspeed} [--lora | --both]

``--both``: the full-weights runs into ``OUT/full`` and then the LoRA runs into ``OUT/lora-kl``, in the
same two processes (one launch instead of two: ~15 CPU s of process starts fewer).
"""

import json
import shutil
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

import torch  # noqa: E402
from accelerate import Accelerator  # noqa: E402

from rltf.config.loading import load_config  # noqa: E402
from rltf.planners.planner import Planner  # noqa: E402
from rltf.rl.trainer import RLTFTrainer  # noqa: E402
from rltf.run.distributed import Sharding, shard_planner  # noqa: E402
from tests.tiny_models import tiny_t5, unigram_tokenizer, with_lora  # noqa: E402
from tests.toy_env import toy_env  # noqa: E402


def make_planner(lora: bool, out: str, acc) -> Planner:
    tok = unigram_tokenizer()
    if not lora:
        return Planner(tiny_t5(tok, seed=0), tok, True, "tiny-t5")
    base = Path(out) / "base"  # a LoRA checkpoint names its base: save one to reload from
    if acc.is_main_process and not base.exists():
        tiny_t5(tok, seed=0).save_pretrained(base)
        tok.save_pretrained(base)
    acc.wait_for_everyone()
    return Planner(with_lora(tiny_t5(tok, seed=0), seed=1), tok, True, str(base), base_model=str(base))


def accelerator(mode: str) -> Accelerator:
    if mode == "deepspeed":
        from accelerate.state import PartialState
        from accelerate.utils import DeepSpeedPlugin

        PartialState(backend="gloo")  # on CPU accelerate finds no backend by itself
        return Accelerator(deepspeed_plugin=DeepSpeedPlugin(zero_stage=2, gradient_accumulation_steps=1))
    return Accelerator(cpu=True)


def main(out: str, mode: str, lora: bool, acc: Accelerator | None = None) -> None:
    torch.set_num_threads(1)
    acc = acc or accelerator(mode)
    common = ["rltf.steps=3", "rltf.tasks_per_batch=2", "rltf.k_samples=4", "rltf.lr=0.01", "rltf.eval_every=0",
              "rltf.checkpoint_every=2", "logging.progress_bar=false", f"rltf.kl_coef={0.1 if lora else 0.0}"]
    result = {"initial": {"weights": {k: v.float().flatten().tolist()
                                      for k, v in make_planner(lora, out, acc).model.state_dict().items()}}}
    for name, kind in (("replicated", "replicated"), ("sharded", mode), ("resumed", mode)):
        cfg = load_config([f"output_dir={out}", f"run_name={'sharded' if name == 'resumed' else name}", *common])
        planner = make_planner(lora, out, acc)
        sharding = Sharding(kind, acc)
        shard_planner(planner.model, sharding)
        trainer = RLTFTrainer(cfg, planner, toy_env(), acc, sharding=sharding)
        if name == "resumed":
            run = Path(out) / "sharded" / "rltf"
            if acc.is_main_process:  # forget step 3: resume from checkpoint-2
                shutil.rmtree(run / "checkpoint-3")
                (run / "latest").write_text("checkpoint-2\n")
            acc.wait_for_everyone()
            assert trainer.resume() and trainer.step == 2
        rewards = []
        while trainer.step < cfg.rltf.steps:
            trainer.train_step()
            rewards.append(trainer.last_batch.rewards.tolist())
            trainer.save()  # checkpoint-2 and checkpoint-3 (the newest two are kept)
        weights = sharding.full_state_dict(planner.model)
        if weights is None:
            weights = planner.model.state_dict()
        shards = {n: tuple(getattr(p, "_local_tensor", p).shape) for n, p in planner.model.named_parameters()}
        result[name] = {"weights": {k: v.float().flatten().tolist() for k, v in weights.items()},
                        "rewards": rewards, "shards": shards}
        sharding.release()
        acc.wait_for_everyone()
    saved = Planner.from_pretrained(Path(out) / "sharded" / "rltf" / "checkpoint-3" / "planner").model.state_dict()
    result["reloaded"] = {"weights": {k: v.float().flatten().tolist() for k, v in saved.items()}}
    if not acc.is_main_process:  # only rank 0 holds full weights; the others report their shards
        result = {k: {"shards": v["shards"], "rewards": v["rewards"]} for k, v in result.items() if "shards" in v}
    Path(out, f"rank{acc.process_index}.json").write_text(json.dumps({"world": acc.num_processes, **result}))


if __name__ == "__main__":
    if "--both" in sys.argv:
        shared = accelerator(sys.argv[2])
        for sub, with_lora_ in (("full", False), ("lora-kl", True)):
            Path(sys.argv[1], sub).mkdir(parents=True, exist_ok=True)
            main(str(Path(sys.argv[1], sub)), sys.argv[2], with_lora_, shared)
    else:
        main(sys.argv[1], sys.argv[2], "--lora" in sys.argv)
