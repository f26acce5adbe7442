"""A reward worker that hangs (SIGSTOP) or is killed (SIGKILL) stops the step with one line naming the
worker and its tasks (a user-facing error: exit status 2), within ``rltf.reward_worker_timeout_s``;
nothing of the step is written (rltf/rl/reward_workers.py, issue 52 item 5)."""

import multiprocessing as mp
import os
import signal

import pytest
from accelerate import Accelerator

from common.errors import UserError
from rltf.rl.trainer import RLTFTrainer
from rltf.run.checkpoint import checkpoints
from tests.rl.test_rltf import make_cfg, make_planner
from tests.toy_env import toy_env

pytestmark = pytest.mark.skipif("fork" not in mp.get_all_start_methods(), reason="the reward workers fork")


@pytest.mark.parametrize("fault, said", [(signal.SIGSTOP, "sent nothing back within rltf.reward_worker_timeout_s=1"),
                                         (signal.SIGKILL, "was killed by SIGKILL")])
def test_a_hung_or_killed_worker_stops_the_step_in_one_line(tmp_path, fault, said):
    cfg = make_cfg(tmp_path, "rltf.reward_workers=2", "rltf.reward_worker_timeout_s=1", "rltf.steps=3",
                   "rltf.checkpoint_every=1")
    trainer = RLTFTrainer(cfg, make_planner(), toy_env(samples_per_step=2), Accelerator(cpu=True))
    real_step, done = trainer.train_step, []

    def step():
        if done:  # the pool is up: the fault hits worker 1 before step 2's plans reach it
            os.kill(trainer._pool.procs[1].pid, fault)
        done.append(real_step())
        return done[-1]

    trainer.train_step = step
    try:
        with pytest.raises(UserError) as err:
            trainer.train()
        message = str(err.value)
        assert message.startswith("step 2: reward worker 1 (pid ") and "tasks " in message and said in message
        assert "no reward of the step is used" in message and "\n" not in message
        assert len(done) == 1 and trainer.step == 1  # the step stopped before its update
        run = tmp_path / "toy" / "rltf"
        assert [s for s, _ in checkpoints(run)] == [1] and (run / "latest").read_text() == "checkpoint-1\n"
        assert sorted(p.name for p in run.iterdir()) == ["checkpoint-1", "latest"]  # nothing of step 2, no temporary
        assert not trainer._pool.alive
        assert not [p for p in mp.active_children() if p.name.startswith("rltf-reward-")]  # killed and reaped
    finally:
        trainer.close()
