"""Flow backends (rltf.flows.backends) on tiny random models, offline: ``hf`` (a tiny causal and a
tiny seq2seq checkpoint), ``openai`` (against an OpenAI-compatible server on 127.0.0.1 that this
file starts, wrapping a tiny local model), ``planner`` (rltf's planner, constrained by a choice
grammar and by OpenAGI's plan grammar, log-probs checked against plan_logprobs)."""

from __future__ import annotations

import json
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import pytest
import torch

from constrained_decoding.decode import forced_plan, greedy_plans, sample_plans
from constrained_decoding.logprobs import plan_logprobs
from constrained_decoding.prompts import encode_formatted, format_prompt
from rltf.evaluation.schemas import free_text
from rltf.flows import (
    BackendError,
    Backoff,
    ChoiceError,
    ChoiceGrammar,
    Choices,
    Flow,
    FlowConfig,
    Sampling,
    choice_grammar,
    make_backend,
    render_plain,
)
from rltf.flows.backends.hf import HFBackend
from rltf.flows.backends.local import LocalModelBackend
from rltf.flows.backends.openai_chat import OpenAIBackend
from rltf.flows.backends.planner import PlannerBackend, rescore
from rltf.planners.planner import Planner
from tests.hf_tiny import build_gpt2, build_t5
from tests.tiny_models import (
    bpe_tokenizer,
    small_registry,
    tiny_llama,
    tiny_t5,
    unigram_tokenizer,
)

pytestmark = pytest.mark.usefixtures("one_torch_thread")

MSGS = [[{"role": "system", "content": "You answer briefly."}, {"role": "user", "content": "what color is the cat"}],
        [{"role": "user", "content": "a dog in the grass"}]]


@pytest.fixture(scope="module")
def tiny_dirs(tmp_path_factory):
    root = tmp_path_factory.mktemp("flow_models")
    return {"causal": str(build_gpt2(root / "gpt2")), "seq2seq": str(build_t5(root / "t5"))}


@pytest.fixture(scope="module")
def hf_backends(tiny_dirs):
    return {k: HFBackend(d, sampling=Sampling(max_new_tokens=6)) for k, d in tiny_dirs.items()}


def _continuation_logprob(backend: HFBackend, prompt_ids: list[int], gen_ids: list[int]) -> float:
    """Teacher-forced sum of log p(token) of a generated continuation (EOS included)."""
    model = backend.model
    with torch.no_grad():
        if backend.is_encoder_decoder:
            start = model.config.decoder_start_token_id
            logits = model(input_ids=torch.tensor([prompt_ids]),
                           decoder_input_ids=torch.tensor([[start, *gen_ids[:-1]]])).logits[0]
        else:
            logits = model(input_ids=torch.tensor([prompt_ids + gen_ids[:-1]])).logits[0, len(prompt_ids) - 1:]
    return float(logits.log_softmax(-1).gather(-1, torch.tensor(gen_ids)[:, None]).sum())


# ------------------------------------------------------------------------------------- hf
@pytest.mark.parametrize("arch", ["causal", "seq2seq"])
def test_hf_backend_batched_greedy_matches_single_and_reports_exact_usage_and_logprob(hf_backends, arch):
    b = hf_backends[arch]
    assert b.is_encoder_decoder == (arch == "seq2seq") and not b.use_chat_template
    batch = b.generate(MSGS)
    single = [b.generate([m])[0] for m in MSGS]
    assert [c.text for c in batch] == [c.text for c in single]  # padding does not change answers
    for c, m in zip(batch, MSGS):
        ids = b.free_prompt_ids(m)
        assert c.prompt_tokens == len(ids) and 1 <= c.completion_tokens <= 6
        assert b.tokenizer.decode(ids, skip_special_tokens=True).startswith("system: You answer" if len(m) == 2
                                                                            else "user: a dog")
        # re-generate the token ids and score them by teacher forcing
        out = b.model.generate(input_ids=torch.tensor([ids]), max_new_tokens=6, do_sample=False,
                               pad_token_id=b.tokenizer.pad_token_id)
        gen = out[0, 1:].tolist() if b.is_encoder_decoder else out[0, len(ids):].tolist()
        gen = gen[: c.completion_tokens]
        assert c.logprob == pytest.approx(_continuation_logprob(b, ids, gen), rel=1e-4, abs=1e-4)
        assert b.tokenizer.decode(gen, skip_special_tokens=True) == c.text


