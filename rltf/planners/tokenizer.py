"""A small plan tokenizer trained locally, for the embedded planner (no hub download).

It is T5-shaped so the embedded T5 behaves like a real one: special tokens ``<pad>``=0,
``</s>``=1, ``<unk>``=2, ``</s>`` appended to every encoded text, SentencePiece-style ``▁`` word
boundaries (a ``Metaspace`` pre-tokenizer, decoded back to the exact text). The model is BPE
trained with the ``tokenizers`` library: on a corpus of a few hundred task descriptions it keeps
whole words (``▁Image``, ``▁Denoising``) where HF's Unigram trainer collapses to single letters.

The plan syntax characters are split off before BPE (``(``, ``)``, ``,`` and ``?``, with the
preceding space if any), so a piece never straddles a tool-name boundary, and every printable
ASCII character is in the alphabet, so tool names, plan syntax and any ASCII text encode without
``<unk>``. As with T5, the first word of a tool name is ``▁Image`` at the start of a plan and
after ``", "``, but ``Image`` (no ``▁``) right after ``(``: a constrained decoder must tokenize
names in context.
"""

from __future__ import annotations

import string
from collections.abc import Iterable, Sequence
from typing import TYPE_CHECKING

from tokenizers import Regex, Tokenizer, decoders, models, pre_tokenizers, processors, trainers
from transformers import PreTrainedTokenizerFast

from envs import registry
from envs.config import DEFAULT_ENV

if TYPE_CHECKING:
    from envs.protocol import RLTFEnv

PAD, EOS, UNK = "<pad>", "</s>", "<unk>"
SPECIAL_TOKENS = (PAD, EOS, UNK)  # ids 0, 1, 2 as in T5
ALPHABET = sorted(set(string.printable) - set(string.whitespace)) + ["▁"]
_SYNTAX = r"▁?[(),?]"


def default_tokenizer_texts() -> list[str]:
    """What the embedded tokenizer is trained on when the caller passes nothing: the default env's
    texts (its :attr:`envs.registry.EnvSpec.tokenizer_texts`; OpenAGI's: the descriptions of the TRAIN
    tasks of both suites, every reference plan, the tool names with their one-line descriptions)."""
    texts = registry.spec(DEFAULT_ENV).tokenizer_texts
    return list(texts()) if texts is not None else []


def default_tokenizer_words() -> list[str]:
    """The strings every embedded tokenizer keeps as whole pieces unless its caller says otherwise: the
    default env's :attr:`envs.registry.EnvSpec.tokenizer_words` (OpenAGI's tool names)."""
    words = registry.spec(DEFAULT_ENV).tokenizer_words
    return list(words()) if words is not None else []


def tokenizer_texts_for(env: RLTFEnv) -> list[str]:
    """The embedded tokenizer's texts for the train env ``env``: what the env says its planner reads
    and writes (``env.tokenizer_texts()``: OpenAGI's train task texts, plans and tools, including
    those registered from outside, ``env.tools``; the travel sandbox's train query texts and every
    entity name a plan may use)."""
    return list(env.tokenizer_texts())


def train_plan_tokenizer(texts: Iterable[str], vocab_size: int = 2000,
                         required: Sequence[str] | None = None) -> PreTrainedTokenizerFast:
    """Train a T5-style tokenizer on ``texts`` (deterministic: same texts -> same vocabulary).

    ``vocab_size`` is a maximum: a small corpus gives fewer tokens (``len(tokenizer)``).
    ``required`` strings (default: :func:`default_tokenizer_words`, every OpenAGI tool name) are added
    to the corpus so they are always covered by whole-word pieces."""
    if vocab_size < len(SPECIAL_TOKENS) + len(ALPHABET):
        raise ValueError(f"vocab_size={vocab_size} is too small: the special tokens and the ASCII alphabet "
                         f"alone need {len(SPECIAL_TOKENS) + len(ALPHABET)}")
    if required is None:
        required = default_tokenizer_words()
    corpus = [t for t in texts if t] + list(required)
    if not corpus:
        raise ValueError("train_plan_tokenizer needs at least one non-empty text")

    tok = Tokenizer(models.BPE(unk_token=UNK))
    tok.pre_tokenizer = pre_tokenizers.Sequence([
        pre_tokenizers.Metaspace(replacement="▁", prepend_scheme="always"),
        pre_tokenizers.Split(Regex(_SYNTAX), behavior="isolated"),
    ])
    tok.decoder = decoders.Metaspace(replacement="▁", prepend_scheme="always")
    trainer = trainers.BpeTrainer(vocab_size=vocab_size, min_frequency=1, special_tokens=list(SPECIAL_TOKENS),
                                  initial_alphabet=ALPHABET, show_progress=False)
    tok.train_from_iterator(corpus, trainer=trainer)
    eos_id = tok.token_to_id(EOS)
    tok.post_processor = processors.TemplateProcessing(single=f"$A {EOS}", pair=f"$A {EOS} $B {EOS}",
                                                       special_tokens=[(EOS, eos_id)])
    ids = [tok.token_to_id(t) for t in SPECIAL_TOKENS]
    if ids != [0, 1, 2]:  # the trainer puts special tokens first; T5's config relies on it
        raise RuntimeError(f"special token ids {dict(zip(SPECIAL_TOKENS, ids))}, expected pad=0 eos=1 unk=2")
    return PreTrainedTokenizerFast(tokenizer_object=tok, pad_token=PAD, eos_token=EOS, unk_token=UNK,
                                   padding_side="right", model_max_length=512)
