"""The plan grammar over token ids: exactly the tokenizer's own tokens of exactly the valid plans."""

from __future__ import annotations

import copy
import itertools

import pytest
import torch

from constrained_decoding.dfa import GrammarBuildError, build_dfa
from constrained_decoding.tables import stack_tables
from envs.openagi.grammar import (
    GrammarError,
    branch_text,
    build_grammar,
    head_text,
    plan_grammar,
)
from envs.openagi.plans import LinearPlan, NonlinearPlan, PlanLimits, enumerate_plans, format_plan
from envs.openagi.registry import IMAGE, TEXT, ToolRegistry
from tests.tiny_models import bpe_tokenizer, small_registry, unigram_tokenizer, wordpiece_tokenizer

REG = small_registry()
LIMITS = PlanLimits(max_tools=3, max_branch=2, max_tail=1)
FAMILIES = {"unigram": unigram_tokenizer, "bpe": bpe_tokenizer, "wordpiece": wordpiece_tokenizer}
SIGNATURES = [((IMAGE,), TEXT), ((IMAGE, TEXT), TEXT), ((TEXT, TEXT), TEXT)]


def language(dfa, start) -> set[tuple[int, ...]]:
    """Every token sequence the DFA accepts from ``start`` (depth-first)."""
    out, stack = set(), [(start, ())]
    while stack:
        s, pre = stack.pop()
        if s == dfa.final:
            out.add(pre)
        for tok, nxt in dfa.transitions[s].items():
            stack.append((nxt, pre + (tok,)))
    return out


def ids(tok, text: str) -> tuple[int, ...]:
    return tuple(tok(text, add_special_tokens=False)["input_ids"])


@pytest.mark.parametrize("family", FAMILIES)
@pytest.mark.parametrize("sig", SIGNATURES, ids=lambda s: "+".join(s[0]) + "->" + s[1])
def test_grammar_accepts_exactly_the_tokenised_valid_plans(family, sig):
    tok = FAMILIES[family]()
    g = plan_grammar(tok, REG, *sig, LIMITS)
    eos = g.eos_id
    valid = list(enumerate_plans(REG, *sig, LIMITS))
    if g.is_linear:
        want = {ids(tok, format_plan(p)) + (eos,) for p in valid}
        assert language(g.dfa, g.root) == want
        for p in valid:  # the rows are the canonical text as the tokenizer tokenises it
            assert g.rows_for(p) == [(g.root, ids(tok, format_plan(p)) + (eos,))]
        return
    # nonlinear: every path through head and branch languages is a valid plan, and every valid plan is one
    decoded = set()
    for head_row in language(g.dfa, g.root):
        h = g.meaning(g.root, head_row)
        join, tail = g.heads[h]
        assert head_row == ids(tok, head_text(join, tail)) + (eos,)
        per_branch = []
        for i, start in enumerate(g.branch_start[h]):
            rows = language(g.dfa, start)
            for row in rows:
                assert row == ids(tok, branch_text(join, tail, i, g.meaning(start, row)))
            per_branch.append(sorted(rows))
        for combo in itertools.product(*per_branch):
            decoded.add(g.assemble(head_row, combo))
    assert decoded == set(valid)


def test_tool_names_are_tokenised_in_context():
    """The same name has different first tokens at the start of a plan, after ', ' and after '('."""
    for tok, first_alone, first_after_sep in [
        (bpe_tokenizer(), "Image", "ĠImage"),
        (unigram_tokenizer(), "▁", "▁"),
    ]:
        pieces = tok.convert_ids_to_tokens(list(ids(tok, "Image Captioning, Image Classification")))
        assert pieces[0] == first_alone and first_after_sep in pieces[1:]
    g = plan_grammar(bpe_tokenizer(), REG, (IMAGE,), TEXT, LIMITS)
    first = set(g.dfa.transitions[g.root])
    bpe = bpe_tokenizer()
    assert bpe.convert_tokens_to_ids("Image") in first and bpe.convert_tokens_to_ids("ĠImage") not in first
    g2 = plan_grammar(bpe, REG, (IMAGE, TEXT), TEXT, LIMITS)
    h = g2.heads.index(("Visual Question Answering", ()))
    pre, _ = g2.dfa.forced_prefix(g2.branch_start[h][0])
    assert bpe.decode(pre).endswith("branch 1: (") or bpe.decode(pre).endswith("branch 1:")


def test_nonlinear_heads_cover_every_join_and_tail():
    g = plan_grammar(unigram_tokenizer(), REG, (IMAGE, TEXT), TEXT, LIMITS)
    heads = {(p.join, p.tail) for p in enumerate_plans(REG, (IMAGE, TEXT), TEXT, LIMITS)}
    assert set(g.heads) == heads and len(g.heads) == len(heads)
    assert g.num_branches == 2 and not g.is_linear


def test_unknown_tokens_name_the_tool():
    reg = small_registry()
    reg.register("Zebra Quux 9", IMAGE, TEXT, lambda xs: xs)
    tok = unigram_tokenizer()
    assert tok.unk_token_id in tok("Zebra Quux 9", add_special_tokens=False)["input_ids"]
    with pytest.raises(GrammarError, match="Zebra Quux 9"):
        build_grammar(tok, reg, (IMAGE,), TEXT, PlanLimits(1, 0, 0))


