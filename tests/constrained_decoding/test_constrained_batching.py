"""Continuous batching: rows that join a running batch decode exactly as they would alone.

:meth:`PlannerRunner.add_rows` merges freshly prefilled rows into a batch mid-decoding (left-padded
caches and masks); beam search and sampling use it to start the branch rows of a nonlinear plan as
soon as its head row has finished, from a copy of the head row's cache (``forks``) where the
tokens of a branch row's prefix begin with the head row's.
"""

from __future__ import annotations

import pytest
import torch

from constrained_decoding import runner as runner_mod
from constrained_decoding.decode import beam_search_plans, sample_plans
from constrained_decoding.logprobs import plan_logprobs
from envs.openagi.grammar import plan_grammars
from envs.openagi.plans import PlanLimits, check_plan
from envs.openagi.registry import IMAGE, TEXT
from tests.tiny_models import bpe_tokenizer, small_registry, tiny_llama, tiny_t5, unigram_tokenizer

pytestmark = pytest.mark.usefixtures("one_torch_thread")

# Joining rows, forks and teacher forcing run the same maths on other shapes (padding, batch
# composition), so other reduction orders: float32 agreement to a relative ~1e-6, which varies with
# the CPU's vector width and the thread count. Log-probabilities add one log-softmax per token: rtol
# for long plans, atol for those near 0.
FEATURE_TOL = dict(rtol=1e-5, atol=2e-5)  # features are O(1) (|x| <= ~4 here)
LOGPROB_TOL = dict(rtol=1e-5, atol=1e-5)

PROMPTS = ["Given noisy blurry image, how to return the caption in English step by step?",
           "Given noisy image and clozed English query, how to answer the question in German step by step?",
           "Given clozed English text, how to translate the text in German step by step?"]
PLANNERS = {
    "t5": lambda: (tiny_t5(unigram_tokenizer(), seed=1), unigram_tokenizer()),
    "llama": lambda: (tiny_llama(bpe_tokenizer(), seed=2), bpe_tokenizer()),
}


def _rows(n: int, start: int) -> list[list[int]]:
    return [[start + 7 * r + t for t in range(16)] for r in range(n)]


@pytest.mark.parametrize("name", PLANNERS)
@pytest.mark.parametrize("case", ["longer", "shorter", "unpadded"])
def test_rows_added_mid_decoding_match_rows_decoded_alone(name, case):
    """Running rows and joining rows (shorter or longer history; unpadded, maskless T5 rows) give the
    features one teacher-forced pass of each row alone gives."""
    model, tok = PLANNERS[name]()
    r = runner_mod.PlannerRunner(model, tok, PROMPTS, pad_id=tok.pad_token_id)
    first, later = _rows(3, 5), _rows(4, 40)
    first_idx, later_idx = torch.tensor([0, 1, 2]), torch.tensor([2, 0, 1, 1])
    first_pre = [[5, 6], [12], []] if case != "unpadded" else [[5], [12], [19]]
    later_pre = {"longer": [[40, 41, 42, 43, 44, 45], [47], [54, 55, 56, 57], [61, 62, 63, 64, 65, 66, 67]],
                 "shorter": [[], [47], [54], []],
                 "unpadded": [[40, 41], [47, 48], [54, 55], [61, 62]]}[case]
    with torch.no_grad():
        want_first = r.teacher_force(first_idx, first)
        want_later = r.teacher_force(later_idx, later)
        pos = [len(p) for p in first_pre]
        feats = r.start(first_idx, first_pre)
        got: list[tuple[int, int, torch.Tensor]] = [(i, pos[i], feats[i]) for i in range(3)]
        for _ in range(2):
            feats = r.step(torch.tensor([first[i][pos[i]] for i in range(3)]))
            pos = [p + 1 for p in pos]
            got += [(i, pos[i], feats[i]) for i in range(3)]
        joined = r.add_rows(later_idx, later_pre)
        pos += [len(p) for p in later_pre]
        rows = first + later
        got += [(3 + i, pos[3 + i], joined[i]) for i in range(4)]
        for _ in range(3):
            feats = r.step(torch.tensor([rows[i][pos[i]] for i in range(7)]))
            pos = [p + 1 for p in pos]
            got += [(i, pos[i], feats[i]) for i in range(7)]
        # rows leave (a finished group) and the rest keeps decoding
        r.select(torch.tensor([1, 4, 6]))
        keep = [1, 4, 6]
        for _ in range(2):
            feats = r.step(torch.tensor([rows[i][pos[i]] for i in keep]))
            for j, i in enumerate(keep):
                pos[i] += 1
                got.append((i, pos[i], feats[j]))
    for i, t, f in got:
        want = want_first[i, t] if i < 3 else want_later[i - 3, t]
        torch.testing.assert_close(f, want, **FEATURE_TOL, msg=lambda m: f"row {i}, position {t}: {m}")


