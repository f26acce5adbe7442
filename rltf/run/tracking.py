"""Experiment tracking: wandb (offline without an API key), tensorboard or nothing, plus a plot;
the progress bars (:func:`progress_bar`, :func:`configure_progress_bars`): a long job (SFT, the
RLTF steps, held-out evaluation: a tick per chunk of tasks or flow queries) shows a bar on a
terminal, and plain lines at least every 30 s otherwise, with ``logging.progress_bar: false`` too.

Only the main process logs. ``report_to: wandb`` switches to ``WANDB_MODE=offline`` when no API
key is configured, so a run never dies for want of an account; sync it later with ``wandb sync``.
"""

from __future__ import annotations

import contextlib
import json
import os
import sys
import threading
import time
from pathlib import Path
from typing import Any

from tqdm.auto import tqdm
from transformers.utils import logging as hf_logging

from common.atomic import atomic_path, write_atomic
from common.errors import UserError


class Tracker:
    def __init__(self, report_to: str, run_dir: Path, run_name: str, config: dict[str, Any],
                 project: str = "rltf", enabled: bool = True):
        self.report_to = report_to if enabled else "none"
        self.run_dir = Path(run_dir)
        self.history: list[dict[str, Any]] = []
        self._wandb = self._tb = None
        if self.report_to == "wandb":
            import wandb  # optional: only with logging.report_to=wandb

            if not os.environ.get("WANDB_API_KEY") and not os.environ.get("WANDB_MODE"):
                os.environ["WANDB_MODE"] = "offline"
            self._wandb = wandb.init(project=project, name=run_name, dir=str(self.run_dir), config=config,
                                     reinit="finish_previous")
        elif self.report_to == "tensorboard":
            from torch.utils.tensorboard import SummaryWriter  # optional: only with logging.report_to=tensorboard

            self._tb = SummaryWriter(log_dir=str(self.run_dir / "tensorboard"))
        elif self.report_to != "none":
            raise ValueError(f"report_to={report_to!r}: expected none, wandb or tensorboard")

    def log(self, metrics: dict[str, float], step: int) -> None:
        row = {"step": step, **metrics}
        self.history.append(row)
        if self._wandb is not None:
            self._wandb.log(metrics, step=step)
        if self._tb is not None:
            for k, v in metrics.items():
                self._tb.add_scalar(k, v, step)

    def finish(self) -> None:
        if self._wandb is not None:
            self._wandb.finish()
        if self._tb is not None:
            self._tb.close()


def plot_rewards(history: list[dict[str, Any]], path: Path, title: str = "RLTF",
                 validation: list[dict[str, Any]] | None = None, selected_step: int | None = None,
                 diversity: list[dict[str, Any]] | None = None) -> Path:
    """PNG of the train reward (raw and smoothed) and the held-out score at each evaluation.
    ``validation``: rows ``{"step", "eval/<split>/score"}`` from step 0 (the starting planner's
    score, which the step rows of ``history`` lack), drawn in place of ``history``'s scores;
    ``selected_step``: the step whose planner the run handed on, marked on the curve;
    ``diversity``: rows ``{"step", "distinct_plans", "top_plan_prob", "entropy", ...}`` (the policy's
    diversity at each validation, ``rltf.evaluation.diversity.diversity_curve``), drawn in a second
    panel below."""
    import matplotlib  # plotting only, at the end of a run (Agg backend set first)

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt  # plotting only, at the end of a run (Agg backend set first)

    train = [(r["step"], r["train/reward"]) for r in history if "train/reward" in r]
    if diversity:
        fig, (ax, low) = plt.subplots(2, 1, figsize=(7, 7), sharex=True, height_ratios=(4, 3))
        _plot_diversity(low, diversity)
    else:
        fig, ax = plt.subplots(figsize=(7, 4))
    if train:
        xs, ys = zip(*train)
        ax.plot(xs, ys, alpha=0.3, color="C0", label="train reward (batch)")
        smooth, acc = [], None
        for y in ys:
            acc = y if acc is None else 0.9 * acc + 0.1 * y
            smooth.append(acc)
        ax.plot(xs, smooth, color="C0", label="train reward (EMA 0.9)")
    scored = validation or history
    for i, key in enumerate(sorted({k for r in scored for k in r if k.startswith("eval/") and k.endswith("/score")})):
        pts = [(r["step"], r[key]) for r in scored if key in r]
        xs, ys = zip(*pts)
        ax.plot(xs, ys, "o-", color=f"C{i + 1}", label=key.removeprefix("eval/").removesuffix("/score") + " score")
        chosen = [(x, y) for x, y in pts if x == selected_step]
        if chosen:
            ax.plot(*chosen[0], "*", markersize=14, color=f"C{i + 1}", label=f"selected (step {selected_step})")
    ax.set_xlabel("" if diversity else "RLTF step")  # (the diversity panel below names the shared axis)
    ax.set_ylabel("reward")
    ax.set_title(title)
    ax.grid(alpha=0.3)
    ax.legend(loc="lower right")
    fig.tight_layout()
    path = Path(path)
    with atomic_path(path) as tmp:
        fig.savefig(tmp, dpi=120, format="png")
    plt.close(fig)
    return path


