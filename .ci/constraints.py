"""Write ``constraints.txt``: every distribution the project's install resolved to here, pinned (issue 38, item 9).

    python .ci/constraints.py            # after installing as the README says: rewrites constraints.txt
    python .ci/constraints.py --print    # the same text on stdout, the file untouched

It walks the installed project's requirements (``rltf`` with the extras in :data:`EXTRAS`) and theirs,
recursively, markers evaluated for this Python and platform, and pins each distribution found to its
installed version. Distributions that are installed but that the project does not need (tools of the
machine, IPython, ...) are left out; a requirement whose marker holds but that is not installed is an
error (install first). A local version label is dropped (``torch 2.13.0+cpu`` -> ``torch==2.13.0``):
under PEP 440 ``==2.13.0`` accepts ``2.13.0+cpu`` and ``2.13.0+cu128`` alike, so the same file
serves the CPU wheel and a CUDA user's torch (whose ``nvidia-*`` / ``cuda-*`` / ``triton`` dependencies
torch itself pins exactly; :data:`UNPINNED` leaves ``triton`` out for that reason).
"""

from __future__ import annotations

import argparse
import importlib.metadata
import re
import sys
from pathlib import Path

from packaging.requirements import Requirement

REPO = Path(__file__).resolve().parents[1]
OUT = REPO / "constraints.txt"
PROJECT = "rltf"
EXTRAS = ("dev", "docs", "bench")  # .[hf] (diffusers, timm) is for the GPU machine: installed there, unpinned
# left unpinned, and why: a pin here would refuse a CUDA torch 2.13.0, which requires triton==3.7.1 itself
# (here triton comes only with xgrammar, whose GPU kernels the CPU never runs)
UNPINNED = {"triton": "a CUDA torch pins its own (2.13.0: triton==3.7.1); here only xgrammar's GPU kernels need it"}

HEADER = """\
# Every distribution `pip install -e ".[dev,docs,bench]"` resolves to, pinned: the versions the tests
# pass with and the README's figures were measured with (Python {python}, {platform}).
# Use it with every install, as the README and .ci/run do:
#   pip install torch==2.13.0 -c constraints.txt
#   pip install -e ".[dev]" -c constraints.txt
# torch==2.13.0 accepts the CPU wheel (2.13.0+cpu) and a CUDA wheel (2.13.0+cu128) alike (PEP 440 ignores a
# local label the pin does not name); a CUDA torch's nvidia-*/cuda-*/triton pins come from torch itself.
# Other Pythons (3.10, 3.13) may lack wheels for some pins: drop -c there, and expect other figures.
# Regenerate after changing a dependency: python .ci/constraints.py
# Not pinned: .[hf] (diffusers, timm: the GPU machine's){unpinned}
"""


def normalise(name: str) -> str:
    """PEP 503: runs of -, _ and . are one -, lower case."""
    return re.sub(r"[-_.]+", "-", name).lower()


def _installed() -> dict[str, importlib.metadata.Distribution]:
    out: dict[str, importlib.metadata.Distribution] = {}
    for dist in importlib.metadata.distributions():
        if dist.metadata["Name"]:
            out.setdefault(normalise(dist.metadata["Name"]), dist)  # the first on sys.path, as imports see it
    return out


def resolved(project: str = PROJECT, extras: tuple[str, ...] = EXTRAS) -> dict[str, str]:
    """Name (as its metadata spells it) -> installed version of every distribution the project needs."""
    installed = _installed()
    if normalise(project) not in installed:
        raise SystemExit(f"{project} is not installed: pip install -e \".[{','.join(extras)}]\" first")
    pins: dict[str, str] = {}
    todo: list[tuple[str, frozenset[str]]] = [(normalise(project), frozenset(extras))]
    seen: set[tuple[str, frozenset[str]]] = set()
    missing: list[str] = []
    while todo:
        key, wanted = todo.pop()
        if (key, wanted) in seen:
            continue
        seen.add((key, wanted))
        dist = installed[key]
        for line in dist.requires or []:
            req = Requirement(line)
            if req.marker and not any(req.marker.evaluate({"extra": e}) for e in ("", *wanted)):
                continue
            name = normalise(req.name)
            if name not in installed:
                missing.append(f"{req} (required by {dist.metadata['Name']})")
                continue
            todo.append((name, frozenset(req.extras)))
    for key, _ in seen:
        if key != normalise(project) and key not in UNPINNED:
            dist = installed[key]
            pins[dist.metadata["Name"]] = dist.version
    if missing:
        raise SystemExit("required but not installed:\n  " + "\n  ".join(sorted(set(missing))))
    return dict(sorted(pins.items(), key=lambda kv: normalise(kv[0])))


def render(pins: dict[str, str]) -> str:
    unpinned = "".join(f"\n#   {name}: {why}" for name, why in UNPINNED.items())
    lines = [HEADER.format(python=".".join(map(str, sys.version_info[:2])), platform=sys.platform,
                           unpinned=unpinned)]
    for name, version in pins.items():
        public, _, local = version.partition("+")
        lines.append(f"{name}=={public}" + (f"  # installed here as {version}" if local else ""))
    return "\n".join(lines) + "\n"


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--print", action="store_true", help="write to stdout instead of constraints.txt")
    args = ap.parse_args(argv)
    text = render(resolved())
    if args.print:
        sys.stdout.write(text)
    else:
        OUT.write_text(text)
        pinned = sum(1 for line in text.splitlines() if "==" in line and not line.startswith("#"))
        print(f"wrote {OUT.relative_to(REPO)} ({pinned} pins)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
