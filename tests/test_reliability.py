"""Issue 16, reliability: no silently wrong numbers, no lost checkpoints, no code run from a run
folder. One test (or a few) per defect, in the issue's order; all offline and small."""

import warnings
from pathlib import Path

import numpy as np
import pytest
import torch
from accelerate import Accelerator

from rltf.config import ConfigError, load_config
from rltf.planner import Planner
from rltf.trainer import RLTFTrainer
from tests.tiny_models import tiny_t5, unigram_tokenizer
from tests.toy_env import toy_env, toy_tasks

pytestmark = pytest.mark.usefixtures("one_torch_thread")


def make_cfg(tmp_path, *overrides):
    return load_config([f"output_dir={tmp_path}", "run_name=toy", "rltf.tasks_per_batch=2", "rltf.k_samples=4",
                        "rltf.lr=0.01", "rltf.eval_every=0", "rltf.checkpoint_every=1", "logging.progress_bar=false",
                        *overrides])


def make_planner(seed=0):
    tok = unigram_tokenizer()
    return Planner(tiny_t5(tok, seed=seed), tok, True, "tiny-t5")


# ------------------------------------------------------------------ 1. corrupted caches
@pytest.mark.parametrize("content", [b"", b"PK\x03\x04 truncated zip", b"garbage"])
def test_a_damaged_learned_expert_cache_is_retrained_with_a_warning(tmp_path, monkeypatch, content):
    from envs.openagi.lite.image import caching

    monkeypatch.setattr(caching, "rltf_cache_dir", lambda kind: tmp_path)
    calls = []

    def train(config):
        calls.append(config)
        return {"w": np.arange(3.0)}

    first = caching._cached("expert", {"a": 1}, train)
    path = next(tmp_path.glob("expert-*.npz"))
    good = path.read_bytes()
    path.write_bytes(content if content != b"PK\x03\x04 truncated zip" else good[: len(good) // 2])
    with pytest.warns(RuntimeWarning, match=str(path.name)):
        again = caching._cached("expert", {"a": 1}, train)
    assert len(calls) == 2 and np.array_equal(again["w"], first["w"])
    assert path.read_bytes() == good  # rewritten whole
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        caching._cached("expert", {"a": 1}, train)  # intact now: loaded, not retrained
    assert len(calls) == 2


def test_a_damaged_embedded_planner_build_is_rebuilt(tmp_path):
    from rltf.config import EmbeddedSettings
    from rltf.embedded import ensure_embedded_planner

    settings = EmbeddedSettings(d_model=16, d_ff=32, num_layers=1, num_heads=2, dir=str(tmp_path))
    texts = ["Image Denoising, Image Classification", "Given noisy image, how to return the class label?"]
    path = ensure_embedded_planner(settings, texts)
    weights = path / "model.safetensors"
    good = weights.read_bytes()
    weights.write_bytes(good[:100])
    with pytest.warns(RuntimeWarning, match="embedded planner.*damaged"):
        again = ensure_embedded_planner(settings, texts)
    assert again == path and weights.read_bytes() == good
    Planner.from_pretrained(path)


def test_a_damaged_full_suite_build_names_itself(tmp_path):
    from envs.openagi.hf import suite

    root = suite.full_suite_dir(tmp_path, 2, 0)
    root.mkdir(parents=True)
    (root / suite.MANIFEST).write_text("{ not json")
    with pytest.raises(ValueError, match=f"{root.name}.*damaged or stale.*JSONDecodeError"):
        suite.build_full_suite(tmp_path, 2, 0, None)


def _env_with_broken_translation():
    from envs.openagi.env import OpenAGIEnv
    from envs.openagi.plans import PlanLimits
    from envs.openagi.registry import TEXT, ToolRegistry

    def broken(xs):
        raise RuntimeError("weights missing")

    reg = ToolRegistry()
    reg.register("Fill Mask", TEXT, TEXT, lambda xs: [x.replace("[MASK]", "cat") for x in xs])
    reg.register("Machine Translation", TEXT, TEXT, broken)
    reg.register("Question Answering", (TEXT, TEXT), TEXT, lambda ds, qs: [d.split()[-1] for d in ds])
    return OpenAGIEnv(registry=reg, tasks=toy_tasks()[:1], limits=PlanLimits(2, 1, 1),
                      metrics={"toy_equal": lambda p, t: [float(a == b) for a, b in zip(p, t)]})


def test_a_tool_failing_on_every_call_is_a_loud_warning_and_the_error_rate_is_logged(tmp_path):
    trainer = RLTFTrainer(make_cfg(tmp_path), make_planner(), _env_with_broken_translation(), Accelerator(cpu=True))
    with pytest.warns(RuntimeWarning, match="'Machine Translation' failed on every call"):
        stats = trainer.train_step()
    assert 0 < stats["train/expert_error_rate"] <= 1


def test_a_healthy_step_logs_a_zero_expert_error_rate(tmp_path):
    trainer = RLTFTrainer(make_cfg(tmp_path), make_planner(), toy_env(), Accelerator(cpu=True))
    with warnings.catch_warnings():
        warnings.simplefilter("error", RuntimeWarning)
        stats = trainer.train_step()
    assert stats["train/expert_error_rate"] == 0.0


# ------------------------------------------------------------------ 2. checkpoint rotation
class _Saver:
    """Stands in for a planner: save_pretrained writes one small file."""

    def save_pretrained(self, d, state_dict=None):
        Path(d).mkdir(parents=True)
        (Path(d) / "config.json").write_text("{}")


def test_rotation_never_deletes_the_checkpoint_just_written(tmp_path):
    from rltf.checkpoint import latest_checkpoint, save_checkpoint

    rdir = tmp_path / "rltf"
    for step in (6, 8):  # an earlier run's checkpoints, further along
        save_checkpoint(rdir, step, _Saver(), {"history": []})
    save_checkpoint(rdir, 2, _Saver(), {"history": []})
    save_checkpoint(rdir, 4, _Saver(), {"history": []})
    assert latest_checkpoint(rdir).name == "checkpoint-4"
    assert sorted(p.name for p in rdir.glob("checkpoint-*")) == ["checkpoint-2", "checkpoint-4"]


def test_a_fresh_run_into_a_folder_holding_a_run_is_refused_unless_overwrite(tmp_path):
    from rltf import stages
    from rltf.checkpoint import RunFolderError

    run_dir = tmp_path / "toy"
    (run_dir / "rltf" / "checkpoint-4").mkdir(parents=True)
    (run_dir / "rltf" / "latest").write_text("checkpoint-4\n")
    with pytest.raises(RunFolderError, match=r"already holds a run \(rltf\).*resume=true.*overwrite=true"):
        stages.start(make_cfg(tmp_path))
    stages.start(make_cfg(tmp_path, "resume=true"))  # continuing it is fine
    assert (run_dir / "rltf" / "latest").exists()
    stages.start(make_cfg(tmp_path, "overwrite=true"))
    assert not (run_dir / "rltf").exists() and (run_dir / "config.yaml").exists()


# ------------------------------------------------------------------ 3. no code run from a run folder
class _Planted:
    def __reduce__(self):
        return (Path.touch, (Path(_Planted.marker),))


@pytest.mark.parametrize("baseline", ["moving_average", "per_task", "rloo"])
def test_todays_checkpoints_load_with_weights_only(tmp_path, baseline):
    from rltf.checkpoint import latest_checkpoint, load_state

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
    from rltf.checkpoint import RunFolderError, latest_checkpoint

    (tmp_path / "elsewhere" / "trainer_state.pt").parent.mkdir(parents=True)
    (tmp_path / "elsewhere" / "trainer_state.pt").write_bytes(b"")
    rdir = tmp_path / "run" / "rltf"
    rdir.mkdir(parents=True)
    (rdir / "latest").write_text(name + "\n")
    with pytest.raises(RunFolderError, match="not a checkpoint-<step> folder"):
        latest_checkpoint(rdir)


# ------------------------------------------------------------------ 4. resume with a changed config
def test_resume_with_a_changed_training_key_is_refused_listing_the_differences(tmp_path):
    cfg = make_cfg(tmp_path, "rltf.steps=1")
    RLTFTrainer(cfg, make_planner(), toy_env(), Accelerator(cpu=True)).train()
    changed = make_cfg(tmp_path, "rltf.steps=1", "rltf.lr=0.5", "seed=3", "resume=true")
    with pytest.raises(ConfigError, match=r"rltf.lr: 0.01 -> 0.5.*seed: 0 -> 3"):
        RLTFTrainer(changed, make_planner(), toy_env(), Accelerator(cpu=True)).resume()
    # safe keys (logging, evaluation, checkpointing cadence, resume itself) may change
    same = make_cfg(tmp_path, "rltf.steps=1", "resume=true", "logging.log_every=1", "eval.num_beams=3",
                    "rltf.eval_every=5")
    assert RLTFTrainer(same, make_planner(), toy_env(), Accelerator(cpu=True)).resume()


def test_resume_with_a_changed_config_is_refused_before_config_yaml_is_overwritten(tmp_path):
    from rltf import stages

    stages.start(make_cfg(tmp_path))
    saved = (tmp_path / "toy" / "config.yaml").read_text()
    with pytest.raises(ConfigError, match=r"rltf.lr: 0.01 -> 0.5"):
        stages.start(make_cfg(tmp_path, "rltf.lr=0.5", "resume=true"))
    assert (tmp_path / "toy" / "config.yaml").read_text() == saved
