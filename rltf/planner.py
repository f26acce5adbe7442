"""Planners: load any HF model (hub id or local directory) or the embedded T5, save and reload.

:func:`load_planner` turns a ``planner:`` config section into a :class:`Planner` (model +
tokenizer + what it came from):

* ``model: embedded`` builds a small random T5 from ``planner.embedded`` with a tokenizer trained
  locally (:mod:`rltf.tokenizer`), saves it under ``<embedded.dir>/<fingerprint>/`` on first use
  and reloads it from there afterwards; the fingerprint covers the settings, the seed and the
  tokenizer texts, so the same config + seed always gives the same weights;
* otherwise ``model`` is a hub id or a local directory holding a full model (``config.json``) or a
  LoRA adapter (``adapter_config.json``, base found from ``rltf_planner.json`` or the adapter's
  own ``base_model_name_or_path``). Encoder-decoder vs decoder-only comes from the model's
  config (``arch: auto``); ``dtype`` casts the weights; ``lora.enabled`` wraps the model in a
  PEFT LoRA adapter; ``load_in_4bit`` loads the base in 4-bit NF4 for QLoRA (bitsandbytes + CUDA).

Padding: seq2seq tokenizers pad on the right (T5 has relative positions, the decoder starts from
its own start token). Causal tokenizers pad on the LEFT, so a batch of prompts ends at the same
position and generation appends after it; a causal tokenizer without a pad token gets pad = eos.
When scoring left-padded causal sequences yourself, pass ``position_ids = attention_mask.cumsum(-1) - 1``
(clamped at 0) as ``generate`` does, or the logits depend on the amount of padding.

:meth:`Planner.save_pretrained` writes the full model, or just the adapter for a PEFT model,
plus the tokenizer and ``rltf_planner.json``; :meth:`Planner.from_pretrained` reads either back.
Planners are returned in eval mode and stay there: SFT and RLTF never call ``.train()`` (no
dropout, so sampling and scoring evaluate the same function).

:class:`ReferencePolicy` gives the frozen policy RLTF starts from, for a KL penalty: with LoRA it
is the same model with the adapter disabled (no second copy in memory). That is only the start
policy while the adapter is fresh, so after LoRA SFT :func:`rltf_start_planner` (the SFT→RLTF
handoff) merges the SFT adapter into the base and starts a fresh adapter on top; a 4-bit base
cannot be merged exactly, so :func:`check_kl_reference` refuses QLoRA + SFT + KL.
"""

from __future__ import annotations

import contextlib
import copy
import dataclasses
import gc
import hashlib
import importlib.util
import json
import os
import re
import shutil
import tempfile
from collections.abc import Iterator, Sequence
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any, Literal

import torch
from torch import nn
from transformers import (
    AutoConfig,
    AutoModelForCausalLM,
    AutoModelForSeq2SeqLM,
    AutoTokenizer,
    PretrainedConfig,
    PreTrainedModel,
    PreTrainedTokenizerBase,
    T5Config,
    T5ForConditionalGeneration,
)

from rltf.config import EmbeddedSettings, LoraSettings, PlannerSettings
from rltf.tokenizer import default_tokenizer_texts, train_plan_tokenizer

PLANNER_FILE = "rltf_planner.json"
MERGED_DIR = "merged_adapters"
FORMAT_VERSION = 1
DTYPES = {"float32": torch.float32, "bfloat16": torch.bfloat16, "float16": torch.float16}
Arch = Literal["seq2seq", "causal"]
_HUB_ID = re.compile(r"[A-Za-z0-9][\w.\-]*(/[A-Za-z0-9][\w.\-]*)?")


class PlannerError(ValueError):
    """A planner that cannot be loaded or saved as asked (bad path, missing base, wrong arch...)."""


