"""Benchmark: what share of the default RL step the reward takes, batched and shared against per-sample.

The default config (``configs/default.yaml``: the embedded planner, 8 tasks x 8 plans a step, 8
samples a plan) on a cold cache (``env.cache_mib=0``: no execution or score cache, so every plan's
experts and metric run), one ``RLTFTrainer.train_step`` at a time. Four trainers start from the same
warm-started planner and take turns, step by step, in this one run:

* ``per-sample`` — the reference: ``build_lite_registry(batched=False)`` (every image restorer image
  by image, the classifier's ink maps image by image, Fill Mask's candidates one by one) and
  ``image_similarity_batch(..., batched=False)`` (SSIM pair by pair): the code before any expert or
  metric was batched;
* ``restorers`` — only the image restorers (denoising, deblurring) and SSIM batched: the code before
  Fill Mask and the classifier were;
* ``batched`` — all of the above batched, every plan of a step still executed and scored on its own
  (``OpenAGIEnv(share_work=False)``): the code before work was shared within a reward call;
* ``shared`` — what the env runs: batched, and within one ``reward_plans`` call an expert request
  made again (a plan prefix two plans of a task share, on the task's samples; a repeated plan) is
  answered from the first, and the metric of a repeated plan's outputs computed once
  (``PlanExecutor.sharing``). This is not a cache: nothing is kept from one call (step) to the
  next, and ``env.cache_mib=0`` still means every step recomputes everything it needs.

All see the same plans and must get the same rewards, step by step (checked, bit for bit).
Each variant starts each step with the same MiniLM embedding table (the text metrics' text ->
embedding cache, kept across the steps of a run): without that, the first variant of a step would
pay for embedding the step's new texts and the others would find them cached.
Each step's CPU time (process time, ``OMP_NUM_THREADS=1``) is split into ``reward`` (``env.reward_plans``:
expert execution and metrics) and the rest (constrained sampling, log-prob scoring, update).
Learned experts and the metric model are loaded before timing.

    python benchmarks/reward_share.py [--steps 4] [--warmup 1] [--sft-epochs 3]

Last three lines: ``restorers only -> all batched: reward CPU x<ratio> less, plans/s x<ratio>``,
``reward share of the step: <per-sample> -> <shared> (reward CPU x<ratio> less, plans/s x<ratio>)`` and
``batched -> shared within a call: reward share <batched> -> <shared> (reward CPU x<ratio> less, plans/s x<ratio>)``.
"""

from __future__ import annotations

import os

for _var, _val in (("OMP_NUM_THREADS", "1"), ("MKL_NUM_THREADS", "1"), ("HF_HUB_OFFLINE", "1"),
                   ("TRANSFORMERS_OFFLINE", "1"), ("TOKENIZERS_PARALLELISM", "false")):
    os.environ.setdefault(_var, _val)

import argparse  # noqa: E402
import copy  # noqa: E402
import sys  # noqa: E402
import tempfile  # noqa: E402
import time  # noqa: E402
from pathlib import Path  # noqa: E402

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from collections import OrderedDict  # noqa: E402
from functools import partial  # noqa: E402

import numpy as np  # noqa: E402
import torch  # noqa: E402
from accelerate import Accelerator  # noqa: E402

from envs.openagi.env import OpenAGIEnv  # noqa: E402
from envs.openagi.lite import build_lite_registry  # noqa: E402
from envs.openagi.lite.image.classification import classify  # noqa: E402
from envs.openagi.lite.image.common import _check_images  # noqa: E402
from envs.openagi.lite.text.fill_mask import fill_mask  # noqa: E402
from envs.openagi.metrics.image import image_similarity_batch  # noqa: E402
from envs.openagi.metrics.text import _minilm  # noqa: E402
from envs.openagi.tools import register_spec  # noqa: E402
from rltf.config.loading import load_config  # noqa: E402
from rltf.planners.loading import load_planner  # noqa: E402
from rltf.planners.tokenizer import tokenizer_texts_for  # noqa: E402
from rltf.rl.sft import supervised_finetune  # noqa: E402
from rltf.rl.trainer import RLTFTrainer  # noqa: E402

VARIANTS = ("per-sample", "restorers", "batched", "shared")


def make_env(cfg, variant: str):
    """The default train env on a cold cache, its experts and image metric batched as ``variant`` says."""
    if variant not in VARIANTS:
        raise ValueError(f"unknown variant {variant!r}; expected one of {', '.join(VARIANTS)}")
    e = cfg.env
    registry = build_lite_registry(batched=variant != "per-sample")
    if variant == "restorers":  # Fill Mask and the classifier as they were before they were batched
        register_spec(registry, "Fill Mask", partial(fill_mask, batched=False), replace=True)
        register_spec(registry, "Image Classification", replace=True,
                      fn=lambda batch: classify(_check_images("Image Classification", batch), batched=False))
    per_pair = {"image_similarity": lambda p, t: image_similarity_batch(p, t, batched=False)}
    return OpenAGIEnv(suite=e.suite, split="train", n_samples=e.n_samples, samples_per_step=e.samples_per_step,
                      data_seed=e.data_seed, cache_bytes=0, registry=registry,
                      metrics=per_pair if variant == "per-sample" else {}, share_work=variant == "shared")


