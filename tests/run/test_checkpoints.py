"""Issue 16, checkpoints (rltf.run.checkpoint): rotation never loses the checkpoint just written,
no code runs from a run folder (weights_only), damaged checkpoints name themselves and resume
falls back past them, stale temporaries and half-deleted checkpoints are cleaned up."""

from pathlib import Path

import pytest
import torch
from accelerate import Accelerator

from rltf.rl.trainer import RLTFTrainer
from tests.toy_env import toy_env
from tests.toy_run import make_cfg, make_planner

pytestmark = pytest.mark.usefixtures("one_torch_thread")


# ------------------------------------------------------------------ checkpoint rotation
class _Saver:
    """Stands in for a planner: save_pretrained writes one small file."""

    def save_pretrained(self, d, state_dict=None):
        Path(d).mkdir(parents=True)
        (Path(d) / "config.json").write_text("{}")


def test_rotation_never_deletes_the_checkpoint_just_written(tmp_path):
    from rltf.run.checkpoint import latest_checkpoint, save_checkpoint

    rdir = tmp_path / "rltf"
    for step in (6, 8):  # an earlier run's checkpoints, further along
        save_checkpoint(rdir, step, _Saver(), {"history": []})
    save_checkpoint(rdir, 2, _Saver(), {"history": []})
    save_checkpoint(rdir, 4, _Saver(), {"history": []})
    assert latest_checkpoint(rdir).name == "checkpoint-4"
    assert sorted(p.name for p in rdir.glob("checkpoint-*")) == ["checkpoint-2", "checkpoint-4"]


# ------------------------------------------------------------------ no code run from a run folder
class _Planted:
    def __reduce__(self):
        return (Path.touch, (Path(_Planted.marker),))


@pytest.mark.parametrize("baseline", ["moving_average", "per_task", "rloo"])
def test_todays_checkpoints_load_with_weights_only(tmp_path, baseline):
    from rltf.run.checkpoint import latest_checkpoint, load_state

    cfg = make_cfg(tmp_path, "rltf.steps=2", f"rltf.baseline={baseline}", "rltf.lr_schedule=cosine",
                   "rltf.warmup_steps=1")
    RLTFTrainer(cfg, make_planner(), toy_env(), Accelerator(cpu=True)).train()
    state = load_state(latest_checkpoint(cfg.run_dir / "rltf"))
    assert state["step"] == 2 and {"optimizer", "scheduler", "baseline", "history"} <= set(state)
    resumed = RLTFTrainer(cfg, make_planner(), toy_env(), Accelerator(cpu=True))
    assert resumed.resume() and resumed.step == 2


def test_a_planted_pickle_is_not_executed_on_resume(tmp_path):
    cfg = make_cfg(tmp_path, "rltf.steps=1")
    RLTFTrainer(cfg, make_planner(), toy_env(), Accelerator(cpu=True)).train()
    _Planted.marker = str(tmp_path / "pwned")
    torch.save({"step": 1, "x": _Planted()}, cfg.run_dir / "rltf" / "checkpoint-1" / "trainer_state.pt")
    with pytest.raises(Exception):
        RLTFTrainer(cfg, make_planner(), toy_env(), Accelerator(cpu=True)).resume()
    assert not (tmp_path / "pwned").exists()


@pytest.mark.parametrize("name", ["../../elsewhere", "/tmp/checkpoint-1", "checkpoint-1/../../x"])
def test_latest_must_name_a_checkpoint_inside_the_run_folder(tmp_path, name):
    from rltf.run.checkpoint import RunFolderError, latest_checkpoint

    (tmp_path / "elsewhere" / "trainer_state.pt").parent.mkdir(parents=True)
    (tmp_path / "elsewhere" / "trainer_state.pt").write_bytes(b"")
    rdir = tmp_path / "run" / "rltf"
    rdir.mkdir(parents=True)
    (rdir / "latest").write_text(name + "\n")
    with pytest.raises(RunFolderError, match="not a checkpoint-<step> folder"):
        latest_checkpoint(rdir)


# ------------------------------------------------------------------ damaged files name themselves
def _checkpoints(rdir, steps, keep=10):
    from rltf.run.checkpoint import save_checkpoint

    planner = make_planner()
    for step in steps:
        save_checkpoint(rdir, step, planner, {"history": [], "optimizer": {"x": torch.ones(2)}}, keep=keep)


def test_a_damaged_trainer_state_names_itself(tmp_path):
    from rltf.run.checkpoint import DamagedCheckpointError, load_state
    from rltf.run.tracking import DamagedFileError

    _checkpoints(tmp_path, [3])
    state = tmp_path / "checkpoint-3" / "trainer_state.pt"
    state.write_bytes(state.read_bytes()[:200])
    with pytest.raises(DamagedCheckpointError, match=r"checkpoint-3/trainer_state\.pt is damaged .*older checkpoint"):
        load_state(tmp_path / "checkpoint-3")
    assert issubclass(DamagedCheckpointError, DamagedFileError)


def test_read_json_names_a_damaged_file(tmp_path):
    from rltf.run.tracking import DamagedFileError, read_json, write_json

    f = tmp_path / "eval_initial.json"
    write_json(f, {"zero": 0.5})
    assert read_json(f, "the zero/few-shot results") == {"zero": 0.5}
    f.write_text('{"zero": 0.')
    with pytest.raises(DamagedFileError, match=r"eval_initial\.json \(the zero/few-shot results\) is damaged"):
        read_json(f, "the zero/few-shot results")


