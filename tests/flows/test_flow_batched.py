"""Batched flow passes: many passes run together (PassBatch), each backend call decodes the pending
decisions of all of them, and every pass samples what it would alone (its own seeded streams):
a batched training step equals the one-pass-at-a-time step, a batched evaluation the sequential one."""

from __future__ import annotations

import copy
import math

import numpy as np
import pytest
import torch

import envs as env_factory
from constrained_decoding.decode import sample_plans
from constrained_decoding.logprobs import plan_logprobs
from constrained_decoding.row_draws import RowDraws, categorical
from envs.openagi.grammar import plan_grammars
from envs.openagi.plans import PlanLimits
from envs.openagi.registry import IMAGE, TEXT
from rltf.config.loading import load_config
from rltf.flows import Flow
from rltf.flows.backends.base import Completion
from rltf.flows.backends.planner import PlannerBackend
from rltf.flows.engine.batching import PassBatch
from rltf.flows.engine.config import Backoff, FlowConfig
from rltf.planners.loading import load_planner
from rltf.planners.tokenizer import tokenizer_texts_for
from tests.tiny_models import small_registry, tiny_t5, unigram_tokenizer

# the travel flows cut their prompts to planner.max_prompt_tokens by design (their recipe,
# rltf/flows/evaluate.py, filters the same class); tests/rl/test_rl_correctness.py asserts the warning itself
pytestmark = [pytest.mark.usefixtures("one_torch_thread"),
              pytest.mark.filterwarnings("ignore::constrained_decoding.prompts.PromptTruncationWarning")]

LOGPROB_TOL = dict(rtol=1e-5, atol=1e-5)


# ------------------------------------------------------------------ per-row streams
def test_categorical_draws_follow_the_distribution_and_never_an_excluded_entry():
    logp = torch.tensor([[math.log(0.2), -math.inf, math.log(0.5), math.log(0.3), -math.inf]] * 20000)
    u = torch.tensor(np.random.default_rng(0).random(len(logp)))
    got = categorical(logp, u).squeeze(1)
    freq = torch.bincount(got, minlength=5).double() / len(got)
    p = torch.tensor([0.2, 0.0, 0.5, 0.3, 0.0], dtype=torch.float64)
    sigma = (p * (1 - p) / len(got)).sqrt()
    assert ((freq - p).abs() <= 4 * sigma + 1e-12).all(), freq  # a categorical draw of exp(logp)
    edges = categorical(logp[:2], torch.tensor([0.0, 1.0 - 2**-53], dtype=torch.float64)).squeeze(1)
    assert edges.tolist() == [0, 3]  # the first and the last entry with mass


def test_a_rows_stream_is_its_key_whatever_else_draws():
    a, b = RowDraws([(7, 0), (7, 1)]), RowDraws([(9, 0), (7, 1)])
    first = [a.next(1) for _ in range(40)]
    [b.next(0) for _ in range(5)]
    assert [b.next(1) for _ in range(40)] == first
    with pytest.raises(ValueError, match="integers >= 0"):
        a.add((-1,))


REG = small_registry()
LIMITS = PlanLimits(max_tools=3, max_branch=2, max_tail=1)
TASKS = [("Given noisy blurry image, how to return the caption in English step by step?", ((IMAGE,), TEXT)),
         ("Given noisy image and clozed English query, how to answer the question in German step by step?",
          ((IMAGE, TEXT), TEXT)),
         ("Given clozed English text, how to translate the text in German step by step?", ((TEXT,), TEXT))]