@dataclass
class Planner:
    """A policy model with its tokenizer. ``model`` is a ``PreTrainedModel`` or a ``PeftModel``."""

    model: nn.Module
    tokenizer: PreTrainedTokenizerBase
    is_encoder_decoder: bool
    source: str  # the hub id or directory it was loaded from
    base_model: str | None = None  # PEFT: the base model's hub id or absolute directory
    merged_adapters: tuple[str, ...] = ()  # PEFT: adapters merged into the base first (dirs, in order)

    @property
    def arch(self) -> Arch:
        return "seq2seq" if self.is_encoder_decoder else "causal"

    @property
    def is_peft(self) -> bool:
        from peft import PeftModel

        return isinstance(self.model, PeftModel)

    def prompt(self, description: str) -> str:
        """The model input for a task: the description itself for seq2seq planners (the plan is
        the decoder's output), the description and ``"\nPlan:"`` for causal ones (the plan
        continues it). One definition: :func:`constrained_decoding.prompts.format_prompt`."""
        from constrained_decoding.prompts import format_prompt

        return format_prompt(description, self.is_encoder_decoder)

    def save_pretrained(self, directory: str | os.PathLike, state_dict: dict | None = None) -> Path:
        """Write the model (or only the LoRA adapter), the tokenizer and ``rltf_planner.json``.

        An adapter's base is recorded (hub id or absolute directory) and adapters merged into
        the base before it are copied under ``merged_adapters/``, so the folder reloads on its
        own as long as the base model is reachable. Call on the unwrapped model (not DDP);
        ``state_dict``: the full weights of a sharded model (:meth:`Sharding.full_state_dict`)."""
        out = Path(directory)
        out.mkdir(parents=True, exist_ok=True)
        if state_dict is None:
            self.model.save_pretrained(out)
        else:
            self.model.save_pretrained(out, state_dict=state_dict)
        self.tokenizer.save_pretrained(out)
        merged: list[str] = []
        if self.is_peft:
            for i, src in enumerate(self.merged_adapters):
                rel = f"{MERGED_DIR}/{i}"
                if Path(src).resolve() != (out / rel).resolve():
                    if (out / rel).exists():
                        shutil.rmtree(out / rel)
                    shutil.copytree(src, out / rel)
                merged.append(rel)
        meta = {
            "format": FORMAT_VERSION,
            "arch": self.arch,
            "adapter": self.is_peft,
            "base_model": self.base_model if self.is_peft else None,
            "merged_adapters": merged,
            "source": self.source,
        }
        (out / PLANNER_FILE).write_text(json.dumps(meta, indent=2) + "\n")
        return out

    @classmethod
    def from_pretrained(cls, directory: str | os.PathLike, *, dtype: str = "float32", trainable: bool = True,
                        load_in_4bit: bool = False, arch: str = "auto") -> Planner:
        """Reload what :meth:`save_pretrained` wrote (or any full-model / PEFT-adapter directory).

        For an adapter the base comes from the recorded hub id or directory, the recorded merged
        adapters are merged into it in order, then ``PeftModel.from_pretrained`` puts the adapter
        on top (trainable unless ``trainable=False``)."""
        d = Path(directory).expanduser()
        kind = _dir_kind(d)
        meta = _read_meta(d)
        if kind == "full":
            model, is_enc_dec = _load_model(str(d), dtype, arch, load_in_4bit)
            tokenizer = _load_tokenizer(str(d), is_enc_dec)
            planner = cls(model, tokenizer, is_enc_dec, source=str(d))
        else:
            from peft import PeftModel

            base = _adapter_base(d, meta)
            base_model, is_enc_dec = _load_model(base, dtype, arch, load_in_4bit)
            merged = tuple(str((d / m).resolve()) for m in meta.get("merged_adapters", []))
            for m in merged:
                if load_in_4bit:
                    raise PlannerError(f"adapter {str(d)!r} records merged adapters; merging into a 4-bit base is "
                                       "lossy: load it without planner.load_in_4bit")
                base_model = PeftModel.from_pretrained(base_model, m).merge_and_unload()
            model = PeftModel.from_pretrained(base_model, str(d), is_trainable=trainable)
            tok_dir = str(d) if _has_tokenizer(d) else base
            tokenizer = _load_tokenizer(tok_dir, is_enc_dec)
            planner = cls(model, tokenizer, is_enc_dec, source=str(d), base_model=base, merged_adapters=merged)
        _sync_pad(planner)
        planner.model.eval()  # and it stays so: SFT and RLTF train in eval mode (no dropout)
        return planner


