"""The slot KV cache (constrained_decoding/slot_rows.py): rows that join a running batch go into its
free slots, the running rows stay where they are, and every row decodes as it would alone.

Features are compared with one teacher-forced pass of each row (float32, other reduction orders:
the tolerances of test_constrained_batching.py); on travel itineraries (the grammar whose branch
rows join most) the slot path and the re-stacking path (``DevicePolicy(slots=False)``) draw
the same plans with the same log-probabilities, which are the teacher-forced scorer's.
"""

from __future__ import annotations

import functools

import pytest
import torch

from constrained_decoding import runner as runner_mod
from constrained_decoding.decode import beam_search_plans, sample_plans
from constrained_decoding.device_policy import RESTACKED_JOINS, DevicePolicy
from constrained_decoding.logprobs import plan_logprobs
from constrained_decoding.slot_rows import SlotBatch
from constrained_decoding.without_replacement import sample_distinct_plans
from envs.travel.env import TravelPlannerEnv
from rltf.planners.tokenizer import train_plan_tokenizer
from tests.constrained_decoding.test_constrained_batching import FEATURE_TOL, LOGPROB_TOL, PLANNERS, PROMPTS
from tests.envs.travel.test_travel_grammar import byte_bpe, sandbox_texts
from tests.tiny_models import tiny_llama, tiny_t5

pytestmark = pytest.mark.usefixtures("one_torch_thread")


def _rows(n: int, start: int) -> list[list[int]]:
    return [[3 + (start + 5 * r + 3 * t) % 60 for t in range(24)] for r in range(n)]


class Check:
    """Decodes rows through a runner, recording (row, position, features) to compare with teacher forcing."""

    def __init__(self, name: str):
        model, tok = PLANNERS[name]()
        self.r = runner_mod.PlannerRunner(model, tok, PROMPTS, pad_id=tok.pad_token_id)
        self.rows: list[list[int]] = []
        self.prompt: list[int] = []
        self.pos: list[int] = []
        self.live: list[int] = []  # the row each batch position holds
        self.got: list[tuple[int, int, torch.Tensor]] = []

    def _record(self, feats: torch.Tensor, which: list[int]) -> None:
        self.got += [(i, self.pos[i], f) for i, f in zip(which, feats)]

    def open(self, prompts: list[int], prefix_lens: list[int], start: int) -> None:
        new = list(range(len(self.rows), len(self.rows) + len(prompts)))
        self.rows += _rows(len(prompts), start)
        self.prompt += prompts
        self.pos += prefix_lens
        prefixes = [self.rows[i][:n] for i, n in zip(new, prefix_lens)]
        idx = torch.tensor(prompts)
        feats = self.r.add_rows(idx, prefixes) if self.live else self.r.start(idx, prefixes)
        self.live += new
        self._record(feats, new)

    def step(self, n: int = 1) -> None:
        for _ in range(n):
            feats = self.r.step(torch.tensor([self.rows[i][self.pos[i]] for i in self.live]))
            for i in self.live:
                self.pos[i] += 1
            self._record(feats, self.live)

    def select(self, keep: list[int], same_prompt: bool = False, host: bool = False) -> None:
        """Keep batch positions ``keep`` (a repeated position: a new row continuing that row's tokens)."""
        live = []
        for b in keep:
            i = self.live[b]
            if i in live:  # a copy: a new row with the same tokens so far (then its own)
                j = len(self.rows)
                self.rows.append(self.rows[i][: self.pos[i]] + [3 + (t + 1) % 60 for t in self.rows[i][self.pos[i] :]])
                self.prompt.append(self.prompt[i])
                self.pos.append(self.pos[i])
                i = j
            live.append(i)
        self.r.select(torch.tensor(keep, dtype=torch.long), same_prompt=same_prompt, host_rows=keep if host else None)
        self.live = live

    def verify(self) -> None:
        with torch.no_grad():
            want = self.r.teacher_force(torch.tensor(self.prompt), self.rows)
        for i, t, f in self.got:
            torch.testing.assert_close(f, want[i, t], **FEATURE_TOL, msg=lambda m: f"row {i}, position {t}: {m}")


@pytest.fixture
def slots_at_first_join(monkeypatch):
    _with_policy(monkeypatch, DevicePolicy(restacked_joins=0))


