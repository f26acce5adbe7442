"""benchmarks/xgrammar_peer.py: XGrammar on our plan language (issue #15 item 6).

The trie-shaped EBNF accepts exactly the plans of a small grammar (every canonical token sequence
is accepted and stops at EOS, invalid plans are rejected, random walks through XGrammar's masks end
in plans), token strings are right for WordPiece / Metaspace / byte-level vocabularies, and HF
``generate`` with the peer's logits processor emits only valid plans under beam search and sampling.
"""

from __future__ import annotations

import importlib.util
import random
import sys
from pathlib import Path

import pytest

xgr = pytest.importorskip("xgrammar", reason="the XGrammar peer needs the bench extra: pip install -e \".[bench]\"")

import torch  # noqa: E402
from transformers import LogitsProcessorList  # noqa: E402

from constrained_decoding.rows import special_ids  # noqa: E402
from envs.openagi.plans import PlanLimits, enumerate_plans, format_plan  # noqa: E402
from envs.openagi.registry import IMAGE, TEXT  # noqa: E402
from tests.tiny_models import bpe_tokenizer, small_registry, tiny_t5, unigram_tokenizer, wordpiece_tokenizer  # noqa: E402

pytestmark = pytest.mark.usefixtures("one_torch_thread")

ROOT = Path(__file__).resolve().parents[2]
LIMITS = PlanLimits(max_tools=3, max_branch=2, max_tail=1)
SIGNATURES = [((IMAGE,), TEXT), ((IMAGE, TEXT), TEXT)]  # a linear and a nonlinear signature
PROMPTS = ["Given noisy image, how to return the caption in English step by step?",
           "Given blurry image and clozed English query, how to answer the question in English step by step?"]


def load_peer():
    if "xgrammar_peer" not in sys.modules:
        spec = importlib.util.spec_from_file_location("xgrammar_peer", ROOT / "benchmarks" / "xgrammar_peer.py")
        module = importlib.util.module_from_spec(spec)
        sys.modules["xgrammar_peer"] = module
        spec.loader.exec_module(module)
    return sys.modules["xgrammar_peer"]


def embedded_tokenizer():
    from rltf.planners.tokenizer import default_tokenizer_texts, train_plan_tokenizer

    return train_plan_tokenizer(default_tokenizer_texts())


TOKENIZERS = {"wordpiece": wordpiece_tokenizer, "unigram": unigram_tokenizer, "bpe": bpe_tokenizer,
              "embedded": embedded_tokenizer}
_cache: dict[str, tuple] = {}


def setup(name: str):
    """(tokenizer, plans per signature, token sequences per signature, compiled XGrammarPlans)."""
    if name not in _cache:
        tok = TOKENIZERS[name]()
        eos, _ = special_ids(tok)
        registry = small_registry()
        plans = [[format_plan(p) for p in enumerate_plans(registry, *sig, LIMITS)] for sig in SIGNATURES]
        langs = [[tuple(x) + (eos,) for x in tok(texts, add_special_tokens=False)["input_ids"]] for texts in plans]
        _cache[name] = tok, plans, langs, load_peer().XGrammarPlans(tok, langs)
    return _cache[name]


def feed(matcher, tokens) -> bool:
    """Whether the matcher accepts every token and stops (the last token is EOS)."""
    matcher.reset()
    return all(matcher.accept_token(t) for t in tokens) and matcher.is_terminated()


def allowed(matcher, vocab_size: int) -> list[int]:
    mask = xgr.allocate_token_bitmask(1, vocab_size)
    matcher.fill_next_token_bitmask(mask)
    bits = ((mask[0].unsqueeze(-1) >> torch.arange(32, dtype=torch.int32)) & 1).flatten()[:vocab_size]
    return bits.nonzero().flatten().tolist()


def canonical(tok, strings, tokens) -> tuple[int, ...] | None:
    """The canonical token sequence of what ``tokens`` (ending in EOS) write, re-tokenised."""
    eos, _ = special_ids(tok)
    text = b"".join(strings[t] for t in tokens[:-1]).decode()
    return tuple(tok(text.strip(), add_special_tokens=False)["input_ids"]) + (eos,)


def test_wordpiece_token_strings():
    peer = load_peer()
    tok = wordpiece_tokenizer()
    strings = peer.token_bytes(tok)
    ids = tok("Image Super Resolution, (Colorization)", add_special_tokens=False)["input_ids"]
    assert any(t.startswith("##") for t in tok.convert_ids_to_tokens(ids))  # a continuation piece is there
    assert b"".join(strings[i] for i in ids) == b" image super resolution , ( colorization )"
    for special in tok.all_special_ids:
        assert strings[special] == b""