def test_lowercasing_tokenizer_collision_is_an_error():
    reg = ToolRegistry()
    reg.register("Fill Mask", TEXT, TEXT, lambda xs: xs)
    reg.register("FILL MASK", TEXT, TEXT, lambda xs: xs)
    with pytest.raises(GrammarError, match="same token ids"):
        build_grammar(wordpiece_tokenizer(), reg, (TEXT,), TEXT, PlanLimits(1, 0, 0))
    build_grammar(bpe_tokenizer(), reg, (TEXT,), TEXT, PlanLimits(1, 0, 0))  # a cased tokenizer is fine


def test_signature_without_plans_is_an_error():
    with pytest.raises(GrammarError, match="no valid plan"):
        build_grammar(bpe_tokenizer(), small_registry(), (TEXT,), IMAGE, LIMITS)


def test_tokenizer_without_end_token_is_an_error():
    tok = bpe_tokenizer()
    old = tok.eos_token
    tok.eos_token = None
    try:
        with pytest.raises(GrammarError, match="end-of-sequence"):
            build_grammar(tok, REG, (IMAGE,), TEXT, LIMITS)
    finally:
        tok.eos_token = old


def test_grammars_are_cached_per_signature_and_limits():
    tok = unigram_tokenizer()
    a = plan_grammar(tok, REG, (IMAGE,), TEXT, LIMITS)
    assert plan_grammar(tok, small_registry(), [IMAGE], TEXT, PlanLimits(3, 2, 1)) is a
    assert plan_grammar(tok, REG, (IMAGE,), TEXT, PlanLimits(2, 2, 1)) is not a


def test_rows_for_rejects_invalid_plans_with_the_checkers_reason():
    g = plan_grammar(unigram_tokenizer(), REG, (IMAGE,), TEXT, LIMITS)
    with pytest.raises(Exception) as e:
        g.rows_for(LinearPlan(("Fill Mask",)))
    assert getattr(e.value, "reason", None) == "bad_start"
    g2 = plan_grammar(unigram_tokenizer(), REG, (IMAGE, TEXT), TEXT, LIMITS)
    with pytest.raises(Exception) as e:
        g2.rows_for(NonlinearPlan(((), ("Image Captioning",)), "Visual Question Answering"))
    assert getattr(e.value, "reason", None) == "bad_start"


def test_dfa_is_minimal_and_rejects_prefixes():
    dfa, (a, b) = build_dfa([[(1, 2, 9), (1, 3, 9)], [(4, 2, 9), (4, 3, 9)]], pad_id=0)
    assert a != b and dfa.num_states == 5  # sink, {9}, {2,3}, and one root per language
    assert dfa.walk(a, (1, 3, 9)) == ([a, dfa.transitions[a][1], dfa.transitions[dfa.transitions[a][1]][3]], [0, 1, 0])
    with pytest.raises(ValueError, match="not allowed"):
        dfa.walk(a, (4, 2, 9))
    with pytest.raises(GrammarBuildError, match="prefix"):
        build_dfa([[(1, 2), (1, 2, 3)]], pad_id=0)


def test_stacked_tables_match_the_python_transitions():
    tok = bpe_tokenizer()
    gs = (plan_grammar(tok, REG, (IMAGE,), TEXT, LIMITS), plan_grammar(tok, REG, (IMAGE, TEXT), TEXT, LIMITS))
    t = stack_tables(gs, torch.device("cpu"))
    for g in gs:
        off = t.offset[g]
        for s, edges in enumerate(g.dfa.transitions):
            allowed = t.allowed[s + off][t.valid[s + off]].tolist()
            nxt = t.next_state[s + off][t.valid[s + off]].tolist()
            if s == g.dfa.final:
                assert bool(t.final[s + off]) and allowed == [g.pad_id] and nxt == [s + off]
            else:
                assert not bool(t.final[s + off])
                assert dict(zip(allowed, nxt)) == {k: v + off for k, v in edges.items()}


def test_encoded_rows_are_remembered_per_tokenizer_and_forgotten_when_its_vocabulary_grows():
    """Row texts shared by many grammars are encoded once per tokenizer; a token added later
    changes what the tokenizer gives, and the memo must follow it."""
    from constrained_decoding.rows import encode_texts

    tok = copy.deepcopy(bpe_tokenizer())  # (the shared tokenizer of tiny_models is left as it is)
    texts = ["Image Denoising, Image Deblurring", "Text Summarization"] * 3
    first = encode_texts(tok, texts)
    assert first == [tuple(ids) for ids in tok(texts, add_special_tokens=False)["input_ids"]]
    assert encode_texts(tok, texts) == first
    tok.add_tokens(["Denoising"])
    after = encode_texts(tok, texts)
    assert after == [tuple(ids) for ids in tok(texts, add_special_tokens=False)["input_ids"]]
    assert after[0] != first[0]
