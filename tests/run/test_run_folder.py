"""Issue 16, run-folder layout: a fresh run into a folder holding a run is refused unless
overwrite, and a file where the run needs a folder is refused, before anything trains."""


import pytest

from tests.toy_run import make_cfg

pytestmark = pytest.mark.usefixtures("one_torch_thread")


def test_a_fresh_run_into_a_folder_holding_a_run_is_refused_unless_overwrite(tmp_path):
    from rltf.run.checkpoint import RunFolderError
    from rltf.stages import plan_job as stages

    run_dir = tmp_path / "toy"
    (run_dir / "rltf" / "checkpoint-4").mkdir(parents=True)
    (run_dir / "rltf" / "latest").write_text("checkpoint-4\n")
    with pytest.raises(RunFolderError, match=r"already holds a run \(rltf\).*resume=true.*overwrite=true"):
        stages.start(make_cfg(tmp_path))
    stages.start(make_cfg(tmp_path, "resume=true"))  # continuing it is fine
    assert (run_dir / "rltf" / "latest").exists()
    stages.start(make_cfg(tmp_path, "overwrite=true"))
    assert not (run_dir / "rltf").exists() and (run_dir / "config.yaml").exists()


# ------------------------------------------------------------------ run-folder layout
@pytest.mark.parametrize("where", ["output_dir", "run", "run/rltf", "run/rltf/checkpoint-2", "run/sft"])
@pytest.mark.parametrize("resume", [True, False])
def test_a_file_where_the_run_needs_a_folder_is_refused_naming_it(tmp_path, where, resume):
    from rltf.run.checkpoint import RunFolderError, prepare_run_folder

    out = tmp_path / "out"
    run_dir = out / "toy"
    path = out if where == "output_dir" else run_dir / where.removeprefix("run").lstrip("/")
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text("not a folder")
    if not resume and where.startswith("run/"):  # a fresh run: the folder holds a run's outputs
        with pytest.raises(RunFolderError, match="already holds a run"):
            prepare_run_folder(run_dir, resume=False, overwrite=False)
        prepare_run_folder(run_dir, resume=False, overwrite=True)  # removed: nothing left in the way
        assert not path.exists()
        return
    with pytest.raises(RunFolderError, match=rf"{path} \(.*\) is a file, not a folder"):
        prepare_run_folder(run_dir, resume=resume, overwrite=False)


def test_the_run_folder_layout_is_checked_before_anything_trains(tmp_path):
    from rltf.run.checkpoint import RunFolderError
    from rltf.stages import plan_job as stages

    (tmp_path / "toy" / "rltf").mkdir(parents=True)
    (tmp_path / "toy" / "sft").write_text("")
    with pytest.raises(RunFolderError, match=r"toy/sft \(the fine-tuned planner\) is a file"):
        stages.start(make_cfg(tmp_path, "resume=true"))
    assert not (tmp_path / "toy" / "config.yaml").exists()
