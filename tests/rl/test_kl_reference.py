"""The KL reference is the policy RLTF starts from: KL exactly 0 at RL step 0.

For full-model and LoRA planners, with and without a supervised warm start, T5 and LLaMA: the
trainer's reference (:class:`rltf.rl.kl_reference.ReferencePolicy`) gives every valid plan the same
log-probability as the policy RLTF starts from, which after SFT is the fine-tuned policy; the
trainer's own ``train/kl`` (log π − log π_ref on the plans it sampled) is 0 at its first step;
a saved RLTF checkpoint reloads to the same policy and the same reference. The main job is
checked end to end too (the in-run SFT → RLTF handoff, then resume).

Log-probabilities are compared with tolerances relative to their size (they are -1 .. -30).
"""

from __future__ import annotations

import json

import pytest
import torch
from accelerate import Accelerator

from constrained_decoding.logprobs import plan_logprobs
from envs.openagi.grammar import plan_grammars
from envs.openagi.plans import enumerate_plans
from rltf.config.loading import LoraSettings, PlannerSettings, load_config
from rltf.planners.loading import load_planner
from rltf.planners.planner import Planner
from rltf.rl.kl_reference import ReferencePolicy
from rltf.rl.sft import supervised_finetune
from rltf.rl.trainer import RLTFTrainer
from rltf.run.checkpoint import MODEL_DIR, latest_checkpoint
from tests.tiny_models import bpe_tokenizer, tiny_llama, tiny_t5, unigram_tokenizer
from tests.toy_env import toy_env

pytestmark = [pytest.mark.usefixtures("one_torch_thread"),
              # PEFT calls a transformers method deprecated in v5; not ours to fix.
              pytest.mark.filterwarnings("ignore:`is_gradient_checkpointing` is deprecated:FutureWarning")]

RTOL, ATOL = 1e-5, 1e-6  # relative to log-probabilities of size 1..30


@pytest.fixture(scope="module")
def base_dirs(tmp_path_factory):
    """Tiny T5 (SentencePiece-style tokenizer) and LLaMA (byte-level BPE) saved as a hub download would be."""
    root = tmp_path_factory.mktemp("bases")
    out = {}
    for arch, tok, build in (("t5", unigram_tokenizer(), tiny_t5), ("llama", bpe_tokenizer(), tiny_llama)):
        build(tok, seed=0).save_pretrained(root / arch)
        tok.save_pretrained(root / arch)
        out[arch] = root / arch
    return out


def _all_plans(env):
    """(prompts, signatures, plans): every valid plan of every task of the toy env."""
    rows = [(t.description, (t.inputs, t.target), p) for t in env.tasks()
            for p in enumerate_plans(env.registry, t.inputs, t.target, env.limits)]
    return tuple(list(x) for x in zip(*rows))


def _logp(model, planner, env, temperature=1.0):
    prompts, sigs, plans = _all_plans(env)
    with torch.no_grad():
        return plan_logprobs(model, planner.tokenizer, prompts,
                             plan_grammars(planner.tokenizer, sigs, env.registry, env.limits), plans,
                             temperature).float()


def _ref_logp(reference: ReferencePolicy, planner, env, temperature=1.0):
    with reference() as m:
        return _logp(m, planner, env, temperature)


def _cfg(tmp_path, *overrides):
    return load_config([f"output_dir={tmp_path}", "run_name=kl", "rltf.tasks_per_batch=2", "rltf.k_samples=4",
                        "rltf.lr=0.01", "rltf.kl_coef=0.1", "rltf.steps=1", "rltf.eval_every=0",
                        "rltf.checkpoint_every=1", "logging.progress_bar=false", *overrides])


def _assert_kl_logged_zero(row: dict) -> None:
    """The trainer's ``train/kl`` (mean of log π − log π_ref over its sampled plans) is 0, relative to
    the size of those log-probs (``train/entropy`` = −mean log π)."""
    assert row["train/entropy"] > 0.1
    assert abs(row["train/kl"]) <= RTOL * row["train/entropy"], row["train/kl"]