def test_hf_backend_sampling_is_reproducible_with_its_generator(hf_backends):
    b = hf_backends["causal"]
    s = Sampling(max_new_tokens=6, do_sample=True, temperature=1.5, top_k=50, top_p=0.95)
    b.reseed(7)
    first = [c.text for c in b.generate(MSGS, sampling=s)]
    second = [c.text for c in b.generate(MSGS, sampling=s)]
    b.reseed(7)
    again = [c.text for c in b.generate(MSGS, sampling=s)]
    assert first == again and first != second  # the stream continues unless reseeded
    assert b.generator.device == b.device
    c = b.generate([MSGS[1]], sampling=s.replace(top_k=1))[0]  # top-k 1 is greedy: log-prob 0 per token
    assert c.logprob == pytest.approx(0.0, abs=1e-5) and c.text == b.generate([MSGS[1]])[0].text


def test_hf_backend_chat_template_dtype_and_errors(tiny_dirs):
    b = HFBackend(tiny_dirs["causal"], dtype="bfloat16", sampling=Sampling(max_new_tokens=3))
    assert next(b.model.parameters()).dtype == torch.bfloat16 and len(b.generate(MSGS)) == 2
    b.tokenizer.chat_template = ("{% for m in messages %}<{{ m['role'] }}>{{ m['content'] }}\n{% endfor %}"
                                 "{% if add_generation_prompt %}<assistant>{% endif %}")
    t = LocalModelBackend(b.model, b.tokenizer, False)  # "auto": the tokenizer has a template now
    assert t.use_chat_template and len(t.generate(MSGS)) == 2
    text = t.tokenizer.decode(t.free_prompt_ids(MSGS[0]))
    assert text == "<system>You answer briefly.\n<user>what color is the cat\n<assistant>"
    with pytest.raises(BackendError, match="has no chat template"):
        HFBackend(tiny_dirs["seq2seq"], chat_template=True)
    with pytest.raises(BackendError, match="dtype='float8'"):
        HFBackend(tiny_dirs["seq2seq"], dtype="float8")
    with pytest.raises(TypeError, match="item 0 of the batch is not a non-empty list of messages"):
        b.generate(MSGS[0])


@pytest.mark.parametrize("arch", ["causal", "seq2seq"])
def test_hf_backend_choices_are_constrained(hf_backends, arch):
    b = hf_backends[arch]
    options = ["red cat", "blue", "green dog"]
    s = Sampling(do_sample=True, temperature=2.0)
    outs = b.generate(MSGS * 6, Choices(options), sampling=s)
    assert all(c.text in options and c.value == c.text and c.decoded is not None for c in outs)
    lp = rescore(b.model, b.tokenizer, outs)
    assert torch.allclose(lp, torch.tensor([c.logprob for c in outs]), rtol=1e-4, atol=1e-5)


# ------------------------------------------------------------------------------- planner
@pytest.fixture(scope="module")
def planners():
    t5_tok, bpe_tok = unigram_tokenizer(), bpe_tokenizer()
    return {"seq2seq": Planner(tiny_t5(t5_tok, seed=0), t5_tok, True, "tiny-t5"),
            "causal": Planner(tiny_llama(bpe_tok, seed=0), bpe_tok, False, "tiny-llama")}


