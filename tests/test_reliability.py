"""Issue 16, reliability: no silently wrong numbers, no lost checkpoints, no code run from a run
folder. One test (or a few) per defect, in the issue's order; all offline and small."""

import warnings
from pathlib import Path

import numpy as np
import pytest
import torch
from accelerate import Accelerator

from rltf.config.loading import ConfigError, load_config
from rltf.planners.planner import Planner
from rltf.rl.trainer import RLTFTrainer
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
    from rltf.config.loading import EmbeddedSettings
    from rltf.planners.embedded import ensure_embedded_planner

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
    from rltf.run.checkpoint import latest_checkpoint, save_checkpoint

    rdir = tmp_path / "rltf"
    for step in (6, 8):  # an earlier run's checkpoints, further along
        save_checkpoint(rdir, step, _Saver(), {"history": []})
    save_checkpoint(rdir, 2, _Saver(), {"history": []})
    save_checkpoint(rdir, 4, _Saver(), {"history": []})
    assert latest_checkpoint(rdir).name == "checkpoint-4"
    assert sorted(p.name for p in rdir.glob("checkpoint-*")) == ["checkpoint-2", "checkpoint-4"]


def test_a_fresh_run_into_a_folder_holding_a_run_is_refused_unless_overwrite(tmp_path):
    from rltf.stages import plan_job as stages
    from rltf.run.checkpoint import RunFolderError

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
    from rltf.stages import plan_job as stages

    stages.start(make_cfg(tmp_path))
    saved = (tmp_path / "toy" / "config.yaml").read_text()
    with pytest.raises(ConfigError, match=r"rltf.lr: 0.01 -> 0.5"):
        stages.start(make_cfg(tmp_path, "rltf.lr=0.5", "resume=true"))
    assert (tmp_path / "toy" / "config.yaml").read_text() == saved


# ------------------------------------------------------------------ 5. non-finite numbers
@pytest.mark.parametrize("key", ["rltf.lr", "rltf.temperature", "sft.lr", "env.n_samples"])
@pytest.mark.parametrize("value", ["inf", "nan", ".inf", "1e999"])
def test_non_finite_numbers_in_a_config_are_refused_naming_the_key(tmp_path, key, value):
    with pytest.raises(ConfigError, match=rf"'{key}'.*expected (a finite number|an integer)"):
        make_cfg(tmp_path, f"{key}={value}")


def test_bound_errors_refuse_non_finite_numbers_of_unbounded_fields():
    import dataclasses

    from common.config_fields import bound_errors, num

    @dataclasses.dataclass
    class Section:
        scale: float = num(1.0)

    assert list(bound_errors(Section(2.5))) == []
    assert list(bound_errors(Section(float("nan")), "x.")) == ["bad value for 'x.scale': nan; expected a finite number"]


def test_an_infinite_hf_memory_budget_is_refused():
    from envs.openagi.hf.config import HFBackendConfig

    with pytest.raises(ValueError, match="memory_budget_gib=inf; expected a finite number"):
        HFBackendConfig.from_dict({"memory_budget_gib": float("inf")})


_NONLINEAR_PROMPT = "Given noisy image and clozed English query, how to answer the question in German step by step?"


def _nan_decoding_setup():
    from envs.openagi.grammar import plan_grammars
    from envs.openagi.plans import PlanLimits
    from envs.openagi.registry import IMAGE, TEXT
    from tests.tiny_models import small_registry

    tok = unigram_tokenizer()
    grammars = plan_grammars(tok, [((IMAGE, TEXT), TEXT)], small_registry(), PlanLimits(3, 2, 1))
    return tok, grammars


@pytest.mark.parametrize("decode", ["sample", "beam", "greedy"])
def test_a_planner_with_nan_weights_is_a_clear_decoding_error(decode):
    from constrained_decoding.decode import beam_search_plans, greedy_plans, sample_plans
    from constrained_decoding.search import NonFiniteLogitsError

    tok, grammars = _nan_decoding_setup()
    model = tiny_t5(tok, seed=1)
    with torch.no_grad():
        for p in model.parameters():
            p.fill_(float("nan"))
    call = {"sample": lambda: sample_plans(model, tok, [_NONLINEAR_PROMPT], grammars, k=4, seed=1),
            "beam": lambda: beam_search_plans(model, tok, [_NONLINEAR_PROMPT], grammars, num_beams=4),
            "greedy": lambda: greedy_plans(model, tok, [_NONLINEAR_PROMPT], grammars)}[decode]
    with pytest.raises(NonFiniteLogitsError, match="non-finite logits from the planner at decoding step 1"):
        call()


