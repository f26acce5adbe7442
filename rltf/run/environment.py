"""What a run's figures depend on besides its config and seed (issue 38, item 9).

The main job's held-out scores move in the fourth decimal between library versions and between
CPUs (oneDNN / MKL pick their kernels by the CPU's instruction set, so the float sums differ), so
every ``results.json`` records the machine and *every* installed distribution with its version,
under ``"environment"``:

* ``python``, ``platform``, ``cpu`` (the model name, family / model / stepping from
  ``/proc/cpuinfo``), ``cpu_count``, ``torch_threads`` (the intra-op threads the run used),
  ``torch_cpu_capability`` (``AVX512``, ``AVX2``, ...: the kernels torch dispatches to), ``cuda`` and
  ``gpu`` (``None`` on the CPU);
* ``commit``: the project's git commit (``+dirty`` with uncommitted changes; ``None`` outside a checkout);
* ``distributions``: name -> version of every distribution Python sees, not only the project's
  declared requirements. Optional imports change behaviour too (transformers and accelerate switch
  code paths on what is installed: safetensors, deepspeed, bitsandbytes, ...), the environment's
  199 names cost about 10 KB, and ``importlib.metadata.version(name)`` gives the same version for each.
"""

from __future__ import annotations

import importlib.metadata
import os
import platform
import subprocess
from pathlib import Path
from typing import Any

import torch

_SOURCE = Path(__file__).resolve().parents[2]  # the checkout (or site-packages) holding the rltf package


def cpu_model() -> str:
    """The CPU's model name with its family / model / stepping (a hypervisor may show only "AMD EPYC")."""
    fields: dict[str, str] = {}
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            key, _, value = line.partition(":")
            key = key.strip()
            if not key and fields:
                break  # the first processor's block is enough
            if key in ("model name", "cpu family", "model", "stepping") and key not in fields:
                fields[key] = value.strip()
    except OSError:
        pass
    name = fields.get("model name") or platform.processor() or platform.machine() or "unknown"
    ids = ", ".join(f"{k} {fields[k]}" for k in ("cpu family", "model", "stepping") if k in fields)
    return f"{name} ({ids})" if ids else name


def distributions() -> dict[str, str]:
    """Every installed distribution's name -> version, sorted by name; where one is installed twice,
    the one ``importlib.metadata.version`` reports (the first on ``sys.path``)."""
    out: dict[str, str] = {}
    for dist in importlib.metadata.distributions():
        name = dist.metadata["Name"]
        if name:
            out.setdefault(name, dist.version)
    return dict(sorted(out.items(), key=lambda kv: kv[0].lower()))


def git_commit(folder: Path = _SOURCE) -> str | None:
    """The checkout's commit, ``+dirty`` when tracked files differ from it; ``None`` outside a git checkout."""
    try:
        head = subprocess.run(["git", "rev-parse", "HEAD"], cwd=folder, capture_output=True, text=True, timeout=10)
        if head.returncode != 0:
            return None
        dirty = subprocess.run(["git", "status", "--porcelain", "--untracked-files=no"], cwd=folder,
                               capture_output=True, text=True, timeout=10)
    except (OSError, subprocess.SubprocessError):
        return None
    return head.stdout.strip() + ("+dirty" if dirty.returncode == 0 and dirty.stdout.strip() else "")


def environment() -> dict[str, Any]:
    """The machine, the threads and every installed version (``results.json``'s ``environment``)."""
    gpu = torch.cuda.get_device_name(0) if torch.cuda.is_available() else None
    return {"python": platform.python_version(), "platform": platform.platform(), "cpu": cpu_model(),
            "cpu_count": os.cpu_count(), "torch_threads": torch.get_num_threads(),
            "torch_cpu_capability": torch.backends.cpu.get_cpu_capability(), "cuda": torch.version.cuda,
            "gpu": gpu, "commit": git_commit(), "distributions": distributions()}
