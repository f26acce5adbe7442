"""Held-out evaluation is never silent (issue #38 item 10): a planner's schemas decode in chunks of
``eval.chunk_tasks`` tasks and tick a progress bar after each (plain lines, at most one every 30 s,
with ``logging.progress_bar: false``), naming the schema and the tasks done of the total; the flow
evaluation ticks per batch of queries. Chunking changes no plan and no score."""

from __future__ import annotations

import contextlib
import dataclasses
import io
import time

import pytest

from envs.openagi.env import OpenAGIEnv
from envs.openagi.plans import PlanLimits
from rltf.config.loading import load_config
from rltf.evaluation import schemas as ev
from rltf.flows import ScriptedBackend
from rltf.flows.evaluate import load_flow_config
from rltf.flows.evaluation import evaluate_flows
from rltf.planners.planner import Planner
from rltf.run import tracking
from rltf.stages import plan_job as stages
from tests.tiny_models import tiny_llama, tiny_t5, unigram_tokenizer
from tests.toy_env import _equal, toy_registry, toy_tasks

pytestmark = pytest.mark.usefixtures("one_torch_thread")

WORDS = ("", " quickly", " now", " for me", " please", " at once", " today")


def _env() -> OpenAGIEnv:
    """The toy env with 2 x 7 tasks (its two, worded a little differently: prompts of other lengths)."""
    tasks = [dataclasses.replace(t, id=2 * k + j, samples=t.samples,
                                 description=t.description.replace(" step by step", w + " step by step"))
             for k, w in enumerate(WORDS) for j, t in enumerate(toy_tasks())]
    return OpenAGIEnv(registry=toy_registry(), tasks=tasks, limits=PlanLimits(2, 1, 1), metrics={"toy_equal": _equal})


def _planner(kind: str, seed: int) -> Planner:
    tok = unigram_tokenizer()
    if kind == "t5":
        return Planner(tiny_t5(tok, seed=seed), tok, True, "tiny-t5")
    return Planner(tiny_llama(tok, seed=seed), tok, False, "tiny-llama")


def _plain_lines(fn, monkeypatch) -> tuple[object, list[str]]:
    """``fn()``'s result and the lines it wrote on stderr, every redraw a line (interval 0)."""
    monkeypatch.setattr(tracking, "PLAIN_PROGRESS_EVERY_S", 0.0)
    err = io.StringIO()
    with contextlib.redirect_stderr(err):
        out = fn()
    ours = [line for line in err.getvalue().split("\n") if line.lstrip("\r").startswith(("eval ", "flow "))]
    assert all("\r" not in line and line.isascii() for line in ours), ours  # plain lines, not redraws
    return out, err.getvalue().splitlines()


def _counts(lines: list[str], desc: str) -> list[str]:
    """The ``done/total`` of each of ``desc``'s lines, once each (the closing line may repeat the
    last count with a newer rate)."""
    return list(dict.fromkeys(line.split("|")[2].split()[0] for line in lines if line.startswith(f"{desc}: ")))


def test_a_schema_prints_a_line_per_chunk_naming_it_and_the_tasks_done(monkeypatch):
    env = _env()
    tasks = env.tasks()
    planner = _planner("t5", 0)
    res, lines = _plain_lines(lambda: ev.constrained_schema("finetuned", planner, env, tasks, 2, chunk=4,
                                                            progress=False), monkeypatch)
    assert _counts(lines, "eval finetuned") == ["0/14", "4/14", "8/14", "12/14", "14/14"], lines
    assert sorted(res.scores) == [t.id for t in tasks]
    # the same on a free-text schema (a planner without a chat template: zero-shot free text)
    _, lines = _plain_lines(lambda: ev.untrained_schema("zero", planner, env, tasks, [], num_beams=2,
                                                        max_new_tokens=4, chunk=8, progress=False), monkeypatch)
    assert _counts(lines, "eval zero") == ["0/14", "8/14", "14/14"], lines
    # no progress asked (library callers): nothing printed
    _, lines = _plain_lines(lambda: ev.constrained_schema("finetuned", planner, env, tasks, 2, chunk=4), monkeypatch)
    assert lines == []


