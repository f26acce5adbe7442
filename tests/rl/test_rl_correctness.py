"""Correctness of the RL maths and its plumbing (issue #10): random draws on the right device,
loss weights independent of the number of processes, baselines that never contain the sample's
own reward, a tokenizer that never sees held-out tasks, prompt length applied, docs that are true.
"""

import copy
import json
import re
from pathlib import Path

import numpy as np
import pytest
import torch
from accelerate import Accelerator
from torch.overrides import TorchFunctionMode

from constrained_decoding.decode import sample_plans
from constrained_decoding.logprobs import plan_logprobs
from constrained_decoding.prompts import PLAN_SEPARATOR, encode_prompts
from envs.openagi.grammar import plan_grammars
from rltf.algorithms.baselines import Baseline
from rltf.config.loading import load_config
from rltf.evaluation.schemas import constrained_schema
from rltf.planners.planner import Planner
from rltf.rl.sft import supervised_finetune
from rltf.rl.steps import loss_weights
from rltf.rl.trainer import RLTFTrainer
from tests.tiny_models import bpe_tokenizer, tiny_llama, tiny_t5, unigram_tokenizer
from tests.toy_env import toy_env
from tests.two_processes import torchrun2

pytestmark = pytest.mark.usefixtures("one_torch_thread")
ROOT = Path(__file__).resolve().parents[2]


def make_cfg(tmp_path, *overrides):
    return load_config([f"output_dir={tmp_path}", "run_name=toy", "rltf.tasks_per_batch=2", "rltf.k_samples=4",
                        "rltf.lr=0.01", "rltf.eval_every=0", "rltf.checkpoint_every=0", "logging.progress_bar=false",
                        *overrides])


def t5_planner(seed=0):
    tok = unigram_tokenizer()
    return Planner(tiny_t5(tok, seed=seed), tok, True, "tiny-t5")


# --------------------------------------------------------------------------- 2. random draws
RANDOM_FUNCS = {torch.multinomial, torch.rand, torch.randn, torch.randint, torch.randperm, torch.bernoulli,
                torch.normal, torch.rand_like, torch.randn_like, torch.randint_like, torch.Tensor.uniform_,
                torch.Tensor.normal_, torch.Tensor.bernoulli_, torch.Tensor.exponential_, torch.Tensor.random_,
                torch.Tensor.geometric_, torch.Tensor.cauchy_, torch.Tensor.log_normal_}


class RandomAudit(TorchFunctionMode):
    """Records every random draw: the generator it got and the device of the tensors it draws for."""

    def __init__(self):
        super().__init__()
        self.draws = []

    def __torch_function__(self, func, types, args=(), kwargs=None):
        kwargs = kwargs or {}
        if func in RANDOM_FUNCS:
            tensors = [a for a in args if isinstance(a, torch.Tensor)]
            device = tensors[0].device if tensors else torch.device(kwargs.get("device") or "cpu")
            self.draws.append((getattr(func, "__name__", str(func)), kwargs.get("generator"), device))
        return func(*args, **kwargs)


@pytest.fixture
def generators(monkeypatch):
    """Every torch.Generator made while the test runs, with the device it was EXPLICITLY made on
    (None for ``torch.Generator()``, which is a CPU generator whatever device the model is on)."""
    made = {}

    class RecordingGenerator(torch.Generator):
        def __new__(cls, *args, **kwargs):
            g = super().__new__(cls, *args, **kwargs)
            made[id(g)] = args[0] if args else kwargs.get("device")
            return g

        def __init__(self, *args, **kwargs):
            pass

    monkeypatch.setattr(torch, "Generator", RecordingGenerator)
    return made


def check_draws(draws, made):
    assert draws, "expected random draws"
    for name, gen, device in draws:
        assert gen is not None, f"{name} drew from the global RNG: not a function of (seed, step, process)"
        assert id(gen) in made, f"{name} got a generator made outside the audited code"
        explicit = made[id(gen)]
        assert explicit is not None, (f"{name} drew for {device} tensors with a generator made without a device "
                                      "(torch.Generator() is a CPU generator: multinomial on CUDA raises)")
        assert torch.device(explicit) == device == gen.device, (name, explicit, device, gen.device)


def test_every_random_draw_of_a_train_step_uses_a_generator_on_its_tensors_device(tmp_path, generators):
    planner, env = t5_planner(), toy_env()
    trainer = RLTFTrainer(make_cfg(tmp_path), planner, env, Accelerator(cpu=True))
    with RandomAudit() as audit:
        trainer.train_step()
    check_draws(audit.draws, generators)
    # the sampler draws torch.multinomial's exponentials without its host-side check (row_draws.multinomial_one)
    assert any(name == "exponential_" for name, *_ in audit.draws)


