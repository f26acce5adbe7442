"""Issue 25, hardening round 2: every failure says what broke, no silent zeros. One test (or a few)
per item, in the issue's order, with real files, a real HTTP server on 127.0.0.1, real child
processes that are signalled or killed, a real read-only folder and (as root) a real full disk."""

from __future__ import annotations

import errno
import json
import math
import os
import pickle
import signal
import socket
import subprocess
import sys
import textwrap
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

import numpy as np
import pytest

from rltf.config.loading import ConfigError, load_config
from rltf.run.cli import run_cli

pytestmark = pytest.mark.usefixtures("one_torch_thread")

ROOT = Path(__file__).resolve().parents[1]
TINY = ["planner.embedded.encoder=scratch", "planner.embedded.d_model=32", "planner.embedded.d_ff=64",
        "planner.embedded.num_layers=1", "planner.embedded.num_heads=2", "env.n_samples=2", "env.samples_per_step=2",
        "sft.epochs=1", "rltf.steps=1", "rltf.tasks_per_batch=2", "rltf.k_samples=2", "rltf.eval_every=0",
        "eval.num_beams=2", "eval.splits=[test]", "logging.progress_bar=false", "eval.schemas=[finetuned]"]


def _alive(pid: int) -> bool:
    """Whether process ``pid`` runs (a zombie, dead but not reaped, does not)."""
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    try:
        return Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0] != "Z"
    except OSError:
        return False


def _wait_for(predicate, timeout: float = 60.0, what: str = "") -> None:
    end = time.monotonic() + timeout
    while not predicate():
        if time.monotonic() > end:
            raise AssertionError(f"timed out waiting for {what}")
        time.sleep(0.05)


def _child_env() -> dict[str, str]:
    return {**os.environ, "PYTHONPATH": str(ROOT), "OMP_NUM_THREADS": "1"}


# ------------------------------------------------------------------ 2. a dead or broken openai endpoint
class _Endpoint:
    """An OpenAI-compatible endpoint on 127.0.0.1 that answers 500 to the first ``failures``
    requests (all of them: -1), then a chat completion whose text is ``answer``."""

    def __init__(self, failures: int = -1, answer: str = "?"):
        self.failures, self.answer, self.requests = failures, answer, 0
        endpoint = self

        class Handler(BaseHTTPRequestHandler):
            def log_message(self, *args):
                pass

            def do_POST(self):
                self.rfile.read(int(self.headers.get("Content-Length", 0)))
                endpoint.requests += 1
                if endpoint.failures < 0 or endpoint.requests <= endpoint.failures:
                    code, body = 500, {"error": {"message": "the model crashed", "type": "server_error"}}
                else:
                    code, body = 200, {"id": "c", "object": "chat.completion", "created": 0, "model": "m",
                                       "choices": [{"index": 0, "finish_reason": "stop",
                                                    "message": {"role": "assistant", "content": endpoint.answer}}],
                                       "usage": {"prompt_tokens": 3, "completion_tokens": 1, "total_tokens": 4}}
                data = json.dumps(body).encode()
                self.send_response(code)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(data)))
                self.end_headers()
                self.wfile.write(data)

        self.httpd = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.url = f"http://127.0.0.1:{self.httpd.server_address[1]}/v1"
        threading.Thread(target=self.httpd.serve_forever, daemon=True).start()

    def close(self):
        self.httpd.shutdown()
        self.httpd.server_close()


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
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and err[0].startswith("error: the backend OpenAIBackend('m'"), err
    assert f"at {server.url} failed on every call of the first 2 queries" in err[0]
    assert "last: InternalServerError" in err[0] and "the model crashed" in err[0]
    assert server.requests == 2 * 5  # two queries, each one node's 5 calls: not all 4 queries, not 12 hours
    assert not (tmp_path / "ev" / "flow_eval.json").exists()  # no all-zero table


def test_backend_errors_of_a_flaky_endpoint_are_printed_in_the_summary(tmp_path, openai_env):
    import envs
    from rltf.flows.evaluate import load_flow_config
    from rltf.flows.evaluation import evaluate_flows

    server = _Endpoint(failures=2, answer="not an option")  # two 500s, then answers (never a valid one)
    cfg, flow = load_flow_config(_flow_args(tmp_path, server.url, limit=2))
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


