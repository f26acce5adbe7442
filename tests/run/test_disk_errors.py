"""Issue 25, disk errors: a read-only output folder and a full disk (as root a real tmpfs, otherwise
an injected ENOSPC) are one error line, and leave no half-written sft/ folder."""

from __future__ import annotations

import errno
import os
import subprocess
from pathlib import Path

import pytest

from rltf.run.cli import run_cli

pytestmark = pytest.mark.usefixtures("one_torch_thread")


TINY = ["planner.embedded.encoder=scratch", "planner.embedded.d_model=32", "planner.embedded.d_ff=64",
        "planner.embedded.num_layers=1", "planner.embedded.num_heads=2", "env.n_samples=2", "env.samples_per_step=2",
        "sft.epochs=1", "rltf.steps=1", "rltf.tasks_per_batch=2", "rltf.k_samples=2", "rltf.eval_every=0",
        "eval.num_beams=2", "eval.splits=[test]", "logging.progress_bar=false", "eval.schemas=[finetuned]"]


def _mount_tmpfs(path: Path, options: str) -> bool:
    path.mkdir(parents=True, exist_ok=True)
    if os.geteuid() != 0:
        return False
    done = subprocess.run(["mount", "-t", "tmpfs", "-o", options, "tmpfs", str(path)], capture_output=True)
    return done.returncode == 0


def _unmount(path: Path) -> None:
    subprocess.run(["umount", "-l", str(path)], capture_output=True)


@pytest.fixture
def read_only_dir(tmp_path):
    """A real folder on which no file can be created: mode 0555 for a user; as root (whom modes do
    not stop) a read-only tmpfs."""
    path = tmp_path / "read-only"
    if os.geteuid() != 0:
        path.mkdir()
        path.chmod(0o555)
        yield path
        path.chmod(0o755)
    elif _mount_tmpfs(path, "ro,size=64k"):
        yield path
        _unmount(path)
    else:
        pytest.skip("running as root without permission to mount a read-only tmpfs")


def test_a_read_only_output_dir_is_one_error_line_naming_it(read_only_dir, capsys):
    from train.rltf import main

    with pytest.raises(SystemExit) as stop:
        run_cli(main, [f"output_dir={read_only_dir / 'runs'}", "run_name=toy"])
    assert stop.value.code == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and err[0].startswith(f"error: cannot write {read_only_dir / 'runs'}"), err
    assert "Read-only file system" in err[0] or "Permission denied" in err[0]


@pytest.fixture
def full_disk(tmp_path, monkeypatch):
    """``(folder, how)``: as root a real 96 KiB tmpfs that the planner's weights do not fit in; otherwise a
    folder where writing the fine-tuned planner's weights raises ``OSError(ENOSPC)`` (injected)."""
    path = tmp_path / "full"
    if _mount_tmpfs(path, "size=96k"):
        yield path, "tmpfs"
        _unmount(path)
        return
    import safetensors.torch

    real = safetensors.torch.save_file

    def no_space(tensors, filename, *args, **kwargs):
        if str(filename).startswith(str(path)):
            Path(filename).write_bytes(b"\0" * 100)  # what a full disk leaves: a partial file
            raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC), str(filename))
        return real(tensors, filename, *args, **kwargs)

    monkeypatch.setattr(safetensors.torch, "save_file", no_space)
    yield path, "injected"


@pytest.mark.slow
def test_a_full_disk_is_one_error_line_and_leaves_no_half_written_sft_folder(tmp_path, full_disk, capsys):
    from train.sft import main

    out, _ = full_disk
    args = [f"output_dir={out}", "run_name=toy", f"planner.embedded.dir={tmp_path / 'embedded'}", *TINY]
    with pytest.raises(SystemExit) as stop:
        run_cli(main, args)
    assert stop.value.code == 2
    err = capsys.readouterr().err.strip().splitlines()  # (weight-loading progress bars above it: issue 25.11)
    assert "Traceback" not in "\n".join(err) and [e for e in err if e.startswith("error:")] == err[-1:], err
    assert err[-1].startswith("error: cannot write ") and "No space left on device" in err[-1], err
    assert str(out / "toy" / "sft") in err[-1]
    left = sorted(p.name for p in (out / "toy").iterdir())
    assert "sft" not in left and not any(name.startswith(".sft-") for name in left), left  # nothing half-written
    assert not (out / "toy" / "sft" / "rltf_planner.json").exists()  # a resume fine-tunes again
