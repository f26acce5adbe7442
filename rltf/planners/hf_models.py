"""Reading a planner's model, config and tokenizer with transformers, with errors that say why.

What a directory holds (:func:`dir_kind`: a full model or a LoRA adapter; what a ``planner.model``
string names is :func:`rltf.planners.source.resolve_planner_source`), and the loaders
:class:`~rltf.planners.planner.Planner` and :func:`~rltf.planners.loading.load_planner` share:
:func:`load_model` (encoder-decoder vs decoder-only from the model's config, ``dtype``, 4-bit
NF4 for QLoRA) and :func:`load_tokenizer` (padding side by architecture, see
:mod:`rltf.planners.planner`). Every failure is a :class:`PlannerError`: a damaged file of a local
directory (a truncated ``model.safetensors``, a JSON file that does not parse) is named before
transformers reads it (:func:`damaged_files`, :func:`check_planner_dir`), and a local directory
without tokenizer files is refused (transformers would silently build a default tokenizer).
"""

from __future__ import annotations

import importlib.util
import json
import os
import pickle
import re
import warnings
import zipfile
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import torch
from transformers import (
    AutoConfig,
    AutoModelForCausalLM,
    AutoModelForSeq2SeqLM,
    AutoTokenizer,
    BitsAndBytesConfig,
    PretrainedConfig,
    PreTrainedModel,
    PreTrainedTokenizerBase,
)

import rltf.planners.minilm_t5  # noqa: F401  registers the MiniLM planner's model type with the Auto classes
from common.errors import UserError
from rltf.planners.named import is_named, named_model_path

DTYPES = {"float32": torch.float32, "bfloat16": torch.bfloat16, "float16": torch.float16}
HUB_ID = re.compile(r"[A-Za-z0-9][\w.\-]*(/[A-Za-z0-9][\w.\-]*)?")


class PlannerError(UserError, ValueError):
    """A planner that cannot be loaded or saved as asked (bad path, missing base, wrong arch...)."""


@contextmanager
def peft_deprecations_quiet() -> Iterator[None]:
    """PEFT reads ``model.is_gradient_checkpointing``, which transformers 5 deprecates: one FutureWarning
    per adapter wrapped or loaded that no user of rltf can act on; silenced around PEFT calls only."""
    with warnings.catch_warnings():
        warnings.filterwarnings("ignore", message="`is_gradient_checkpointing` is deprecated", category=FutureWarning)
        yield


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


TOKENIZER_FILES = ("tokenizer.json", "tokenizer_config.json", "tokenizer.model", "spiece.model",
                   "sentencepiece.bpe.model", "vocab.json", "vocab.txt")
"""Any of these in a directory means it holds a tokenizer (fast, SentencePiece, BPE or WordPiece files)."""


def has_tokenizer(d: Path) -> bool:
    return any((Path(d) / f).is_file() for f in TOKENIZER_FILES)


def require_tokenizer(src: str) -> None:
    """Refuse a local directory without tokenizer files (a hub id is left to transformers)."""
    local = _local_dir(src)
    if local is not None and not has_tokenizer(local):
        raise PlannerError(f"planner directory {src!r} has no tokenizer files (expected one of: "
                           f"{', '.join(TOKENIZER_FILES)}); save the tokenizer with the model "
                           "(tokenizer.save_pretrained(dir)) or copy its files in")


# ------------------------------------------------------------------------------ damaged files
def damaged_files(d: str | os.PathLike) -> list[tuple[Path, str]]:
    """``(file, why)`` for each damaged file of a local model / adapter / planner directory.

    Cheap checks, no weights read: every ``*.json`` parses, every ``*.safetensors`` has a header
    that parses and a size that covers the tensors it lists (a truncated copy or a killed write
    fails this), every zip-format ``*.bin`` / ``*.pt`` has its central directory, and every file a
    sharded checkpoint's ``*.index.json`` names exists. Folders below ``d`` (``merged_adapters``)
    are checked too."""
    d = Path(d)
    found: list[tuple[Path, str]] = []
    for f in sorted(d.rglob("*")):
        if not f.is_file():
            continue
        why = _file_problem(f)
        if why:
            found.append((f, why))
    return found


def check_planner_dir(d: str | os.PathLike) -> None:
    """Raise :class:`PlannerError` naming the first damaged file of ``d`` (see :func:`damaged_files`)."""
    bad = damaged_files(d)
    if bad:
        f, why = bad[0]
        more = f" (and {len(bad) - 1} more damaged file(s))" if len(bad) > 1 else ""
        raise PlannerError(f"{f} is damaged ({why}){more}: the planner directory {str(d)!r} cannot be loaded; "
                           "save or copy it again (a training checkpoint: resume from an older one)")