# ------------------------------------------------------------------------------ the trainer's reference
@pytest.mark.parametrize("arch", ["t5", "llama"])
@pytest.mark.parametrize("kind", ["full", "lora", "full-after-sft", "lora-after-sft"])
def test_kl_is_zero_at_the_first_rltf_step_and_checkpoints_reload(base_dirs, tmp_path, arch, kind):
    env, acc = toy_env(), Accelerator(cpu=True)
    cfg = _cfg(tmp_path)
    lora = kind.startswith("lora")
    settings = PlannerSettings(model=str(base_dirs[arch]), lora=LoraSettings(enabled=lora, r=4))
    planner = load_planner(settings)
    base_lp = _logp(planner.model, planner, env)
    start_lp = base_lp
    sft = kind.endswith("after-sft")
    if sft:
        from rltf.planners.loading import rltf_start_planner  # the SFT -> RLTF handoff the main job runs

        supervised_finetune(planner, env, env.tasks(), epochs=4, lr=0.05 if lora else 0.01, batch_size=2, seed=0,
                            accelerator=acc, progress=False)
        start_lp = _logp(planner.model, planner, env)  # the fine-tuned policy: RLTF's start
        assert (start_lp - base_lp).abs().max() > 0.05, "SFT must move the policy for this test to mean anything"
        sft_dir = planner.save_pretrained(tmp_path / "sft")
        if lora:  # the bug this guards against: the adapter-disabled model is still the pre-SFT base
            torch.testing.assert_close(_ref_logp(ReferencePolicy(planner), planner, env), base_lp, rtol=RTOL, atol=ATOL)
        rltf_start_planner(planner, settings, sft_dir)
        if lora:  # merged SFT adapter + a fresh one, recorded for the checkpoints
            assert planner.is_peft and planner.merged_adapters == (str(sft_dir.resolve()),)
    assert not planner.model.training

    trainer = RLTFTrainer(cfg, planner, env, acc)
    assert trainer.state.reference is not None
    policy_lp = _logp(planner.model, planner, env)
    torch.testing.assert_close(policy_lp, start_lp, rtol=RTOL, atol=ATOL)  # the handoff keeps the policy
    # every valid plan, not only the sampled ones: log π_ref == log π, i.e. KL = 0 at step 0
    torch.testing.assert_close(_ref_logp(trainer.state.reference, planner, env), policy_lp, rtol=RTOL, atol=ATOL)

    row = trainer.train_step()  # what the trainer computes and logs, on the plans it sampled
    _assert_kl_logged_zero(row)
    trained_lp = _logp(planner.model, planner, env)
    assert (trained_lp - policy_lp).abs().max() > 1e-4, "the step must move the policy"
    # the reference did not move with it
    torch.testing.assert_close(_ref_logp(trainer.state.reference, planner, env), start_lp, rtol=RTOL, atol=ATOL)

    # a checkpoint after one step reloads to the same policy (and, with LoRA, to the same reference)
    trainer.save()
    ckpt = latest_checkpoint(cfg.run_dir / "rltf") / MODEL_DIR
    again = Planner.from_pretrained(ckpt)
    assert again.is_peft == lora and not again.model.training
    torch.testing.assert_close(_logp(again.model, again, env), trained_lp, rtol=RTOL, atol=ATOL)
    if lora:
        torch.testing.assert_close(_ref_logp(ReferencePolicy(again), again, env), start_lp, rtol=RTOL, atol=ATOL)
        # train/evaluate.py's load (planner.model=<checkpoint>, LoRA off): every adapter merged, same policy
        merged = load_planner(PlannerSettings(model=str(ckpt)))
        assert not merged.is_peft
        torch.testing.assert_close(_logp(merged.model, merged, env), trained_lp, rtol=RTOL, atol=ATOL)

    # resume (a fresh start of the same run) loads the checkpoint into the start planner: same policy
    fresh = load_planner(settings)
    if sft:
        rltf_start_planner(fresh, settings, sft_dir)
    resumed = RLTFTrainer(cfg, fresh, env, acc)
    assert resumed.resume() and resumed.step == 1
    torch.testing.assert_close(_logp(fresh.model, fresh, env), trained_lp, rtol=RTOL, atol=ATOL)
    if lora:  # still the policy RLTF started from
        torch.testing.assert_close(_ref_logp(resumed.state.reference, fresh, env), start_lp, rtol=RTOL, atol=ATOL)


