"""The planner a run starts from: a ``planner:`` config section -> a :class:`~rltf.planners.planner.Planner`.

:func:`load_planner` turns a config section into a planner:

what ``model`` names is worked out by :func:`rltf.planners.source.resolve_planner_source` (a
:class:`~rltf.planners.source.PlannerSource`; pass one already resolved as ``source``):

* ``embedded`` builds (once) and loads the small planner of :mod:`rltf.planners.embedded`: MiniLM
  + a T5 decoder (``embedded.encoder: minilm``) or a T5 from scratch (``scratch``) for ``arch:
  auto`` / ``seq2seq``, a LLaMA-style decoder-only model for ``arch: causal``;
* a named model (``smollm2``), a hub id or a model folder (``config.json``) loads as a full model;
  a LoRA adapter folder (``adapter_config.json``, base found from ``rltf_planner.json`` or the
  adapter's own ``base_model_name_or_path``) as an adapter; a training run's folder as the planner
  it reported (a model or an adapter). Encoder-decoder vs decoder-only comes from the model's
  config (``arch: auto``); ``dtype`` casts the weights; ``lora.enabled`` wraps the model in a
  PEFT LoRA adapter (:func:`apply_lora`); ``load_in_4bit`` loads the base in 4-bit NF4 for QLoRA
  (bitsandbytes + CUDA).

The SFT -> RLTF handoff: the KL reference of a LoRA planner (:class:`rltf.rl.kl_reference.ReferencePolicy`)
is the same model with the adapter disabled, which is the start policy only while the adapter is
fresh. So after LoRA SFT :func:`rltf_start_planner` merges the SFT adapter into the base and
starts a fresh adapter on top; a 4-bit base cannot be merged exactly, so
:func:`check_kl_reference` refuses QLoRA + SFT + KL.
"""

from __future__ import annotations

import dataclasses
import gc
import os
from collections.abc import Sequence
from pathlib import Path

import torch
from torch import nn
from transformers import PreTrainedModel

from rltf.config.loading import LoraSettings, PlannerSettings
from rltf.planners.embedded import LANGUAGE_PRETRAINING, embedded_arch, ensure_embedded_planner, uses_minilm
from rltf.planners.hf_models import PlannerError, load_model, load_tokenizer, peft_deprecations_quiet, require_4bit
from rltf.planners.idle_dropout import skip_idle_dropout
from rltf.planners.minilm_t5 import MODEL_TYPE as MINILM_T5
from rltf.planners.planner import Planner, sync_pad
from rltf.planners.source import PlannerSource, SourceKind, resolve_planner_source


def load_planner(settings: PlannerSettings, tokenizer_texts: Sequence[str] | None = None, *,
                 source: PlannerSource | None = None) -> Planner:
    """The planner a config section describes (see the module docstring): the one ``source``
    names (by default ``settings.model`` resolved), loaded as the rest of ``settings`` say.

    ``tokenizer_texts`` (task descriptions, plans) train the embedded planner's tokenizer; by
    default the OpenAGI task grammar and tool names. Ignored for other models.

    A LoRA adapter directory as ``model``: with ``lora.enabled`` and ``lora.merge_source_adapter``
    it is merged into its base and a fresh adapter is trained on top (so the adapter-disabled
    model, the KL reference, is the loaded policy); with ``merge_source_adapter: false`` the
    adapter itself keeps training; with LoRA disabled it is merged and the full model trains.
    :func:`rltf_start_planner` does the same with the adapter SFT trained in the main job."""
    s = settings
    source = resolve_planner_source(s.model) if source is None else source
    if s.load_in_4bit:
        require_4bit()
    if source.kind is SourceKind.EMBEDDED:
        arch = embedded_arch(s.arch)
        path = ensure_embedded_planner(s.embedded, tokenizer_texts, arch=arch)
        planner = Planner.from_pretrained(path, dtype=s.dtype, load_in_4bit=s.load_in_4bit, arch=arch)
        planner.source = str(path)
        if not uses_minilm(s.embedded, arch):  # also builds saved before the flag existed
            setattr(planner.model.config, LANGUAGE_PRETRAINING, False)
    elif source.adapter:
        keep = s.lora.enabled and not s.lora.merge_source_adapter
        if s.load_in_4bit and not keep:
            raise PlannerError(f"planner.model {source.value!r} is a LoRA adapter and planner.load_in_4bit is true: "
                               "merging it into a 4-bit base is lossy; set planner.lora.enabled=true and "
                               "planner.lora.merge_source_adapter=false to keep training it as an adapter")
        where = source.load_path()
        planner = Planner.from_pretrained(where, dtype=s.dtype, load_in_4bit=s.load_in_4bit, arch=s.arch,
                                          trainable=keep)
        if not keep:
            planner.merged_adapters = (*planner.merged_adapters, str(Path(where).resolve()))
            planner.model = planner.model.merge_and_unload().requires_grad_(True)  # PEFT froze the base
    else:  # a full model: a named model, a hub id, a model folder, or the one a run folder reported
        where = source.load_path()
        model, is_enc_dec = load_model(where, s.dtype, s.arch, s.load_in_4bit)
        planner = Planner(model, load_tokenizer(where, is_enc_dec), is_enc_dec, source=source.name)
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
    sync_pad(planner)
    planner.model.eval()  # and it stays so: SFT and RLTF train in eval mode (no dropout)
    skip_idle_dropout(planner.model)  # ...so its dropouts issue no op (rltf.planners.idle_dropout)
    return planner