def test_resume_falls_back_past_damaged_checkpoints_with_a_warning(tmp_path):
    from rltf.run.checkpoint import DamagedCheckpointError, latest_intact_checkpoint

    rdir = tmp_path / "rltf"
    assert latest_intact_checkpoint(rdir) is None
    _checkpoints(rdir, [2, 4, 6, 8])
    path, state = latest_intact_checkpoint(rdir)
    assert path.name == "checkpoint-8" and state["step"] == 8
    weights = rdir / "checkpoint-8" / "planner" / "model.safetensors"
    weights.write_bytes(weights.read_bytes()[:1000])
    (rdir / "checkpoint-6" / "trainer_state.pt").write_bytes(b"PK\x03\x04 truncated")
    (rdir / "checkpoint-4" / "planner" / "tokenizer.json").unlink()
    (rdir / "checkpoint-4" / "planner" / "tokenizer_config.json").unlink()
    with pytest.warns(RuntimeWarning) as caught:
        path, state = latest_intact_checkpoint(rdir)
    assert path.name == "checkpoint-2" and state["step"] == 2 and torch.equal(state["optimizer"]["x"], torch.ones(2))
    messages = [str(w.message) for w in caught]
    assert len(messages) == 3
    assert "checkpoint-8 is damaged (planner/model.safetensors: truncated" in messages[0]
    assert "checkpoint-6 is damaged (trainer_state.pt:" in messages[1]
    assert "checkpoint-4 is damaged (planner/ has no tokenizer files): resuming from checkpoint-2" in messages[2]
    (rdir / "checkpoint-2" / "trainer_state.pt").unlink()
    with pytest.raises(DamagedCheckpointError, match=r"no intact checkpoint .*checkpoint-8: .*checkpoint-2: "
                                                     r"trainer_state\.pt: missing"):
        latest_intact_checkpoint(rdir)


def test_resume_never_falls_forward_to_an_abandoned_runs_later_checkpoint(tmp_path):
    import shutil

    from rltf.run.checkpoint import latest_intact_checkpoint

    rdir = tmp_path / "rltf"
    _checkpoints(rdir, [2, 4, 6])
    (rdir / "latest").write_text("checkpoint-4\n")  # checkpoint-6: an abandoned run's leftover
    assert latest_intact_checkpoint(rdir)[0].name == "checkpoint-4"
    shutil.rmtree(rdir / "checkpoint-4")  # latest names a folder that is gone
    with pytest.warns(RuntimeWarning, match="checkpoint-4 is damaged \\(its folder is missing\\): resuming from "
                                            "checkpoint-2"):
        assert latest_intact_checkpoint(rdir)[0].name == "checkpoint-2"


# ------------------------------------------------------------------ stale temporaries, half-deleted checkpoints
def test_stale_temporaries_are_removed_when_a_run_resumes(tmp_path):
    from rltf.run.checkpoint import prepare_run_folder

    rdir = tmp_path / "toy" / "rltf"
    _checkpoints(rdir, [2])
    stale = [rdir / ".checkpoint-4-x1y2", rdir / ".engine-4", rdir / ".checkpoint-1-deleted"]
    for p in stale:
        (p / "planner").mkdir(parents=True)
    (rdir / ".latest.abc.tmp").write_text("checkpoint-4\n")
    keep = rdir / ".notes"
    keep.write_text("mine")
    prepare_run_folder(tmp_path / "toy", resume=True, overwrite=False)
    assert sorted(p.name for p in rdir.iterdir()) == [".notes", "checkpoint-2", "latest"]


def test_a_save_removes_stale_checkpoint_temporaries(tmp_path):
    rdir = tmp_path / "rltf"
    (rdir / ".checkpoint-3-killed" / "planner").mkdir(parents=True)
    _checkpoints(rdir, [4])
    assert sorted(p.name for p in rdir.iterdir()) == ["checkpoint-4", "latest"]


def test_a_killed_rotation_leaves_no_half_deleted_checkpoint(tmp_path, monkeypatch):
    import shutil

    from rltf.run import checkpoint
    from rltf.run.checkpoint import checkpoints, latest_intact_checkpoint, prepare_run_folder, save_checkpoint

    rdir = tmp_path / "toy" / "rltf"
    _checkpoints(rdir, [2, 4], keep=2)
    real_rmtree = shutil.rmtree

    def killed(path, *args, **kwargs):  # deletes one file, then the process dies
        next(p for p in Path(path).rglob("*") if p.is_file()).unlink()
        raise KeyboardInterrupt

    monkeypatch.setattr(checkpoint.shutil, "rmtree", killed)
    with pytest.raises(KeyboardInterrupt):
        save_checkpoint(rdir, 6, make_planner(), {"history": []}, keep=2)
    monkeypatch.setattr(checkpoint.shutil, "rmtree", real_rmtree)
    assert [s for s, _ in checkpoints(rdir)] == [4, 6]  # checkpoint-2 is whole or gone, never half
    (rdir / "latest").unlink()
    assert latest_intact_checkpoint(rdir)[0].name == "checkpoint-6"
    prepare_run_folder(tmp_path / "toy", resume=True, overwrite=False)
    assert not list(rdir.glob(".checkpoint-*"))


@pytest.mark.parametrize("keep", [0, -1, 1.5, True])
def test_save_checkpoint_refuses_a_keep_below_one_before_writing(tmp_path, keep):
    from rltf.run.checkpoint import save_checkpoint

    with pytest.raises(ValueError, match=rf"keep={keep!r} \(rltf.save_total_limit\); expected an integer >= 1"):
        save_checkpoint(tmp_path / "rltf", 1, _Saver(), {"history": []}, keep=keep)
    assert not (tmp_path / "rltf").exists()
