"""The main job (``train/rltf.py``) end to end on a tiny configuration: every stage, the table, the
plot, resume; the other recipes (``train/sft.py``, ``train/evaluate.py``) built from the same
stages give the same numbers; a tool named only in the config is planned, executed and rewarded.
The planner is the embedded T5 built from scratch (``planner.embedded.encoder=scratch``), whose
zero-/few-shot rows are n/a (no language pretraining); the MiniLM planner's main job is in
``tests/planners/test_embedded_minilm.py``."""

import contextlib
import io
import json

import pytest

from rltf.config.loading import load_config
from train.rltf import run

pytestmark = pytest.mark.usefixtures("one_torch_thread")

TINY = ["planner.embedded.encoder=scratch", "planner.embedded.d_model=32", "planner.embedded.d_ff=64",
        "planner.embedded.num_layers=1", "planner.embedded.num_heads=2", "env.n_samples=2", "env.samples_per_step=2",
        "sft.epochs=2",
        "rltf.steps=2", "rltf.tasks_per_batch=2", "rltf.k_samples=2", "rltf.eval_every=1",
        "rltf.checkpoint_every=1", "eval.num_beams=2", "eval.splits=[test]", "logging.progress_bar=false",
        "eval.schemas=[zero,few,finetuned,rltf,reference]"]


def _run_printing(fn, *args):
    out = io.StringIO()
    with contextlib.redirect_stdout(out):
        result = fn(*args)
    return result, out.getvalue().strip().splitlines()


@pytest.fixture(scope="module")
def tiny(tmp_path_factory):
    """One tiny main job: ``(args, summary, printed lines, output_dir)``."""
    root = tmp_path_factory.mktemp("main-job")
    args = [f"output_dir={root}", "run_name=tiny", f"planner.embedded.dir={root / 'embedded'}", *TINY]
    summary, out = _run_printing(run, load_config(args))
    return args, summary, out, root


@pytest.mark.slow
def test_main_job_on_a_tiny_config(tiny):
    args, summary, out, root = tiny
    assert out[-1].startswith("held-out overall: zero=n/a few=n/a finetuned=") and " rltf=" in out[-1]
    assert any(line.startswith("zero-shot n/a (n/a: the planner has no language pretraining") for line in out)
    run_dir = root / "tiny"
    for name in ("config.yaml", "results.md", "results.json", "rewards.png", "rltf_history.json",
                 "eval_initial.json", "sft/rltf_planner.json", "rltf/latest"):
        assert (run_dir / name).exists(), name
    table = json.loads((run_dir / "results.json").read_text())["table"]
    assert list(table["rows"]) == ["zero", "few", "finetuned", "rltf", "reference"]
    # no language pretraining: the free-form rows hold no numbers, and the table says why
    assert table["rows"]["zero"] == table["rows"]["few"] == {c: None for c in table["columns"]}
    assert set(table["n/a"]) == {"zero", "few"} and "no language pretraining" in table["n/a"]["zero"]
    md = (run_dir / "results.md").read_text()
    assert "| zero | n/a |" in md and "| few | n/a |" in md and "zero, few: n/a: the planner has no language" in md
    assert json.loads((run_dir / "eval_initial.json").read_text())["zero"]["n/a"] == table["n/a"]["zero"]
    assert "overall" in table["columns"] and table["n_tasks"]["overall"] == 10
    hist = json.loads((run_dir / "rltf_history.json").read_text())
    assert [h["step"] for h in hist] == [1, 2] and "eval/validation/score" in hist[0]
    # rltf.select=best_validation: the rltf row is the best of steps 0 (the fine-tuned planner), 1, 2
    selection = json.loads((run_dir / "results.json").read_text())["rltf_selection"]
    assert [v["step"] for v in selection["validation"]] == [0, 1, 2] and selection["step"] in (0, 1, 2)
    assert f"| rltf (best validation, step {selection['step']}) |" in md
    assert "| schema |" in (run_dir / "results.md").read_text()
    # resume: the finished run is picked up from its checkpoints and gives the same table
    again, _ = _run_printing(run, load_config([*args, "resume=true"]))
    assert again["table"] == summary["table"]


@pytest.mark.slow
def test_sft_entry_point_writes_a_reloadable_planner(tmp_path, capsys):
    from rltf.planners.planner import Planner
    from train.sft import main as sft_main

    sft_main([f"output_dir={tmp_path}", "run_name=sft", f"planner.embedded.dir={tmp_path / 'embedded'}", *TINY])
    out = capsys.readouterr().out.strip().splitlines()
    assert out[-1].startswith("held-out (test) finetuned=")
    reloaded = Planner.from_pretrained(tmp_path / "sft" / "sft")
    assert reloaded.is_encoder_decoder and (tmp_path / "sft" / "sft_history.json").exists()


@pytest.mark.slow
def test_a_tool_named_only_in_the_config_is_planned_executed_and_rewarded(tmp_path, monkeypatch):
    """``env.tools: [tests.envs.test_env_factory:register_echo]``: the embedded tokenizer learns its name,
    the decoder samples plans with it from the env's registry, the env executes them and rewards
    them, and the planner learns from them, in a 2-step run of ``train/rltf.py``."""
    from rltf.planners.planner import Planner
    from rltf.rl.trainer import RLTFTrainer
    from rltf.run.checkpoint import MODEL_DIR, latest_checkpoint
    from tests.envs import test_env_factory

    batches = []
    train_step = RLTFTrainer.train_step

    def recording(self):
        stats = train_step(self)
        batches.append(self.last_batch)
        return stats

    monkeypatch.setattr(RLTFTrainer, "train_step", recording)
    test_env_factory.CALLS.clear()
    args = [f"output_dir={tmp_path}", "run_name=echo", f"planner.embedded.dir={tmp_path / 'embedded'}",
            *TINY, "sft.enabled=false", "rltf.tasks_per_batch=4", "rltf.k_samples=8", "rltf.eval_every=0",
            "eval.schemas=[rltf]", "env.tools=[tests.envs.test_env_factory:register_echo]"]
    summary, out = _run_printing(run, load_config(args))
    assert out[-1].startswith("held-out overall: rltf=")

    assert len(batches) == 2
    with_tool = [(b.plans[i], b.rewards[i], b.advantages[i]) for b in batches for i in range(len(b.plans))
                 if "Echo Text" in b.plans[i]]
    assert with_tool, [b.plans for b in batches]  # sampled by the decoder from the env's registry
    assert test_env_factory.CALLS  # executed by the env
    assert any(reward > 0 for _, reward, _ in with_tool), with_tool  # rewarded
    assert any(adv != 0 for _, _, adv in with_tool)  # and learned from (a non-zero REINFORCE weight)
    history = json.loads((tmp_path / "echo" / "rltf_history.json").read_text())
    assert [h["step"] for h in history] == [1, 2] and all(h["train/valid"] == 1.0 for h in history)
    tokenizer = Planner.from_pretrained(latest_checkpoint(tmp_path / "echo" / "rltf") / MODEL_DIR).tokenizer
    assert "▁Echo" in tokenizer.get_vocab()  # the embedded tokenizer was trained knowing the tool
