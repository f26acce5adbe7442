"""Output a newcomer reads in a log file (issue 25 item 11): progress bars print a few plain lines
(no carriage-return redraws) when their output is not a terminal, and decoding passes its KV cache
the way the installed transformers asks (no FutureWarning).

Before the change the sft and rltf bars wrote every redraw (``"\\r" + status``) into a redirected
file, and every decoder pass warned "``past_key_values`` is deprecated ... Use ``cache`` instead"."""

from __future__ import annotations

import io
import os
import subprocess
import sys
import warnings
from pathlib import Path

import pytest
from tqdm import tqdm

from constrained_decoding.decode import beam_search_plans, sample_plans
from constrained_decoding.logprobs import plan_logprobs
from envs.openagi.grammar import plan_grammars
from envs.openagi.plans import PlanLimits
from envs.openagi.registry import IMAGE, TEXT
from rltf.run.tracking import PlainProgressLines, progress_bar
from tests.tiny_models import bpe_tokenizer, small_registry, tiny_llama, tiny_t5, unigram_tokenizer, with_lora

ROOT = Path(__file__).resolve().parents[2]


class _Terminal(io.StringIO):
    def isatty(self):
        return True


class _Clock:
    """Seconds that move on only when told (one per bar update below)."""

    def __init__(self):
        self.now = 0.0

    def __call__(self):
        return self.now


def test_a_bar_into_a_file_prints_sparse_plain_lines():
    out, clock = io.StringIO(), _Clock()
    bar = tqdm(total=100, desc="rltf", file=PlainProgressLines(out, every_s=30, clock=clock), ascii=True,
               mininterval=0, miniters=1)
    for _ in range(100):
        clock.now += 1
        bar.update(1)
        bar.set_postfix(reward="0.500")
    bar.close()
    text = out.getvalue()
    assert "\r" not in text and "\x1b" not in text and text.isascii(), repr(text)
    lines = text.splitlines()
    assert all(line.startswith("rltf: ") for line in lines), lines
    # the opening status, one every 30 s (at 30, 60, 90 s), the closing one; nothing twice
    assert [line.split("|")[2].split()[0] for line in lines] == ["0/100", "30/100", "60/100", "90/100", "100/100"]
    assert len(set(lines)) == len(lines)


def test_progress_bar_redraws_only_on_a_terminal():
    terminal, file, off, other = _Terminal(), io.StringIO(), _Terminal(), _Terminal()
    for stream, enabled, main in ((terminal, True, True), (file, True, True), (off, False, True), (other, True, False)):
        for _ in progress_bar(range(3), desc="sft", enabled=enabled, main=main, stream=stream):
            pass
    assert "\r" in terminal.getvalue()  # drawn in place, as before
    assert "\r" not in file.getvalue() and file.getvalue().splitlines()[-1].startswith("sft: 100%|##########| 3/3")
    # logging.progress_bar=false: no bar, plain lines still (issue #38 item 10: a long job is never silent)
    assert "\r" not in off.getvalue() and off.getvalue().splitlines()[-1].startswith("sft: 100%|##########| 3/3")
    assert other.getvalue() == ""  # a process other than the main one prints nothing


REG = small_registry()
LIMITS = PlanLimits(max_tools=2, max_branch=2, max_tail=1)
TASKS = [(((IMAGE,), TEXT), "Given noisy blurry image, how to return the caption in English step by step?"),
         (((IMAGE,), TEXT), "Given noisy blurry image, how to return the caption in English step by step?"),
         (((IMAGE, TEXT), TEXT), "Given noisy image and clozed English query, how to answer the question?")]
PLANNERS = {
    "t5": lambda: (tiny_t5(unigram_tokenizer(), seed=1), unigram_tokenizer()),
    "lora-llama": lambda: (with_lora(tiny_llama(bpe_tokenizer(), seed=2), seed=3), bpe_tokenizer()),
}


@pytest.mark.usefixtures("one_torch_thread")
@pytest.mark.parametrize("name", list(PLANNERS))
@pytest.mark.parametrize("head", ["restricted", "full"])
def test_decoding_and_scoring_warn_nothing_about_the_cache(name, head):
    model, tok = PLANNERS[name]()
    grammars = plan_grammars(tok, [sig for sig, _ in TASKS], REG, LIMITS)
    prompts = [text for _, text in TASKS]
    with warnings.catch_warnings():
        warnings.simplefilter("error", FutureWarning)
        beams = beam_search_plans(model, tok, prompts, grammars, num_beams=2, head=head)
        samples = sample_plans(model, tok, prompts, grammars, k=2, temperature=1.0, seed=0, head=head)
        plans = [d for ds in samples for d in ds]
        logp = plan_logprobs(model, tok, [TASKS[i][1] for i, ds in enumerate(samples) for _ in ds],
                             [d.grammar for d in plans], plans, 1.0, head=head)
    assert len(beams) == len(TASKS) and logp.shape == (len(plans),)


@pytest.mark.slow  # one tiny main job in a subprocess (~20 s CPU)
def test_a_redirected_main_job_writes_plain_lines(tmp_path):
    log = tmp_path / "job.log"
    args = [f"output_dir={tmp_path / 'runs'}", "run_name=tiny", f"planner.embedded.dir={tmp_path / 'embedded'}",
            "planner.embedded.encoder=scratch", "planner.embedded.d_model=32", "planner.embedded.d_ff=64",
            "planner.embedded.num_layers=1", "planner.embedded.num_heads=2", "env.n_samples=2",
            "env.samples_per_step=2", "sft.epochs=2", "rltf.steps=2", "rltf.tasks_per_batch=2", "rltf.k_samples=2",
            "rltf.eval_every=1", "rltf.checkpoint_every=1", "eval.num_beams=2", "eval.splits=[test]",
            "eval.schemas=[finetuned,rltf]"]  # logging.progress_bar: the default (true)
    env = {**os.environ, "OMP_NUM_THREADS": "1", "PYTHONWARNINGS": "default"}
    with log.open("wb") as f:
        done = subprocess.run([sys.executable, "train/rltf.py", *args], stdout=f, stderr=subprocess.STDOUT, env=env,
                              cwd=ROOT, timeout=600)
    raw = log.read_bytes()
    assert done.returncode == 0, raw[-2000:]
    text = raw.decode()
    assert b"\r" not in raw and b"\x1b" not in raw, raw[:2000]
    assert "\n\n\n" not in text  # no runs of blank lines
    assert "FutureWarning" not in text, text
    lines = text.splitlines()
    assert (any(line.startswith("sft: 100%|") for line in lines)
            and any(line.startswith("rltf: 100%|") for line in lines))
    assert lines[-1].startswith("held-out overall: finetuned=")