# ------------------------------------------------------------------------------ loading
def load_planner(settings: PlannerSettings, tokenizer_texts: Sequence[str] | None = None) -> Planner:
    """The planner a config section describes (see the module docstring).

    ``tokenizer_texts`` (task descriptions, plans) train the embedded planner's tokenizer; by
    default the OpenAGI task grammar and tool names. Ignored for other models.

    A LoRA adapter directory as ``model``: with ``lora.enabled`` and ``lora.merge_source_adapter``
    it is merged into its base and a fresh adapter is trained on top (so the adapter-disabled
    model, the KL reference, is the loaded policy); with ``merge_source_adapter: false`` the
    adapter itself keeps training; with LoRA disabled it is merged and the full model trains.
    :func:`rltf_start_planner` does the same with the adapter SFT trained in the main job."""
    s = settings
    if s.load_in_4bit:
        _require_4bit()
    if s.model == "embedded":
        if s.arch == "causal":
            raise PlannerError("planner.arch='causal' but the embedded planner is a T5 encoder-decoder")
        path = ensure_embedded_planner(s.embedded, tokenizer_texts)
        planner = Planner.from_pretrained(path, dtype=s.dtype, load_in_4bit=s.load_in_4bit)
        planner.source = str(path)
    else:
        kind, where = _resolve_source(s.model)
        if kind == "adapter":
            keep = s.lora.enabled and not s.lora.merge_source_adapter
            if s.load_in_4bit and not keep:
                raise PlannerError(f"planner.model {s.model!r} is a LoRA adapter and planner.load_in_4bit is true: "
                                   "merging it into a 4-bit base is lossy; set planner.lora.enabled=true and "
                                   "planner.lora.merge_source_adapter=false to keep training it as an adapter")
            planner = Planner.from_pretrained(where, dtype=s.dtype, load_in_4bit=s.load_in_4bit, arch=s.arch,
                                              trainable=keep)
            if not keep:
                planner.merged_adapters = (*planner.merged_adapters, str(Path(where).resolve()))
                planner.model = planner.model.merge_and_unload().requires_grad_(True)  # PEFT froze the base
        else:
            model, is_enc_dec = _load_model(where, s.dtype, s.arch, s.load_in_4bit)
            planner = Planner(model, _load_tokenizer(where, is_enc_dec), is_enc_dec, source=s.model)
    if s.lora.enabled and not planner.is_peft:
        base = planner.source
        if Path(base).expanduser().is_dir():
            base = str(Path(base).expanduser().resolve())
        if planner.merged_adapters:  # the merged adapter's own base is the real base
            base = planner.base_model or base
        planner.model = apply_lora(planner.model, s.lora, planner.is_encoder_decoder, s.load_in_4bit)
        planner.base_model = base
    elif not planner.is_peft:
        planner.merged_adapters, planner.base_model = (), None  # a full model: nothing to record
    planner.tokenizer.model_max_length = s.max_prompt_tokens  # prompts are cut to it (prompts.encode_prompts)
    _sync_pad(planner)
    planner.model.eval()  # and it stays so: SFT and RLTF train in eval mode (no dropout)
    return planner


def apply_lora(model: PreTrainedModel, lora: LoraSettings, is_encoder_decoder: bool,
               quantized: bool = False) -> nn.Module:
    """Wrap ``model`` in a fresh PEFT LoRA adapter (only the adapter is trainable)."""
    from peft import LoraConfig, TaskType, get_peft_model, prepare_model_for_kbit_training

    if quantized:
        model = prepare_model_for_kbit_training(model, use_gradient_checkpointing=False)
    config = LoraConfig(task_type=TaskType.SEQ_2_SEQ_LM if is_encoder_decoder else TaskType.CAUSAL_LM,
                        r=lora.r, lora_alpha=lora.alpha, lora_dropout=lora.dropout,
                        target_modules=list(lora.target_modules) if lora.target_modules else None)
    try:
        return get_peft_model(model, config)
    except ValueError as e:
        linear = sorted({n.rsplit(".", 1)[-1] for n, m in model.named_modules() if isinstance(m, nn.Linear)})
        raise PlannerError(f"planner.lora.target_modules={lora.target_modules!r} cannot be applied to a "
                           f"{model.config.model_type!r} model ({e}); its linear layers are named "
                           f"{', '.join(linear)}") from None