@pytest.mark.parametrize("name", list(TOKENIZERS))
def test_ebnf_accepts_exactly_the_plans(name):
    tok, plans, langs, xp = setup(name)
    eos, _ = special_ids(tok)
    rng = random.Random(0)
    for k, (texts, lang) in enumerate(zip(plans, langs)):
        matcher = xp.matcher(k)
        # what the tokens of a plan write is the plan text (up to spaces, after the tokenizer's
        # normaliser: WordPiece lowercases and writes " image classification , machine translation")
        normalizer = tok.backend_tokenizer.normalizer
        for text, seq in zip(texts, lang):
            written = b"".join(xp.strings[t] for t in seq[:-1]).decode()
            expected = normalizer.normalize_str(text) if normalizer is not None else text
            assert written.split() == expected.replace(",", " ,").replace("(", "( ").replace(")", " )").split() \
                or "".join(written.split()) == "".join(expected.split()), (written, text)
            if name != "wordpiece":  # these decoders give the text back exactly
                assert written.strip() == text
        # every plan of ours is accepted, and ends exactly at EOS
        assert all(feed(matcher, seq) for seq in lang)
        # invalid plans: another signature's plans, truncations, an extra tool, a reversed chain
        own = set(texts)
        others = [t for j, ts in enumerate(plans) if j != k for t in ts if t not in own]
        bad = rng.sample(others, 20)
        bad += [t + ", Image Captioning" for t in rng.sample(texts, 10)]
        bad += [t.rsplit(", ", 1)[0] + "," for t in texts if ", " in t][:10]
        bad += [", ".join(reversed(t.split(", "))) for t in texts if t.count(", ") == 2][:10]
        bad = [t for t in bad if t not in own]
        assert len(bad) >= 30
        for text in bad:
            seq = tuple(tok(text, add_special_tokens=False)["input_ids"]) + (eos,)
            assert not feed(matcher, seq), text
        # random walks through XGrammar's masks (any tokenisation) end in one of our plans
        for _ in range(30):
            matcher.reset()
            walk = []
            while not matcher.is_terminated():
                options = allowed(matcher, xp.vocab_size)
                assert options and all(xp.strings[t] or t == eos for t in options)  # no special token but EOS
                walk.append(rng.choice(options))
                assert matcher.accept_token(walk[-1])
            assert walk[-1] == eos and canonical(tok, xp.strings, walk) in set(lang), walk


def test_ebnf_is_trie_shaped():
    peer = load_peer()
    tok, plans, langs, xp = setup("wordpiece")
    for k, lang in enumerate(langs):
        flat = peer.flat_ebnf(lang, xp.strings, special_ids(tok)[0])
        assert len(xp.ebnf[k]) * 2 < len(flat)
        for line in xp.ebnf[k].splitlines():  # alternatives of a rule start with different characters
            alts = line.split(" ::= ", 1)[1]
            if "(" not in alts:
                starts = [a.strip()[:2] for a in alts.split(" | ") if a.strip().startswith('"')]
                assert len(starts) == len(set(starts)), line


@pytest.mark.parametrize("name", ["wordpiece", "embedded"])
@pytest.mark.parametrize("mode", ["beam", "sample"])
def test_generate_with_the_processor_emits_only_plans(name, mode):
    peer = load_peer()
    tok, plans, langs, xp = setup(name)
    eos, pad = special_ids(tok)
    model = tiny_t5(tok, seed=1)
    width = 4
    batch = tok(PROMPTS, return_tensors="pt", padding=True)
    proc = peer.XGrammarLogitsProcessor(xp.compiled, rows_per_prompt=width, pad_id=pad, beam=mode == "beam")
    kw = dict(num_beams=width, do_sample=False, length_penalty=0.0, early_stopping=True) if mode == "beam" else \
        dict(num_beams=1, do_sample=True, top_k=0, top_p=1.0)
    torch.manual_seed(0)
    with torch.inference_mode():
        out = model.generate(input_ids=batch["input_ids"], attention_mask=batch["attention_mask"],
                             num_return_sequences=width, pad_token_id=pad, eos_token_id=eos, decoder_start_token_id=pad,
                             renormalize_logits=True, max_new_tokens=80, logits_processor=LogitsProcessorList([proc]),
                             **kw)
    assert out.shape[0] == len(PROMPTS) * width
    for i, row in enumerate(out[:, 1:].tolist()):
        assert eos in row, tok.decode(row)
        seq = row[: row.index(eos) + 1]
        assert all(t in (pad, eos) for t in row[len(seq):])  # HF's beam search fills with EOS when pad is 0
        assert canonical(tok, xp.strings, seq) in set(langs[i // width]), tok.decode(seq)
    assert proc.seconds > 0


def test_processor_applies_masks_like_xgrammar():
    """The sparse application of the bitmask equals xgrammar.apply_token_bitmask_inplace."""
    peer = load_peer()
    tok, _, _, xp = setup("wordpiece")
    _, pad = special_ids(tok)
    proc = peer.XGrammarLogitsProcessor(xp.compiled, rows_per_prompt=1, pad_id=pad, beam=False)
    torch.manual_seed(0)
    mask = torch.randint(-2**31, 2**31 - 1, (3, (xp.vocab_size + 31) // 32), dtype=torch.int32)
    mask[1] = 0
    mask[1, 5] = 1 << 3
    scores = torch.randn(3, xp.vocab_size)
    ref = scores.clone()
    xgr.apply_token_bitmask_inplace(ref, mask)
    proc._apply_sparse(scores, mask)
    assert torch.equal(scores, ref)


def load_bench():
    spec = importlib.util.spec_from_file_location("bench_decoding", ROOT / "benchmarks" / "decoding.py")
    bench = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(bench)
    return bench


def test_section_skips_without_xgrammar(capsys, monkeypatch):
    bench = load_bench()
    monkeypatch.setattr(bench, "load_xgrammar_peer", lambda: None)
    bench.main(["--sections", "xgrammar"])
    out = capsys.readouterr().out
    assert 'skipped: xgrammar is not installed (pip install -e ".[bench]")' in out


@pytest.mark.slow
def test_section_prints_ratio_lines(capsys):
    import re

    bench = load_bench()
    bench.main(["--sections", "xgrammar", "--prompts", "2", "--samples", "2", "--beams", "2", "--repeats", "1",
                "--threads", "1"])
    out = capsys.readouterr().out
    for mode in ("sample", "beam"):
        m = re.search(rf"^ours/xgrammar per row-step \({mode}\): (\d+\.\d+)$", out, re.MULTILINE)
        assert m and float(m.group(1)) > 0, out
        assert re.search(r"xgrammar output rows: (\d+)/\1 valid plans", out), out
    assert re.search(r"^xgrammar compile time: \d+ ms", out, re.MULTILINE), out
