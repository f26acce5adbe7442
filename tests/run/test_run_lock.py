"""Issue 25, one run per run folder (rltf.run.lock): a second run into a folder in use is refused,
a killed run leaves no stale lock, only the main process of a two-process run takes the lock."""

from __future__ import annotations

import subprocess
import sys

import pytest

from rltf.config.loading import load_config
from tests.two_processes import child_env as _child_env

pytestmark = pytest.mark.usefixtures("one_torch_thread")


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
