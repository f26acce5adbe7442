"""Loading hub checkpoints lazily into one shared LRU model cache bounded by a memory budget.

Why: the original code loaded all 15 experts (Stable Diffusion included) at start-up. Here a
model is loaded the first time a plan calls its tool, kept while memory allows, and the least
recently used models are evicted when a new one would exceed the budget. Experts and metric
models share one cache, so the budget covers everything resident on the device.

A model is loaded on the CPU in its target dtype, measured, room is made for it, and only then is
it moved to the device: the budget is never overshot by a load. Only weights (parameters and
buffers) are counted; keep headroom in the budget for activations.
"""

from __future__ import annotations

import gc
import logging
import os
import threading
from collections import OrderedDict
from collections.abc import Callable, Hashable
from dataclasses import dataclass
from typing import Any

import torch
import transformers as tf

from common.errors import UserError
from envs.openagi.hf.models import (
    BFLOAT16,
    CAUSAL_LM,
    CLIP,
    DIFFUSERS,
    FILL_MASK,
    FLOAT16,
    FLOAT32,
    IMAGE_CLASSIFICATION,
    IMAGE_EDITING,
    IMAGE_ENCODER,
    IMAGE_TO_IMAGE,
    IMAGE_TO_TEXT,
    OBJECT_DETECTION,
    QUESTION_ANSWERING,
    SEQ2SEQ,
    TEXT_CLASSIFICATION,
    TEXT_ENCODER,
    TEXT_TO_IMAGE,
    VISUAL_QA,
    ExpertModel,
)

log = logging.getLogger(__name__)
GIB = 1024**3
_TORCH_DTYPES = {FLOAT32: torch.float32, FLOAT16: torch.float16, BFLOAT16: torch.bfloat16}


class MemoryBudgetError(UserError, RuntimeError):
    """A single model does not fit in the configured memory budget."""


class ModelLoadError(UserError, RuntimeError):
    """A checkpoint could not be loaded (missing, offline, missing optional dependency)."""


# ----------------------------------------------------------------------------- device and dtype


def resolve_device(device: str | None) -> torch.device:
    """``None`` -> ``cuda`` when available, else ``cpu``; otherwise the named device."""
    if device is None:
        return torch.device("cuda" if torch.cuda.is_available() else "cpu")
    try:
        dev = torch.device(device)
    except (RuntimeError, TypeError) as e:
        raise ValueError(f"bad device {device!r}; expected e.g. 'cpu', 'cuda' or 'cuda:1'") from e
    if dev.type == "cuda" and not torch.cuda.is_available():
        raise ValueError(f"device {device!r} requested but CUDA is not available here; use 'cpu' or None")
    return dev


def resolve_dtype(requested: str, device: torch.device, safe_halves: tuple[str, ...]) -> torch.dtype:
    """The dtype a model runs in: the requested one if the model is safe in it, else float32.

    ``"auto"`` is bfloat16 on a GPU that supports it, float16 on older GPUs, float32 on CPU.
    """
    if requested == "auto":
        if device.type != "cuda":
            return torch.float32
        requested = BFLOAT16 if torch.cuda.is_bf16_supported() else FLOAT16
    if requested not in _TORCH_DTYPES:
        raise ValueError(f"bad dtype {requested!r}; expected one of {sorted(_TORCH_DTYPES)} or 'auto'")
    if requested != FLOAT32 and requested not in safe_halves:
        return torch.float32
    return _TORCH_DTYPES[requested]


def default_budget_bytes(device: torch.device) -> int:
    """70% of the GPU's memory, or half of the host's RAM for CPU models."""
    if device.type == "cuda":
        return int(0.7 * torch.cuda.get_device_properties(device).total_memory)
    try:
        ram = os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES")
    except (ValueError, OSError, AttributeError):
        ram = 16 * GIB
    return int(0.5 * ram)


def module_nbytes(obj: Any) -> int:
    """Bytes of parameters and buffers of a module, or of every module in a diffusers pipeline."""
    modules = [obj] if isinstance(obj, torch.nn.Module) else [
        c for c in getattr(obj, "components", {}).values() if isinstance(c, torch.nn.Module)
    ]
    seen: set[int] = set()
    total = 0
    for m in modules:
        for t in (*m.parameters(), *m.buffers()):
            if id(t) not in seen:
                seen.add(id(t))
                total += t.numel() * t.element_size()
    return total


