"""Issue 25: a dead or broken OpenAI-compatible endpoint (a real HTTP server on 127.0.0.1) stops a
flow evaluation with one error line naming it, or is counted in the summary; the client's
connect and read timeouts."""

from __future__ import annotations

import json
import socket
import time

import pytest

from rltf.run.cli import run_cli
from tests.chat_server import ChatServer, chat_completion

pytestmark = pytest.mark.usefixtures("one_torch_thread")


class _Endpoint(ChatServer):
    """An OpenAI-compatible endpoint on 127.0.0.1 that answers 500 to the first ``failures``
    requests (all of them: -1), then a chat completion whose text is ``answer``."""

    def __init__(self, failures: int = -1, answer: str = "?"):
        self.failures, self.answer = failures, answer

        def respond(_headers, n):
            if self.failures < 0 or n <= self.failures:
                return 500, {"error": {"message": "the model crashed", "type": "server_error"}}
            return 200, chat_completion(self.answer)

        super().__init__(respond)


@pytest.fixture
def openai_env(monkeypatch):
    from rltf.flows.engine.config import Backoff

    monkeypatch.setenv("HARDENING_KEY", "sk-test")
    monkeypatch.setenv("NO_PROXY", "127.0.0.1,localhost")
    monkeypatch.setenv("no_proxy", "127.0.0.1,localhost")
    monkeypatch.setattr(Backoff, "delay", lambda self, failure: 0.0)  # retries at once (the count is the same)


def _flow_args(tmp_path, url: str, limit: int) -> list[str]:
    return ["config=configs/travel-mtp-openai.yaml", f"output_dir={tmp_path}", "run_name=ev", "env.travel.days=[3]",
            f"flow.backend.base_url={url}", "flow.backend.model=m", "flow.backend.api_key_env=HARDENING_KEY",
            f"flow.limit={limit}", "flow.oracle=false", "flow.trace_queries=0", "flow.mtp.supervisor=template"]


def test_a_dead_endpoint_stops_the_flow_evaluation_with_one_error_line_naming_it(tmp_path, openai_env, capsys):
    from rltf.flows.evaluate import main

    server = _Endpoint(failures=-1)
    try:
        with pytest.raises(SystemExit) as stop:
            run_cli(main, _flow_args(tmp_path, server.url, limit=4))
    finally:
        server.close()
    assert stop.value.code == 2
    lines = capsys.readouterr().err.strip().splitlines()
    err = [line for line in lines if not line.startswith("flow mtp:")]  # (the evaluation's progress lines)
    assert len(err) == 1 and err[0].startswith("error: the backend OpenAIBackend('m'"), lines
    assert f"at {server.url} failed on every call of the first 2 queries" in err[0]
    assert "last: InternalServerError" in err[0] and "the model crashed" in err[0]
    assert server.requests == 2 * 3  # two queries, each one node's 3 calls (call_attempts): not all 4 queries
    assert not (tmp_path / "ev" / "flow_eval.json").exists()  # no all-zero table


def test_backend_errors_of_a_flaky_endpoint_are_printed_in_the_summary(tmp_path, openai_env):
    import envs
    from rltf.flows.evaluate import load_flow_config
    from rltf.flows.evaluation import evaluate_flows

    server = _Endpoint(failures=2, answer="not an option")  # two 500s, then answers (never a valid one)
    cfg, flow = load_flow_config([*_flow_args(tmp_path, server.url, limit=2),
                                  "flow.backend.max_failed_share=1"])  # counted, never fatal
    lines: list[str] = []
    try:
        summary = evaluate_flows(cfg, flow, envs_pair=envs.make_train_and_held_out(cfg.env), log=lines.append)
    finally:
        server.close()
    assert summary["backend_errors"]["mtp"]["failed_calls"] == 2 and summary["backend_errors"]["mtp"]["queries"] == 1
    printed = [line for line in lines if line.startswith("mtp: backend errors:")]
    assert printed and "2 failed call(s) in 1 of 2 queries" in printed[0] and "InternalServerError" in printed[0]
    records = json.loads((tmp_path / "ev" / "flow_eval.json").read_text())["results"]["mtp"]
    assert records[0]["backend_failures"] == 2 and records[1]["backend_failures"] == 0


def test_the_openai_client_connects_with_a_short_timeout_and_reads_with_the_long_one(openai_env):
    import httpx

    from rltf.flows.backends.openai_chat import OpenAIBackend

    timeout = OpenAIBackend("m", "http://127.0.0.1:9/v1", api_key_env="HARDENING_KEY", timeout=120).client.timeout
    assert isinstance(timeout, httpx.Timeout)
    assert (timeout.connect, timeout.read) == (10.0, 120.0)


def test_a_server_that_accepts_and_never_answers_fails_after_the_read_timeout(openai_env):
    from rltf.flows.backends.base import Sampling
    from rltf.flows.backends.openai_chat import OpenAIBackend

    silent = socket.socket()
    silent.bind(("127.0.0.1", 0))
    silent.listen(8)  # the kernel accepts connections; nobody ever answers
    try:
        backend = OpenAIBackend("m", f"http://127.0.0.1:{silent.getsockname()[1]}/v1", api_key_env="HARDENING_KEY",
                                timeout=1.0, sampling=Sampling(max_new_tokens=2))
        t0 = time.monotonic()
        with pytest.raises(Exception, match="timed out|Timeout"):
            backend.generate([[{"role": "user", "content": "hi"}]])
        assert time.monotonic() - t0 < 10
    finally:
        silent.close()