def _resolve_source(name: str) -> tuple[str, str]:
    """("full" | "adapter", local dir) or ("hub", id); a clear error for anything else."""
    p = Path(name).expanduser()
    if p.exists():
        if not p.is_dir():
            raise PlannerError(f"planner.model {name!r} is a file; expected a model or adapter directory or a hub id")
        return _dir_kind(p), str(p)
    looks_local = name.startswith(("/", "./", "../", "~", ".")) or "\\" in name or name.count("/") > 1
    if looks_local or not _HUB_ID.fullmatch(name):
        raise PlannerError(f"planner.model {name!r}: no such directory, and not a hub model id "
                           f"(expected 'embedded', a directory, or an id such as 'google/flan-t5-large')")
    return "hub", name


def _dir_kind(d: Path) -> str:
    if not d.is_dir():
        raise PlannerError(f"planner directory {str(d)!r} does not exist")
    if (d / "adapter_config.json").is_file():
        return "adapter"
    if (d / "config.json").is_file():
        return "full"
    files = sorted(x.name for x in d.iterdir())[:10]
    raise PlannerError(f"directory {str(d)!r} has neither config.json (a full model) nor adapter_config.json "
                       f"(a LoRA adapter); it holds: {', '.join(files) or 'nothing'}")


def _read_meta(d: Path) -> dict[str, Any]:
    f = d / PLANNER_FILE
    if not f.is_file():
        return {}
    meta = json.loads(f.read_text())
    if meta.get("format", FORMAT_VERSION) > FORMAT_VERSION:
        raise PlannerError(f"{f} has format {meta['format']}; this rltf reads up to {FORMAT_VERSION}")
    return meta


def _adapter_base(d: Path, meta: dict[str, Any]) -> str:
    """The base model of an adapter dir: the recorded id/dir, as given or resolved, must exist."""
    recorded = meta.get("base_model") or json.loads((d / "adapter_config.json").read_text()).get(
        "base_model_name_or_path")
    if not recorded:
        raise PlannerError(f"LoRA adapter {str(d)!r} does not record its base model (no base_model in {PLANNER_FILE}, "
                           "no base_model_name_or_path in adapter_config.json)")
    p = Path(recorded).expanduser()
    if p.is_dir():
        return str(p)
    if not p.is_absolute() and (d / p).is_dir():
        return str(d / p)
    if p.is_absolute() or recorded.startswith(".") or recorded.count("/") > 1 or not _HUB_ID.fullmatch(recorded):
        raise PlannerError(f"LoRA adapter {str(d)!r} needs its base model {recorded!r}, which is not a directory "
                           "(moved or deleted?) nor a hub id")
    return recorded


def _has_tokenizer(d: Path) -> bool:
    return any((d / f).is_file() for f in ("tokenizer.json", "tokenizer_config.json", "spiece.model",
                                            "tokenizer.model"))


def _load_model(src: str, dtype: str, arch: str, load_in_4bit: bool) -> tuple[PreTrainedModel, bool]:
    config = _load_config(src)
    is_enc_dec = bool(getattr(config, "is_encoder_decoder", False))
    detected = "seq2seq" if is_enc_dec else "causal"
    if arch not in ("auto", detected):
        raise PlannerError(f"planner.arch={arch!r} but {src!r} is a {detected} model "
                           f"(model_type {config.model_type!r}); use arch=auto or {detected}")
    cls = AutoModelForSeq2SeqLM if is_enc_dec else AutoModelForCausalLM
    kwargs: dict[str, Any] = {"dtype": DTYPES[dtype]}
    if load_in_4bit:
        kwargs.update(_quantization_kwargs(dtype))
    try:
        model = cls.from_pretrained(src, config=config, **kwargs)
    except (OSError, ValueError) as e:
        raise PlannerError(f"cannot load the {detected} model {src!r}: {e}") from None
    return model, is_enc_dec