@pytest.mark.parametrize("arch", ["seq2seq", "causal"])
def test_planner_backend_choice_grammar_answers_an_option_with_the_exact_logprob(planners, arch):
    planner = planners[arch]
    b = PlannerBackend(planner, seed=3)
    options = ["Image Captioning", "Image Classification", "Machine Translation", "Fill Mask", "yes", "no"]
    grammar = ChoiceGrammar(planner.tokenizer, options)
    assert sorted(grammar.enumerate()) == sorted(options) and grammar.rows_for("yes")[0][0] == grammar.root
    with pytest.raises(ChoiceError, match="'maybe' is not one of the options"):
        grammar.rows_for("maybe")
    # every option's probability under π_c: they sum to 1
    desc = b.describe(MSGS[0])
    all_lp = plan_logprobs(planner.model, planner.tokenizer, [desc] * len(options), [grammar] * len(options), options)
    assert float(all_lp.detach().exp().sum()) == pytest.approx(1.0, abs=1e-5)

    for sampling, temperature in ((None, 1.0), (Sampling(do_sample=True, temperature=1.7), 1.7)):
        outs = b.generate(MSGS * 8, grammar, sampling=sampling)
        assert all(c.text in options and c.value == c.text for c in outs)
        assert all(c.temperature == temperature and c.prompt == b.describe(m) for c, m in zip(outs, MSGS * 8))
        for c in outs:
            assert c.completion_tokens == len(grammar.rows_for(c.text)[0][1])
            assert c.prompt_tokens == len(encode_formatted(planner.tokenizer,
                                                           [format_prompt(c.prompt, b.is_encoder_decoder)],
                                                           b.is_encoder_decoder)[0])
        # the reported log-prob is log π_c: teacher forcing of the decoded rows / of the option text agree
        want = torch.tensor([c.logprob for c in outs])
        assert torch.allclose(rescore(planner.model, planner.tokenizer, outs), want, rtol=1e-4, atol=1e-5)
        by_text = plan_logprobs(planner.model, planner.tokenizer, [c.prompt for c in outs], [grammar] * len(outs),
                                [c.text for c in outs], temperature)
        assert torch.allclose(by_text, want, rtol=1e-4, atol=1e-5)
    # rescore keeps gradients (what a trainer needs)
    lp = rescore(planner.model, planner.tokenizer, b.generate(MSGS, grammar))
    lp.sum().backward()
    assert any(p.grad is not None for p in planner.model.parameters())
    planner.model.zero_grad(set_to_none=True)
    assert choice_grammar(planner.tokenizer, options) is choice_grammar(planner.tokenizer, options)


@pytest.mark.parametrize("arch", ["seq2seq", "causal"])
def test_a_choice_among_one_option_is_answered_without_the_model_as_the_decoder_answers_it(planners, arch, monkeypatch):
    import rltf.flows.backends.local as local

    planner = planners[arch]
    model, tok = planner.model, planner.tokenizer
    one, many = ChoiceGrammar(tok, ["Image Captioning"]), ChoiceGrammar(tok, ["yes", "no", "Fill Mask"])
    forced = forced_plan(one)
    assert forced_plan(many) is None and forced.plan == "Image Captioning" and forced.logprob == 0.0
    b = PlannerBackend(planner, seed=3)
    descs = [b.describe(m) for m in MSGS]
    # what the decoder gives such a choice: sampled (own streams, any temperature) and greedy
    decoded = [d[0] for d in sample_plans(model, tok, descs, [one, one], 1, 1.7, sample_seeds=[5, 6])]
    decoded += greedy_plans(model, tok, descs, [one, one])
    for d in decoded:
        assert (d.plan, d.rows, d.starts, d.grammar) == (forced.plan, forced.rows, forced.starts, one)
        assert d.logprob == pytest.approx(0.0, abs=1e-6)

    def generators():
        return [torch.Generator().manual_seed(s) for s in (11, 12, 13)]

    hot = Sampling(do_sample=True, temperature=1.7)
    msgs = [MSGS[0], MSGS[1], MSGS[1]]
    mixed = b.generate(msgs, [one, many, one], sampling=hot, generators=generators())
    # the other items sample what they would without the forced ones beside them (same per-item seeds)
    alone = b.generate(msgs, [many, many, many], sampling=hot, generators=generators())
    assert mixed[1].text == alone[1].text and mixed[1].logprob == pytest.approx(alone[1].logprob, rel=1e-5)
    for c, m in zip((mixed[0], mixed[2]), (msgs[0], msgs[2])):
        assert (c.text, c.logprob, c.decoded, c.temperature, c.prompt) == (forced.plan, 0.0, forced, 1.7, b.describe(m))
        assert c.completion_tokens == len(forced.rows[0]) and c.prompt_tokens == len(
            encode_formatted(tok, [format_prompt(c.prompt, b.is_encoder_decoder)], b.is_encoder_decoder)[0])

    def no_model(*args, **kwargs):
        raise AssertionError("the model decoded a choice among one option")

    monkeypatch.setattr(local, "sample_plans", no_model)
    monkeypatch.setattr(local, "greedy_plans", no_model)
    for sampling, gens in ((hot, generators()[:2]), (None, None)):
        outs = b.generate(MSGS, one, sampling=sampling, generators=gens)
        assert [(c.text, c.logprob) for c in outs] == [(forced.plan, 0.0)] * 2
    assert rescore(model, tok, outs).detach().abs().max() < 1e-6  # the scorer agrees: log π_c = 0