@pytest.mark.parametrize("kind", ["t5", "llama"])
def test_chunking_changes_no_plan_and_no_score(kind):
    env = _env()
    tasks = env.tasks()
    for seed in (0, 1):
        planner = _planner(kind, seed)
        whole = ev.constrained_schema("finetuned", planner, env, tasks, 4, chunk=0)
        assert len({p for p in whole.plans.values()}) > 1  # the planner does not answer one plan everywhere
        for chunk in (1, 3, 16):
            part = ev.constrained_schema("finetuned", planner, env, tasks, 4, chunk=chunk)
            assert (part.plans, part.scores, part.valid) == (whole.plans, whole.scores, whole.valid), (kind, chunk)


def test_a_long_chunk_is_not_silent(monkeypatch):
    """While one chunk decodes, its bar is redrawn (tracking.kept_alive): its elapsed time moves, so a
    plain line still comes at least every ~35 s. The chunk here waits (a minute at most) for such a line."""
    monkeypatch.setattr(tracking, "PLAIN_PROGRESS_EVERY_S", 0.0)
    err = io.StringIO()

    def slow(part: list[int]) -> list[int]:
        before, give_up = err.getvalue().count("\n"), time.monotonic() + 60
        while err.getvalue().count("\n") == before and time.monotonic() < give_up:
            time.sleep(0.01)
        return part

    with contextlib.redirect_stderr(err):
        out = ev.decode_in_chunks("finetuned", [0, 1, 2], slow, chunk=3, progress=False)
    lines = err.getvalue().splitlines()
    assert out == [0, 1, 2]
    counts = [line.split("|")[2].split()[0] for line in lines]
    assert counts[:2] == ["0/3", "0/3"] and counts[-1] == "3/3", lines  # a line during the chunk: the redraw's


def test_a_bad_chunk_names_the_value():
    with pytest.raises(ValueError, match="chunk=-1"):
        ev.decode_in_chunks("finetuned", [0, 1], lambda part: part, chunk=-1)


def test_a_main_job_evaluation_with_the_bar_off_counts_its_tasks(tmp_path, monkeypatch):
    """``train/evaluate.py``'s path (``stages.evaluate``): ``eval.chunk_tasks`` and ``logging.progress_bar``."""
    cfg = load_config([f"output_dir={tmp_path}", "run_name=ev", f"planner.embedded.dir={tmp_path / 'embedded'}",
                       "planner.embedded.encoder=scratch", "planner.embedded.d_model=32", "planner.embedded.d_ff=64",
                       "planner.embedded.num_layers=1", "planner.embedded.num_heads=2", "env.n_samples=2",
                       "eval.num_beams=2", "eval.splits=[validation,test]", "eval.chunk_tasks=5",
                       "logging.progress_bar=false"])
    run = stages.start(cfg, write_config=False)
    envs = stages.build_envs(run)
    planner = stages.build_planner(run, envs)
    tasks = envs.tasks(cfg.eval.splits)
    n = len(tasks)
    res, lines = _plain_lines(lambda: stages.evaluate(run, ["finetuned"], planner, envs, tasks, log=False),
                              monkeypatch)
    assert _counts(lines, "eval finetuned") == [f"{d}/{n}" for d in [*range(0, n, 5), n]], lines
    assert len(res["finetuned"].scores) == n
    _, lines = _plain_lines(lambda: stages.evaluate(run, ["finetuned"], planner, envs, tasks, log=False,
                                                    progress=False), monkeypatch)
    assert not _counts(lines, "eval finetuned")  # the validation under the RLTF bar: no bar of its own


def test_the_flow_evaluation_prints_a_line_per_batch_of_queries(tmp_path, monkeypatch):
    cfg, flow = load_flow_config(["config=configs/travel-mtp.yaml", f"output_dir={tmp_path}", "run_name=ev",
                                  "flow.methods=[flat]", "flow.limit=3", "flow.trace_queries=0", "env.travel.days=[3]",
                                  "env.travel.levels=[easy]", "logging.progress_bar=false"])
    backend = ScriptedBackend(lambda messages: "?")
    summary, lines = _plain_lines(lambda: evaluate_flows(cfg, flow, backend=backend, log=lambda _: None), monkeypatch)
    width = getattr(backend, "batch_size", 1)
    assert _counts(lines, "flow flat") == [f"{d}/3" for d in [*range(0, 3, width), 3]], lines
    assert len(summary["queries"]) == 3
