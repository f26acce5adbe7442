"""Running a comparison suite: every (arm, seed) as its own process, resumable.

:func:`run_suite` runs every arm for every seed, one subprocess each (``python <script>
<common> <overrides> <extra> seed=<k> output_dir=<root>/<arm> run_name=seed<k> overwrite=true``),
into ``<output_dir>/<name>/<arm>/seed<k>/`` with its log beside it (``seed<k>.log``) and
``seed<k>.run.json`` (the arguments, wall time, exit status). It is resumable: a run whose results
file exists is not run again (its recorded arguments must be the same: a changed suite refuses
rather than mixing runs). Seeds go in the outer loop, so an interrupted comparison has every arm
for the first seeds. A failed run is reported and the others go on. Stopping the comparison
(SIGTERM, SIGINT, SIGHUP) stops the run in progress first (:func:`run_forwarding_signals`).
A comparison that dies without a chance to do so (SIGKILL, the OOM killer) takes its run with it:
on Linux each run is started with ``prctl(PR_SET_PDEATHSIG, SIGKILL)`` (:func:`die_with_parent`),
so the kernel kills it when the comparison dies and a restart never finds its run folder held by
an orphan. (SIGKILL rather than SIGTERM: a run that traps SIGTERM and hangs would keep the folder's
lock. Processes the run itself starts are its own to stop. Elsewhere than Linux nothing is set.)
"""

from __future__ import annotations

import contextlib
import ctypes
import json
import os
import resource
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path

from common.atomic import write_atomic
from rltf.comparison.suites import Arm, Suite
from rltf.config.loading import REPO_ROOT, ConfigError

PLANNER_FILE = "rltf_planner.json"  # a saved planner's marker (rltf.planners.planner's; not imported: torch, peft)


def print_flushed(msg: str) -> None:
    """The comparison's default log: a line on stdout, at once (runs take minutes)."""
    print(msg, flush=True)


@dataclass
class RunRecord:
    """One (arm, seed) run: where it is and how it went."""

    arm: str
    seed: int
    run_dir: str
    status: str  # done | reused | failed | missing
    wall_s: float | None = None
    returncode: int | None = None
    error: str | None = None
    cpu_s: float | None = None  # user + system CPU seconds of the run's processes (fairer on a shared machine)


def dir_arg(path: Path) -> Path:
    """A folder as an argument of a run started in the repository: relative to it when inside it
    (the recorded arguments then survive moving the checkout)."""
    path = Path(path)
    try:
        return path.resolve().relative_to(REPO_ROOT)
    except ValueError:
        return path


def run_record_path(arm_dir: Path, seed: int) -> Path:
    """``seed<k>.run.json`` beside the run folder: its arguments, wall and CPU time, exit status."""
    return arm_dir / f"seed{seed}.run.json"


def run_one(suite: Suite, arm: Arm, seed: int, root: Path, extra: Sequence[str] = (), *,
            python: str = sys.executable, log: Callable[[str], None] = print_flushed,
            env: dict[str, str] | None = None) -> RunRecord:
    """Run ``arm`` for ``seed`` into ``root/<arm>/seed<seed>`` unless its results file is there."""
    arm_dir = root / arm.name
    run_dir = arm_dir / f"seed{seed}"
    args = arm.command(suite.common, extra, seed, dir_arg(arm_dir))
    record_file = run_record_path(arm_dir, seed)
    if (run_dir / arm.results).is_file():
        recorded = json.loads(record_file.read_text()) if record_file.is_file() else None
        if recorded is not None and recorded.get("args") != args:
            raise ConfigError(
                f"{run_dir} was run with other arguments ({' '.join(recorded.get('args') or [])}) than the suite "
                f"now gives ({' '.join(args)}); compare under another name=..., or delete {run_dir} to rerun it")
        log(f"[{arm.name} seed {seed}] done already: {run_dir / arm.results}")
        return RunRecord(arm.name, seed, str(run_dir), "reused",
                         wall_s=recorded.get("wall_s") if recorded else None,
                         returncode=recorded.get("returncode") if recorded else None,
                         cpu_s=recorded.get("cpu_s") if recorded else None)
    arm_dir.mkdir(parents=True, exist_ok=True)
    log_file = arm_dir / f"seed{seed}.log"
    if arm.start_from is not None and not (arm.start_dir(arm_dir, seed) / PLANNER_FILE).is_file():
        error = (f"no fine-tuned planner at {arm.start_dir(arm_dir, seed)} to start from (arm {arm.start_from} "
                 f"seed {seed} failed or has not run)")
        log(f"[{arm.name} seed {seed}] FAILED: {error}")
        return RunRecord(arm.name, seed, str(run_dir), "failed", error=error)
    log(f"[{arm.name} seed {seed}] {python} {' '.join(args)}  (log: {log_file})")
    t0, r0 = time.perf_counter(), resource.getrusage(resource.RUSAGE_CHILDREN)
    with open(log_file, "w") as out:
        proc = run_forwarding_signals([python, *args], cwd=REPO_ROOT, stdout=out, stderr=subprocess.STDOUT,
                                      env={**os.environ, **(env or {})})
    wall, r1 = time.perf_counter() - t0, resource.getrusage(resource.RUSAGE_CHILDREN)
    cpu = (r1.ru_utime - r0.ru_utime) + (r1.ru_stime - r0.ru_stime)
    ok = proc.returncode == 0 and (run_dir / arm.results).is_file()
    record = RunRecord(arm.name, seed, str(run_dir), "done" if ok else "failed", wall, proc.returncode, cpu_s=cpu)
    if not ok:
        tail = log_file.read_text(errors="replace").strip().splitlines()[-5:]
        record.error = " | ".join(tail) or f"exit status {proc.returncode}"
        log(f"[{arm.name} seed {seed}] FAILED (exit {proc.returncode}, {wall:.0f}s): {record.error}")
    else:
        log(f"[{arm.name} seed {seed}] done in {wall:.0f}s ({cpu:.0f} CPU s)")
    write_atomic(record_file, json.dumps({"args": args, "wall_s": wall, "cpu_s": cpu, "returncode": proc.returncode},
                                         indent=1))
    return record