# ------------------------------------------------------------------ 3. compare forwards SIGTERM / SIGINT
CHILD_RUN = """
import os, signal, sys, time
from pathlib import Path
marks = Path(sys.argv[1])
def stop(signum, frame):
    time.sleep(0.5)  # cleaning up takes a moment: the parent must wait for it
    (marks / "stopped").write_text(str(signum))
    sys.exit(128 + signum)
signal.signal(signal.SIGTERM, stop)
signal.signal(signal.SIGINT, stop)
(marks / "pid").write_text(str(os.getpid()))
time.sleep(120)
"""

PARENT = """
import sys
from pathlib import Path
from rltf.comparison.runs import run_one
from rltf.comparison.suites import Arm, Suite
script, marks, root = sys.argv[1:]
arm = Arm("a", script, overrides=(marks,))
run_one(Suite("s", (arm,), ()), arm, 0, Path(root))
"""


@pytest.mark.parametrize("sig", [signal.SIGTERM, signal.SIGINT])
def test_stopping_compare_stops_its_run_first(tmp_path, sig):
    script = tmp_path / "child_run.py"
    script.write_text(CHILD_RUN)
    marks = tmp_path / "marks"
    marks.mkdir()
    parent = subprocess.Popen([sys.executable, "-c", PARENT, str(script), str(marks), str(tmp_path / "runs")],
                              env=_child_env(), stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    child = None
    try:
        _wait_for(lambda: (marks / "pid").is_file() and (marks / "pid").read_text(), what="the run to start")
        child = int((marks / "pid").read_text())
        parent.send_signal(sig)
        parent.wait(timeout=60)
        assert (marks / "stopped").read_text() == str(int(sig))  # the run got the signal...
        assert not _alive(child)  # ...and ended before the comparison did: no orphan
        assert parent.returncode != 0
    finally:
        for pid in ([child] if child else []):
            if _alive(pid):
                os.kill(pid, signal.SIGKILL)
        if parent.poll() is None:
            parent.kill()
            parent.wait()


# ------------------------------------------------------------------ 4. one run per run folder
HOLDER = """
import sys, time
from rltf.config.loading import load_config
from rltf.stages import plan_job as stages
stages.start(load_config(sys.argv[1:]))
print("started", flush=True)
time.sleep(120)
"""


def test_a_second_run_into_a_folder_in_use_is_refused_and_a_killed_run_leaves_no_stale_lock(tmp_path):
    from rltf.run.checkpoint import RunFolderError  # (RunFolderInUseError, rltf.run.lock)
    from rltf.stages import plan_job as stages

    args = [f"output_dir={tmp_path}", "run_name=x"]
    first = subprocess.Popen([sys.executable, "-c", HOLDER, *args], env=_child_env(), stdout=subprocess.PIPE,
                             stderr=subprocess.PIPE, text=True)
    try:
        printed = [first.stdout.readline().strip() for _ in range(2)]  # "run x -> ...", then "started"
        assert printed[-1] == "started", (printed, first.stderr.read())
        with pytest.raises(RunFolderError, match=rf"run folder {tmp_path / 'x'} is in use by another run "
                                                      rf"\(process {first.pid}\)"):
            stages.start(load_config(args))
        with pytest.raises(RunFolderError, match="in use"):  # resume=true too: it would write the same files
            stages.start(load_config([*args, "resume=true"]))
    finally:
        first.kill()  # SIGKILL: no cleanup runs
        first.wait()
    stages.start(load_config([*args, "overwrite=true"]))  # the killed run's lock went with it
    assert (tmp_path / "x" / "config.yaml").is_file()
    from rltf.run.lock import release_run_folder

    release_run_folder(tmp_path / "x")


DDP_START = """
import sys
from rltf.config.loading import load_config
from rltf.stages import plan_job as stages
run = stages.start(load_config(sys.argv[1:]))
run.acc.wait_for_everyone()
print(f"rank {run.acc.process_index} started", flush=True)
"""


@pytest.mark.slow
def test_only_the_main_process_of_a_two_process_run_takes_the_lock(tmp_path):
    from tests.two_processes import torchrun2

    script = tmp_path / "ddp_start.py"
    script.write_text(DDP_START)
    proc = torchrun2(script, f"output_dir={tmp_path}", "run_name=ddp")
    assert "rank 0 started" in proc.stdout and "rank 1 started" in proc.stdout


# ------------------------------------------------------------------ 5. disk errors
def _mount_tmpfs(path: Path, options: str) -> bool:
    path.mkdir(parents=True, exist_ok=True)
    if os.geteuid() != 0:
        return False
    done = subprocess.run(["mount", "-t", "tmpfs", "-o", options, "tmpfs", str(path)], capture_output=True)
    return done.returncode == 0


def _unmount(path: Path) -> None:
    subprocess.run(["umount", "-l", str(path)], capture_output=True)


@pytest.fixture
def read_only_dir(tmp_path):
    """A real folder on which no file can be created: mode 0555 for a user; as root (whom modes do
    not stop) a read-only tmpfs."""
    path = tmp_path / "read-only"
    if os.geteuid() != 0:
        path.mkdir()
        path.chmod(0o555)
        yield path
        path.chmod(0o755)
    elif _mount_tmpfs(path, "ro,size=64k"):
        yield path
        _unmount(path)
    else:
        pytest.skip("running as root without permission to mount a read-only tmpfs")


def test_a_read_only_output_dir_is_one_error_line_naming_it(read_only_dir, capsys):
    from train.rltf import main

    with pytest.raises(SystemExit) as stop:
        run_cli(main, [f"output_dir={read_only_dir / 'runs'}", "run_name=toy"])
    assert stop.value.code == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and err[0].startswith(f"error: cannot write {read_only_dir / 'runs'}"), err
    assert "Read-only file system" in err[0] or "Permission denied" in err[0]


@pytest.fixture
def full_disk(tmp_path, monkeypatch):
    """``(folder, how)``: as root a real 96 KiB tmpfs that the planner's weights do not fit in; otherwise a
    folder where writing the fine-tuned planner's weights raises ``OSError(ENOSPC)`` (injected)."""
    path = tmp_path / "full"
    if _mount_tmpfs(path, "size=96k"):
        yield path, "tmpfs"
        _unmount(path)
        return
    import safetensors.torch

    real = safetensors.torch.save_file

    def no_space(tensors, filename, *args, **kwargs):
        if str(filename).startswith(str(path)):
            Path(filename).write_bytes(b"\0" * 100)  # what a full disk leaves: a partial file
            raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC), str(filename))
        return real(tensors, filename, *args, **kwargs)

    monkeypatch.setattr(safetensors.torch, "save_file", no_space)
    yield path, "injected"


