"""Issue 52 item 9: ``train/rltf.py config=configs/travel-mtp.yaml`` printed raw
``PromptTruncationWarning: prompts longer than 160 tokens`` lines: the flows cut their prompts to
``planner.max_prompt_tokens`` (160 in that config) by design. The flow job says so in one plain line
naming the key and its value, and lets no such warning out."""

from __future__ import annotations

import contextlib
import io
import warnings

import pytest

from rltf.config.loading import load_config
from rltf.run.lock import release_run_folder
from tests.flows.test_flow_rl import TINY

pytestmark = pytest.mark.usefixtures("one_torch_thread")


@pytest.mark.slow  # a tiny flow job end to end (~20 s)
def test_the_flow_job_says_its_prompts_are_cut_in_one_line_and_warns_nothing(tmp_path):
    from train.rltf import run

    cfg = load_config([*TINY, f"output_dir={tmp_path}", f"planner.embedded.dir={tmp_path / 'embedded'}", "run_name=m"])
    out = io.StringIO()
    try:
        with warnings.catch_warnings(record=True) as caught, contextlib.redirect_stdout(out):
            warnings.simplefilter("always")
            run(cfg)
    finally:
        release_run_folder(tmp_path / "m")
    assert not [w for w in caught if "prompts longer than" in str(w.message)]
    said = [line for line in out.getvalue().splitlines() if "max_prompt_tokens" in line]
    assert said == ["prompts longer than planner.max_prompt_tokens=160 tokens keep their end (the options), "
                    "as the flows are built to"]