# ------------------------------------------------------------------------------ refused combinations
def test_kl_with_a_still_trained_adapter_or_a_4bit_sft_adapter_is_refused(base_dirs, tmp_path):
    from rltf.planners.hf_models import PlannerError
    from rltf.planners.loading import check_kl_reference

    keep = PlannerSettings(model=str(base_dirs["llama"]), lora=LoraSettings(enabled=True, merge_source_adapter=False))
    with pytest.raises(PlannerError, match=r"rltf\.kl_coef=0\.05 with planner\.lora\.merge_source_adapter=false.*"
                                           r"sft\.enabled=true.*rltf\.kl_coef=0"):
        check_kl_reference(keep, sft=True, kl_coef=0.05)
    check_kl_reference(keep, sft=True, kl_coef=0.0)  # no reference, nothing wrong
    check_kl_reference(keep, sft=False, kl_coef=0.05)  # a fresh adapter on a plain model: fine

    adapter = load_planner(PlannerSettings(model=str(base_dirs["t5"]), lora=LoraSettings(enabled=True)))
    adapter_dir = adapter.save_pretrained(tmp_path / "adapter")
    kept = PlannerSettings(model=str(adapter_dir), lora=LoraSettings(enabled=True, merge_source_adapter=False))
    with pytest.raises(PlannerError, match=r"merge_source_adapter=false.*the adapter planner\.model="):
        check_kl_reference(kept, sft=False, kl_coef=0.1)
    check_kl_reference(PlannerSettings(model=str(adapter_dir), lora=LoraSettings(enabled=True)), sft=False,
                       kl_coef=0.1)  # merged into the base: fine

    qlora = PlannerSettings(model=str(base_dirs["llama"]), lora=LoraSettings(enabled=True), load_in_4bit=True)
    with pytest.raises(PlannerError, match=r"sft\.enabled=true and planner\.load_in_4bit=true.*lossy.*"
                                           r"rltf\.kl_coef=0, sft\.enabled=false, or planner\.load_in_4bit=false"):
        check_kl_reference(qlora, sft=True, kl_coef=0.05)
    check_kl_reference(qlora, sft=False, kl_coef=0.05)  # QLoRA without SFT: a fresh adapter, fine
    check_kl_reference(qlora, sft=True, kl_coef=0.0)

    # the main job refuses before it loads anything
    from train.rltf import run

    cfg = load_config([f"output_dir={tmp_path}", "run_name=refused", f"planner.model={base_dirs['llama']}",
                       "planner.lora.enabled=true", "planner.lora.merge_source_adapter=false", "rltf.kl_coef=0.1"])
    with pytest.raises(PlannerError, match="merge_source_adapter=false"):
        run(cfg)
    assert not (tmp_path / "refused").exists()


# ------------------------------------------------------------------------------ the main job end to end
TINY = ["planner.embedded.d_model=32", "planner.embedded.d_ff=64", "planner.embedded.num_layers=1",
        "planner.embedded.num_heads=2", "env.n_samples=2", "env.samples_per_step=2", "sft.epochs=3", "sft.lr=0.01",
        "rltf.steps=1", "rltf.tasks_per_batch=2", "rltf.k_samples=4", "rltf.eval_every=0",
        "rltf.checkpoint_every=1", "rltf.kl_coef=0.1", "eval.num_beams=2", "eval.splits=[test]",
        "eval.schemas=[finetuned,rltf]", "logging.progress_bar=false", "planner.lora.enabled=true",
        "planner.lora.r=4"]


@pytest.mark.slow
@pytest.mark.parametrize("arch", ["t5", "llama"])
def test_main_job_lora_after_sft_starts_rltf_at_kl_zero(base_dirs, tmp_path, capsys, arch):
    """``train/rltf.py`` with LoRA, SFT and a KL penalty (as configs/llama-lora.yaml): the first
    RLTF step's ``train/kl`` is 0, the checkpoint carries the SFT adapter, and ``resume=true``
    (reload ``sft/``, hand off, load the latest checkpoint) gives the same numbers."""
    from train.rltf import run

    model = [f"planner.embedded.dir={tmp_path / 'embedded'}"] if arch == "t5" else [f"planner.model={base_dirs[arch]}"]
    args = [f"output_dir={tmp_path}", "run_name=lora-sft", *TINY, *model]
    summary = run(load_config(args))
    run_dir = tmp_path / "lora-sft"
    sft_nll = [h["sft/nll"] for h in json.loads((run_dir / "sft_history.json").read_text())]
    assert sft_nll[-1] < sft_nll[0] - 0.05, "SFT must move the policy for this test to mean anything"
    (row,) = json.loads((run_dir / "rltf_history.json").read_text())
    _assert_kl_logged_zero(row)
    ckpt = latest_checkpoint(run_dir / "rltf") / MODEL_DIR
    assert json.loads((ckpt / "rltf_planner.json").read_text())["merged_adapters"] == ["merged_adapters/0"]
    assert (ckpt / "merged_adapters" / "0" / "adapter_config.json").is_file()

    again = run(load_config([*args, "resume=true"]))
    assert "resumed RLTF at step 1" in capsys.readouterr().out
    assert again["table"] == summary["table"]