def test_seeded_samples_are_the_same_alone_or_in_a_batch_with_branch_rows():
    """sample_seeds: each sample draws from its own streams (branch rows included), so a prompt's
    samples do not depend on the other prompts decoded with it; log-probs are the scorer's."""
    tok = unigram_tokenizer()
    model = tiny_t5(tok, seed=1)
    prompts, sigs = [p for p, _ in TASKS], [s for _, s in TASKS]
    seeds = [11, 12, 13, 21, 22, 23, 31, 32, 33]
    together = sample_plans(model, tok, prompts, plan_grammars(tok, sigs, REG, LIMITS), k=3, temperature=0.8,
                            sample_seeds=seeds)
    assert any(len(d.rows) > 1 for ds in together for d in ds)  # branch rows joined mid-sampling
    for j, (p, s) in enumerate(TASKS):
        alone = sample_plans(model, tok, [p], plan_grammars(tok, [s], REG, LIMITS), k=3, temperature=0.8,
                             sample_seeds=seeds[3 * j : 3 * j + 3])[0]
        assert [d.text for d in alone] == [d.text for d in together[j]]
        torch.testing.assert_close([d.logprob for d in alone], [d.logprob for d in together[j]], **LOGPROB_TOL)
    flat = [(p, s, d) for (p, s), ds in zip(TASKS, together) for d in ds]
    with torch.no_grad():
        want = plan_logprobs(model, tok, [p for p, _, _ in flat],
                             plan_grammars(tok, [s for _, s, _ in flat], REG, LIMITS),
                             [d.plan for _, _, d in flat], 0.8)
    torch.testing.assert_close(torch.tensor([d.logprob for _, _, d in flat]), want.float(), **LOGPROB_TOL)
    with pytest.raises(ValueError, match="sample_seeds"):
        sample_plans(model, tok, prompts, plan_grammars(tok, sigs, REG, LIMITS), k=3, sample_seeds=seeds[:2])


# ------------------------------------------------------------------ the pass scheduler
class CountingBackend:
    """Answers ``<node>@<pass>`` from the prompt; records the size of every call; fails the calls listed."""

    supports_grammar = False

    def __init__(self, fail_calls=()):
        self.sizes: list[int] = []
        self.fail_calls = set(fail_calls)

    def generate(self, messages_batch, grammar=None, *, sampling=None):
        self.sizes.append(len(messages_batch))
        if len(self.sizes) - 1 in self.fail_calls:
            raise RuntimeError("endpoint hiccup")
        return [Completion(text=m[-1]["content"].upper(), prompt_tokens=1, completion_tokens=1) for m in messages_batch]


def _chain(n_nodes: int, tag: str, log: list):
    def job(backend):
        flow = Flow(backend, config=FlowConfig(backoff=Backoff(max_attempts=3, sleep=lambda s: None)))
        for k in range(n_nodes):
            flow.add_node(f"n{k}", f"{tag}-{k}", needs=[f"n{k - 1}"] if k else [],
                          compose=lambda ctx: [{"role": "user", "content": ctx.node.prompt}])
        result = flow.run()
        log.append(tag)
        return [result[f"n{k}"].answer for k in range(n_nodes)]
    return job


@pytest.mark.parametrize("width", [1, 2, 5])
def test_passes_run_together_answer_as_alone_and_calls_hold_every_pending_request(width):
    lengths = [3, 1, 4, 2, 3]
    backend, log = CountingBackend(fail_calls={1}), []
    got = PassBatch(backend, width).run([_chain(n, f"p{i}", log) for i, n in enumerate(lengths)])
    assert got == [[f"P{i}-{k}" for k in range(n)] for i, n in enumerate(lengths)]
    assert sum(backend.sizes) == sum(lengths) + backend.sizes[1]  # the failed call's passes asked again
    assert max(backend.sizes) <= width
    if width == 5:  # the failed call (the second) is retried within the next one: calls = the longest pass + 1
        assert len(backend.sizes) == max(lengths) + 1 and backend.sizes[0] == 5


def test_a_pass_that_raises_does_not_stop_the_others_and_is_raised_at_the_end():
    log = []

    def broken(backend):
        backend.generate([[{"role": "user", "content": "x"}]])
        raise KeyError("bad after-query")

    with pytest.raises(KeyError, match="bad after-query"):
        PassBatch(CountingBackend(), 3).run([_chain(2, "a", log), broken, _chain(3, "b", log)])
    assert sorted(log) == ["a", "b"]
    with pytest.raises(Exception, match="width=0"):
        PassBatch(CountingBackend(), 0)


# ------------------------------------------------------------------ training and evaluation
TINY = ["config=configs/travel-mtp.yaml", "env.travel.days=[3]", "env.travel.levels=[easy]",
        "planner.embedded.d_model=32", "planner.embedded.d_ff=64", "planner.embedded.num_layers=1",
        "planner.embedded.num_heads=2", "planner.embedded.vocab_size=2000", "rltf.steps=2", "rltf.tasks_per_batch=2",
        "rltf.k_samples=2", "rltf.lr=0.01", "rltf.lr_schedule=constant", "flow.limit=3", "logging.progress_bar=false",
        "rltf.checkpoint_every=0"]