@pytest.mark.parametrize("name", PLANNERS)
def test_slot_batch_rows_decode_as_alone(name, slots_at_first_join):
    """Joins (into free slots, longer histories that widen the window, growth past the capacity), drops,
    repeats (beam search's reordering, with and without ``same_prompt``) and forks of a slot batch:
    every row's features are those of a teacher-forced pass of the row alone."""
    c = Check(name)
    with torch.no_grad():
        c.open([0, 1, 2], [2, 1, 0], 10)
        c.step(2)
        c.open([2, 0, 1, 1], [6, 1, 4, 0], 40)  # the first join: the batch becomes a SlotBatch
        batch = c.r.batch
        assert isinstance(batch, SlotBatch)
        running = batch.layers[0].kbuf.data_ptr()
        c.step(2)
        c.select([1, 3, 4, 6], host=True)  # rows leave: their slots are free
        c.step()
        c.open([0, 2], [9, 3], 70)  # into the free slots, one history longer than the window
        assert c.r.batch is batch and batch.layers[0].kbuf.data_ptr() == running  # the running rows stayed
        c.step(2)
        c.select([0, 0, 2, 3, 3, 5], same_prompt=False)  # beam search's reordering: repeats copied
        c.step(2)
        same = [b for b, i in enumerate(c.live) if c.prompt[i] == c.prompt[c.live[0]]]
        c.select([same[0]] * len(same) + [b for b in range(len(c.live)) if b not in same], same_prompt=False)
        c.step()
        c.open([1] * 20 + [0] * 5, [2] * 25, 100)  # past the slot capacity: the buffers grow
        assert batch.layers[0].kbuf.shape[0] >= len(c.live)
        c.step(3)
        fork = c.r.fork(0, c.r.context_len(c.prompt[c.live[0]]) + c.pos[c.live[0]] - 1)
        assert fork.mask.sum() == fork.n_valid
        c.select(list(range(len(c.live) - 1, -1, -2)), host=True)
        c.step(2)
    c.verify()


def test_repeats_within_a_prompt_keep_their_slots_prompt(monkeypatch, slots_at_first_join):
    """``same_prompt``: a repeat copied into the slot its position held copies no encoder states or
    cross-attention K/V (and the features stay right)."""
    c = Check("t5")
    moved: list[bool] = []
    real = SlotBatch._moved
    monkeypatch.setattr(SlotBatch, "_moved", lambda self, s, d, prompt=True: (moved.append(prompt) if s else None,
                                                                               real(self, s, d, prompt))[1])
    with torch.no_grad():
        c.open([0, 0, 0], [1, 2, 3], 10)
        c.step()
        c.open([1, 1], [1, 2], 30)
        c.step()
        moved.clear()
        c.select([0, 0, 2, 3, 3], same_prompt=True)  # positions 1 and 4 repeat 0 and 3: same prompts
        c.step(2)
    assert moved == [False]
    c.verify()


@pytest.mark.parametrize("name", PLANNERS)
def test_a_batch_restacks_its_first_joins_then_takes_slots(name):
    """``RESTACKED_JOINS`` joins re-stack the running cache (beam search's root then branch rows), the
    next one moves the batch into slots, and later joins keep it there."""
    c = Check(name)
    with torch.no_grad():
        c.open([0, 1], [2, 1], 10)
        for j in range(RESTACKED_JOINS):
            c.step()
            c.open([2], [j + 1], 20 + j)
            assert not isinstance(c.r.batch, SlotBatch) and c.r.batch.joins == j + 1
        c.step()
        c.open([1, 0], [3, 0], 40)
        batch = c.r.batch
        assert isinstance(batch, SlotBatch)
        c.step()
        c.open([0], [4], 50)
        assert c.r.batch is batch
        c.step(2)
    c.verify()


def test_the_device_policy_decides_every_path():
    """One object decides where rows live and how they move: re-stacked or in slots, a beam search
    select mapped on the host or gathered on the device (by the device unless forced), and which
    uploads are queued (CUDA only)."""
    cpu, cuda = torch.device("cpu"), torch.device("cuda")
    policy = DevicePolicy()
    assert not policy.gathers_on_device(cpu) and policy.gathers_on_device(cuda)
    assert DevicePolicy(gather_on_device=True).gathers_on_device(cpu)
    assert not DevicePolicy(gather_on_device=False).gathers_on_device(cuda)
    assert [policy.into_slots(j, False) for j in (0, RESTACKED_JOINS - 1, RESTACKED_JOINS)] == [False, False, True]
    assert policy.into_slots(0, True) and DevicePolicy(restacked_joins=0).into_slots(0, False)
    assert not DevicePolicy(slots=False).into_slots(100, True)
    assert [DevicePolicy.queues_uploads(d) for d in (cpu, "cpu", None, cuda, "cuda:1")] == [False] * 3 + [True] * 2


# ------------------------------------------------------------------ travel: slot path against re-stacking

@pytest.fixture(scope="module")
def travel():
    env = TravelPlannerEnv("all")
    texts = sandbox_texts(env)
    t5_tok = train_plan_tokenizer(texts, vocab_size=1500, required=[])
    llama_tok = byte_bpe(texts)
    return env, {"t5": (tiny_t5(t5_tok, seed=1), t5_tok), "llama": (tiny_llama(llama_tok, seed=2), llama_tok)}