@pytest.mark.slow
def test_a_full_disk_is_one_error_line_and_leaves_no_half_written_sft_folder(tmp_path, full_disk, capsys):
    from train.sft import main

    out, _ = full_disk
    args = [f"output_dir={out}", "run_name=toy", f"planner.embedded.dir={tmp_path / 'embedded'}", *TINY]
    with pytest.raises(SystemExit) as stop:
        run_cli(main, args)
    assert stop.value.code == 2
    err = capsys.readouterr().err.strip().splitlines()  # (weight-loading progress bars above it: issue 25.11)
    assert "Traceback" not in "\n".join(err) and [e for e in err if e.startswith("error:")] == err[-1:], err
    assert err[-1].startswith("error: cannot write ") and "No space left on device" in err[-1], err
    assert str(out / "toy" / "sft") in err[-1]
    left = sorted(p.name for p in (out / "toy").iterdir())
    assert "sft" not in left and not any(name.startswith(".sft-") for name in left), left  # nothing half-written
    assert not (out / "toy" / "sft" / "rltf_planner.json").exists()  # a resume fine-tunes again


# ------------------------------------------------------------------ 6. a pickle in a checkpoint's planner/
class _Planted:
    marker = ""

    def __reduce__(self):
        return (Path.touch, (Path(_Planted.marker),))


def test_a_pickle_in_a_checkpoint_planner_falls_back_to_the_previous_checkpoint(tmp_path):
    from accelerate import Accelerator

    from rltf.planners.planner import Planner
    from rltf.rl.trainer import RLTFTrainer
    from tests.tiny_models import tiny_t5, unigram_tokenizer
    from tests.toy_env import toy_env

    def trainer():
        cfg = load_config([f"output_dir={tmp_path}", "run_name=pickled", "rltf.steps=4", "rltf.tasks_per_batch=2",
                           "rltf.k_samples=2", "rltf.lr=0.01", "rltf.eval_every=0", "rltf.checkpoint_every=2",
                           "rltf.save_total_limit=3", "logging.progress_bar=false"])
        tok = unigram_tokenizer()
        return RLTFTrainer(cfg, Planner(tiny_t5(tok, seed=0), tok, True, "tiny-t5"), toy_env(), Accelerator(cpu=True))

    trainer().train()  # checkpoints 2 and 4
    planner = tmp_path / "pickled" / "rltf" / "checkpoint-4" / "planner"
    (planner / "model.safetensors").unlink()
    _Planted.marker = str(tmp_path / "pwned")
    (planner / "pytorch_model.bin").write_bytes(pickle.dumps({"weight": _Planted()}))
    again = trainer()
    with pytest.warns(RuntimeWarning, match=r"checkpoint-4 is damaged \(planner/pytorch_model.bin: a pickle weights "
                                            r"file.*resuming from checkpoint-2"):
        assert again.resume()
    assert again.step == 2 and not (tmp_path / "pwned").exists()


