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

from tokenizers import Regex, Tokenizer, decoders, models, pre_tokenizers, processors, trainers
from transformers import PreTrainedTokenizerFast

PAD, EOS, UNK = "<pad>", "</s>", "<unk>"
SPECIAL_TOKENS = (PAD, EOS, UNK)  # ids 0, 1, 2 as in T5
ALPHABET = sorted(set(string.printable) - set(string.whitespace)) + ["▁"]
_SYNTAX = r"▁?[(),?]"


def default_tokenizer_texts() -> list[str]:
    """What the embedded tokenizer is trained on when the caller passes nothing: the descriptions
    of the TRAIN tasks only (no validation or test task of either suite, lite or full, reaches the
    tokenizer), the canonical reference plans of every task (tool names and plan syntax are
    allowed everywhere: they are the action space, not the task), and the tool names with their
    one-line descriptions."""
    from envs.openagi.plans import format_plan
    from envs.openagi.split import load_split
    from envs.openagi.suite import task_specs
    from envs.openagi.tools import OPENAGI_TOOLS

    train, held_out = set(), set()
    for suite in ("lite", "full"):
        specs, split = task_specs(suite), load_split(suite)
        train |= {specs[i].description for i in split["train"]}
        held_out |= {specs[i].description for part in ("validation", "test") for i in split[part]}
    specs = task_specs("full")
    texts = [s.description for s in specs if s.description in train - held_out]
    texts += [format_plan(s.reference_plan) for s in specs]
    texts += [t.name for t in OPENAGI_TOOLS] + [f"{t.name}: {t.description}" for t in OPENAGI_TOOLS]
    return texts


def tokenizer_texts_for(env) -> list[str]:
    """The embedded tokenizer's texts for the train env ``env``.

    An env that says what its planner reads and writes (``env.tokenizer_texts()``: the travel
    sandbox's train query texts and every entity name a plan may use) gives those. On OpenAGI:
    the defaults (:func:`default_tokenizer_texts`, the same tokenizer as always) when its registry
    holds only OpenAGI's tools, else the defaults plus each other tool's name and one-line
    description, so a tool
    registered from outside (``env.tools``) gets whole-word pieces like the others (its name would
    encode anyway: every printable ASCII character is in the alphabet)."""
    from envs.openagi.tools import SPECS

    if hasattr(env, "tokenizer_texts"):
        return list(env.tokenizer_texts())
    extra = [t for t in env.registry if t.name not in SPECS]
    return default_tokenizer_texts() + [t.name for t in extra] + [f"{t.name}: {t.description}" for t in extra]


def train_plan_tokenizer(texts: Iterable[str], vocab_size: int = 2000,
                         required: Sequence[str] | None = None) -> PreTrainedTokenizerFast:
    """Train a T5-style tokenizer on ``texts`` (deterministic: same texts -> same vocabulary).

    ``vocab_size`` is a maximum: a small corpus gives fewer tokens (``len(tokenizer)``).
    ``required`` strings (default: every OpenAGI tool name) are added to the corpus so they are
    always covered by whole-word pieces."""
    if vocab_size < len(SPECIAL_TOKENS) + len(ALPHABET):
        raise ValueError(f"vocab_size={vocab_size} is too small: the special tokens and the ASCII alphabet "
                         f"alone need {len(SPECIAL_TOKENS) + len(ALPHABET)}")
    if required is None:
        from envs.openagi.tools import OPENAGI_TOOLS

        required = [t.name for t in OPENAGI_TOOLS]
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
