"""Several command lines of the ``train/<recipe>.py`` scripts in ONE child Python process.

A recipe's refusals (a bad value, a dry run) are each a whole process start (~8 s of imports) for
well under a second of work. :func:`run_recipes` starts one ``python`` that executes the recipe
files' module code (as ``python train/<recipe>.py`` does; their ``__main__`` block is
``run_cli(main)``), then runs each command line as that block would: ``run_cli(main, args)``, its
output captured at the file descriptors (1 and 2: warnings, C-level writes and all) and its exit
status as the process's would be (a ``SystemExit``'s code; an escaping exception: its traceback
and 1). The recipe imports' own output is a case too (``startup``), so a test can check that nothing
but the one line is printed. Only for command lines that stop before anything is built: they share
the process's modules and caches."""

from __future__ import annotations

import json
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]

DRIVER = r"""
import json, os, runpy, sys, tempfile, traceback

root, cases = sys.argv[1], json.loads(sys.argv[2])
mains = {}


def captured(fn):
    sys.stdout.flush(); sys.stderr.flush()
    saved = os.dup(1), os.dup(2)
    with tempfile.TemporaryFile() as out, tempfile.TemporaryFile() as err:
        os.dup2(out.fileno(), 1); os.dup2(err.fileno(), 2)
        code = 0
        try:
            fn()
        except SystemExit as e:
            code = e.code if isinstance(e.code, int) else (0 if e.code is None else 1)
        except BaseException:
            traceback.print_exc(); code = 1
        finally:
            sys.stdout.flush(); sys.stderr.flush()
            os.dup2(saved[0], 1); os.dup2(saved[1], 2)
            os.close(saved[0]); os.close(saved[1])
        out.seek(0); err.seek(0)
        return {"returncode": code, "stdout": out.read().decode(errors="replace"),
                "stderr": err.read().decode(errors="replace")}


def load():
    for script in dict.fromkeys(s for s, _ in cases):
        mains[script] = runpy.run_path(os.path.join(root, "train", script), run_name="__recipe__")["main"]


results = [captured(load)]
if results[0]["returncode"] == 0:
    from rltf.run.cli import run_cli  # what every recipe's __main__ block calls

    for script, args in cases:
        sys.argv = [os.path.join("train", script), *args]
        results.append(captured(lambda: run_cli(mains[script], args)))
print("RESULTS " + json.dumps(results))
"""


@dataclass
class Done:
    """One command line's outcome, as ``subprocess.CompletedProcess`` would give it."""

    returncode: int
    stdout: str
    stderr: str


def run_recipes(cases: list[tuple[str, list[str]]], env: dict[str, str], timeout: int = 600) -> tuple[Done, list[Done]]:
    """``(startup, [one Done per (script, args)])``: ``script`` is a file name under ``train/``;
    ``startup`` is what importing the recipes printed."""
    proc = subprocess.run([sys.executable, "-c", DRIVER, str(ROOT), json.dumps(cases)], cwd=ROOT, env=env,
                          capture_output=True, text=True, timeout=timeout)
    assert proc.returncode == 0, proc.stderr[-3000:]
    line = next(x for x in proc.stdout.splitlines() if x.startswith("RESULTS "))
    startup, *done = (Done(**r) for r in json.loads(line.removeprefix("RESULTS ")))
    assert startup.returncode == 0, startup.stderr[-3000:]  # a recipe that cannot even be imported
    return startup, done