def _file_problem(f: Path) -> str | None:
    name = f.name
    try:
        if name.endswith(".json"):
            data = json.loads(f.read_text(encoding="utf-8"))
            if name.endswith(".index.json") and isinstance(data, dict) and isinstance(data.get("weight_map"), dict):
                missing = sorted({v for v in data["weight_map"].values() if not (f.parent / str(v)).is_file()})
                if missing:
                    return f"names shard(s) that are missing: {', '.join(missing[:3])}"
            return None
        if name.endswith(".safetensors"):
            return _safetensors_problem(f)
        if name.endswith((".bin", ".pt", ".pth")):
            with open(f, "rb") as fh:
                if fh.read(4) != b"PK\x03\x04":
                    return None  # a legacy (non-zip) pickle: nothing cheap to check
            with zipfile.ZipFile(f):
                return None
    except (UnicodeDecodeError, json.JSONDecodeError) as e:
        return f"not valid JSON: {e}"
    except zipfile.BadZipFile as e:
        return f"truncated or not a torch archive: {e}"
    except OSError as e:
        return f"unreadable: {e}"
    return None


def _safetensors_problem(f: Path) -> str | None:
    size = f.stat().st_size
    if size < 8:
        return f"{size} bytes: shorter than a safetensors header"
    with open(f, "rb") as fh:
        n = int.from_bytes(fh.read(8), "little")
        if n > size - 8:
            return f"truncated: its header claims {n} bytes but the file holds {size}"
        try:
            header = json.loads(fh.read(n))
            ends = [int(v["data_offsets"][1]) for k, v in header.items() if k != "__metadata__"]
        except (ValueError, TypeError, KeyError, IndexError, AttributeError):
            return "its header is not a safetensors header"
    want = 8 + n + max(ends, default=0)
    if size < want:
        return f"truncated: {size} bytes, its header lists tensors up to byte {want}"
    if size > want:
        return f"{size} bytes, more than the {want} its header describes"
    return None


def load_model(src: str, dtype: str, arch: str, load_in_4bit: bool) -> tuple[PreTrainedModel, bool]:
    """The model at ``src`` (directory, hub id or a named model such as ``smollm2``: an adapter
    records its base by the name it was given) and whether it is an encoder-decoder."""
    if is_named(src):
        src = str(named_model_path(src))
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
    except pickle.UnpicklingError:  # torch's weights_only refusal: its advice (weights_only=False) is the wrong one
        raise PlannerError(unsafe_pickle_message(src)) from None
    except (OSError, ValueError, RuntimeError, _SafetensorError) as e:
        raise PlannerError(f"cannot load the {detected} model {src!r}: {_first_line(e)}") from None
    return model, is_enc_dec


def unsafe_pickle_message(src: str | os.PathLike) -> str:
    """The one line for a pickled weights file (``pytorch_model.bin``...) that holds more than tensors."""
    local = _local_dir(str(src))
    pickles = sorted(p.name for p in local.iterdir() if p.suffix in (".bin", ".pt", ".pth")) if local else []
    where = f"{Path(local, pickles[0])}" if len(pickles) == 1 else f"the pickled weights of {str(src)!r}"
    return (f"{where} holds objects other than tensors, which rltf never unpickles (weights are loaded with "
            f"weights_only=True, so a file cannot run code): replace it with model.safetensors saved from "
            f"a source you trust")


try:
    from safetensors import SafetensorError as _SafetensorError  # a version probe
except ImportError:  # pragma: no cover - transformers requires safetensors
    class _SafetensorError(Exception):  # type: ignore[no-redef]
        pass


def _first_line(e: BaseException) -> str:
    text = str(e).strip()
    return text.splitlines()[0] if text else type(e).__name__


def _local_dir(src: str) -> Path | None:
    p = Path(src).expanduser()
    return p if p.is_dir() else None


def _load_config(src: str) -> PretrainedConfig:
    local = _local_dir(src)
    if local is not None:
        check_planner_dir(local)
    try:
        return AutoConfig.from_pretrained(src)
    except (OSError, ValueError) as e:
        offline = os.environ.get("HF_HUB_OFFLINE", "").lower() in ("1", "true", "yes", "on")
        why = " (HF_HUB_OFFLINE is set and it is not in the local cache)" if offline else ""
        first = str(e).strip().splitlines()[0] if str(e).strip() else type(e).__name__
        raise PlannerError(f"cannot load a model config from {src!r}{why}: {first}") from None


def load_tokenizer(src: str, is_encoder_decoder: bool) -> PreTrainedTokenizerBase:
    """The tokenizer at ``src``, padding on the right (seq2seq) or on the left with a pad token (causal).

    A local directory must hold tokenizer files (:data:`TOKENIZER_FILES`): without them
    transformers would quietly build a default tokenizer for the model type, whose ids do not
    match the model's embeddings."""
    if is_named(src):
        src = str(named_model_path(src))
    require_tokenizer(src)
    try:
        tok = AutoTokenizer.from_pretrained(src)
    except (OSError, ValueError, RuntimeError) as e:
        raise PlannerError(f"cannot load a tokenizer from {src!r}: {_first_line(e)}") from None
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
    require_4bit()
    compute = DTYPES[dtype] if dtype != "float32" else torch.bfloat16
    q = BitsAndBytesConfig(load_in_4bit=True, bnb_4bit_quant_type="nf4", bnb_4bit_use_double_quant=True,
                           bnb_4bit_compute_dtype=compute)
    return {"quantization_config": q, "device_map": {"": int(os.environ.get("LOCAL_RANK", 0))}}