def apply_lora(model: PreTrainedModel, lora: LoraSettings, is_encoder_decoder: bool,
               quantized: bool = False) -> nn.Module:
    """Wrap ``model`` in a fresh PEFT LoRA adapter (only the adapter is trainable)."""
    from peft import LoraConfig, TaskType, get_peft_model, prepare_model_for_kbit_training  # heavy: LoRA runs only

    if quantized:
        model = prepare_model_for_kbit_training(model, use_gradient_checkpointing=False)
    targets = list(lora.target_modules) if lora.target_modules else None
    if targets is None and getattr(model.config, "model_type", None) == MINILM_T5:
        targets = ["q", "v"]  # PEFT's T5 default: the decoder's attention (PEFT does not know this model type)
    config = LoraConfig(task_type=TaskType.SEQ_2_SEQ_LM if is_encoder_decoder else TaskType.CAUSAL_LM,
                        r=lora.r, lora_alpha=lora.alpha, lora_dropout=lora.dropout, target_modules=targets)
    try:
        with peft_deprecations_quiet():
            wrapped = get_peft_model(model, config)
    except ValueError as e:
        linear = sorted({n.rsplit(".", 1)[-1] for n, m in model.named_modules() if isinstance(m, nn.Linear)})
        raise PlannerError(f"planner.lora.target_modules={lora.target_modules!r} cannot be applied to a "
                           f"{model.config.model_type!r} model ({e}); its linear layers are named "
                           f"{', '.join(linear)}") from None
    skip_idle_dropout(wrapped)  # lora_dropout: no op in eval mode, the same draws in training
    return wrapped


# ------------------------------------------------------------------------------ SFT -> RLTF handoff
def check_kl_reference(settings: PlannerSettings, *, sft: bool, kl_coef: float,
                       source: PlannerSource | None = None) -> None:
    """Refuse, before anything loads, the runs whose KL reference would not be the policy RLTF
    starts from (``sft``: a supervised warm start runs first; ``kl_coef``: ``rltf.kl_coef``).

    With LoRA the reference is the adapter-disabled model, so an adapter that already learned
    something (trained by SFT, or loaded from ``planner.model``) must be merged into the base
    first (:func:`rltf_start_planner`, :func:`load_planner`). Refused: keeping such an adapter
    trainable (``planner.lora.merge_source_adapter=false``), and SFT on a 4-bit base
    (``planner.load_in_4bit``), where merging is lossy. ``source``: ``settings.model`` resolved
    (by default resolved here)."""
    s = settings
    if kl_coef <= 0 or not s.lora.enabled:
        return  # no reference at all, or a full model: the trainer's frozen copy of the start policy
    source = resolve_planner_source(s.model) if source is None else source
    if not (sft or source.adapter):
        return  # a fresh adapter on the loaded model: adapter disabled == the start policy
    what = "the adapter SFT trains (sft.enabled=true)" if sft else f"the adapter planner.model={source.value!r}"
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
    :class:`~rltf.rl.kl_reference.ReferencePolicy` of it IS that policy (KL exactly 0 at RL step 0).

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