def _plot_diversity(ax, rows: list[dict[str, Any]]) -> None:
    """The policy's diversity at each validation: the top plan's probability (left axis, 0-1), the
    entropy in nats (with its standard error) and the distinct plans among the samples (right axis)."""
    xs = [r["step"] for r in rows]
    ax.plot(xs, [r["top_plan_prob"] for r in rows], "s-", color="C3", label="top plan probability")
    ax.set_ylim(0, 1.02)
    ax.set_ylabel("probability")
    ax.set_xlabel("RLTF step")
    ax.grid(alpha=0.3)
    right = ax.twinx()
    entropy, se = [r["entropy"] for r in rows], [r.get("entropy_se", 0.0) for r in rows]
    right.errorbar(xs, entropy, yerr=se, fmt="o-", color="C4", capsize=3, label="entropy of π_c (nats)")
    right.plot(xs, [r["distinct_plans"] for r in rows], "^--", color="C5", label="distinct plans (mean per task)")
    right.set_ylabel("nats / plans")
    right.set_ylim(bottom=0)
    handles = [h for a in (ax, right) for h in a.get_legend_handles_labels()[0]]
    ax.legend(handles, [h.get_label() for h in handles], loc="upper right", fontsize="small")
    ax.set_title("validation: policy diversity", fontsize="medium")


class DamagedFileError(UserError, ValueError):
    """A file a run wrote earlier (results, histories, checkpoint state) that no longer reads:
    truncated, overwritten, or not what it should be. The message names the file and what to do."""


def write_json(path: Path, data: Any) -> None:
    write_atomic(path, json.dumps(data, indent=1, default=str) + "\n")


def read_json(path: str | os.PathLike, what: str) -> Any:
    """The JSON at ``path`` (``what`` it holds, for the message: "the zero/few-shot results");
    a :class:`DamagedFileError` naming the file when it is unreadable or not JSON. A missing file
    raises ``FileNotFoundError`` as usual (callers usually check for it first)."""
    path = Path(path)
    try:
        return json.loads(path.read_text(encoding="utf-8"))
    except FileNotFoundError:
        raise
    except (OSError, UnicodeDecodeError, json.JSONDecodeError) as e:
        raise DamagedFileError(f"{path} ({what}) is damaged ({type(e).__name__}: {e}); delete it to have it "
                               "computed again") from None