# ------------------------------------------------------------------------------------- the cache


@dataclass
class Loaded:
    """A loaded model (an ``nn.Module`` or a diffusers pipeline) with its (pre/post)processor."""

    model: Any
    processor: Any
    nbytes: int
    dtype: torch.dtype
    device: torch.device = torch.device("cpu")

    def to(self, device: torch.device) -> "Loaded":
        if device != self.device:
            self.model = self.model.to(device)
            self.device = device
        return self


class ModelCache:
    """Least-recently-used models under a byte budget, on one device. Thread-safe."""

    def __init__(self, device: torch.device | str | None = None, budget_bytes: int | None = None):
        self.device = device if isinstance(device, torch.device) else resolve_device(device)
        self.budget_bytes = int(budget_bytes) if budget_bytes is not None else default_budget_bytes(self.device)
        if self.budget_bytes <= 0:
            raise ValueError(f"memory budget must be positive, got {self.budget_bytes} bytes")
        self._entries: OrderedDict[Hashable, Loaded] = OrderedDict()
        self._lock = threading.RLock()
        self.loads = self.hits = self.evictions = 0

    @property
    def used_bytes(self) -> int:
        return sum(e.nbytes for e in self._entries.values())

    def keys(self) -> list[Hashable]:
        """Resident keys, least recently used first."""
        return list(self._entries)

    def __contains__(self, key: Hashable) -> bool:
        return key in self._entries

    def __len__(self) -> int:
        return len(self._entries)

    def get(self, key: Hashable, load: Callable[[], Loaded]) -> Loaded:
        """The cached entry for ``key``, or ``load()`` it (on CPU), make room, move it to the device."""
        with self._lock:
            if key in self._entries:
                self._entries.move_to_end(key)
                self.hits += 1
                return self._entries[key]
            loaded = load()
            if loaded.nbytes > self.budget_bytes:
                need = loaded.nbytes
                del loaded
                gc.collect()
                raise MemoryBudgetError(
                    f"model {key!r} needs {_gib(need)} of weights, more than the whole memory budget of "
                    f"{_gib(self.budget_bytes)}; raise HFBackendConfig.memory_budget_gib"
                )
            while self._entries and self.used_bytes + loaded.nbytes > self.budget_bytes:
                self.evict(next(iter(self._entries)))
            self._entries[key] = loaded.to(self.device)
            self.loads += 1
            log.info("loaded %r (%s) on %s; cache holds %s / %s", key, _gib(loaded.nbytes), self.device,
                     _gib(self.used_bytes), _gib(self.budget_bytes))
            return loaded

    def evict(self, key: Hashable) -> None:
        with self._lock:
            entry = self._entries.pop(key)
            log.info("evicting %r (%s)", key, _gib(entry.nbytes))
            del entry
            self.evictions += 1
            gc.collect()
            if self.device.type == "cuda":
                torch.cuda.empty_cache()

    def clear(self) -> None:
        with self._lock:
            for key in list(self._entries):
                self.evict(key)


def _gib(n: int) -> str:
    return f"{n / GIB:.3f} GiB"


# ------------------------------------------------------------------------------------- loading


def load_model(spec: ExpertModel, dtype: torch.dtype, *, local_files_only: bool = False) -> Loaded:
    """Load ``spec``'s checkpoint on the CPU in ``dtype``, in eval mode, with its processor."""
    try:
        if spec.library == DIFFUSERS:
            model, processor = _load_diffusers(spec, dtype, local_files_only), None
        else:
            model, processor = _load_transformers(spec, dtype, local_files_only)
    except ModelLoadError:
        raise
    except (OSError, ValueError, ImportError, EnvironmentError) as e:
        hint = (
            f"; with no hub access, point the config's model id for {spec.name!r} at a local directory"
            if isinstance(e, OSError) else ""
        )
        raise ModelLoadError(f"could not load {spec.name!r} model {spec.model_id!r} ({spec.kind}): {e}{hint}") from e
    if isinstance(model, torch.nn.Module):
        model.eval().requires_grad_(False)
    return Loaded(model=model, processor=processor, nbytes=module_nbytes(model), dtype=dtype)