def _load_config(src: str) -> PretrainedConfig:
    try:
        return AutoConfig.from_pretrained(src)
    except (OSError, ValueError) as e:
        offline = os.environ.get("HF_HUB_OFFLINE", "").lower() in ("1", "true", "yes", "on")
        why = " (HF_HUB_OFFLINE is set and it is not in the local cache)" if offline else ""
        first = str(e).strip().splitlines()[0] if str(e).strip() else type(e).__name__
        raise PlannerError(f"cannot load a model config from {src!r}{why}: {first}") from None


def _load_tokenizer(src: str, is_encoder_decoder: bool) -> PreTrainedTokenizerBase:
    try:
        tok = AutoTokenizer.from_pretrained(src)
    except (OSError, ValueError) as e:
        raise PlannerError(f"cannot load a tokenizer from {src!r}: {str(e).strip().splitlines()[0]}") from None
    if is_encoder_decoder:
        tok.padding_side = "right"
    else:
        tok.padding_side = "left"
        if tok.pad_token is None:
            if tok.eos_token is None:
                raise PlannerError(f"the tokenizer of {src!r} has neither a pad nor an eos token")
            tok.pad_token = tok.eos_token
    return tok


def _sync_pad(planner: Planner) -> None:
    """Make the model's config agree with the tokenizer's pad token (generate needs it)."""
    pad = planner.tokenizer.pad_token_id
    base = planner.model.get_base_model() if planner.is_peft else planner.model
    if base.config.pad_token_id is None:
        base.config.pad_token_id = pad
    gen = getattr(base, "generation_config", None)
    if gen is not None and gen.pad_token_id is None:
        gen.pad_token_id = pad


def _require_4bit() -> None:
    if importlib.util.find_spec("bitsandbytes") is None:
        raise PlannerError("planner.load_in_4bit=true needs the bitsandbytes package (pip install bitsandbytes) "
                           "and a CUDA GPU")
    if not torch.cuda.is_available():
        raise PlannerError("planner.load_in_4bit=true needs a CUDA GPU (bitsandbytes 4-bit); none is visible")


def _quantization_kwargs(dtype: str) -> dict[str, Any]:
    from transformers import BitsAndBytesConfig

    _require_4bit()
    compute = DTYPES[dtype] if dtype != "float32" else torch.bfloat16
    q = BitsAndBytesConfig(load_in_4bit=True, bnb_4bit_quant_type="nf4", bnb_4bit_use_double_quant=True,
                           bnb_4bit_compute_dtype=compute)
    return {"quantization_config": q, "device_map": {"": int(os.environ.get("LOCAL_RANK", 0))}}


# ------------------------------------------------------------------------------ embedded planner
def embedded_fingerprint(settings: EmbeddedSettings, texts: Sequence[str]) -> str:
    """Names the embedded planner built from these settings, seed and tokenizer texts."""
    spec = {k: v for k, v in asdict(settings).items() if k != "dir"}
    h = hashlib.sha256(json.dumps({"v": FORMAT_VERSION, "spec": spec, "texts": list(texts)}, sort_keys=True).encode())
    return f"t5-d{settings.d_model}-l{settings.num_layers}-s{settings.seed}-{h.hexdigest()[:10]}"