def configure_progress_bars(enabled: bool, stream=None) -> bool:
    """Show the libraries' progress bars (transformers' "Loading weights" / "Writing model shards",
    huggingface_hub's downloads) only when ``enabled`` (``logging.progress_bar``) and ``stream``
    (default stderr, where tqdm draws) is a terminal: in a file every redraw is text, and a bar
    drawn under an open one (a checkpoint written during the rltf bar) leaves cursor-up codes
    and blank lines. Returns whether they show. Called by the ``train/`` recipes once the config
    is read."""
    stream = sys.stderr if stream is None else stream
    show = bool(enabled) and _is_terminal(stream)
    if show:
        hf_logging.enable_progress_bar()
    else:
        hf_logging.disable_progress_bar()  # (and huggingface_hub's)
    return show


def _is_terminal(stream) -> bool:
    return bool(getattr(stream, "isatty", lambda: False)())


PLAIN_PROGRESS_EVERY_S = 30.0
"""Seconds between the plain progress lines a bar prints when its output is not a terminal."""


class PlainProgressLines:
    """A file-like target for a tqdm bar whose output is not a terminal (a log file, a pipe): each
    redraw (``"\\r" + status``) becomes at most one plain line, at most one every ``every_s``
    seconds (the first and the closing status always), so a file holds a few readable lines, not
    hundreds of carriage-return redraws. ``clock``: seconds, for tests."""

    def __init__(self, stream, every_s: float = PLAIN_PROGRESS_EVERY_S, clock=time.monotonic):
        self.stream, self.every_s, self.clock = stream, every_s, clock
        self._pending = self._written = ""
        self._last: float | None = None

    def write(self, text: str) -> None:
        status = text.replace("\x1b[A", "").strip("\r\n").rstrip()
        if status and "\r" not in status and "\n" not in status:
            self._pending = status
            if self._last is None or self.clock() - self._last >= self.every_s:
                self._emit()
        elif text.endswith("\n") and not status:  # tqdm closing a bar it leaves: its last status
            self._emit()

    def _emit(self) -> None:
        if self._pending and self._pending != self._written:
            self.stream.write(self._pending + "\n")
            self._written, self._last = self._pending, self.clock()

    def flush(self) -> None:
        getattr(self.stream, "flush", lambda: None)()


@contextlib.contextmanager
def kept_alive(bar):
    """While the block runs, ``bar`` (a :func:`progress_bar`) is redrawn from a daemon thread every sixth
    of :data:`PLAIN_PROGRESS_EVERY_S`: its elapsed time moves on a terminal, and as plain lines one is
    written at least every ~35 s even while a long piece of work (a chunk of held-out tasks) runs
    without a tick. The thread ends with the block, before the bar is closed."""
    if getattr(bar, "disable", False):  # (another process's bar: nothing to redraw)
        yield bar
        return
    every = max(0.01, PLAIN_PROGRESS_EVERY_S / 6)
    stop = threading.Event()

    def beat() -> None:
        while not stop.wait(every):
            bar.refresh()  # (under tqdm's lock, as the ticks of the block's thread are)

    beating = threading.Thread(target=beat, name=f"progress: {bar.desc}", daemon=True)
    beating.start()
    try:
        yield bar
    finally:
        stop.set()
        beating.join()


def progress_bar(iterable=None, *, desc: str, enabled: bool, main: bool, stream=None, **kwargs):
    """The progress of a long job ``desc`` on ``stream`` (default stderr), from the ``main`` process
    only (the others print nothing). With the bar ``enabled`` (``logging.progress_bar``) on a
    terminal: a tqdm bar redrawn in place; otherwise (a log file, a pipe, or the bar turned off)
    sparse plain ASCII lines, at most one every :data:`PLAIN_PROGRESS_EVERY_S` seconds
    (:class:`PlainProgressLines`), so a long job is never silent. ``kwargs`` go to tqdm
    (``total``, ``initial``)."""
    stream = sys.stderr if stream is None else stream
    if not main or enabled and _is_terminal(stream):
        return tqdm(iterable, desc=desc, disable=not main, file=stream, **kwargs)
    # (the interval read now, not when the class was defined: a test may shorten it)
    return tqdm(iterable, desc=desc, file=PlainProgressLines(stream, PLAIN_PROGRESS_EVERY_S), ascii=True, **kwargs)