@pytest.mark.parametrize("name", PLANNERS)
def test_rows_join_an_emptied_batch_and_copies(name):
    """Joining a batch whose rows all left is a fresh start; ``copies`` repeats prefilled rows."""
    model, tok = PLANNERS[name]()
    r = runner_mod.PlannerRunner(model, tok, PROMPTS, pad_id=tok.pad_token_id)
    rows = _rows(2, 30)
    with torch.no_grad():
        want = r.teacher_force(torch.tensor([1, 2, 1]), [rows[0], rows[1], rows[0]])
        r.start(torch.tensor([0]), [[3, 4]])
        r.select(torch.tensor([], dtype=torch.long))
        feats = r.add_rows(torch.tensor([1, 2]), [[30, 31], [37]], copies=torch.tensor([0, 1, 0]))
        torch.testing.assert_close(feats, torch.stack([want[0, 2], want[1, 1], want[2, 2]]), **FEATURE_TOL)
        feats = r.step(torch.tensor([32, 38, 32]))
        torch.testing.assert_close(feats, torch.stack([want[0, 3], want[1, 2], want[2, 3]]), **FEATURE_TOL)


REG = small_registry()
LIMITS = PlanLimits(max_tools=3, max_branch=2, max_tail=1)
TASKS = [(PROMPTS[0], ((IMAGE,), TEXT)), (PROMPTS[1], ((IMAGE, TEXT), TEXT)), (PROMPTS[2], ((TEXT,), TEXT)),
         ("Given clozed English document and clozed English query, how to answer the question in English step by "
          "step?", ((TEXT, TEXT), TEXT))]


@pytest.mark.parametrize("name", PLANNERS)
def test_beam_search_of_a_mixed_batch_equals_each_prompt_alone(name):
    """Branch groups join a batch of running head and linear groups (other widths, other prompts):
    the same hypotheses and scores as each prompt searched alone."""
    model, tok = PLANNERS[name]()
    prompts, sigs = [p for p, _ in TASKS], [s for _, s in TASKS]
    for beams, branch_beams in ((8, 2), (6, 1), (3, 3)):
        together = beam_search_plans(model, tok, prompts, plan_grammars(tok, sigs, REG, LIMITS),
                                     num_beams=beams, branch_beams=branch_beams)
        for (p, s), got in zip(TASKS, together):
            alone = beam_search_plans(model, tok, [p], plan_grammars(tok, [s], REG, LIMITS),
                                      num_beams=beams, branch_beams=branch_beams)[0]
            assert [d.text for d in got] == [d.text for d in alone]
            torch.testing.assert_close([d.logprob for d in got], [d.logprob for d in alone], **LOGPROB_TOL)


@pytest.mark.parametrize("name", PLANNERS)
def test_sampled_mixed_batch_reports_the_scorers_log_probabilities(name):
    """Branch rows joining mid-sampling: valid plans whose log-probabilities the scorer recomputes."""
    model, tok = PLANNERS[name]()
    prompts, sigs = [p for p, _ in TASKS], [s for _, s in TASKS]
    drawn = sample_plans(model, tok, prompts, plan_grammars(tok, sigs, REG, LIMITS), k=12, temperature=0.8, seed=4)
    flat = [(p, s, d) for (p, s), ds in zip(TASKS, drawn) for d in ds]
    for _, s, d in flat:
        check_plan(d.plan, REG, *s, LIMITS)
        assert len(d.rows) == (1 if len(s[0]) == 1 else 1 + len(s[0]))  # head + one row per branch
    with torch.no_grad():
        want = plan_logprobs(model, tok, [p for p, _, _ in flat],
                             plan_grammars(tok, [s for _, s, _ in flat], REG, LIMITS),
                             [d.plan for _, _, d in flat],
                             0.8)
    torch.testing.assert_close(torch.tensor([d.logprob for _, _, d in flat]), want.float(), **LOGPROB_TOL)
    again = sample_plans(model, tok, prompts, plan_grammars(tok, sigs, REG, LIMITS), k=12, temperature=0.8, seed=4)
    assert [[d.text for d in ds] for ds in again] == [[d.text for d in ds] for ds in drawn]


# ------------------------------------------------------------------ branch rows from the head row's cache


@pytest.mark.parametrize("name", PLANNERS)
def test_forked_rows_match_a_full_prefill(name):
    """Rows started from a fork of a finished row (its cache cut to the tokens they share, then their
    suffix) give teacher forcing's features, mixed in one join with rows prefilled whole (no fork,
    or a prefix too short for the common suffix length), also after the forked row left the batch."""
    model, tok = PLANNERS[name]()
    r = runner_mod.PlannerRunner(model, tok, PROMPTS, pad_id=tok.pad_token_id)
    head, other = _rows(2, 5)
    branch = head[:4] + [90, 91, 92, 93, 94, 95, 96, 97]  # re-reads the head's first 4 tokens
    with torch.no_grad():
        want = r.teacher_force(torch.tensor([1, 1, 0, 1]), [branch, branch, other, head[:3] + [80, 81, 82, 83]])
        r.start(torch.tensor([0, 1]), [other[:1], head[:2]])  # (unequal lengths: a padded cache)
        for t in range(1, 4):
            r.step(torch.tensor([other[t], head[t + 1]]))  # the head row has read head[:5]
        fork = r.fork(1, r.context_len(1) + 4)
        r.select(torch.tensor([0]))  # the head row leaves
        r.step(torch.tensor([other[4]]))
        # suffixes of one length (4, the first row's): the third row takes 1 token from the fork, the
        # last (4 tokens) none: it is prefilled whole, as the row without a fork
        prefixes = [branch[:8], other[:2], head[:3] + [80, 81], head[:3] + [80]]
        feats = r.add_rows(torch.tensor([1, 0, 1, 1]), prefixes, copies=torch.tensor([0, 0, 1, 2, 3]),
                           forks=[(fork, 4), None, (fork, 3), (fork, 3)])
        want_at = [(0, 8), (1, 8), (2, 2), (3, 5), (3, 4)]
        torch.testing.assert_close(feats, torch.stack([want[i, t] for i, t in want_at]), **FEATURE_TOL)
        feats = r.step(torch.tensor([other[5], branch[8], branch[8], other[2], 82, 81]))
        want_at = [(i, t + 1) for i, t in want_at]
        torch.testing.assert_close(feats[1:], torch.stack([want[i, t] for i, t in want_at]), **FEATURE_TOL)