def test_sampling_sft_and_evaluation_draw_only_from_device_generators(generators):
    planner, env = t5_planner(), toy_env()
    tasks = env.tasks()
    with RandomAudit() as audit:
        sample_plans(planner.model, planner.tokenizer, [t.description for t in tasks],
                     plan_grammars(planner.tokenizer, [(t.inputs, t.target) for t in tasks], env.registry, env.limits),
                     k=3)
        supervised_finetune(planner, env, tasks, epochs=1, lr=1e-3, batch_size=2, seed=0,
                            accelerator=Accelerator(cpu=True), progress=False)
        constrained_schema("finetuned", planner, env, tasks, num_beams=2)
    check_draws(audit.draws, generators)


def test_the_audit_catches_a_generator_made_without_a_device(generators):
    """The check above can fail: the trainer's old ``torch.Generator()`` is caught."""
    planner, env = t5_planner(), toy_env()
    t = env.tasks()[0]
    with RandomAudit() as audit:
        sample_plans(planner.model, planner.tokenizer, [t.description],
                     plan_grammars(planner.tokenizer, [(t.inputs, t.target)], env.registry, env.limits),
                     k=2, generator=torch.Generator().manual_seed(0))
    with pytest.raises(AssertionError, match="made without a device"):
        check_draws(audit.draws, generators)


# ------------------------------------------------------------- 5. weights vs process count
def _fixed_batch():
    rng = np.random.default_rng(7)
    n = 16  # 4 tasks x 4 samples, the same global batch for 1 and 2 processes
    return (rng.uniform(0, 1, n), np.repeat([0, 1, 0, 1], 4), -rng.uniform(0.5, 6, n), rng.normal(0, 0.3, n))


WEIGHT_OVERRIDES = ("rltf.normalize_rewards=true", "rltf.entropy_coef=0.05", "rltf.kl_coef=0.1",
                    "rltf.tasks_per_batch=4")


def weights_for(trainer, shards: int, rank: int):
    """Two consecutive steps' loss weights for this rank's shard of the fixed batch."""
    out = []
    for step in range(2):
        r, ids, lp, kl = (np.split(x, shards)[rank] for x in _fixed_batch())  # contiguous shards
        r = r + 0.1 * step
        shaped, *_ = loss_weights(r, ids, lp, kl, trainer.state.baseline, trainer.rl, trainer.acc)
        out.append(shaped.tolist())
    return out


@pytest.mark.slow
def test_loss_weights_are_the_same_with_one_and_two_processes(tmp_path):
    torchrun2("tests/weights_worker.py", tmp_path, timeout=300)
    two = [json.loads((tmp_path / f"weights{r}.json").read_text()) for r in (0, 1)]
    one = weights_for(RLTFTrainer(make_cfg(tmp_path / "one", *WEIGHT_OVERRIDES), t5_planner(), toy_env(),
                                  Accelerator(cpu=True)), 1, 0)
    for step in range(2):
        np.testing.assert_allclose(two[0][step] + two[1][step], one[step], rtol=1e-12, atol=1e-12)
    # and the normalisation really used the global std: each shard's own std would differ
    halves = np.split(np.asarray(one[0]), 2)
    assert not np.isclose(halves[0].std(), halves[1].std(), rtol=1e-3)


# -------------------------------------------------------------------------- 6. baselines
def test_first_visit_baselines_never_contain_the_samples_own_reward():
    r = [1.0, 0.0, 0.5, 0.3]
    adv, base = Baseline("moving_average", decay=0.5).advantages(r, [0, 0, 1, 1])
    np.testing.assert_allclose(base, [(0.0 + 0.5 + 0.3) / 3, (1.0 + 0.5 + 0.3) / 3, 1.3 / 3, 1.5 / 3], rtol=1e-12)
    adv, base = Baseline("per_task", decay=0.5).advantages(r, [0, 0, 1, 1])
    np.testing.assert_allclose(base, [0.0, 1.0, 0.3, 0.5], rtol=1e-12)
    adv, base = Baseline("rloo").advantages(r, [0, 0, 1, 1])
    np.testing.assert_allclose(base, [0.0, 1.0, 0.3, 0.5], rtol=1e-12)
    # nothing to compare with: advantage exactly 0 (no update), for every kind
    for kind in ("moving_average", "per_task", "rloo"):
        adv, base = Baseline(kind).advantages([0.7], [3])
        assert adv.tolist() == [0.0] and base.tolist() == [0.7]
    # a revisit uses only earlier batches' averages, not its own rewards
    b = Baseline("per_task", decay=0.0)
    b.advantages([1.0, 0.0], [3, 3])
    adv, base = b.advantages([0.0, 1.0, 0.2, 0.4], [3, 3, 4, 4])
    np.testing.assert_allclose(base, [0.5, 0.5, 0.4, 0.2], rtol=1e-12)