def test_planner_backend_takes_an_env_grammar_and_does_free_generation_without_one(planners):
    from envs.openagi.grammar import plan_grammar

    planner = planners["seq2seq"]
    b = PlannerBackend(planner, sampling=Sampling(max_new_tokens=8))
    g = plan_grammar(planner.tokenizer, small_registry(), ("image",), "text")
    c = b.generate([MSGS[1]], g)[0]
    assert c.text == g.format(c.value) and c.value in set(g.enumerate())
    assert float(rescore(planner.model, planner.tokenizer, [c]).detach()) == pytest.approx(c.logprob, rel=1e-4,
                                                                                           abs=1e-5)
    free = b.generate(MSGS, [None, None])
    desc = [render_plain(MSGS[0], assistant_cue=False), MSGS[1][0]["content"]]  # a lone user message: as it is
    assert [b.describe(m) for m in MSGS] == desc and desc[0].startswith("system: You answer briefly.\nuser: ")
    assert [f.decoded for f in free] == [None, None]
    assert [f.text for f in free] == free_text(planner, [format_prompt(d, True) for d in desc], max_new_tokens=8)


def test_planner_grammar_through_a_flow_node(planners):
    planner = planners["causal"]
    flow = Flow(PlannerBackend(planner), db={"task": "Given image, how to return the caption in English step by step?"})
    flow.add_node("tool", "$db.task$ First tool:", choices=["Image Captioning", "Image Classification"],
                  output_key="plan.first")
    flow.add_node("ok", "Confirm:", needs=["tool"], choices=lambda ctx: ["yes", "no"])
    res = flow.run()
    assert res.ok and flow.db["plan.first"] in ("Image Captioning", "Image Classification")
    steps = res.constrained()
    assert [n for n, _ in steps] == ["tool", "ok"]
    lp = rescore(planner.model, planner.tokenizer, [c for _, c in steps])
    assert torch.allclose(lp, torch.tensor([c.logprob for _, c in steps]), rtol=1e-4, atol=1e-5)
    assert res.trace.node("tool").attempts[0].logprob == pytest.approx(steps[0][1].logprob)


# -------------------------------------------------------------------------------- openai
class _Server:
    """An OpenAI-compatible ``POST /v1/chat/completions`` on 127.0.0.1 serving a local backend."""

    def __init__(self, backend, key: str = "sk-test"):
        self.backend, self.key, self.requests = backend, key, []
        self.fail_next = 0
        lock = threading.Lock()
        server = self

        class Handler(BaseHTTPRequestHandler):
            def log_message(self, *args):  # quiet
                pass

            def _send(self, code: int, body: dict) -> None:
                data = json.dumps(body).encode()
                self.send_response(code)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(data)))
                self.end_headers()
                self.wfile.write(data)

            def do_POST(self):
                body = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
                server.requests.append(body)
                if self.path != "/v1/chat/completions":
                    return self._send(404, {"error": {"message": f"no route {self.path}"}})
                if self.headers.get("Authorization") != f"Bearer {server.key}":
                    return self._send(401, {"error": {"message": "bad key", "type": "invalid_request_error"}})
                if server.fail_next:
                    server.fail_next -= 1
                    return self._send(503, {"error": {"message": "overloaded", "type": "server_error"}})
                greedy = body.get("temperature", 1.0) == 0
                s = Sampling(max_new_tokens=body.get("max_tokens", 16), do_sample=not greedy,
                             temperature=body.get("temperature") or 1.0)
                with lock:
                    c = server.backend.generate([body["messages"]], sampling=s)[0]
                self._send(200, {
                    "id": "chatcmpl-1", "object": "chat.completion", "created": int(time.time()),
                    "model": body["model"],
                    "choices": [{"index": 0, "message": {"role": "assistant", "content": c.text},
                                 "finish_reason": "stop",
                                 "logprobs": {"content": [{"token": c.text, "logprob": c.logprob, "bytes": None,
                                                           "top_logprobs": []}]} if body.get("logprobs") else None}],
                    "usage": {"prompt_tokens": c.prompt_tokens, "completion_tokens": c.completion_tokens,
                              "total_tokens": c.prompt_tokens + c.completion_tokens},
                })

        self.httpd = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.url = f"http://127.0.0.1:{self.httpd.server_address[1]}/v1"
        self.thread = threading.Thread(target=self.httpd.serve_forever, daemon=True)
        self.thread.start()

    def close(self) -> None:
        self.httpd.shutdown()
        self.httpd.server_close()


