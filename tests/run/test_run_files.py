"""Issue 52 item 6 and 9: what a run leaves in its folder. Output files are written atomically (a
reader never sees a half-written one: the old file is replaced, not rewritten) and with the user's
umask; ``overwrite=true`` removes the trackers' folders too; a damaged or empty saved ``config.yaml``
on ``resume=true`` is one line; the ``.run.lock`` is removed when the run's process ends."""

from __future__ import annotations

import os
import stat

import pytest

from common.atomic import atomic_dir, write_atomic
from rltf.config.loading import ConfigError, load_config
from rltf.run.checkpoint import prepare_run_folder
from rltf.run.lock import LOCK_FILE, _release_all, lock_run_folder, release_run_folder
from rltf.run.tracking import plot_rewards


@pytest.fixture
def umask():
    """Set the process's umask for the test (restored after)."""
    old = os.umask(0o022)
    yield lambda mask: os.umask(mask)
    os.umask(old)


def _mode(path) -> int:
    return stat.S_IMODE(os.stat(path).st_mode)


@pytest.mark.parametrize("mask, file_mode, dir_mode", [(0o022, 0o644, 0o755), (0o077, 0o600, 0o700),
                                                       (0o002, 0o664, 0o775)])
def test_atomic_writes_follow_the_umask(tmp_path, umask, mask, file_mode, dir_mode):
    umask(mask)
    assert _mode(write_atomic(tmp_path / "results.json", "{}\n")) == file_mode
    with atomic_dir(tmp_path / "checkpoint-1") as tmp:
        (tmp / "state").write_bytes(b"x")
    assert _mode(tmp_path / "checkpoint-1") == dir_mode
    png = plot_rewards([{"step": 1, "train/reward": 0.5}, {"step": 2, "train/reward": 0.7}], tmp_path / "rewards.png")
    assert _mode(png) == file_mode
    assert sorted(p.name for p in tmp_path.iterdir()) == ["checkpoint-1", "results.json", "rewards.png"]


def test_rewards_png_is_replaced_whole_not_rewritten(tmp_path):
    """A second hard link to the old file keeps the old bytes: the new plot went to a temporary that
    was renamed over the name (rewriting the file in place would change both links)."""
    path = tmp_path / "rewards.png"
    plot_rewards([{"step": 1, "train/reward": 0.5}], path)
    os.link(path, tmp_path / "before.png")
    old = path.read_bytes()
    plot_rewards([{"step": 1, "train/reward": 0.5}, {"step": 2, "train/reward": 0.9}], path)
    assert (tmp_path / "before.png").read_bytes() == old != path.read_bytes()
    assert path.read_bytes().startswith(b"\x89PNG")


def test_overwrite_removes_the_trackers_folders(tmp_path):
    run = tmp_path / "run"
    for folder in ("tensorboard", "wandb/offline-run-1", "rltf/checkpoint-2"):
        (run / folder).mkdir(parents=True)
    (run / "tensorboard" / "events.out.tfevents.1").write_bytes(b"old run")
    (run / "results.json").write_text("{}")
    try:
        prepare_run_folder(run, resume=False, overwrite=True)
    finally:
        release_run_folder(run)
    assert sorted(p.name for p in run.iterdir()) == []  # (the lock file went with the release)


def test_a_fresh_run_into_a_folder_holding_only_tracker_logs_is_refused(tmp_path):
    (tmp_path / "run" / "tensorboard").mkdir(parents=True)
    try:
        with pytest.raises(ValueError, match=r"already holds a run \(tensorboard\)"):
            prepare_run_folder(tmp_path / "run", resume=False, overwrite=False)
    finally:
        release_run_folder(tmp_path / "run")


@pytest.mark.parametrize("text, said", [("", "is empty;"), ("   \n# nothing\n", "is empty;"),
                                        ("seed: [1, 2\nrltf: {", "is damaged (not YAML: "),
                                        ("- a\n- b\n", "is damaged (it holds a list, not a config)")])
def test_a_damaged_or_empty_saved_config_is_one_line_on_resume(tmp_path, text, said):
    from rltf.stages import plan_job as stages

    args = [f"output_dir={tmp_path}", "run_name=x", "logging.progress_bar=false"]
    (tmp_path / "x").mkdir()
    (tmp_path / "x" / "config.yaml").write_text(text)
    try:
        with pytest.raises(ConfigError) as err:
            stages.start(load_config([*args, "resume=true"]))
    finally:
        release_run_folder(tmp_path / "x")
    message = str(err.value)
    assert f"the run's saved config {tmp_path / 'x' / 'config.yaml'} {said}" in message
    assert "\n" not in message and "training key" not in message
    assert (tmp_path / "x" / "config.yaml").read_text() == text  # left as it was, for a look


def test_the_lock_file_is_removed_when_the_run_ends(tmp_path):
    lock_run_folder(tmp_path / "a")
    assert (tmp_path / "a" / LOCK_FILE).is_file()
    release_run_folder(tmp_path / "a")
    assert not (tmp_path / "a" / LOCK_FILE).exists()
    # at the process's end (normal, or an error's exit), what it still holds goes the same way
    lock_run_folder(tmp_path / "b")
    _release_all()  # (registered with atexit)
    assert (tmp_path / "b").is_dir() and not (tmp_path / "b" / LOCK_FILE).exists()


def test_a_lock_file_removed_before_it_is_locked_is_not_taken(tmp_path):
    """The ending run removes the file while it still holds it: a process that opened that file and
    locks it afterwards must lock the new file instead (else two runs would hold the folder)."""
    import fcntl

    lock_run_folder(tmp_path)
    stale = open(tmp_path / LOCK_FILE, "a+")  # noqa: SIM115 - another process's open, before the removal
    try:
        release_run_folder(tmp_path)
        fcntl.flock(stale.fileno(), fcntl.LOCK_EX | fcntl.LOCK_NB)  # the removed file: lockable, but meaningless
        lock_run_folder(tmp_path)  # takes (and creates) the file in the folder
        assert (tmp_path / LOCK_FILE).read_text() == f"{os.getpid()}\n"
        assert os.fstat(stale.fileno()).st_ino != os.stat(tmp_path / LOCK_FILE).st_ino
    finally:
        stale.close()
        release_run_folder(tmp_path)