def build_embedded_planner(settings: EmbeddedSettings, tokenizer_texts: Sequence[str] | None = None) -> Planner:
    """A fresh small T5 and its locally trained tokenizer, in memory. The weights depend only on
    the settings (seed included) and the texts; the global RNG is left untouched."""
    texts = list(tokenizer_texts) if tokenizer_texts is not None else default_tokenizer_texts()
    tokenizer = train_plan_tokenizer(texts, settings.vocab_size)
    config = T5Config(
        vocab_size=len(tokenizer), d_model=settings.d_model, d_kv=settings.d_model // settings.num_heads,
        d_ff=settings.d_ff, num_layers=settings.num_layers, num_decoder_layers=settings.num_layers,
        num_heads=settings.num_heads, dropout_rate=settings.dropout, feed_forward_proj="relu",
        pad_token_id=tokenizer.pad_token_id, eos_token_id=tokenizer.eos_token_id,
        decoder_start_token_id=tokenizer.pad_token_id, tie_word_embeddings=True,
    )
    with torch.random.fork_rng(devices=[]):
        torch.manual_seed(settings.seed)
        model = T5ForConditionalGeneration(config)
    model.eval()
    return Planner(model, tokenizer, True, source="embedded")


def ensure_embedded_planner(settings: EmbeddedSettings, tokenizer_texts: Sequence[str] | None = None) -> Path:
    """The directory of the embedded planner for these settings, built and saved on first use.

    Written to a temporary sibling and renamed into place, so concurrent processes (DDP ranks)
    never see a half-written folder; they build identical weights, and the first rename wins."""
    texts = list(tokenizer_texts) if tokenizer_texts is not None else default_tokenizer_texts()
    root = Path(settings.dir).expanduser()
    target = root / embedded_fingerprint(settings, texts)
    if (target / PLANNER_FILE).is_file():
        return target
    root.mkdir(parents=True, exist_ok=True)
    planner = build_embedded_planner(settings, texts)
    tmp = Path(tempfile.mkdtemp(dir=root, prefix=f".{target.name}."))
    try:
        planner.save_pretrained(tmp)
        meta = json.loads((tmp / PLANNER_FILE).read_text())
        meta["embedded"] = {k: v for k, v in asdict(settings).items() if k != "dir"}
        (tmp / PLANNER_FILE).write_text(json.dumps(meta, indent=2) + "\n")
        try:
            os.rename(tmp, target)
        except OSError:
            if not (target / PLANNER_FILE).is_file():
                raise
    finally:
        if tmp.exists():
            shutil.rmtree(tmp, ignore_errors=True)
    return target


# ------------------------------------------------------------------------------ SFT -> RLTF handoff
def check_kl_reference(settings: PlannerSettings, *, sft: bool, kl_coef: float) -> None:
    """Refuse, before anything loads, the runs whose KL reference would not be the policy RLTF
    starts from (``sft``: a supervised warm start runs first; ``kl_coef``: ``rltf.kl_coef``).

    With LoRA the reference is the adapter-disabled model, so an adapter that already learned
    something (trained by SFT, or loaded from ``planner.model``) must be merged into the base
    first (:func:`rltf_start_planner`, :func:`load_planner`). Refused: keeping such an adapter
    trainable (``planner.lora.merge_source_adapter=false``), and SFT on a 4-bit base
    (``planner.load_in_4bit``), where merging is lossy."""
    s = settings
    if kl_coef <= 0 or not s.lora.enabled:
        return  # no reference at all, or a full model: the trainer's frozen copy of the start policy
    source_adapter = s.model != "embedded" and Path(s.model).expanduser().is_dir() and \
        _dir_kind(Path(s.model).expanduser()) == "adapter"
    if not (sft or source_adapter):
        return  # a fresh adapter on the loaded model: adapter disabled == the start policy
    what = "the adapter SFT trains (sft.enabled=true)" if sft else f"the adapter planner.model={s.model!r}"
    if not s.lora.merge_source_adapter:
        raise PlannerError(
            f"rltf.kl_coef={kl_coef} with planner.lora.merge_source_adapter=false: RLTF would keep training {what}, "
            "so the KL reference (the adapter-disabled model) would be the base model without it, not the policy "
            "RLTF starts from; set planner.lora.merge_source_adapter=true (merge it into the base, train a fresh "
            "adapter on top) or rltf.kl_coef=0")
    if s.load_in_4bit and sft:
        raise PlannerError(
            f"rltf.kl_coef={kl_coef} with sft.enabled=true and planner.load_in_4bit=true: the KL reference must be "
            "the fine-tuned policy, i.e. the SFT adapter merged into the base, and merging into a 4-bit base is "
            "lossy; set rltf.kl_coef=0, sft.enabled=false, or planner.load_in_4bit=false")