@pytest.fixture(scope="module")
def server(hf_backends):
    s = _Server(hf_backends["causal"])
    yield s
    s.close()


@pytest.fixture
def api_env(monkeypatch):
    monkeypatch.setenv("TINY_SERVER_KEY", "sk-test")
    monkeypatch.setenv("NO_PROXY", "127.0.0.1,localhost")
    monkeypatch.setenv("no_proxy", "127.0.0.1,localhost")


def test_openai_backend_against_a_local_server(server, hf_backends, api_env):
    b = make_backend({"kind": "openai", "base_url": server.url, "model": "tiny-gpt2", "api_key_env": "TINY_SERVER_KEY",
                      "max_concurrency": 2, "sampling": {"max_new_tokens": 5}})
    assert isinstance(b, OpenAIBackend) and b._client is None  # no client before the first call
    got = b.generate(MSGS)
    want = hf_backends["causal"].generate(MSGS, sampling=Sampling(max_new_tokens=5))
    assert [(c.text, c.prompt_tokens, c.completion_tokens) for c in got] == \
        [(c.text, c.prompt_tokens, c.completion_tokens) for c in want]
    req = server.requests[-1]
    assert req["model"] == "tiny-gpt2" and req["temperature"] == 0.0 and req["max_tokens"] == 5
    assert {json.dumps(r["messages"]) for r in server.requests[-2:]} == {json.dumps(m) for m in MSGS}
    assert all(c.logprob is None for c in got)
    with pytest.raises(BackendError, match="cannot constrain"):
        b.generate(MSGS, Choices(["a", "b"]))
    lp = OpenAIBackend("tiny-gpt2", server.url, api_key_env="TINY_SERVER_KEY", logprobs=True,
                       sampling=Sampling(max_new_tokens=5)).generate(MSGS[:1])[0]
    assert server.requests[-1]["logprobs"] is True and lp.logprob == pytest.approx(want[0].logprob)


def test_openai_backend_in_a_flow_with_backoff_and_usage(server, hf_backends, api_env):
    sleeps: list[float] = []
    b = OpenAIBackend("tiny-gpt2", server.url, api_key_env="TINY_SERVER_KEY", sampling=Sampling(max_new_tokens=4))
    flow = Flow(b, config=FlowConfig(backoff=Backoff(max_attempts=3, base_delay=0.25, sleep=sleeps.append)))
    flow.add_node("a", "what color is the cat")
    server.fail_next = 2  # two 503s, then an answer
    res = flow.run()
    assert res.ok and sleeps == [0.25, 0.5]
    errors = res.trace.node("a").attempts[0].backend_errors
    assert len(errors) == 2 and all("InternalServerError" in e or "503" in e for e in errors)
    direct = hf_backends["causal"].generate([[{"role": "user", "content": "what color is the cat"}]],
                                            sampling=Sampling(max_new_tokens=4))[0]
    assert (res["a"].answer, res.usage.prompt_tokens, res.usage.completion_tokens) == \
        (direct.text, direct.prompt_tokens, direct.completion_tokens)
    server.fail_next = 5  # never recovers within the bound: the node fails, no endless retries
    sleeps.clear()
    res = flow.run()
    assert res["a"].status == "failed" and sleeps == [0.25, 0.5] and server.fail_next == 2
    server.fail_next = 0


def test_openai_backend_key_and_config_errors(server, monkeypatch):
    monkeypatch.delenv("NOPE_KEY", raising=False)
    b = OpenAIBackend("m", server.url, api_key_env="NOPE_KEY")
    with pytest.raises(BackendError, match=r"\$NOPE_KEY, which is not set"):
        b.generate(MSGS)
    with pytest.raises(BackendError, match="unknown key"):
        make_backend({"kind": "openai", "model": "m", "base_urll": "x"})
    with pytest.raises(BackendError, match="backend kind 'vllm'"):
        make_backend({"kind": "vllm"})
    with pytest.raises(BackendError, match="needs the planner object"):
        make_backend({"kind": "planner"})
