"""The shipped pddl configs (issue #50 item 4) end to end at tiny sizes, in this process: Blocksworld,
Mystery Blocksworld (a seeded renaming) and Logistics with the embedded planner, and each one's SmolLM2
variant on a tiny random LLaMA with SmolLM2's own tokenizer and chat template (the real 135M weights
would make each run minutes). Each run warms up on ``sft.max_plans`` plans, trains RLTF, and writes
the schemas' table with the oracle row, ``results.json`` naming the grammar, and the reward plot."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import torch
import yaml

from rltf.config.loading import load_config
from tests.stages.test_main_job import _run_printing
from train.rltf import run

pytestmark = pytest.mark.usefixtures("one_torch_thread")

ROOT = Path(__file__).resolve().parents[3]
EMBEDDED = ("pddl-blocksworld", "pddl-mystery", "pddl-logistics")
SMOLLM2 = tuple(f"{name}-smollm2" for name in EMBEDDED)
SMALL = ["env.pddl.train_size=6", "env.pddl.validation_size=2", "env.pddl.test_size=3", "env.pddl.test_long_size=0",
         "sft.epochs=1", "sft.batch_size=2", "sft.max_plans=4", "rltf.steps=2", "rltf.tasks_per_batch=2",
         "rltf.k_samples=2", "rltf.checkpoint_every=2", "eval.num_beams=2", "eval.diversity_samples=2",
         "logging.progress_bar=false", "logging.report_to=none"]
TINY_T5 = ["planner.embedded.encoder=scratch", "planner.embedded.d_model=32", "planner.embedded.d_ff=64",
           "planner.embedded.num_layers=1", "planner.embedded.num_heads=2", "planner.embedded.vocab_size=300"]
# SmolLM2-135M's architecture (LlamaForCausalLM, tied embeddings, grouped-query attention), made tiny
TINY_SMOLLM2 = dict(num_hidden_layers=2, hidden_size=32, num_attention_heads=4, num_key_value_heads=2,
                    intermediate_size=64, head_dim=8)


def _config(name: str) -> dict:
    return yaml.safe_load((ROOT / "configs" / f"{name}.yaml").read_text())


@pytest.fixture(scope="module")
def tiny_smollm2(smollm2_folder, tmp_path_factory) -> Path:
    """A random tiny LLaMA shaped like SmolLM2-135M with its real tokenizer and chat template."""
    from transformers import AutoTokenizer, LlamaConfig, LlamaForCausalLM

    tokenizer = AutoTokenizer.from_pretrained(smollm2_folder)
    real = LlamaConfig.from_pretrained(smollm2_folder)
    config = LlamaConfig(**{**TINY_SMOLLM2, "vocab_size": real.vocab_size, "tie_word_embeddings": True,
                            "bos_token_id": real.bos_token_id, "eos_token_id": real.eos_token_id,
                            "pad_token_id": real.pad_token_id, "max_position_embeddings": 2048})
    with torch.random.fork_rng(devices=[]):
        torch.manual_seed(0)
        model = LlamaForCausalLM(config)
    out = tmp_path_factory.mktemp("tiny-smollm2")
    model.save_pretrained(out)
    tokenizer.save_pretrained(out)
    return out


def _check_run(name: str, args: list[str], run_dir: Path) -> dict:
    """Run config ``name`` with ``args``; the table, results.json and plot as for the other envs."""
    cfg = load_config([f"config=configs/{name}.yaml", *args])
    summary, out = _run_printing(run, cfg)
    shipped = _config(name)
    grammar = shipped["env"]["pddl"]["grammar"]
    schemas = shipped["eval"]["schemas"]
    table = summary["table"]
    assert list(table["rows"]) == schemas and "oracle" in table["rows"], table["rows"]
    assert table["rows"]["oracle"]["goal rate"] == 1.0 and table["columns"][:2] == ["goal rate", "executable"]
    assert all(0 <= row["goal rate"] <= 1 for s, row in table["rows"].items() if s not in table.get("n/a", {}))
    saved = json.loads((run_dir / "results.json").read_text())
    assert saved["data"]["grammar"] == grammar and f"grammar {grammar}" in (run_dir / "results.md").read_text()
    assert saved["table"] == table and (run_dir / "rewards.png").is_file()
    assert out[-1].startswith("held-out goal rate: ") and out[-1].endswith(" oracle=1.0000"), out[-1]
    return summary


@pytest.mark.parametrize("name", EMBEDDED)
def test_each_embedded_pddl_config_runs_end_to_end_at_tiny_sizes(name, tmp_path):
    shipped = _config(name)
    assert shipped["env"]["name"] == "pddl" and shipped["planner"]["model"] == "embedded"
    assert shipped["sft"]["max_plans"] > 0 and "oracle" in shipped["eval"]["schemas"]
    summary = _check_run(name, [f"output_dir={tmp_path}", f"planner.embedded.dir={tmp_path / 'emb'}",
                                *SMALL, *TINY_T5, "rltf.eval_every=2"], tmp_path / shipped["run_name"])
    oracle_plans = " ".join(summary["plans"]["oracle"].values())
    if name == "pddl-mystery":  # the renamed domain: no Blocksworld action name is left in a plan
        assert shipped["env"]["pddl"]["obfuscation_seed"] is not None
        assert oracle_plans and not any(f"({a} " in oracle_plans for a in ("pick-up", "put-down", "stack", "unstack"))
    elif name == "pddl-blocksworld":
        assert "(pick-up " in oracle_plans or "(unstack " in oracle_plans
    else:
        assert shipped["env"]["pddl"]["domain"] == "logistics" and "(load-" in oracle_plans


@pytest.mark.parametrize("name", SMOLLM2)
def test_each_smollm2_pddl_config_runs_end_to_end_on_a_tiny_smollm2_shaped_model(name, tiny_smollm2, tmp_path):
    shipped, embedded = _config(name), _config(name.removesuffix("-smollm2"))
    assert shipped["planner"]["model"] == "smollm2" and shipped["planner"]["lora"]["enabled"]
    assert shipped["env"] == embedded["env"]  # the same instances and grammar as the embedded planner's config
    summary = _check_run(name, [f"output_dir={tmp_path}", f"planner.model={tiny_smollm2}", *SMALL,
                                "eval.few_shot_k=1", "planner.max_prompt_tokens=1024"], tmp_path / shipped["run_name"])
    assert "zero" in summary["table"]["rows"] and "few" in summary["table"]["rows"]  # prompted: a chat planner
