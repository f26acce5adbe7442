"""Issue 38 item 3: a flow backend that answers, then dies / hangs / sends huge answers, through the
openai backend and ``python -m rltf.flows.evaluate`` as a subprocess (a real HTTP server on 127.0.0.1):
a backend failing too often ends the run with one error line and exit status 2 after the table is
written with the failed queries marked; a hung server is reported within seconds of its timeouts
(the shipped configs: ~2 minutes); huge answers are cut, so the traces stay small. The first test runs
the command as a subprocess (the exit status and the one stderr line of the real command); the others
call its ``run_cli(main, args)`` in this process (what its ``__main__`` block runs, its exit status
from the ``SystemExit``): the same code path without ~9 CPU s of imports each (issue #52 item 2)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import threading
import time

import pytest

from tests.chat_server import ChatServer, chat_completion
from tests.two_processes import ROOT, child_env

pytestmark = pytest.mark.usefixtures("one_torch_thread")


class _Server(ChatServer):
    """An OpenAI-compatible endpoint that answers ``answers`` requests (``"?"``, or ``size``
    characters), then ``after``: ``die`` (the server shuts down: connections refused) or ``hang``
    (requests are read and never answered)."""

    def __init__(self, answers: int, after: str = "die", size: int = 1):
        self.answers, self.after, self.size = answers, after, size
        self.released = threading.Event()

        def respond(_headers, n):
            if n > self.answers:
                if self.after == "hang":
                    self.released.wait(120)
                else:
                    threading.Thread(target=self.close, daemon=True).start()
                return None
            return 200, chat_completion("?" if self.size == 1 else "x" * self.size)

        super().__init__(respond)

    def close(self):
        self.released.set()
        super().close()


ENDPOINT_ENV = {"HARDENING_KEY": "sk-test", "NO_PROXY": "127.0.0.1,localhost", "no_proxy": "127.0.0.1,localhost"}


def _args(tmp_path, url: str, *extra: str) -> list[str]:
    return ["config=configs/travel-mtp-openai.yaml", f"output_dir={tmp_path}", "run_name=ev", "env.travel.days=[3]",
            f"flow.backend.base_url={url}", "flow.backend.model=m", "flow.backend.api_key_env=HARDENING_KEY",
            "flow.oracle=false", "flow.trace_queries=0", "flow.mtp.supervisor=template", "flow.select=first", *extra]


def _evaluate(tmp_path, url: str, *extra: str, timeout: float = 300) -> tuple[subprocess.CompletedProcess, float]:
    env = {**child_env(), **ENDPOINT_ENV, "HF_HUB_OFFLINE": "1", "TRANSFORMERS_OFFLINE": "1"}
    args = _args(tmp_path, url, *extra)
    t0 = time.monotonic()
    proc = subprocess.run([sys.executable, "-m", "rltf.flows.evaluate", *args], cwd=ROOT, env=env,
                          capture_output=True, text=True, timeout=timeout)
    return proc, time.monotonic() - t0


@pytest.fixture
def evaluate_here(monkeypatch, capsys):
    """``python -m rltf.flows.evaluate`` without the process: its ``__main__`` block,
    ``run_cli(main, args)``, called here; a ``CompletedProcess`` of its exit status and output (the
    torch threads and transformers' verbosity that ``main`` sets are put back)."""
    import torch
    from transformers.utils import logging as hf_logging

    from rltf.flows.evaluate import main
    from rltf.run.cli import run_cli

    for key, value in ENDPOINT_ENV.items():
        monkeypatch.setenv(key, value)
    monkeypatch.chdir(ROOT)
    threads, verbosity = torch.get_num_threads(), hf_logging.get_verbosity()

    def run(tmp_path, url: str, *extra: str) -> subprocess.CompletedProcess:
        args = _args(tmp_path, url, *extra)
        capsys.readouterr()
        try:
            run_cli(main, args)
            code = 0
        except SystemExit as e:
            code = e.code if isinstance(e.code, int) else (0 if e.code is None else 1)
        finally:
            torch.set_num_threads(threads)
            hf_logging.set_verbosity(verbosity)
        out = capsys.readouterr()
        return subprocess.CompletedProcess(args, code, out.out, out.err)

    return run


def _error_lines(proc: subprocess.CompletedProcess) -> list[str]:
    return [line for line in proc.stderr.splitlines() if line.startswith("error:")]


def test_a_backend_that_dies_mid_run_ends_it_with_exit_2_and_the_failed_queries_marked(tmp_path):
    server = _Server(answers=3, after="die")  # query 1's node is answered (3 attempts), then the server is gone
    try:
        proc, _ = _evaluate(tmp_path, server.url, "flow.limit=6")
    finally:
        server.close()
    assert proc.returncode == 2, proc.stderr[-3000:]
    errors = _error_lines(proc)
    assert len(errors) == 1 and "stopped answering" in errors[0], proc.stderr[-3000:]
    summary = json.loads((tmp_path / "ev" / "flow_eval.json").read_text())
    ids = summary["queries"]
    failed = summary["backend_errors"]["mtp"]["failed_queries"]
    assert failed == ids[1:], (failed, ids)  # queries 2-3 failed, 4-6 were not run: all marked
    assert [r.get("not_run", False) for r in summary["results"]["mtp"]] == [False] * 3 + [True] * 3
    md = (tmp_path / "ev" / "flow_eval.md").read_text()
    assert "| mtp (backend failed 5/6) |" in md and "**backend failures**" in md and "**stopped**" in md


def test_a_hung_backend_is_reported_within_its_timeouts(tmp_path, evaluate_here):
    server = _Server(answers=3, after="hang")
    try:
        proc = evaluate_here(tmp_path, server.url, "flow.limit=6", "flow.backend.timeout=1")
    finally:
        server.close()
    assert proc.returncode == 2, proc.stderr[-3000:]
    assert len(_error_lines(proc)) == 1 and "stopped answering" in _error_lines(proc)[0]
    # two queries of 3 timed-out calls each, then it stopped (not 6 queries x 5 calls x timeout); counted,
    # not timed: the wall clock of a shared machine proves nothing
    assert server.requests == 3 + 2 * 3


def test_a_backend_failing_on_more_than_the_share_of_calls_ends_the_run(tmp_path, evaluate_here):
    server = _Server(answers=3, after="die")
    try:  # a streak of 2 would stop it too: the share (checked after the method) is what ends it here
        proc = evaluate_here(tmp_path, server.url, "flow.limit=2", "flow.backend.max_failed_share=0.3")
    finally:
        server.close()
    assert proc.returncode == 2, proc.stderr[-3000:]
    errors = _error_lines(proc)
    assert len(errors) == 1 and "failed on 3 of 6 calls of mtp" in errors[0], errors
    assert "flow.backend.max_failed_share=0.3" in errors[0]
    md = (tmp_path / "ev" / "flow_eval.md").read_text()
    assert "| mtp (backend failed 1/2) |" in md


def test_huge_answers_are_cut_so_traces_stay_small(tmp_path, evaluate_here):
    server = _Server(answers=10**6, size=5_000_000)  # 5 MB per answer
    try:
        proc = evaluate_here(tmp_path, server.url, "flow.limit=2", "flow.trace_queries=2")  # max_answer_chars: 20000
    finally:
        server.close()
    assert proc.returncode == 0, proc.stderr[-3000:]
    traces = list((tmp_path / "ev" / "traces" / "mtp").glob("*.json"))
    assert len(traces) == 2
    sizes = [os.path.getsize(t) for t in traces]
    assert max(sizes) < 1_000_000, sizes  # 3 attempts x (answer + the answers repeated in the retry prompts)


def test_the_shipped_openai_configs_report_a_hung_server_within_about_two_minutes():
    from rltf.flows.engine.config import Backoff
    from rltf.flows.evaluate import load_flow_config
    from rltf.flows.evaluation import FAIL_FAST_QUERIES

    for name in ("mtp", "okr", "react"):
        _, flow = load_flow_config([f"config=configs/travel-{name}-openai.yaml"])
        b, backoff = flow.backend, Backoff(max_attempts=flow.backend.call_attempts)
        per_query = b.call_attempts * b.timeout + sum(backoff.delay(i) for i in range(b.call_attempts - 1))
        assert FAIL_FAST_QUERIES * per_query <= 130, (name, per_query)
        assert 0 < b.max_failed_share < 1 and b.max_answer_chars <= 100_000