# ------------------------------------------------------------------ 7. silent zeros
def _expert_env(output):
    from envs.openagi.env import OpenAGIEnv
    from envs.openagi.plans import LinearPlan, PlanLimits
    from envs.openagi.registry import IMAGE, TEXT, ToolRegistry
    from envs.openagi.tasks import Sample, Task

    reg = ToolRegistry()
    reg.register("Odd Text", TEXT, TEXT, lambda xs: [output if x == "b" else x for x in xs])
    reg.register("Odd Image", IMAGE, IMAGE, lambda xs: [output if float(x[0, 0, 0]) > 0.5 else x for x in xs])
    text = Task(0, "Given text, how to return the text?", (TEXT,), TEXT, "toy_equal", "toy", ((),),
                LinearPlan(("Odd Text",)))
    text.samples = [Sample(f"t/{i}", (s,), s) for i, s in enumerate(["a", "b", "c"])]
    image = Task(1, "Given an image, how to return the image?", (IMAGE,), IMAGE, "toy_close", "toy", ((),),
                 LinearPlan(("Odd Image",)))
    images = [np.full((4, 4, 3), v, dtype=np.float32) for v in (0.2, 0.8, 0.3)]
    image.samples = [Sample(f"i/{i}", (x,), x) for i, x in enumerate(images)]
    return OpenAGIEnv(registry=reg, tasks=[text, image], limits=PlanLimits(1, 1, 1),
                      metrics={"toy_equal": lambda p, t: [float(isinstance(a, str) and a == b) for a, b in zip(p, t)],
                               "toy_close": lambda p, t: [float(isinstance(a, np.ndarray) and a.shape == b.shape)
                                                          for a, b in zip(p, t)]})


@pytest.mark.parametrize("output, why", [
    (None, "returned None"), (float("nan"), "returned a float, not text (str)"),
    (math.inf, "returned a float, not text (str)"), (3, "returned an int, not text (str)"),
    (np.zeros(0), "returned a ndarray, not text (str)"),
])
def test_an_expert_returning_nothing_usable_is_a_recorded_error_not_a_silent_zero(output, why):
    env = _expert_env(output)
    result = env.reward_plans([(0, "Odd Text")])[0]
    assert result.scores == [1.0, 0.0, 1.0]
    assert result.sample_errors[0] is None and result.sample_errors[2] is None
    assert result.sample_errors[1] == f"Odd Text {why}"


@pytest.mark.parametrize("output, why", [
    (None, "returned None"), (float("nan"), "returned nan"), (-math.inf, "returned -inf"),
    (np.zeros((0, 2)), "returned an empty array (shape (0, 2))"),
    (np.array([1.0, np.inf]), "returned an array holding NaN or infinite values"),
])
def test_an_output_of_a_modality_registered_from_outside_is_checked_too(output, why):
    from envs.openagi.outputs import output_problem

    assert output_problem(output, "audio") == why
    assert output_problem(np.zeros(3), "audio") is None and output_problem(0.5, "audio") is None


@pytest.mark.parametrize("output, why", [
    (None, "returned None"), ("a caption", "returned a str, not an image"),
    (np.zeros((0, 4, 3), dtype=np.float32), "returned an array of shape (0, 4, 3), not an image"),
    (np.full((4, 4, 3), np.nan, dtype=np.float32), "returned an array holding NaN or infinite values"),
    (np.zeros((4, 4), dtype=np.float32), "returned an array of shape (4, 4), not an image"),
])
def test_an_image_expert_returning_nothing_usable_is_a_recorded_error(output, why):
    result = _expert_env(output).reward_plans([(1, "Odd Image")])[0]
    assert result.scores == [1.0, 0.0, 1.0] and result.sample_errors[1].startswith(f"Odd Image {why}")
    assert result.sample_errors[0] is None