def merges_sft_adapter(settings: PlannerSettings) -> bool:
    """Does RLTF start from the SFT adapter merged into the base plus a fresh adapter
    (:func:`rltf_start_planner`)? LoRA with ``merge_source_adapter`` on a base that is not 4-bit."""
    return settings.lora.enabled and settings.lora.merge_source_adapter and not settings.load_in_4bit


def rltf_start_planner(planner: Planner, settings: PlannerSettings, sft_dir: str | os.PathLike) -> Planner:
    """The SFT -> RLTF handoff: the planner RLTF starts from after the supervised warm start saved
    in ``sft_dir`` (:meth:`Planner.save_pretrained` of ``planner``), chosen so that
    :class:`ReferencePolicy` of it IS that policy (KL exactly 0 at RL step 0).

    * LoRA with ``planner.lora.merge_source_adapter`` (the default): the SFT adapter is merged into
      the base and a fresh adapter trains on top, i.e. exactly what ``load_planner`` gives for
      ``planner.model=<sft_dir>`` (so a run that fine-tunes first and one started from a saved
      ``sft/`` are the same). It is rebuilt from the saved folder, on the CPU, after ``planner``'s
      model is released — hold no other reference to it — so there is never a second copy in
      memory, and the merge is the same arithmetic that :meth:`Planner.from_pretrained` (resume,
      evaluation) repeats on an RLTF checkpoint, which carries the SFT adapter under
      ``merged_adapters/``. ``planner`` is updated in place and returned; the caller puts the
      model on its device and shards it again. The adapter is fresh: an RLTF checkpoint is what
      ``resume`` loads into it.
    * a full model, or LoRA with ``merge_source_adapter: false``: ``planner`` itself, unchanged
      (a full model's reference is the trainer's frozen copy of it; a still-trained adapter has
      no valid KL reference, see :func:`check_kl_reference`).
    A 4-bit base is never merged (lossy): with ``load_in_4bit`` the SFT adapter keeps training."""
    s = settings
    if not merges_sft_adapter(s):
        return planner
    sft_dir = Path(sft_dir).resolve()
    planner.model = None  # release the fine-tuned model before its merged copy is built
    gc.collect()
    if torch.cuda.is_available():
        torch.cuda.empty_cache()
    fresh = load_planner(dataclasses.replace(s, model=str(sft_dir)))
    for f in dataclasses.fields(Planner):
        setattr(planner, f.name, getattr(fresh, f.name))
    return planner


# ------------------------------------------------------------------------------ KL reference
class ReferencePolicy:
    """The frozen policy pi_ref RLTF starts from, for a KL penalty; create it BEFORE the first update.

    With a PEFT (LoRA) planner it costs no memory: ``with ref() as m:`` yields the same model
    inside ``model.disable_adapter()``, i.e. the base weights. That is the policy RLTF starts
    from only while the adapter is fresh (LoRA's B matrix starts at zero) and every earlier
    adapter is merged into the base: :func:`load_planner` merges an adapter given as
    ``planner.model``, and :func:`rltf_start_planner` merges the adapter SFT trained in the same
    run. (A planner whose adapter was already trained would get the wrong reference here.) With
    a full model it holds a frozen deep copy taken at construction. Either way the forward runs
    under ``torch.no_grad()`` in eval mode (no dropout); the train/eval mode is restored
    afterwards. Call it with the unwrapped model's planner (accelerate's ``unwrap_model``), not DDP."""

    def __init__(self, planner: Planner):
        self.planner = planner
        self._copy = None if planner.is_peft else copy.deepcopy(planner.model).eval().requires_grad_(False)

    @contextlib.contextmanager
    def __call__(self) -> Iterator[nn.Module]:
        if self._copy is not None:
            with torch.no_grad():
                yield self._copy
            return
        model = self.planner.model
        was_training = model.training
        model.eval()
        try:
            with torch.no_grad(), model.disable_adapter():
                yield model
        finally:
            model.train(was_training)
