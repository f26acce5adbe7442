"""A planner: a policy model with its tokenizer, saved to and reloaded from one directory.

A :class:`Planner` is a model (a transformers ``PreTrainedModel`` or a PEFT ``PeftModel``), its
tokenizer and what it came from. :func:`rltf.planners.loading.load_planner` builds one from a
``planner:`` config section (the embedded T5 of :mod:`rltf.planners.embedded`, a hub id, a directory,
LoRA); :mod:`rltf.planners.hf_models` reads models and tokenizers for both.

Padding: seq2seq tokenizers pad on the right (T5 has relative positions, the decoder starts from
its own start token). Causal tokenizers pad on the LEFT, so a batch of prompts ends at the same
position and generation appends after it; a causal tokenizer without a pad token gets pad = eos.
When scoring left-padded causal sequences yourself, pass ``position_ids = attention_mask.cumsum(-1) - 1``
(clamped at 0) as ``generate`` does, or the logits depend on the amount of padding.

:meth:`Planner.save_pretrained` writes the full model, or just the adapter for a PEFT model,
plus the tokenizer and ``rltf_planner.json``; :meth:`Planner.from_pretrained` reads either back.
Planners are returned in eval mode and stay there: SFT and RLTF never call ``.train()`` (no
dropout, so sampling and scoring evaluate the same function).
"""

from __future__ import annotations

import json
import os
import pickle
import shutil
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Literal

from peft import PeftModel
from torch import nn
from transformers import PreTrainedTokenizerBase

from constrained_decoding.prompts import Conversation, format_prompt
from rltf.planners.hf_models import (
    HUB_ID,
    PlannerError,
    check_planner_dir,
    dir_kind,
    has_tokenizer,
    load_model,
    load_tokenizer,
    peft_deprecations_quiet,
    require_tokenizer,
    unsafe_pickle_message,
)
from rltf.planners.idle_dropout import skip_idle_dropout

PLANNER_FILE = "rltf_planner.json"
MERGED_DIR = "merged_adapters"
FORMAT_VERSION = 1
Arch = Literal["seq2seq", "causal"]


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
        return isinstance(self.model, PeftModel)

    def prompt(self, description: str | Conversation) -> str:
        """The model input for a task, as sampling, scoring, SFT and GRPO read it: a causal planner
        whose tokenizer has a chat template (SmolLM2-Instruct) reads the template around the task
        as the user message, assistant turn opened (the plan is the assistant's answer); otherwise
        the description itself for seq2seq planners (the plan is the decoder's output), the
        description and ``"\nPlan:"`` for causal ones (the plan continues it). One definition:
        :func:`constrained_decoding.prompts.format_prompt` with this planner's tokenizer. A chat
        prompt's text holds its special tokens: tokenise it with ``add_special_tokens=False`` (or
        use :func:`constrained_decoding.prompts.encode_prompts` on the description)."""
        return format_prompt(description, self.is_encoder_decoder, self.tokenizer)

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
        kind = dir_kind(d)
        meta = _read_meta(d)
        if kind == "full":
            require_tokenizer(str(d))  # before the weights are read
            model, is_enc_dec = load_model(str(d), dtype, arch, load_in_4bit)
            tokenizer = load_tokenizer(str(d), is_enc_dec)
            planner = cls(model, tokenizer, is_enc_dec, source=str(d))
        else:
            try:
                planner = cls._load_adapter(d, meta, dtype, trainable, load_in_4bit, arch)
            except pickle.UnpicklingError:  # torch's weights_only refusal, whose advice is the wrong one
                raise PlannerError(unsafe_pickle_message(d)) from None
        sync_pad(planner)
        planner.model.eval()  # and it stays so: SFT and RLTF train in eval mode (no dropout)
        skip_idle_dropout(planner.model)  # ...so its dropouts issue no op (rltf.planners.idle_dropout)
        return planner

    @classmethod
    def _load_adapter(cls, d: Path, meta: dict[str, Any], dtype: str, trainable: bool, load_in_4bit: bool,
                      arch: str) -> Planner:
        """The adapter folder ``d`` on its base (see :meth:`from_pretrained`)."""
        check_planner_dir(d)  # (a full model's directory is checked by load_model)
        base = _adapter_base(d, meta)
        base_model, is_enc_dec = load_model(base, dtype, arch, load_in_4bit)
        merged = tuple(str((d / m).resolve()) for m in meta.get("merged_adapters", []))
        if merged and load_in_4bit:
            raise PlannerError(f"adapter {str(d)!r} records merged adapters; merging into a 4-bit base is "
                               "lossy: load it without planner.load_in_4bit")
        with peft_deprecations_quiet():
            for m in merged:
                base_model = PeftModel.from_pretrained(base_model, m).merge_and_unload()
            model = PeftModel.from_pretrained(base_model, str(d), is_trainable=trainable)
        tok_dir = str(d) if has_tokenizer(d) else base
        tokenizer = load_tokenizer(tok_dir, is_enc_dec)
        return cls(model, tokenizer, is_enc_dec, source=str(d), base_model=base, merged_adapters=merged)


def _read_meta(d: Path) -> dict[str, Any]:
    f = d / PLANNER_FILE
    if not f.is_file():
        return {}
    meta = _read_json(f)
    if not isinstance(meta, dict) or not isinstance(meta.get("format", FORMAT_VERSION), int):
        raise PlannerError(f"{f} is damaged (not a {PLANNER_FILE} object with an integer format): save the "
                           "planner again, or delete the file to load the directory as a plain model")
    if meta.get("format", FORMAT_VERSION) > FORMAT_VERSION:
        raise PlannerError(f"{f} has format {meta['format']}; this rltf reads up to {FORMAT_VERSION}")
    return meta


def _read_json(f: Path) -> Any:
    try:
        return json.loads(f.read_text(encoding="utf-8"))
    except (OSError, UnicodeDecodeError, json.JSONDecodeError) as e:
        raise PlannerError(f"{f} is damaged (not valid JSON: {e}): save the planner again or copy the file "
                           "from an intact copy") from None


def _adapter_base(d: Path, meta: dict[str, Any]) -> str:
    """The base model of an adapter dir: the recorded id/dir, as given or resolved, must exist."""
    adapter_config = _read_json(d / "adapter_config.json")
    recorded = meta.get("base_model") or (adapter_config.get("base_model_name_or_path")
                                          if isinstance(adapter_config, dict) else None)
    if not recorded:
        raise PlannerError(f"LoRA adapter {str(d)!r} does not record its base model (no base_model in {PLANNER_FILE}, "
                           "no base_model_name_or_path in adapter_config.json)")
    p = Path(recorded).expanduser()
    if p.is_dir():
        return str(p)
    if not p.is_absolute() and (d / p).is_dir():
        return str(d / p)
    if p.is_absolute() or recorded.startswith(".") or recorded.count("/") > 1 or not HUB_ID.fullmatch(recorded):
        raise PlannerError(f"LoRA adapter {str(d)!r} needs its base model {recorded!r}, which is not a directory "
                           "(moved or deleted?) nor a hub id")
    return recorded


def sync_pad(planner: Planner) -> None:
    """Make the model's config agree with the tokenizer's pad token (generate needs it)."""
    pad = planner.tokenizer.pad_token_id
    base = planner.model.get_base_model() if planner.is_peft else planner.model
    if base.config.pad_token_id is None:
        base.config.pad_token_id = pad
    gen = getattr(base, "generation_config", None)
    if gen is not None and gen.pad_token_id is None:
        gen.pad_token_id = pad