FORWARDED_SIGNALS = (signal.SIGTERM, signal.SIGINT, signal.SIGHUP)
PR_SET_PDEATHSIG = 1  # <linux/prctl.h>


def die_with_parent() -> Callable[[], None] | None:
    """A ``preexec_fn`` (run in the child between fork and exec) asking the kernel to SIGKILL the child
    when this process dies, however it dies; None where that is not available (not Linux). libc is
    loaded here, before the fork: the child only calls into it. If this process died before the
    request took effect (the child was already re-parented), the child kills itself."""
    if not sys.platform.startswith("linux"):
        return None
    try:
        prctl = ctypes.CDLL(None, use_errno=True).prctl
    except (OSError, AttributeError):
        return None
    parent = os.getpid()

    def preexec() -> None:
        prctl(PR_SET_PDEATHSIG, signal.SIGKILL, 0, 0, 0)
        if os.getppid() != parent:
            os.kill(os.getpid(), signal.SIGKILL)

    return preexec


def run_forwarding_signals(command: Sequence[str], **popen_kwargs) -> subprocess.CompletedProcess:
    """``subprocess.run(command)``, but a SIGTERM / SIGINT / SIGHUP sent to this process is passed on
    to the child's process group (the run and whatever it started) and this process waits for the
    child to end before it stops too (SIGINT: ``KeyboardInterrupt``; the others: exit status
    128 + signal). So a restarted comparison never races an orphan still writing the same run
    folder. A second signal kills the child's group (SIGKILL) for a child that does not stop. Should
    this process die without forwarding (SIGKILL, OOM), the kernel kills the child (:func:`die_with_parent`)."""
    proc = subprocess.Popen(list(command), start_new_session=True, preexec_fn=die_with_parent(),  # noqa: PLW1509
                            **popen_kwargs)  # its own group
    received: list[int] = []

    def forward(signum, frame):  # noqa: ARG001 - signal handler signature
        received.append(signum)
        with contextlib.suppress(ProcessLookupError):
            os.killpg(proc.pid, signum if len(received) == 1 else signal.SIGKILL)

    main_thread = threading.current_thread() is threading.main_thread()  # handlers: main thread only
    previous = {sig: signal.signal(sig, forward) for sig in FORWARDED_SIGNALS} if main_thread else {}
    try:
        while True:
            try:
                returncode = proc.wait()
                break
            except KeyboardInterrupt:  # (only if SIGINT's handler was not ours) forward it, keep waiting
                forward(signal.SIGINT, None)
    finally:
        for sig, handler in previous.items():
            signal.signal(sig, handler)
    if received:
        if received[0] == signal.SIGINT:
            raise KeyboardInterrupt
        raise SystemExit(128 + received[0])
    return subprocess.CompletedProcess(proc.args, returncode)


def run_suite(suite: Suite, root: Path, extra: Sequence[str] = (), *, seeds: Sequence[int] | None = None,
              arms: Sequence[str] | None = None, log: Callable[[str], None] = print_flushed,
              env: dict[str, str] | None = None) -> list[RunRecord]:
    """Every (seed, arm) run, seeds in the outer loop; runs whose results exist are reused."""
    return [run_one(suite, a, s, root, extra, log=log, env=env) for s, a in planned_runs(suite, seeds, arms)]


def planned_runs(suite: Suite, seeds: Sequence[int] | None = None,
                 arms: Sequence[str] | None = None) -> list[tuple[int, Arm]]:
    """The (seed, arm) pairs a comparison runs, seeds in the outer loop: the chosen ``arms`` (None:
    all; with the arms they start from, :attr:`Arm.start_from`) for the chosen ``seeds`` (None: the suite's),
    in the suite's order, an arm with its own ``seeds`` only below it."""
    seeds = list(range(suite.seeds)) if seeds is None else list(seeds)
    wanted = set(suite.arms_needed(arms))
    chosen = [a for a in suite.arms if a.name in wanted]
    return [(s, a) for s in seeds for a in chosen if a.seeds is None or s < a.seeds]