def test_baseline_docstring_states_the_first_visit_rule():
    import rltf.algorithms.baselines as mod

    assert "never contains its own reward" in " ".join(mod.__doc__.split())


# ------------------------------------------------------------------------------ 7. tokenizer
def test_the_embedded_tokenizer_never_sees_a_held_out_task():
    from envs.openagi.split import load_split
    from envs.openagi.suite import task_specs
    from rltf.planners.tokenizer import default_tokenizer_texts

    corpus = set(default_tokenizer_texts())
    train_seen = 0
    for suite in ("lite", "full"):
        specs, split = task_specs(suite), load_split(suite)
        held = [specs[i].description for part in ("validation", "test") for i in split[part]]
        assert not corpus & set(held), f"{suite}: held-out descriptions in the tokenizer corpus"
        train_seen += sum(specs[i].description in corpus for i in split["train"])
    assert train_seen > 0


# --------------------------------------------------------------------- 8. max_prompt_tokens
@pytest.mark.parametrize("arch", ["t5", "llama"])
def test_prompts_longer_than_the_limit_are_cut_from_the_left_keeping_the_template(arch):
    tok = copy.deepcopy(unigram_tokenizer() if arch == "t5" else bpe_tokenizer())  # (the shared ones keep their limit)
    enc_dec = arch == "t5"
    desc = "Given clozed English text, how to translate the text in German step by step?"
    long = "blah " * 40 + desc
    full = encode_prompts(tok, [desc, long], enc_dec)
    tok.model_max_length = len(full[0]) + 2
    with pytest.warns(UserWarning, match=r"prompts longer than \d+ tokens .* are truncated from the left"):
        cut = encode_prompts(tok, [desc, long], enc_dec)
    assert cut[0] == full[0]  # short prompts are untouched
    assert len(cut[1]) == tok.model_max_length
    if enc_dec:
        assert cut[1][-1] == tok.eos_token_id  # T5's EOS kept
    else:
        assert cut[1][0] == full[1][0] == tok.bos_token_id  # BOS kept ...
        assert tok.decode(cut[1]).endswith(PLAN_SEPARATOR)  # ... and the separator the plan follows
    text = tok.decode(cut[1], skip_special_tokens=True)
    assert "step by step?" in text and text.count("blah") < long.count("blah")  # the left was cut


def test_sampler_and_scorer_agree_on_truncated_prompts():
    tok = copy.deepcopy(bpe_tokenizer())  # (the shared one keeps its limit)
    planner = Planner(tiny_llama(tok, seed=1), tok, False, "tiny-llama")
    env = toy_env()
    t = env.tasks()[0]
    prompt = "noise " * 50 + t.description
    tok.model_max_length = 24
    with pytest.warns(UserWarning):
        d = sample_plans(planner.model, tok, [prompt],
                         plan_grammars(tok, [(t.inputs, t.target)], env.registry, env.limits), k=4)[0]
    with pytest.warns(UserWarning), torch.no_grad():
        lp = plan_logprobs(planner.model, tok, [prompt] * 4,
                           plan_grammars(tok, [(t.inputs, t.target)] * 4, env.registry, env.limits),
                           [x.plan for x in d])
    torch.testing.assert_close(lp, torch.tensor([x.logprob for x in d]), rtol=1e-5, atol=1e-6)


def test_readme_and_docs_name_only_test_files_that_exist():
    texts = [(ROOT / "README.md").read_text()] + [p.read_text() for p in sorted((ROOT / "docs").rglob("*.md"))]
    named = {m for text in texts for m in re.findall(r"tests/[\w/]+\.py", text)}
    missing = [p for p in named if not (ROOT / p).is_file()]
    assert not missing, f"README or docs/ cite test files that do not exist: {missing}"


def test_checkpoint_docs_claim_no_rng_state():
    import rltf.run.checkpoint as ck

    assert "RNG state" not in (ck.__doc__ or "").split("No RNG state")[0]
    assert not hasattr(ck, "rng_state") and not hasattr(ck, "set_rng_state")


def test_load_planner_applies_max_prompt_tokens_and_saved_planners_keep_it(tmp_path):
    from rltf.config.loading import PlannerSettings
    from rltf.planners.loading import load_planner

    tok = bpe_tokenizer()
    Planner(tiny_llama(tok, seed=0), tok, False, "tiny-llama").save_pretrained(tmp_path / "src")
    planner = load_planner(PlannerSettings(model=str(tmp_path / "src"), max_prompt_tokens=20))
    assert planner.tokenizer.model_max_length == 20
    with pytest.warns(UserWarning, match="longer than 20 tokens"):
        ids = encode_prompts(planner.tokenizer, ["word " * 40], False)
    assert len(ids[0]) == 20
    planner.save_pretrained(tmp_path / "saved")  # a checkpoint remembers the limit it ran with
    assert Planner.from_pretrained(tmp_path / "saved").tokenizer.model_max_length == 20