@pytest.mark.parametrize("decode", ["sample", "beam"])
def test_an_infinite_logit_later_on_names_its_decoding_step(monkeypatch, decode):
    from constrained_decoding.decode import beam_search_plans, sample_plans
    from constrained_decoding.runner import PlannerRunner
    from constrained_decoding.search import NonFiniteLogitsError

    tok, grammars = _nan_decoding_setup()
    model = tiny_t5(tok, seed=1)
    real, calls = PlannerRunner.allowed_logits, []

    def poisoned(self, feats, tables, state):
        z = real(self, feats, tables, state)
        calls.append(1)
        return z.index_fill(-1, torch.tensor([0]), float("inf")) if len(calls) == 3 else z

    monkeypatch.setattr(PlannerRunner, "allowed_logits", poisoned)
    with pytest.raises(NonFiniteLogitsError, match="at decoding step 3"):
        if decode == "sample":
            sample_plans(model, tok, [_NONLINEAR_PROMPT], grammars, k=3, seed=0)
        else:
            beam_search_plans(model, tok, [_NONLINEAR_PROMPT], grammars, num_beams=3)


def test_disallowed_slots_stay_masked_whatever_the_logits():
    from types import SimpleNamespace

    from constrained_decoding.search import slot_logprobs

    valid = torch.tensor([[True, True, False, False], [True, False, True, False]])
    tables = SimpleNamespace(allowed=torch.arange(8).view(2, 4), valid=valid)
    state = torch.tensor([0, 1])
    for logits, bad in ((torch.full((2, 4), float("nan")), [True, True]),
                        (torch.tensor([[0.0, float("inf"), 1.0, 1.0], [-float("inf"), 0.0, -float("inf"), 0.0]]),
                         [True, True]),
                        (torch.tensor([[0.0, 1.0, float("nan"), float("inf")], [2.0, float("nan"), 0.0, 0.0]]),
                         [False, False])):  # non-finite logits of disallowed tokens do not matter
        runner = SimpleNamespace(allowed_logits=lambda f, t, s, z=logits: z)
        lp, idx, flagged = slot_logprobs(runner, tables, None, state, 1.0)
        assert flagged.tolist() == bad
        assert torch.isneginf(lp[~valid]).all() and torch.isfinite(lp[valid]).all()
        torch.testing.assert_close(lp.exp().sum(-1), torch.ones(2))


# ------------------------------------------------------------------ 6. damaged files name themselves
@pytest.fixture
def saved_planner(tmp_path):
    return make_planner().save_pretrained(tmp_path / "planner")


