"""Prompts become ids once per tokenizer (constrained_decoding/prompts.py ``_token_ids``): the ids
are those the tokenizer gives, whatever was asked before, and a tokenizer that changes (tokens
added, special tokens, length limit) is read afresh."""

from __future__ import annotations

import copy
from unittest import mock

import pytest

from constrained_decoding.prompts import encode_formatted, forget_ids
from tests.tiny_models import bpe_tokenizer

TEXTS = ["Given clean image, return its label.", "Given noisy image", "Given clean image, return its label.",
         "a b c d e f"]


def direct(tok, texts, add_special_tokens=True):
    return [list(x) for x in tok(list(texts), add_special_tokens=add_special_tokens)["input_ids"]]


def counting(tok):
    """A patch of the tokenizer's class that counts the texts it is called on."""
    seen: list[str] = []
    original = type(tok).__call__

    def call(self, text, *args, **kwargs):
        seen.extend([text] if isinstance(text, str) else list(text))
        return original(self, text, *args, **kwargs)
    return mock.patch.object(type(tok), "__call__", call), seen


def test_the_ids_are_the_tokenizers_and_each_text_is_tokenised_once():
    tok = copy.deepcopy(bpe_tokenizer())
    texts = TEXTS
    patch, seen = counting(tok)
    with patch:
        first = encode_formatted(tok, texts, encoder_decoder=True)
        again = encode_formatted(tok, list(reversed(texts)), encoder_decoder=True)
        mixed = encode_formatted(tok, [texts[0], "a text not seen yet"], encoder_decoder=True)
    assert first == direct(tok, texts)
    assert again == direct(tok, list(reversed(texts)))
    assert mixed == direct(tok, [texts[0], "a text not seen yet"])
    assert sorted(seen) == sorted(set(texts) | {"a text not seen yet"})  # each distinct text once
    first[0].append(-1)  # the caller's lists are its own
    assert encode_formatted(tok, texts[:1], encoder_decoder=True) == direct(tok, texts[:1])


def test_with_and_without_special_tokens_are_remembered_apart():
    tok = copy.deepcopy(bpe_tokenizer())
    texts = TEXTS
    assert encode_formatted(tok, texts, encoder_decoder=False) == direct(tok, texts)
    tok.chat_template = "{% for m in messages %}{{ m['content'] }}{% endfor %}"  # a chat tokenizer adds none
    assert encode_formatted(tok, texts, encoder_decoder=False) == direct(tok, texts, add_special_tokens=False)
    assert direct(tok, texts) != direct(tok, texts, add_special_tokens=False)  # (the case is a real one)


def test_a_changed_tokenizer_is_read_afresh():
    tok = copy.deepcopy(bpe_tokenizer())
    text = ["a zorblax b"]
    before = encode_formatted(tok, text, encoder_decoder=True)
    tok.add_tokens(["zorblax"])  # a new token: the text's ids change
    after = encode_formatted(tok, text, encoder_decoder=True)
    assert after == direct(tok, text) and after != before
    tok.model_max_length = 3  # a shorter limit: cut from the left (the memo holds the uncut ids)
    with pytest.warns(UserWarning, match="truncated from the left"):
        assert len(encode_formatted(tok, ["a b c d e f g h"], encoder_decoder=True)[0]) == 3


def test_forget_ids_drops_the_memo():
    tok = copy.deepcopy(bpe_tokenizer())
    encode_formatted(tok, ["x y"], encoder_decoder=True)
    patch, seen = counting(tok)
    forget_ids(tok)
    with patch:
        assert encode_formatted(tok, ["x y"], encoder_decoder=True) == direct(tok, ["x y"])
    assert seen[0] == "x y"


def test_long_prompts_are_cut_without_the_tokenizers_indexing_notice():
    """The ids are cut to the limit here (with rltf's own warning), so the tokenizer's "longer than the
    specified maximum ... will result in indexing errors" notice, which it logs once per tokenizer, is
    not raised: it would be false."""
    tok = copy.deepcopy(bpe_tokenizer())
    tok.model_max_length = 6
    forget_ids(tok)
    with pytest.warns(UserWarning, match="longer than 6 tokens"):
        ids = encode_formatted(tok, ["a b c d e f g h i j k l m n o p"], encoder_decoder=True)
    assert len(ids[0]) <= 6
    assert not tok.deprecation_warnings.get("sequence-length-is-longer-than-the-specified-maximum")
