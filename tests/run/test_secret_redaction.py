"""Issue #52 item 3: an API key the run holds is never printed or written, whatever the server echoes.

A real OpenAI-compatible HTTP server on 127.0.0.1 (http.server in a thread) echoes the request's
``Authorization`` header: in a 401 error (the ``error:`` line, the traces) and in a chat answer (the
traces, the table). ``python -m rltf.flows.evaluate``'s ``main`` runs in process under ``run_cli``."""

from __future__ import annotations

from pathlib import Path

import pytest

from rltf.run.cli import run_cli
from tests.chat_server import ChatServer, chat_completion

pytestmark = pytest.mark.usefixtures("one_torch_thread")

KEY_ENV = "RLTF_ECHO_TEST_KEY"
KEY = "sk-echo-0123456789abcdef"


def _echoing_server(status: int) -> ChatServer:
    """Answers every chat completion with the request's Authorization header in it: a 401 error
    (``status=401``) or the answer's text (``status=200``)."""

    def respond(headers, _n):
        echoed = f"you sent Authorization: {headers.get('Authorization')}"
        if status == 401:
            return 401, {"error": {"message": f"invalid key; {echoed}", "type": "invalid_request_error"}}
        return 200, chat_completion(echoed)

    return ChatServer(respond)


@pytest.fixture
def key_env(monkeypatch):
    from common.held_secrets import forget_all
    from rltf.flows.engine.config import Backoff

    monkeypatch.setenv(KEY_ENV, KEY)
    monkeypatch.setenv("NO_PROXY", "127.0.0.1,localhost")
    monkeypatch.setenv("no_proxy", "127.0.0.1,localhost")
    monkeypatch.setattr(Backoff, "delay", lambda self, failure: 0.0)  # retries at once
    yield
    forget_all()


def _flow_args(tmp_path, url: str) -> list[str]:
    return ["config=configs/travel-mtp-openai.yaml", f"output_dir={tmp_path}", "run_name=ev", "env.travel.days=[3]",
            f"flow.backend.base_url={url}", "flow.backend.model=m", f"flow.backend.api_key_env={KEY_ENV}",
            "flow.limit=2", "flow.oracle=false", "flow.trace_queries=2", "flow.mtp.supervisor=template",
            "flow.backend.max_failed_share=1"]


def _files_holding_the_key(folder: Path) -> list[str]:
    return [str(p) for p in folder.rglob("*") if p.is_file() and KEY.encode() in p.read_bytes()]


def test_a_server_echoing_the_key_in_its_error_never_gets_it_printed_or_written(tmp_path, key_env, capsys):
    from rltf.flows.evaluate import main

    server = _echoing_server(401)
    try:
        with pytest.raises(SystemExit) as stop:
            run_cli(main, [*_flow_args(tmp_path, server.url), "flow.backend.max_failed_share=0"])
    finally:
        server.close()
    assert stop.value.code == 2 and server.requests > 0
    out, err = capsys.readouterr()
    assert KEY not in out and KEY not in err
    (line,) = [x for x in err.splitlines() if x.startswith("error:")]
    assert f"you sent Authorization: Bearer [redacted ${KEY_ENV}]" in line, line
    assert _files_holding_the_key(tmp_path) == []


def test_a_server_echoing_the_key_in_its_answers_never_gets_it_written(tmp_path, key_env, capsys):
    from rltf.flows.evaluate import main

    server = _echoing_server(200)
    try:
        run_cli(main, _flow_args(tmp_path, server.url))
    finally:
        server.close()
    out, err = capsys.readouterr()
    assert KEY not in out and KEY not in err
    traces = list((tmp_path / "ev").rglob("traces/**/*.json"))
    assert traces and any(f"[redacted ${KEY_ENV}]" in p.read_text() for p in traces)  # the echo, redacted
    assert _files_holding_the_key(tmp_path) == []