@pytest.mark.parametrize("cut", ["empty", "header", "half", "one byte"])
def test_a_truncated_model_safetensors_names_itself(saved_planner, cut):
    from rltf.planners.hf_models import PlannerError

    weights = saved_planner / "model.safetensors"
    good = weights.read_bytes()
    weights.write_bytes({"empty": b"", "header": good[:100], "half": good[: len(good) // 2],
                         "one byte": good[:-1]}[cut])
    with pytest.raises(PlannerError, match=r"model\.safetensors is damaged \(.*\).*save or copy it again"):
        Planner.from_pretrained(saved_planner)


@pytest.mark.parametrize("name", ["rltf_planner.json", "config.json", "tokenizer_config.json"])
def test_a_damaged_json_file_of_a_planner_names_itself(saved_planner, name):
    from rltf.planners.hf_models import PlannerError

    (saved_planner / name).write_text('{"format": 1, "arch":')
    with pytest.raises(PlannerError, match=rf"{name} is damaged \(not valid JSON"):
        Planner.from_pretrained(saved_planner)


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


# ------------------------------------------------------------------ 7. missing tokenizer files
def test_a_planner_folder_without_tokenizer_files_is_a_clear_error(saved_planner):
    from rltf.planners.hf_models import PlannerError, load_tokenizer

    for name in ("tokenizer.json", "tokenizer_config.json"):
        (saved_planner / name).unlink()
    with pytest.raises(PlannerError, match=r"planner directory .*planner' has no tokenizer files \(expected one "
                                           r"of: tokenizer\.json, tokenizer_config\.json"):
        Planner.from_pretrained(saved_planner)
    with pytest.raises(PlannerError, match="has no tokenizer files"):
        load_tokenizer(str(saved_planner), True)


# ------------------------------------------------------------------ 8. run-folder layout
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
    from rltf.stages import plan_job as stages
    from rltf.run.checkpoint import RunFolderError

    (tmp_path / "toy" / "rltf").mkdir(parents=True)
    (tmp_path / "toy" / "sft").write_text("")
    with pytest.raises(RunFolderError, match=r"toy/sft \(the fine-tuned planner\) is a file"):
        stages.start(make_cfg(tmp_path, "resume=true"))
    assert not (tmp_path / "toy" / "config.yaml").exists()


# ------------------------------------------------------------------ 9. stale temporaries, half-deleted checkpoints
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


# ------------------------------------------------------------------ 10. entry points
def test_an_entry_point_prints_a_user_error_as_one_line_and_exits_2(tmp_path):
    import os
    import subprocess
    import sys

    root = Path(__file__).resolve().parents[1]
    proc = subprocess.run([sys.executable, str(root / "train" / "rltf.py"), "rltf.lr=-1"], cwd=tmp_path,
                          capture_output=True, text=True, timeout=120,
                          env={**os.environ, "HF_HUB_OFFLINE": "1", "PYTHONWARNINGS": "ignore"})
    assert proc.returncode == 2
    assert "Traceback" not in proc.stderr
    assert proc.stderr.strip().splitlines() == ["error: bad value for 'rltf.lr': -1.0; expected a number > 0"]


@pytest.mark.parametrize("script", ["sft", "evaluate"])
def test_the_other_entry_points_share_the_wrapper(tmp_path, capsys, script):
    import importlib

    module = importlib.import_module(f"train.{script}")
    with pytest.raises(SystemExit) as exit_:
        module.run_cli(module.main, [f"output_dir={tmp_path}", "planner.model=/nonexistent/planner-dir"]
                       if script == "evaluate" else ["sft.epochs=-1"])
    assert exit_.value.code == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and err[0].startswith("error: ")
    assert ("'/nonexistent/planner-dir': no such directory" in err[0]) if script == "evaluate" else ("'sft.epochs'" in err[0])


def test_run_cli_keeps_the_traceback_of_bugs_and_joins_message_lines(capsys):
    from rltf.run.cli import run_cli

    def bug(argv):
        raise KeyError("a bug")

    with pytest.raises(KeyError):
        run_cli(bug, [])

    def bad(argv):
        raise ConfigError("first line\n  second line\n")

    with pytest.raises(SystemExit):
        run_cli(bad, [])
    assert capsys.readouterr().err == "error: first line second line\n"
    assert run_cli(lambda argv: argv, ["a=1"]) == ["a=1"]


# ------------------------------------------------------------------ 11. OpenAGI env
@pytest.fixture(scope="module")
def lite_env():
    from envs.openagi.env import OpenAGIEnv

    return OpenAGIEnv(n_samples=2, cache_bytes=0)


@pytest.mark.parametrize("plan", ["x" * 1_000_000, "Image Denoising; " * 60_000, "(Image Denoising) (" + "y" * 500_000 + ") Visual Question Answering"],
                         ids=["one-huge-name", "no-commas", "unclosed-branch"])
def test_a_huge_invalid_plan_gives_a_short_error(lite_env, plan):
    result = lite_env.reward_plans([(lite_env.tasks()[0], plan)])[0]
    assert not result.valid and result.reward == 0.0
    assert len(result.error) <= 1000 and "…" in result.error


@pytest.mark.parametrize("task", [True, False, np.bool_(True)])
def test_a_bool_task_id_is_refused(lite_env, task):
    with pytest.raises(ValueError, match="is a bool, not a task"):
        lite_env.reward_plans([(task, "Image Denoising")])


def test_the_lite_suite_on_the_hf_backend_fails_validation():
    from envs.openagi.config import EnvConfigError, OpenAGIEnvConfig

    with pytest.raises(EnvConfigError, match="suite='lite' runs on the lite backend only"):
        OpenAGIEnvConfig(suite="lite", backend="hf").validate()


@pytest.mark.parametrize("value", [float("nan"), float("inf"), -float("inf")])
def test_non_finite_images_score_zero(value):
    from envs.openagi.metrics.image import image_similarity

    rng = np.random.default_rng(0)
    target = rng.random((16, 16, 3)).astype(np.float32)
    smooth = np.full_like(target, 0.5)
    broken = smooth.copy()
    broken[3, 4, 1] = value
    assert image_similarity(broken, target) == 0.0
    assert image_similarity(np.full_like(target, value), target) == 0.0
    assert image_similarity(target, target) == pytest.approx(1.0)


def _counting_registry(fail):
    from envs.openagi.registry import TEXT, ToolRegistry

    calls = []

    def tool(xs):
        calls.append(len(xs))
        if fail():
            raise RuntimeError("weights missing")
        return [x.upper() for x in xs]

    reg = ToolRegistry()
    reg.register("Fill Mask", TEXT, TEXT, tool)
    return reg, calls


def _samples(n, first=0):
    from envs.openagi.tasks import Sample

    return [Sample(uid=f"s{first + i}", inputs=(f"text {i}",), target="") for i in range(n)]


def test_a_permanently_failing_expert_is_not_retried_per_sample_forever():
    from envs.openagi.executor import PlanExecutor
    from envs.openagi.plans import LinearPlan
    from envs.openagi.registry import DOWN_LIMIT, PROBE_EVERY

    reg, calls = _counting_registry(lambda: True)
    ex = PlanExecutor(reg)
    for i in range(DOWN_LIMIT):  # a batch of 4, then each sample alone
        assert all("Fill Mask raised RuntimeError: weights missing" == e
                   for e in ex.run(LinearPlan(("Fill Mask",)), _samples(4, 10 * i)).errors)
    assert len(calls) == 5 * DOWN_LIMIT and reg.health("Fill Mask").down
    for i in range(4 * PROBE_EVERY + 1):
        run = ex.run(LinearPlan(("Fill Mask",)), _samples(4, 1000 + 10 * i))
        assert all(e.startswith("Fill Mask raised RuntimeError: weights missing") for e in run.errors)
    assert len(calls) == 5 * DOWN_LIMIT + 5 * 4  # one probe (a batch and its samples) per PROBE_EVERY requests
    assert "not called" in run.errors[0]


def test_a_recovered_expert_is_called_again():
    from envs.openagi.executor import PlanExecutor
    from envs.openagi.plans import LinearPlan
    from envs.openagi.registry import DOWN_LIMIT, PROBE_EVERY

    broken = [True]
    reg, calls = _counting_registry(lambda: broken[0])
    ex = PlanExecutor(reg)
    for i in range(DOWN_LIMIT):
        ex.run(LinearPlan(("Fill Mask",)), _samples(2, 10 * i))
    broken[0] = False  # back (a transient outage)
    results = [ex.run(LinearPlan(("Fill Mask",)), _samples(2, 1000 + 10 * i)) for i in range(PROBE_EVERY + 2)]
    assert all(e is not None for r in results[: PROBE_EVERY - 1] for e in r.errors)  # answered at once
    assert all(r.errors == [None, None] for r in results[PROBE_EVERY - 1 :])  # the probe worked: called again
    assert not reg.health("Fill Mask").down


def test_a_sample_specific_failure_does_not_take_an_expert_down():
    from envs.openagi.executor import PlanExecutor
    from envs.openagi.plans import LinearPlan
    from envs.openagi.registry import DOWN_LIMIT, TEXT, ToolRegistry

    def tool(xs):
        if any("bad" in x for x in xs):
            raise ValueError("cannot read this one")
        return list(xs)

    reg = ToolRegistry()
    reg.register("Fill Mask", TEXT, TEXT, tool)
    ex = PlanExecutor(reg)
    from envs.openagi.tasks import Sample

    for i in range(3 * DOWN_LIMIT):
        samples = [Sample(uid=f"{i}-{j}", inputs=("bad" if j == 0 else "good",), target="") for j in range(3)]
        assert [e is None for e in ex.run(LinearPlan(("Fill Mask",)), samples).errors] == [False, True, True]