@pytest.fixture(scope="module")
def world(tmp_path_factory):
    tmp = tmp_path_factory.mktemp("flow_batched")
    cfg = load_config([*TINY, f"output_dir={tmp}", f"planner.embedded.dir={tmp / 'embedded'}"])
    train, held = env_factory.make_train_and_held_out(cfg.env)
    return tmp, train, held, load_planner(cfg.planner, tokenizer_texts_for(train))


def _trainer(world, width: int, *extra):
    from accelerate import Accelerator

    from rltf.flows.training.trainer import FlowRLTFTrainer

    tmp, train, _, base = world
    cfg = load_config([*TINY, f"output_dir={tmp / str(width)}", f"planner.embedded.dir={tmp / 'embedded'}",
                       f"flow.backend.batch_size={width}", *extra])
    planner = copy.deepcopy(base)
    return FlowRLTFTrainer(cfg, planner, train, Accelerator(cpu=True)), planner


def _summary(trajs):
    return [(t.task_id, t.reward, [(d.node, d.completion.text) for d in t.decisions]) for t in trajs]


def test_a_batched_training_step_equals_the_one_pass_at_a_time_step(world):
    alone, planner_alone = _trainer(world, 1)
    batched, planner_batched = _trainer(world, 3)  # 4 passes, 3 at a time: a pass joins when one ends
    for _ in range(2):
        row_alone, row_batched = alone.train_step(), batched.train_step()
        ta, tb = alone.last_trajectories, batched.last_trajectories
        assert _summary(ta) == _summary(tb)
        assert sum(len(t.decisions) for t in ta) >= 8
        torch.testing.assert_close([d.completion.logprob for t in tb for d in t.decisions],
                                   [d.completion.logprob for t in ta for d in t.decisions], **LOGPROB_TOL)
        assert row_batched["train/reward"] == row_alone["train/reward"]
    for p, q in zip(planner_batched.model.parameters(), planner_alone.model.parameters()):
        torch.testing.assert_close(p, q, rtol=1e-5, atol=1e-7)


def test_a_batched_evaluation_equals_the_sequential_one(world):
    from rltf.flows.evaluation import evaluate_method

    tmp, _, held, planner = world
    cfg = load_config([*TINY, f"output_dir={tmp}", f"planner.embedded.dir={tmp / 'embedded'}"])
    ids = [t.id for t in held.tasks()][:3]
    out = {}
    for width in (1, 3):
        row, records = evaluate_method("mtp", held, ids, PlannerBackend(planner, batch_size=width), cfg.flow)
        out[width] = (row, records)
    (row1, rec1), (row3, rec3) = out[1], out[3]
    assert [r["plan"] for r in rec3] == [r["plan"] for r in rec1]
    assert [r["decisions"] for r in rec3] == [r["decisions"] for r in rec1] and rec1[0]["decisions"] >= 4
    torch.testing.assert_close([r["logprob"] for r in rec3], [r["logprob"] for r in rec1], **LOGPROB_TOL)
    assert {k: v for k, v in row3.items() if k != "seconds/query"} == {k: v for k, v in row1.items()
                                                                      if k != "seconds/query"}


def test_a_step_that_scores_through_the_samplers_encoder_passes_equals_one_that_reads_the_prompts_again(world):
    """The T5 planner's step keeps the encoder states the sampler read each prompt with (an
    EncoderMemo) and back-propagates through them: the same trajectories, log-probs and update
    (the encoder's weights included) as re-reading every prompt when scoring."""
    memo, planner_memo = _trainer(world, 3)
    again, planner_again = _trainer(world, 3)
    assert memo._encoder_memo() is not None
    again._encoder_memo = lambda: None
    before = [p.detach().clone() for p in planner_memo.model.get_encoder().parameters()]
    for _ in range(2):
        row_memo, row_again = memo.train_step(), again.train_step()
        assert _summary(memo.last_trajectories) == _summary(again.last_trajectories)
        for key in ("train/entropy", "train/loss", "train/grad_norm"):  # log π_c as scored, the loss, its gradient
            assert row_memo[key] == pytest.approx(row_again[key], rel=1e-5, abs=1e-6), key
        assert row_memo["train/logprob_mismatch"] < 1e-4
    assert any(not torch.equal(a, b) for a, b in zip(before, planner_memo.model.get_encoder().parameters()))
    for p, q in zip(planner_memo.model.parameters(), planner_again.model.parameters()):
        torch.testing.assert_close(p, q, rtol=1e-5, atol=1e-7)