# kind -> (model class, processor class or None) of transformers, for the kinds loaded as they are
_AUTO_CLASSES = {
    IMAGE_CLASSIFICATION: ("AutoModelForImageClassification", "AutoImageProcessor"),
    IMAGE_TO_IMAGE: ("AutoModelForImageToImage", None),
    TEXT_CLASSIFICATION: ("AutoModelForSequenceClassification", "AutoTokenizer"),
    QUESTION_ANSWERING: ("AutoModelForQuestionAnswering", "AutoTokenizer"),
    SEQ2SEQ: ("AutoModelForSeq2SeqLM", "AutoTokenizer"),
    VISUAL_QA: ("AutoModelForVisualQuestionAnswering", "AutoProcessor"),
    FILL_MASK: ("AutoModelForMaskedLM", "AutoTokenizer"),
    TEXT_ENCODER: ("AutoModel", "AutoTokenizer"),
    CLIP: ("AutoModel", "AutoProcessor"),
}


def _load_transformers(spec: ExpertModel, dtype: torch.dtype, local_files_only: bool) -> tuple[Any, Any]:
    mid, kw = spec.model_id, {"local_files_only": local_files_only}
    mkw = {**kw, "dtype": dtype}
    kind = spec.kind
    if kind in _AUTO_CLASSES:
        model_cls, processor_cls = _AUTO_CLASSES[kind]
        model = getattr(tf, model_cls).from_pretrained(mid, **mkw)
        return model, getattr(tf, processor_cls).from_pretrained(mid, **kw) if processor_cls else None
    if kind == OBJECT_DETECTION:
        try:
            model = tf.AutoModelForObjectDetection.from_pretrained(mid, **mkw)
        except ImportError as e:
            raise ModelLoadError(
                f"could not load {spec.name!r} model {mid!r}: {e}. facebook/detr-* checkpoints use a timm "
                "backbone: `pip install timm`, or choose a detector with a transformers backbone"
            ) from e
        return model, tf.AutoImageProcessor.from_pretrained(mid, **kw)
    if kind == IMAGE_TO_TEXT:
        model = tf.AutoModelForImageTextToText.from_pretrained(mid, **mkw)
        return model, (tf.AutoImageProcessor.from_pretrained(mid, **kw), tf.AutoTokenizer.from_pretrained(mid, **kw))
    if kind == CAUSAL_LM:
        tok = tf.AutoTokenizer.from_pretrained(mid, **kw)
        tok.padding_side = "left"  # batched generation continues each prompt from its last token
        tok.truncation_side = "left"  # a long prompt keeps its end
        if tok.pad_token is None:
            tok.pad_token = tok.eos_token
        return tf.AutoModelForCausalLM.from_pretrained(mid, **mkw), tok
    if kind == IMAGE_ENCODER:
        config = tf.AutoConfig.from_pretrained(mid, **kw)
        extra = {"add_pooling_layer": False} if config.model_type in ("vit", "deit") else {}
        return tf.AutoModel.from_pretrained(mid, **mkw, **extra), tf.AutoImageProcessor.from_pretrained(mid, **kw)
    raise ModelLoadError(f"{spec.name!r}: loader kind {kind!r} is not a transformers kind")


def _load_diffusers(spec: ExpertModel, dtype: torch.dtype, local_files_only: bool) -> Any:
    if spec.kind not in (TEXT_TO_IMAGE, IMAGE_EDITING):
        raise ModelLoadError(f"{spec.name!r}: loader kind {spec.kind!r} is not a diffusers kind")
    try:
        import diffusers  # optional: diffusers (the hf extra), only for diffusion experts
    except ImportError as e:
        raise ModelLoadError(
            f"tool {spec.name!r} runs {spec.model_id!r} with diffusers, which is not installed: "
            "`pip install diffusers` (the optional extra), or point the tool at another backend"
        ) from e
    # diffusers renamed ``torch_dtype`` to ``dtype`` (0.36+); older versions only know the former
    try:
        from diffusers.utils.deprecation_utils import _resolve_dtype  # noqa: F401

        dtype_kw = {"dtype": dtype}
    except ImportError:
        dtype_kw = {"torch_dtype": dtype}
    pipe = diffusers.DiffusionPipeline.from_pretrained(spec.model_id, local_files_only=local_files_only, **dtype_kw)
    pipe.set_progress_bar_config(disable=True)
    return pipe
