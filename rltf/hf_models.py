"""Reading a planner's model, config and tokenizer with transformers, with errors that say why.

What a directory holds (:func:`dir_kind`: a full model or a LoRA adapter), what a
``planner.model`` string names (:func:`resolve_source`: a directory or a hub id), and the loaders
:class:`~rltf.planner.Planner` and :func:`~rltf.planner_loading.load_planner` share:
:func:`load_model` (encoder-decoder vs decoder-only from the model's config, ``dtype``, 4-bit
NF4 for QLoRA) and :func:`load_tokenizer` (padding side by architecture, see
:mod:`rltf.planner`). Every failure is a :class:`PlannerError`.
"""

from __future__ import annotations

import importlib.util
import os
import re
from pathlib import Path
from typing import Any

import torch
from transformers import (
    AutoConfig,
    AutoModelForCausalLM,
    AutoModelForSeq2SeqLM,
    AutoTokenizer,
    PretrainedConfig,
    PreTrainedModel,
    PreTrainedTokenizerBase,
)

DTYPES = {"float32": torch.float32, "bfloat16": torch.bfloat16, "float16": torch.float16}
HUB_ID = re.compile(r"[A-Za-z0-9][\w.\-]*(/[A-Za-z0-9][\w.\-]*)?")


class PlannerError(ValueError):
    """A planner that cannot be loaded or saved as asked (bad path, missing base, wrong arch...)."""


def resolve_source(name: str) -> tuple[str, str]:
    """("full" | "adapter", local dir) or ("hub", id); a clear error for anything else."""
    p = Path(name).expanduser()
    if p.exists():
        if not p.is_dir():
            raise PlannerError(f"planner.model {name!r} is a file; expected a model or adapter directory or a hub id")
        return dir_kind(p), str(p)
    looks_local = name.startswith(("/", "./", "../", "~", ".")) or "\\" in name or name.count("/") > 1
    if looks_local or not HUB_ID.fullmatch(name):
        raise PlannerError(f"planner.model {name!r}: no such directory, and not a hub model id "
                           f"(expected 'embedded', a directory, or an id such as 'google/flan-t5-large')")
    return "hub", name


def dir_kind(d: Path) -> str:
    """"adapter" (``adapter_config.json``) or "full" (``config.json``); an error for anything else."""
    if not d.is_dir():
        raise PlannerError(f"planner directory {str(d)!r} does not exist")
    if (d / "adapter_config.json").is_file():
        return "adapter"
    if (d / "config.json").is_file():
        return "full"
    files = sorted(x.name for x in d.iterdir())[:10]
    raise PlannerError(f"directory {str(d)!r} has neither config.json (a full model) nor adapter_config.json "
                       f"(a LoRA adapter); it holds: {', '.join(files) or 'nothing'}")


def has_tokenizer(d: Path) -> bool:
    return any((d / f).is_file() for f in ("tokenizer.json", "tokenizer_config.json", "spiece.model",
                                            "tokenizer.model"))


def load_model(src: str, dtype: str, arch: str, load_in_4bit: bool) -> tuple[PreTrainedModel, bool]:
    """The model at ``src`` (directory or hub id) and whether it is an encoder-decoder."""
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


def load_tokenizer(src: str, is_encoder_decoder: bool) -> PreTrainedTokenizerBase:
    """The tokenizer at ``src``, padding on the right (seq2seq) or on the left with a pad token (causal)."""
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


def require_4bit() -> None:
    """Refuse ``planner.load_in_4bit`` without bitsandbytes and a CUDA GPU."""
    if importlib.util.find_spec("bitsandbytes") is None:
        raise PlannerError("planner.load_in_4bit=true needs the bitsandbytes package (pip install bitsandbytes) "
                           "and a CUDA GPU")
    if not torch.cuda.is_available():
        raise PlannerError("planner.load_in_4bit=true needs a CUDA GPU (bitsandbytes 4-bit); none is visible")


def _quantization_kwargs(dtype: str) -> dict[str, Any]:
    from transformers import BitsAndBytesConfig

    require_4bit()
    compute = DTYPES[dtype] if dtype != "float32" else torch.bfloat16
    q = BitsAndBytesConfig(load_in_4bit=True, bnb_4bit_quant_type="nf4", bnb_4bit_use_double_quant=True,
                           bnb_4bit_compute_dtype=compute)
    return {"quantization_config": q, "device_map": {"": int(os.environ.get("LOCAL_RANK", 0))}}