class TimedReward:
    """Wraps ``env.reward_plans``, adding its CPU seconds to ``seconds``."""

    def __init__(self, env):
        self.fn, self.seconds = env.reward_plans, 0.0
        env.reward_plans = self

    def __call__(self, *args, **kwargs):
        t0 = time.process_time()
        try:
            return self.fn(*args, **kwargs)
        finally:
            self.seconds += time.process_time() - t0


def main(argv: list[str] | None = None) -> None:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--steps", type=int, default=4, help="timed steps per variant")
    p.add_argument("--warmup", type=int, default=1, help="untimed steps per variant first")
    p.add_argument("--sft-epochs", type=int, default=3, help="warm start on the reference plans (0: none)")
    p.add_argument("--seed", type=int, default=0)
    args = p.parse_args(argv)
    torch.set_num_threads(1)

    with tempfile.TemporaryDirectory() as tmp:
        cfg = load_config([f"output_dir={tmp}", "run_name=bench", f"seed={args.seed}", "env.cache_mib=0",
                           f"rltf.steps={10**6}", "rltf.eval_every=0", "logging.progress_bar=false"])
        acc = Accelerator(cpu=True)
        envs = {v: make_env(cfg, v) for v in VARIANTS}
        warm = envs["shared"]
        warm.reward_plans([(t, t.reference_plan) for t in warm.tasks()])  # train/load learned experts, MiniLM
        planner = load_planner(cfg.planner, tokenizer_texts_for(warm))
        if args.sft_epochs:
            supervised_finetune(planner, warm, warm.tasks(), epochs=args.sft_epochs, lr=cfg.sft.lr,
                                batch_size=cfg.sft.batch_size, seed=cfg.seed, accelerator=acc, progress=False)
        trainers, clocks = {}, {}
        for v in VARIANTS:
            trainers[v] = RLTFTrainer(cfg, copy.deepcopy(planner), envs[v], acc)
            clocks[v] = TimedReward(envs[v])
        step_cpu = dict.fromkeys(VARIANTS, 0.0)
        n_plans = cfg.rltf.tasks_per_batch * cfg.rltf.k_samples
        print(f"default RL step: {cfg.rltf.tasks_per_batch} tasks x {cfg.rltf.k_samples} plans, "
              f"{cfg.env.samples_per_step} samples a plan, cold cache (env.cache_mib=0); "
              f"{args.warmup} warm-up + {args.steps} timed steps per variant, taking turns; CPU seconds, 1 thread")

        embedder = _minilm()
        for step in range(args.warmup + args.steps):
            rewards = {}
            embedded = OrderedDict(embedder.cache)
            for v in VARIANTS:
                embedder.cache = OrderedDict(embedded)  # each variant embeds this step's new texts itself
                before_reward = clocks[v].seconds
                t0 = time.process_time()
                trainers[v].train_step()
                spent = time.process_time() - t0
                rewards[v] = trainers[v].last_batch.rewards
                if step < args.warmup:
                    clocks[v].seconds = before_reward  # warm-up: not counted
                else:
                    step_cpu[v] += spent
            for v in VARIANTS[1:]:
                if not np.array_equal(rewards["per-sample"], rewards[v]):
                    raise SystemExit(f"step {step + 1}: the {v} env gave other rewards than the per-sample "
                                     "one: a batched or shared path is wrong")
        print(f"rewards identical in every step: True ({args.warmup + args.steps} steps x {n_plans} plans)")
        share = {}
        for v in VARIANTS:
            total, reward = step_cpu[v], clocks[v].seconds
            share[v] = reward / total
            print(f"{v:10s} step {total / args.steps:6.2f} s  = sampling+scoring+update "
                  f"{(total - reward) / args.steps:6.2f} s + experts+metrics {reward / args.steps:6.2f} s  "
                  f"| {n_plans * args.steps / total:6.2f} plans/s  reward share {share[v]:.1%}")
        reward = {v: clocks[v].seconds for v in VARIANTS}
        print(f"restorers only -> all batched: reward CPU x{reward['restorers'] / reward['batched']:.2f} less, "
              f"plans/s x{step_cpu['restorers'] / step_cpu['batched']:.2f}")
        print(f"reward share of the step: {share['per-sample']:.1%} -> {share['shared']:.1%} "
              f"(reward CPU x{reward['per-sample'] / reward['shared']:.2f} less, "
              f"plans/s x{step_cpu['per-sample'] / step_cpu['shared']:.2f})")
        print(f"batched -> shared within a call: reward share {share['batched']:.1%} -> {share['shared']:.1%} "
              f"(reward CPU x{reward['batched'] / reward['shared']:.2f} less, "
              f"plans/s x{step_cpu['batched'] / step_cpu['shared']:.2f})")


if __name__ == "__main__":
    main()