@pytest.mark.parametrize("change, message", [
    ({"logprob": float("nan")}, "logprob=nan"), ({"logprob": math.inf}, "logprob=inf"),
    ({"logprob": -math.inf}, "logprob=-inf"), ({"prompt_tokens": -1}, "prompt_tokens=-1"),
    ({"completion_tokens": -3}, "completion_tokens=-3"),
])
def test_a_decision_with_a_nan_logprob_or_negative_token_counts_is_refused(change, message):
    from rltf.flows.backends.base import Completion
    from rltf.flows.training.trajectory import Decision

    with pytest.raises(ValueError, match=rf"Completion: {message}"):
        Completion(**{"text": "a", "prompt_tokens": 1, "completion_tokens": 1, "logprob": -0.5, **change})
    good = Completion("a", 1, 1, logprob=-0.5)
    for key, value in change.items():
        setattr(good, key, value)  # changed after it was made: the decision still refuses it
    with pytest.raises(ValueError, match=rf"decision of node 'leg1': {message}"):
        Decision("leg1", "executor", good)
    Decision("leg1", "executor", Completion("a", 0, 0, logprob=None))  # a backend that cannot say: fine


@pytest.mark.parametrize("content", [b'{"flow": "f", "pass_index": 0, "nodes": [', b"\xff\xfe not utf-8", b"[1, 2]",
                                     b'{"flow": "f", "pass_index": 0, "status": "ok", "started": "t", "nope": 1}'])
def test_a_damaged_trace_is_one_error_naming_the_file(tmp_path, content):
    from rltf.flows.engine.trace import load_trace
    from rltf.run.tracking import DamagedFileError

    path = tmp_path / "query3.json"
    path.write_bytes(content)
    with pytest.raises(DamagedFileError, match=rf"{path} is not (a readable )?(a )?flow trace"):
        load_trace(path)


# ------------------------------------------------------------------ 8. config edges
def test_control_characters_in_run_name_are_one_error_line(tmp_path, capsys):
    from train.rltf import main

    config = tmp_path / "nul.yaml"
    config.write_text('run_name: "a\\0b"\n')
    with pytest.raises(SystemExit) as stop:
        run_cli(main, [f"config={config}", f"output_dir={tmp_path}"])
    assert stop.value.code == 2
    assert capsys.readouterr().err.startswith("error: bad value for 'run_name': 'a\\x00b'")
    config.write_text('run_name: "a\\nb"\n')
    with pytest.raises(ConfigError, match=r"bad value for 'run_name': 'a\\nb'.*control characters"):
        load_config([f"config={config}"])


def test_a_tilde_output_dir_is_the_home_folder(monkeypatch, tmp_path):
    monkeypatch.setenv("HOME", str(tmp_path))
    cfg = load_config(["output_dir=~/runs", "run_name=r"])
    assert cfg.output_dir == str(tmp_path / "runs") and cfg.run_dir == tmp_path / "runs" / "r"


def test_a_dry_run_refuses_an_output_dir_that_is_a_file(tmp_path):
    (tmp_path / "out").write_text("a file")
    with pytest.raises(ConfigError, match=rf"{tmp_path / 'out'} \(output_dir\) is a file, not a folder"):
        load_config([f"output_dir={tmp_path / 'out'}", "dry_run=true"])


@pytest.mark.parametrize("recipe", ["grpo", "sft"])
def test_grpo_and_sft_honour_dry_run(tmp_path, capsys, recipe):
    import importlib

    main = importlib.import_module(f"train.{recipe}").main
    main([f"output_dir={tmp_path}", "run_name=dry", "dry_run=true"])
    out = capsys.readouterr().out
    assert out.startswith(f"dry run of train/{recipe}.py 'dry': the configuration is valid; nothing was loaded")
    assert not (tmp_path / "dry").exists()


@pytest.mark.parametrize("arg, message", [
    ("grpo.beta=-1", "'grpo.beta': -1.0; expected a finite number >= 0"),
    ("grpo.beta=nan", "'grpo.beta': nan"), ("grpo.beta=.inf", "'grpo.beta': inf"),
    ("grpo.num_iterations=100000000000000000000", "'grpo.num_iterations': 100000000000000000000; expected an "
                                                  "integer from 1 to 1000"),
])
def test_out_of_range_grpo_settings_are_refused(arg, message):
    with pytest.raises(ConfigError, match=f"bad value for {message}".replace("(", r"\(").replace(".", r"\.")):
        load_config([arg])
    load_config(["grpo.beta=0.04", "grpo.num_iterations=4"])  # in range: fine
