"""A long job is never silent (issue #38 item 10): with ``logging.progress_bar: false`` (as the SmolLM2
configs set it, which printed nothing for ~10 minutes) SFT and the RLTF steps still print plain
progress lines (the first status, then at most one every 30 s, and the last), counting SFT's
batches, not its epochs; only the main process prints. So does the held-out evaluation, counting
each schema's tasks (tests/evaluation/test_evaluation_progress.py: a line per chunk of tasks)."""

from __future__ import annotations

import contextlib
import io

import pytest

from rltf.config.loading import load_config
from rltf.run.tracking import PLAIN_PROGRESS_EVERY_S, progress_bar
from train.rltf import run

pytestmark = pytest.mark.usefixtures("one_torch_thread")


def test_a_turned_off_bar_prints_plain_lines_on_the_main_process_only():
    main, other = io.StringIO(), io.StringIO()
    for stream, is_main in ((main, True), (other, False)):
        bar = progress_bar(total=4, desc="rltf", enabled=False, main=is_main, stream=stream)
        for _ in range(4):
            bar.update(1)
        bar.close()
    lines = main.getvalue().splitlines()
    assert lines[0].startswith("rltf:   0%") and lines[-1].startswith("rltf: 100%|##########| 4/4"), lines
    assert "\r" not in main.getvalue() and other.getvalue() == ""
    assert PLAIN_PROGRESS_EVERY_S <= 30


def test_a_main_job_with_the_bar_off_prints_sft_and_rltf_progress(tmp_path):
    args = [f"output_dir={tmp_path / 'runs'}", "run_name=quiet", f"planner.embedded.dir={tmp_path / 'embedded'}",
            "planner.embedded.encoder=scratch", "planner.embedded.d_model=32", "planner.embedded.d_ff=64",
            "planner.embedded.num_layers=1", "planner.embedded.num_heads=2", "env.n_samples=2",
            "env.samples_per_step=2", "sft.epochs=2", "sft.batch_size=64", "rltf.steps=2", "rltf.tasks_per_batch=2",
            "rltf.k_samples=2", "rltf.eval_every=0", "rltf.checkpoint_every=0", "eval.num_beams=2",
            "eval.splits=[test]", "eval.schemas=[finetuned]", "logging.progress_bar=false"]
    cfg = load_config(args)
    err, out = io.StringIO(), io.StringIO()
    with contextlib.redirect_stderr(err), contextlib.redirect_stdout(out):
        run(cfg)
    lines = err.getvalue().splitlines()
    sft = [line for line in lines if line.startswith("sft: ")]
    rltf = [line for line in lines if line.startswith("rltf: ")]
    assert sft and rltf, err.getvalue()[-2000:]
    assert rltf[-1].startswith("rltf: 100%|##########| 2/2"), rltf
    done, total = sft[-1].split("|")[2].split()[0].split("/")
    assert done == total and int(total) >= 2, sft  # a tick per batch of every epoch
    held_out = [line for line in lines if line.startswith("eval finetuned: ")]  # the final table's decoding
    assert held_out and held_out[-1].startswith("eval finetuned: 100%|##########| 10/10"), held_out
    ours = [line for line in err.getvalue().split("\n") if line.lstrip("\r").startswith(("sft", "rltf", "eval"))]
    assert all("\r" not in line and line.isascii() for line in ours), ours  # plain lines, not redraws
