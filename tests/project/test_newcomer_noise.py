"""Noise a newcomer hits (issue 25 item 11): the documented ``accelerate launch train/rltf.py`` says
nothing about defaults once ``configs/accelerate/default.yaml`` is accelerate's default config (and
launches exactly as without it), and the libraries' progress bars follow ``logging.progress_bar``
and stay out of files.

Before the change there was no ``configs/accelerate/default.yaml`` and no
``configure_progress_bars``: transformers drew "Loading weights" with ``logging.progress_bar=false``."""

import io
import json
import os
import shutil
import subprocess
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
PROBE = """
import json, os, torch
from accelerate import Accelerator
a = Accelerator()
print("PROBE " + json.dumps({"omp": os.environ.get("OMP_NUM_THREADS"), "threads": torch.get_num_threads(),
      "processes": a.num_processes, "device": str(a.device), "mixed_precision": a.mixed_precision,
      "distributed": str(a.distributed_type)}))
"""


class _Terminal(io.StringIO):
    def isatty(self):
        return True


@pytest.fixture
def restore_progress_bars():
    from transformers.utils import logging as hf_logging

    was = hf_logging.is_progress_bar_enabled()
    yield
    hf_logging.enable_progress_bar() if was else hf_logging.disable_progress_bar()


def test_library_progress_bars_follow_the_setting_and_stay_out_of_files(restore_progress_bars):
    from huggingface_hub.utils import are_progress_bars_disabled
    from transformers.utils import logging as hf_logging

    from rltf.run.tracking import configure_progress_bars

    assert configure_progress_bars(True, _Terminal()) is True
    assert hf_logging.is_progress_bar_enabled() and not are_progress_bars_disabled()
    assert configure_progress_bars(False, _Terminal()) is False  # logging.progress_bar=false
    assert not hf_logging.is_progress_bar_enabled() and are_progress_bars_disabled()
    assert configure_progress_bars(True, io.StringIO()) is False  # output to a file
    assert not hf_logging.is_progress_bar_enabled()


def test_loading_a_planner_draws_nothing_with_progress_bars_off(tmp_path, capfd, restore_progress_bars):
    from rltf.config.loading import EmbeddedSettings
    from rltf.planners.embedded import ensure_embedded_planner
    from rltf.planners.planner import Planner
    from rltf.run.tracking import configure_progress_bars

    configure_progress_bars(False)
    path = ensure_embedded_planner(EmbeddedSettings(encoder="scratch", dir=str(tmp_path), d_model=16, num_layers=1,
                                                    num_heads=2, d_ff=32, vocab_size=300))
    Planner.from_pretrained(path)
    err = capfd.readouterr().err
    assert "Loading weights" not in err and "Writing model shards" not in err, err


def _launch(hf_home: Path, script: Path) -> tuple[dict, str]:
    env = {k: v for k, v in os.environ.items() if k not in ("OMP_NUM_THREADS", "ACCELERATE_USE_CPU")}
    env["HF_HOME"] = str(hf_home)
    accelerate = shutil.which("accelerate") or pytest.skip("no accelerate command on PATH")
    done = subprocess.run([accelerate, "launch", str(script)], env=env, capture_output=True, text=True, timeout=300,
                          cwd=ROOT)
    assert done.returncode == 0, done.stderr[-2000:]
    line = next(x for x in done.stdout.splitlines() if x.startswith("PROBE "))
    return json.loads(line.removeprefix("PROBE ")), done.stderr


@pytest.mark.slow  # two `accelerate launch` starts
def test_the_default_accelerate_config_silences_the_launcher_and_changes_nothing(tmp_path):
    script = tmp_path / "probe.py"
    script.write_text(PROBE)
    bare, noise = _launch(tmp_path / "bare", script)
    assert "were not passed to `accelerate launch`" in noise  # what a newcomer saw
    home = tmp_path / "configured"
    (home / "accelerate").mkdir(parents=True)
    shutil.copy(ROOT / "configs" / "accelerate" / "default.yaml", home / "accelerate" / "default_config.yaml")
    configured, quiet = _launch(home, script)
    assert "were not passed" not in quiet and "defaults used instead" not in quiet, quiet
    assert configured == bare  # one process, same device, one CPU thread, no mixed precision