def _with_policy(monkeypatch, policy: DevicePolicy) -> None:
    """Every runner made from now on (the ones :class:`Check` makes) takes ``policy``."""
    monkeypatch.setattr(runner_mod.PlannerRunner, "__init__", functools.partialmethod(_INIT, policy=policy))


_INIT = runner_mod.PlannerRunner.__init__


@pytest.mark.parametrize("name", ["t5", "llama"])
def test_travel_plans_the_same_with_slots(travel, name, monkeypatch):
    """3-, 5- and 7-day itineraries (route row, then day rows joining as routes finish): sampling,
    beam search and stochastic beam search draw the same plans on both paths, with log-probabilities
    equal to float tolerance and equal to the teacher-forced scorer's."""
    env, planners = travel
    model, tok = planners[name]
    queries = [[q for q in env.queries() if q.days == d][0] for d in (3, 5, 7)]
    prompts, grammars = [q.query for q in queries], [env.grammar(tok, q) for q in queries]
    joins = []
    real_join = SlotBatch.join
    monkeypatch.setattr(SlotBatch, "join", lambda self, new: joins.append(new.rows) or real_join(self, new))
    runs = {}
    for slot in (True, False):
        policy = DevicePolicy(slots=slot)
        drawn = sample_plans(model, tok, prompts, grammars, k=3, seed=4, policy=policy)
        beams = beam_search_plans(model, tok, prompts, grammars, num_beams=4, num_return=2, policy=policy)
        distinct = sample_distinct_plans(model, tok, prompts, grammars, 2, seed=1, policy=policy)
        runs[slot] = [[(d.rows, d.logprob) for d in ds] for ds in drawn + beams + [x.plans for x in distinct]]
        assert bool(joins) == slot
        joins.clear()
        if slot:
            flat = [d for ds in drawn for d in ds]
            with torch.no_grad():
                scored = plan_logprobs(model, tok, [p for p, ds in zip(prompts, drawn) for _ in ds],
                                       [d.grammar for d in flat], flat, 1.0)
            torch.testing.assert_close(scored, torch.tensor([d.logprob for d in flat]), **LOGPROB_TOL)
    assert [[r for r, _ in ds] for ds in runs[True]] == [[r for r, _ in ds] for ds in runs[False]]
    torch.testing.assert_close(torch.tensor([lp for ds in runs[True] for _, lp in ds]),
                               torch.tensor([lp for ds in runs[False] for _, lp in ds]), **LOGPROB_TOL)


@pytest.mark.parametrize("name", ["t5", "llama"])
def test_beam_selects_gathered_on_the_device(travel, name, monkeypatch):
    """On an accelerator a beam search select (``same_prompt``) is gathered on the device instead of
    read and mapped on the host (``SlotBatch._gather_rows``; forced here on the CPU): beam search and
    stochastic beam search in slots from the first join draw what the re-stacking path draws, with
    log-probabilities equal to float tolerance, and no slot batch select reads the device."""
    env, planners = travel
    model, tok = planners[name]
    queries = [[q for q in env.queries() if q.days == d][0] for d in (3, 5)]
    prompts, grammars = [q.query for q in queries], [env.grammar(tok, q) for q in queries]
    gathered, beam_selects = [], []  # gathers on the device; slot batch selects a beam search makes
    real_gather, real_select = SlotBatch._gather_rows, SlotBatch.select
    monkeypatch.setattr(SlotBatch, "_gather_rows", lambda self, rows: gathered.append(1) or real_gather(self, rows))
    monkeypatch.setattr(SlotBatch, "select", lambda self, rows, same_prompt=False, host_rows=None, prompts_of=None: (
        beam_selects.append(same_prompt and host_rows is None) or real_select(self, rows, same_prompt, host_rows)))
    runs = {}
    for path in ("device", "restack"):
        # the accelerator's path forced on the CPU: slots from the first join, selects gathered on the device
        policy = DevicePolicy(gather_on_device=True, restacked_joins=0) if path == "device" else \
            DevicePolicy(slots=False)
        beams = beam_search_plans(model, tok, prompts, grammars, num_beams=4, num_return=2, policy=policy)
        distinct = sample_distinct_plans(model, tok, prompts, grammars, 3, seed=3, policy=policy)
        runs[path] = [[(d.rows, d.logprob) for d in ds] for ds in beams + [x.plans for x in distinct]]
        if path == "device":  # every beam search select went to the device: none read its rows
            assert len(gathered) == sum(beam_selects) > 0
    assert [[r for r, _ in ds] for ds in runs["device"]] == [[r for r, _ in ds] for ds in runs["restack"]]
    torch.testing.assert_close(torch.tensor([lp for ds in runs["device"] for _, lp in ds]),
                               torch.tensor([lp for ds in runs["restack"] for _, lp in ds]), **LOGPROB_TOL)