def _char_tokenizer():
    """Characters, and merges that make every other head text of the tasks below one token and that
    head followed by ``;`` another: a branch row re-reads its head row's tokens (odd heads), part of
    them, or none of them (even heads: its first token differs), LLaMA-style (``<s>``, ``</s>``)."""
    import string

    from tokenizers import Tokenizer, models, processors
    from transformers import PreTrainedTokenizerFast

    from envs.openagi.grammar import head_text, plan_grammar

    heads = sorted({head_text(*h) for _, sig in TASKS if len(sig[0]) > 1
                    for h in plan_grammar(PLANNERS["t5"]()[1], REG, *sig, LIMITS).heads})
    vocab = {t: i for i, t in enumerate(["<pad>", "<s>", "</s>", "<unk>", *string.printable[:95]])}
    merges: list[tuple[str, str]] = []
    for h in heads[::2]:
        for k in range(1, len(h) + 1):
            pair = (h[:k], h[k]) if k < len(h) else (h, ";")
            if pair not in merges:
                merges.append(pair)
                vocab.setdefault("".join(pair), len(vocab))
    tok = Tokenizer(models.BPE(vocab, merges, unk_token="<unk>"))
    tok.add_special_tokens(["<pad>", "<s>", "</s>", "<unk>"])
    tok.post_processor = processors.TemplateProcessing(single="<s> $A", special_tokens=[("<s>", 1)])
    return PreTrainedTokenizerFast(tokenizer_object=tok, pad_token="<pad>", bos_token="<s>", eos_token="</s>",
                                   unk_token="<unk>")


def _char_planner(kind: str):
    tok = _char_tokenizer()
    return (tiny_t5(tok, seed=3) if kind == "t5" else tiny_llama(tok, seed=3)), tok


REUSE_PLANNERS = {**PLANNERS, "t5-chars": lambda: _char_planner("t5"), "llama-chars": lambda: _char_planner("llama")}


@pytest.mark.parametrize("name", REUSE_PLANNERS)
def test_branch_rows_from_the_head_cache_decode_as_prefilled(name, monkeypatch):
    """Beam search and sampling with branch rows forked from their head row's cache: the plans and
    log-probabilities of prefilling every branch prefix whole. The ``-chars`` tokenizer also makes
    branch rows whose prefix shares part or none of the head row's tokens (partial fork, fallback)."""
    model, tok = REUSE_PLANNERS[name]()
    prompts, sigs = [p for p, _ in TASKS], [s for _, s in TASKS]
    forked, whole = [], []
    start_forked, start = runner_mod.PlannerRunner._start_forked, runner_mod.PlannerRunner.start
    monkeypatch.setattr(runner_mod.PlannerRunner, "_start_forked",
                        lambda self, f, n, s, p: forked.append(len(f)) or start_forked(self, f, n, s, p))
    monkeypatch.setattr(runner_mod.PlannerRunner, "start",
                        lambda self, p, pre: whole.append(len(pre)) or start(self, p, pre))
    runs = {}
    for reuse in (True, False):
        forked.clear()
        whole.clear()
        beams = beam_search_plans(model, tok, prompts, plan_grammars(tok, sigs, REG, LIMITS),
                                  num_beams=8, branch_beams=2,
                                  reuse_cache=reuse)
        drawn = sample_plans(model, tok, prompts, plan_grammars(tok, sigs, REG, LIMITS), k=8, temperature=0.8, seed=5,
                             reuse_cache=reuse)
        runs[reuse] = [[(d.text, d.logprob) for d in ds] for ds in beams + drawn]
        assert bool(forked) == reuse
        if reuse:  # (2 calls start the head rows) branch rows prefilled whole: only where tokens differ
            assert len(whole) > 2 if name.endswith("chars") else len(whole) == 2
    for got, want in zip(runs[True], runs[False]):
        assert [t for t, _ in got] == [t for t, _ in want]
        torch.testing.assert_close([a for _, a in got], [b for _, b in want], **LOGPROB_TOL)
